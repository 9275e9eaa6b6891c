//! Decoding only what a printer reads of an object.
//!
//! A Table's cells read a handful of fields of each object (a pod's name, phase,
//! container statuses, node), yet decoding the whole object into a `serde_json::Value`
//! builds every string and map of it: for a Table of 10,000 pods from the watch cache,
//! which keeps objects as JSON, that decoding was most of the time. Each [`Printer`]
//! declares what its cells read as a [`Keep`], and [`decode`] builds a `Value` of just
//! that, skipping the rest of the JSON without building it.
//!
//! Invariant: a printer's cells of the projection equal its cells of the whole object,
//! for every object (the tests check every printer over the Table fixtures). A field of
//! an unexpected type comes out as it is (a scalar) or empty (an array where an object
//! was expected, or the reverse), which a printer reads as it reads the original: as
//! missing.
//!
//! [`Printer`]: super::Printer

use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize as _;
use serde_json::{Map, Value};

/// What to keep of a JSON value.
#[derive(Debug)]
pub(crate) enum Keep {
    /// All of it.
    All,
    /// Of an object, these members, each kept as its own `Keep` says; the others are
    /// left out.
    Members(&'static [(&'static str, Keep)]),
    /// Of an array, every element, each kept as the `Keep` says.
    Each(&'static Keep),
}

/// `json` decoded, keeping what `keep` says.
///
/// # Errors
/// When `json` is not one JSON value.
pub(crate) fn decode(json: &[u8], keep: &Keep) -> serde_json::Result<Value> {
    let mut deserializer = serde_json::Deserializer::from_slice(json);
    let value = keep.deserialize(&mut deserializer)?;
    deserializer.end()?;
    Ok(value)
}

impl<'de> DeserializeSeed<'de> for &Keep {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        match self {
            Keep::All => Value::deserialize(deserializer),
            keep => deserializer.deserialize_any(Projecting(keep)),
        }
    }
}

/// A member's key, looked up among the members to keep without building a `String` of
/// it: the member's entry, or `None` for a member left out.
struct MemberKey(&'static [(&'static str, Keep)]);

impl<'de> DeserializeSeed<'de> for MemberKey {
    type Value = Option<&'static (&'static str, Keep)>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for MemberKey {
    type Value = Option<&'static (&'static str, Keep)>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a member's name")
    }

    fn visit_str<E>(self, key: &str) -> Result<Self::Value, E> {
        Ok(self.0.iter().find(|(name, _)| *name == key))
    }
}

/// The visitor of a [`Keep::Members`] or [`Keep::Each`].
struct Projecting<'k>(&'k Keep);

impl<'de> Visitor<'de> for Projecting<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let members = match self.0 {
            Keep::Members(members) => members,
            _ => &[][..],
        };
        let mut kept = Map::new();
        while let Some(member) = map.next_key_seed(MemberKey(members))? {
            match member {
                Some((name, keep)) => {
                    let value = map.next_value_seed(keep)?;
                    kept.insert(name.to_string(), value);
                }
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(Value::Object(kept))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut kept = Vec::new();
        match self.0 {
            Keep::Each(keep) => {
                while let Some(value) = seq.next_element_seed(*keep)? {
                    kept.push(value);
                }
            }
            _ => while seq.next_element::<IgnoredAny>()?.is_some() {},
        }
        Ok(Value::Array(kept))
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{decode, Keep};

    static POD: Keep = Keep::Members(&[
        ("metadata", Keep::Members(&[("name", Keep::All)])),
        (
            "spec",
            Keep::Members(&[(
                "containers",
                Keep::Each(&Keep::Members(&[("name", Keep::All)])),
            )]),
        ),
        ("status", Keep::All),
    ]);

    fn projected(object: &serde_json::Value) -> serde_json::Value {
        decode(&serde_json::to_vec(object).unwrap(), &POD).unwrap()
    }

    #[test]
    fn keeps_the_members_named_and_drops_the_rest() {
        let object = json!({
            "kind": "Pod",
            "metadata": {"name": "a", "labels": {"x": "y"}, "uid": "u"},
            "spec": {"containers": [{"name": "c", "image": "i"}, {"image": "j"}], "nodeName": "n"},
            "status": {"phase": "Running", "podIPs": [{"ip": "10.0.0.1"}]},
        });
        assert_eq!(
            projected(&object),
            json!({
                "metadata": {"name": "a"},
                "spec": {"containers": [{"name": "c"}, {}]},
                "status": {"phase": "Running", "podIPs": [{"ip": "10.0.0.1"}]},
            })
        );
    }

    #[test]
    fn a_member_of_another_type_comes_out_as_itself_or_empty() {
        // A scalar where an object was expected stays the scalar; an array where an
        // object was expected, or an object where an array was, comes out empty.
        let object = json!({"metadata": "x", "spec": [1, 2], "status": null});
        assert_eq!(
            projected(&object),
            json!({"metadata": "x", "spec": [], "status": null})
        );
        let object = json!({"spec": {"containers": {"name": "c"}}});
        assert_eq!(projected(&object), json!({"spec": {"containers": {}}}));
        assert_eq!(projected(&json!(7)), json!(7));
        assert_eq!(projected(&json!(-7)), json!(-7));
        assert_eq!(projected(&json!(2.5)), json!(2.5));
        assert_eq!(projected(&json!(true)), json!(true));
    }

    #[test]
    fn escaped_keys_and_values_decode_as_serde_json_does() {
        let json = br#"{"meta\u0064ata":{"name":"a\"b\u00e9"},"status":{"ph\u0061se":"R"}}"#;
        assert_eq!(
            decode(json, &POD).unwrap(),
            json!({"metadata": {"name": "a\"bé"}, "status": {"phase": "R"}})
        );
    }

    #[test]
    fn what_is_not_one_json_value_is_an_error() {
        assert!(decode(b"{\"metadata\":", &POD).is_err());
        assert!(decode(b"{} {}", &POD).is_err());
        assert!(decode(b"{\"kind\": tru}", &POD).is_err());
    }
}
