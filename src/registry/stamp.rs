//! Creates of many objects alike ([`Stamp`]): a controller's sync creates hundreds of
//! pods that differ only in their name and in what every create fills in (uid and
//! creation time). Making and encoding each pod whole was about 6 µs of the 60 to 70 µs a
//! pod kcm's process spent in a scale-up, its largest item after the write itself
//! (docs/PERFORMANCE.md); a stamp encodes the object once, cut where those three strings
//! go, and each create joins the pieces around them.
//!
//! Invariant: a stamped create stores exactly the bytes [`Registry::encode_create`] would
//! have stored for the object under that name with that uid and creation time. Whatever
//! the stamp cannot reproduce so (a name that JSON would escape, an object that already
//! carries a uid, a fencing token other than the one it was cut with) goes through
//! `encode_create` itself.

use std::sync::OnceLock;

use super::{prepare_created, EncodedCreate, Registry, StorageError};
use crate::api::{self, Object};

/// What the stamp writes in place of the three strings while it is cut: none is a value
/// the object could hold (a name may not contain `!`), so each is found exactly once, as
/// a whole JSON string, or the stamp is not cut.
const NAME: &str = "!kcm-stamp-name!";
const UID: &str = "!kcm-stamp-uid!";
const CREATED: &str = "!kcm-stamp-created!";

/// An object to be created many times under different names, encoded once
/// ([`Registry::encode_create_stamped`]).
#[derive(Debug)]
pub struct Stamp<T> {
    /// The object as every create gets it, but for its name.
    object: T,
    /// Made by the first create, for the fencing token it carried.
    cut: OnceLock<Option<Cut>>,
}

/// The object's encoding with its name, uid and creation time left out.
#[derive(Debug)]
struct Cut {
    /// The fencing token the pieces carry (`None` when the registry had no fence).
    token: Option<i64>,
    /// The encoding around the three strings, in the order they occur in it.
    pieces: [Vec<u8>; 4],
    order: [Field; 3],
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Field {
    Name,
    Uid,
    Created,
}

/// What a create filled in beside the name: the uid and creation time it stored.
#[derive(Debug)]
pub struct Filled {
    pub uid: String,
    pub creation_timestamp: String,
}

impl<T: Object> Stamp<T> {
    /// A stamp of `object` (its name is ignored).
    pub fn new(object: T) -> Stamp<T> {
        Stamp {
            object,
            cut: OnceLock::new(),
        }
    }

    /// The object under `name`, as it goes to a create.
    pub fn object(&self, name: &str) -> T {
        let mut object = self.object.clone();
        object.metadata_mut().name = name.to_string();
        object
    }

    /// The namespace every object is created in.
    pub fn namespace(&self) -> &str {
        &self.object.metadata().namespace
    }

    /// The cut for `token`: made on the first call, `None` when the object cannot be cut
    /// or was cut for another token.
    fn cut(&self, token: Option<i64>) -> Option<&Cut> {
        let cut = self.cut.get_or_init(|| Cut::of(&self.object, token));
        cut.as_ref().filter(|cut| cut.token == token)
    }
}

impl Cut {
    /// `object`'s encoding as `encode_create` makes it, with its name, uid and creation
    /// time as the markers, cut at each; `None` when the object carries a uid, a creation
    /// time or a resourceVersion of its own, or a marker is not found exactly once.
    fn of<T: Object>(object: &T, token: Option<i64>) -> Option<Cut> {
        let meta = object.metadata();
        if !meta.uid.is_empty()
            || meta.creation_timestamp.is_some()
            || meta.resource_version.is_some()
        {
            return None;
        }
        let mut object = object.clone();
        let meta = object.metadata_mut();
        meta.name = NAME.to_string();
        meta.uid = UID.to_string();
        meta.creation_timestamp = Some(CREATED.to_string());
        prepare_created(&mut object, token);
        let bytes = api::encode(&object).ok()?;
        let [name, uid, created] = [
            (Field::Name, NAME),
            (Field::Uid, UID),
            (Field::Created, CREATED),
        ]
        .map(|(field, marker)| Some((find_once(&bytes, marker)?, field, marker.len() + 2)));
        let mut at = [name?, uid?, created?];
        at.sort_unstable_by_key(|&(start, ..)| start);
        let mut pieces: [Vec<u8>; 4] = Default::default();
        let mut from = 0;
        for (piece, (start, _, len)) in pieces.iter_mut().zip(at) {
            // The marker's quotes stay in the pieces: only the text between is filled.
            *piece = bytes[from..=start].to_vec();
            from = start + len - 1;
        }
        pieces[3] = bytes[from..].to_vec();
        Some(Cut {
            token,
            pieces,
            order: at.map(|(_, field, _)| field),
        })
    }

