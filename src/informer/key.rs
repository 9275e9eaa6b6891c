//! [`ObjectKey`]: a namespaced object's identity, as informers report changes and
//! controllers queue work (kube-runtime's `ObjectRef`, client-go's `namespace/name` key
//! string made a type, so no sync splits a string again).

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

/// The namespace and name of an object. Displays as `namespace/name`; ordered by
/// namespace, then name.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    pub namespace: Arc<str>,
    pub name: Arc<str>,
}

impl ObjectKey {
    pub fn new(namespace: impl Into<Arc<str>>, name: impl Into<Arc<str>>) -> ObjectKey {
        ObjectKey {
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// A key string without its `/`.
#[derive(Debug, PartialEq, Eq)]
pub struct NotAnObjectKey(pub String);

impl fmt::Display for NotAnObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} is not namespace/name", self.0)
    }
}

impl std::error::Error for NotAnObjectKey {}

/// Parses `namespace/name` (the name may not contain `/`; the namespace is up to the
/// first one).
impl FromStr for ObjectKey {
    type Err = NotAnObjectKey;

    fn from_str(key: &str) -> Result<ObjectKey, NotAnObjectKey> {
        match key.split_once('/') {
            Some((namespace, name)) if !name.contains('/') => Ok(ObjectKey::new(namespace, name)),
            _ => Err(NotAnObjectKey(key.to_string())),
        }
    }
}

/// `"namespace/name"` in tests; panics on anything else.
#[cfg(test)]
impl From<&str> for ObjectKey {
    fn from(key: &str) -> ObjectKey {
        key.parse().expect("namespace/name")
    }
}

#[cfg(test)]
impl PartialEq<&str> for ObjectKey {
    fn eq(&self, other: &&str) -> bool {
        other.split_once('/') == Some((&*self.namespace, &*self.name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_display_and_parse_as_namespace_slash_name() {
        let key = ObjectKey::new("ns", "web");
        assert_eq!(key.to_string(), "ns/web");
        assert_eq!("ns/web".parse::<ObjectKey>(), Ok(key));
        assert!("web".parse::<ObjectKey>().is_err());
        assert!("a/b/c".parse::<ObjectKey>().is_err());
        assert!(ObjectKey::new("a", "z") < ObjectKey::new("b", "a"));
    }
}
