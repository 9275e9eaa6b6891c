//! [`Stored`]: one value as an informer reads it from etcd (or from an API server's
//! watch), before it is decoded.

/// One value as etcd stores it, under the informer's key prefix.
#[derive(Clone, Copy)]
pub struct Stored<'a> {
    pub prefix: &'a str,
    pub key: &'a str,
    pub value: &'a [u8],
    pub mod_revision: i64,
    /// 0 when the source does not say (an API server's watch).
    pub create_revision: i64,
}

impl<'a> Stored<'a> {
    /// A value at `mod_revision` whose create revision the source does not say.
    pub fn new(prefix: &'a str, key: &'a str, value: &'a [u8], mod_revision: i64) -> Stored<'a> {
        Stored {
            prefix,
            key,
            value,
            mod_revision,
            create_revision: 0,
        }
    }
}