    /// The encoding with `name`, `uid` and `created` filled in.
    fn fill(&self, name: &str, uid: &str, created: &str) -> Vec<u8> {
        let length = self.pieces.iter().map(Vec::len).sum::<usize>()
            + name.len()
            + uid.len()
            + created.len();
        let mut value = Vec::with_capacity(length);
        value.extend_from_slice(&self.pieces[0]);
        for (field, piece) in self.order.iter().zip(&self.pieces[1..]) {
            value.extend_from_slice(
                match field {
                    Field::Name => name,
                    Field::Uid => uid,
                    Field::Created => created,
                }
                .as_bytes(),
            );
            value.extend_from_slice(piece);
        }
        value
    }
}

/// Where `"marker"` (quoted, as a JSON string) begins in `bytes`, when it occurs exactly
/// once.
fn find_once(bytes: &[u8], marker: &str) -> Option<usize> {
    let quoted = format!("\"{marker}\"");
    let quoted = quoted.as_bytes();
    let mut found = bytes
        .windows(quoted.len())
        .enumerate()
        .filter(|(_, window)| *window == quoted)
        .map(|(at, _)| at);
    let first = found.next()?;
    found.next().is_none().then_some(first)
}

/// Whether JSON writes `text` as it is (no escapes): the uid and time kcm makes are, and
/// so is every valid object name.
fn plain(text: &str) -> bool {
    text.bytes()
        .all(|b| b.is_ascii_graphic() && b != b'"' && b != b'\\')
}

impl Registry {
    /// [`Registry::encode_create`] of `stamp`'s object under `name`, with a new uid and
    /// creation time: the same bytes, made by filling the stamp's cut when it has one.
    /// Returns what was filled in beside the name.
    ///
    /// # Errors
    /// As [`Registry::encode_create`].
    pub fn encode_create_stamped<T: Object>(
        &self,
        stamp: &Stamp<T>,
        name: &str,
    ) -> Result<(EncodedCreate, Filled), StorageError> {
        let namespace = &stamp.object.metadata().namespace;
        let key = self.item_key::<T>("create", namespace, name)?;
        let fence = self.write_fence("create", &key)?;
        let token = fence.as_ref().map(|fence| fence.create_revision);
        match stamp.cut(token).filter(|_| plain(name)) {
            Some(cut) => {
                let filled = Filled {
                    uid: uuid::Uuid::new_v4().to_string(),
                    creation_timestamp: api::now_rfc3339(),
                };
                let value = cut.fill(name, &filled.uid, &filled.creation_timestamp);
                Ok((EncodedCreate { key, fence, value }, filled))
            }
            None => {
                let mut object = stamp.object(name);
                let encoded = self.encode_create(&mut object)?;
                let meta = object.metadata();
                let filled = Filled {
                    uid: meta.uid.clone(),
                    creation_timestamp: meta.creation_timestamp.clone().unwrap_or_default(),
                };
                Ok((encoded, filled))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{ObjectMeta, Pod};

    fn pod() -> Pod {
        let mut pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {
                "namespace": "default",
                "labels": {"app": "web"},
                "annotations": {"note": "a \"quoted\" value"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                    "name": "web", "uid": "u-1", "controller": true}],
                "unknownField": {"kept": true}
            },
            "spec": {"containers": [{"name": "web", "image": "nginx",
                "ports": [{"name": "http", "containerPort": 80}]}],
                "futureField": [1, 2]},
            "status": {"phase": "Pending"}
        }))
        .unwrap();
        pod.metadata.name = String::new();
        pod
    }

    /// What `encode_create` stores for the stamp's object under `name` with the uid and
    /// time the stamped create filled in.
    fn unstamped(registry: &Registry, stamp: &Stamp<Pod>, name: &str, filled: &Filled) -> Vec<u8> {
        let mut object = stamp.object(name);
        object.metadata.uid = filled.uid.clone();
        object.metadata.creation_timestamp = Some(filled.creation_timestamp.clone());
        registry.encode_create(&mut object).unwrap().value
    }

    /// A registry over nothing: encoding asks no etcd (nothing listens on port 1).
    async fn registry() -> Registry {
        let client = etcd_client::Client::connect(["http://127.0.0.1:1"], None)
            .await
            .unwrap();
        Registry::new(&client, "/registry").unwrap()
    }

    #[tokio::test]
    async fn a_stamped_create_stores_what_encode_create_stores() {
        let registry = registry().await;
        let stamp = Stamp::new(pod());
        for name in ["web-abcde", "web-0", "a.b-c"] {
            let (encoded, filled) = registry.encode_create_stamped(&stamp, name).unwrap();
            assert!(stamp.cut(None).is_some(), "the pod is cut");
            assert_eq!(encoded.key(), format!("/registry/pods/default/{name}"));
            assert_eq!(
                String::from_utf8_lossy(encoded.value()),
                String::from_utf8_lossy(&unstamped(&registry, &stamp, name, &filled))
            );
        }
    }

    #[tokio::test]
    async fn what_a_stamp_cannot_reproduce_goes_through_encode_create() {
        let registry = registry().await;
        // A name JSON escapes: encode_create's bytes, and the stamp stays cut.
        let stamp = Stamp::new(pod());
        let (encoded, filled) = registry.encode_create_stamped(&stamp, "we\"b").unwrap();
        assert_eq!(
            encoded.value(),
            unstamped(&registry, &stamp, "we\"b", &filled)
        );
        // An object with a uid of its own keeps it, and is never cut.
        let mut with_uid = pod();
        with_uid.metadata.uid = "given".into();
        let stamp = Stamp::new(with_uid);
        let (encoded, filled) = registry.encode_create_stamped(&stamp, "web-1").unwrap();
        assert_eq!(filled.uid, "given");
        assert!(stamp.cut(None).is_none());
        assert_eq!(
            encoded.value(),
            unstamped(&registry, &stamp, "web-1", &filled)
        );
        // An object whose value holds a marker is not cut.
        let mut marked = pod();
        marked.metadata.labels.insert("x", UID);
        let stamp = Stamp::new(marked);
        let (encoded, filled) = registry.encode_create_stamped(&stamp, "web-2").unwrap();
        assert!(stamp.cut(None).is_none());
        assert_eq!(
            encoded.value(),
            unstamped(&registry, &stamp, "web-2", &filled)
        );
        // The errors are encode_create's.
        let stamp = Stamp::new(Pod {
            metadata: ObjectMeta::default(),
            ..Pod::default()
        });
        assert!(matches!(
            registry.encode_create_stamped(&stamp, "web-3"),
            Err(StorageError::BadRequest { .. })
        ));
    }

    #[tokio::test]
    async fn a_cut_made_for_one_fencing_token_serves_only_that_token() {
        let slot = crate::registry::FenceSlot::default();
        let registry = registry().await.with_fence(slot.clone());
        let term = |revision| crate::registry::Fence::new("/e/a", revision, Default::default());
        slot.set(term(7));
        let stamp = Stamp::new(pod());
        for term_now in [7, 8] {
            slot.set(term(term_now));
            let (encoded, filled) = registry.encode_create_stamped(&stamp, "web-f").unwrap();
            assert_eq!(
                encoded.value(),
                unstamped(&registry, &stamp, "web-f", &filled)
            );
        }
        assert!(stamp.cut(Some(7)).is_some());
        assert!(stamp.cut(Some(7)).is_some());
        assert!(stamp.cut(Some(8)).is_none());
        assert!(stamp.cut(None).is_none());
        let cut = stamp.cut(Some(7)).unwrap();
        let value = String::from_utf8(cut.fill("web-x", "u", "t")).unwrap();
        assert!(value.contains(r#""kcm.io/fencing-token":"7""#), "{value}");
    }
}
