//! [`PodFields`]: what a [`CachedPod`](super::CachedPod) keeps of a pod, read from the
//! stored JSON in one pass with its strings borrowed from the document, or borrowed from a
//! decoded [`Pod`].
//!
//! The pod informer decodes every pod a controller creates, when the watch brings it
//! back. A whole [`Pod`] decodes through serde's `flatten`, which keeps unknown fields for
//! a rewrite: it buffers every field before decoding it, and copies every string. For a
//! ReplicaSet's created pod that was 1.6 µs and 21 allocations, and making the cached
//! form from it 11 more (docs/PERFORMANCE.md, "The pod cache reads what it keeps").
//!
//! The cache reads only the fields it keeps, as client-go's metadata-only informers read
//! only metadata. Each of them is read as the whole decode reads it: the same types, a
//! `null` as absent where the whole decode takes it so, and an object where it wants an
//! object. A pod whose other fields are malformed (an annotation that is a number) is
//! cached, where the whole decode refuses it; the API server, which decodes whole pods,
//! does not serve it, and says why. A document this decode refuses gets the whole decode's
//! error (`CachedPod`'s `decode_pod`).

use std::borrow::Cow;
use std::marker::PhantomData;

use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

use crate::api::{null_as_default, OwnerReference, Pod, PodPhase};
use crate::labels::Set;

/// What [`CachedPod`](super::CachedPod) reads of a pod.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub(super) struct PodFields<'a> {
    #[serde(default, borrow)]
    pub kind: Cow<'a, str>,
    #[serde(default, borrow)]
    pub api_version: Cow<'a, str>,
    #[serde(default, borrow)]
    pub metadata: MapOnly<MetaFields<'a>>,
    #[serde(default, borrow)]
    pub spec: MapOnly<SpecFields<'a>>,
    #[serde(default, borrow)]
    pub status: Option<MapOnly<StatusFields<'a>>>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub(super) struct MetaFields<'a> {
    #[serde(default, borrow)]
    pub name: Cow<'a, str>,
    #[serde(default, borrow)]
    pub namespace: Cow<'a, str>,
    #[serde(default, borrow)]
    pub uid: Cow<'a, str>,
    #[serde(default, borrow)]
    pub labels: Labels<'a>,
    #[serde(default, borrow)]
    pub creation_timestamp: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub deletion_timestamp: Option<Cow<'a, str>>,
    #[serde(default, deserialize_with = "owned_or_default")]
    pub finalizers: Cow<'a, [String]>,
    #[serde(default, borrow)]
    pub owner_references: Owners<'a>,
}

/// `metadata.labels` as read: a decoded pod's set, or a stored pod's pairs in the
/// document's order, borrowed, to be compared with the last pod's set before a set is
/// made ([`SharedParts`](super::cached::SharedParts)).
pub(super) enum Labels<'a> {
    Set(Cow<'a, Set>),
    Pairs(Vec<(Cow<'a, str>, Cow<'a, str>)>),
}

impl Default for Labels<'_> {
    fn default() -> Self {
        Labels::Pairs(Vec::new())
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Labels<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Pairs<'a>(Vec<(Cow<'a, str>, Cow<'a, str>)>);
        impl<'de: 'a, 'a> Deserialize<'de> for Pairs<'a> {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                struct Entries<'a>(PhantomData<&'a ()>);
                impl<'de: 'a, 'a> Visitor<'de> for Entries<'a> {
                    type Value = Pairs<'a>;
                    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        f.write_str("a map of strings")
                    }
                    fn visit_map<A: MapAccess<'de>>(
                        self,
                        mut map: A,
                    ) -> Result<Pairs<'a>, A::Error> {
                        let mut pairs = Vec::with_capacity(map.size_hint().unwrap_or(4));
                        while let Some((key, value)) = map.next_entry::<Text<'a>, Text<'a>>()? {
                            pairs.push((key.0, value.0));
                        }
                        Ok(Pairs(pairs))
                    }
                }
                deserializer.deserialize_map(Entries(PhantomData))
            }
        }
        let pairs = Option::<Pairs<'a>>::deserialize(deserializer)?;
        Ok(Labels::Pairs(pairs.map(|p| p.0).unwrap_or_default()))
    }
}

impl Labels<'_> {
    /// Whether these are the labels of `set`.
    pub(super) fn are(&self, set: &Set) -> bool {
        match self {
            Labels::Set(own) => **own == *set,
            // A set iterates in key order: pairs in another order (or a key twice) make
            // a set of their own, equal or not.
            Labels::Pairs(pairs) => {
                pairs.len() == set.len()
                    && pairs
                        .iter()
                        .zip(set.iter())
                        .all(|((k, v), (sk, sv))| k == sk && v == sv)
            }
        }
    }

    pub(super) fn into_set(self) -> Set {
        match self {
            Labels::Set(set) => set.into_owned(),
            Labels::Pairs(pairs) => {
                let mut set = Set::new();
                for (key, value) in pairs {
                    // As serde's map does: a later key replaces an earlier one.
                    set.insert(key.into_owned(), value.into_owned());
                }
                set
            }
        }
    }
}

/// A string borrowed from the document when it has no escapes.
struct Text<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Chars<'a>(PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for Chars<'a> {
            type Value = Text<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, text: &'de str) -> Result<Text<'a>, E> {
                Ok(Text(Cow::Borrowed(text)))
            }
            fn visit_str<E>(self, text: &str) -> Result<Text<'a>, E> {
                Ok(Text(Cow::Owned(text.to_string())))
            }
            fn visit_string<E>(self, text: String) -> Result<Text<'a>, E> {
                Ok(Text(Cow::Owned(text)))
            }
        }
        deserializer.deserialize_str(Chars(PhantomData))
    }
}

/// `metadata.ownerReferences` as read: a decoded pod's, or a stored pod's read field by
/// field when they hold nothing but the six fields the cache reads (as a ReplicaSet's
/// pods' do), else whole (kept for the garbage collector as written).
pub(super) enum Owners<'a> {
    Whole(Cow<'a, [OwnerReference]>),
    Fields(Vec<MapOnly<OwnerFields<'a>>>),
}

impl Default for Owners<'_> {
    fn default() -> Self {
        Owners::Fields(Vec::new())
    }
}

/// An owner reference with no other fields than these.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct OwnerFields<'a> {
    #[serde(default, borrow)]
    pub api_version: Cow<'a, str>,
    #[serde(default, borrow)]
    pub kind: Cow<'a, str>,
    #[serde(default, borrow)]
    pub name: Cow<'a, str>,
    #[serde(default, borrow)]
    pub uid: Cow<'a, str>,
    #[serde(default)]
    pub controller: Option<bool>,
    #[serde(default)]
    pub block_owner_deletion: Option<bool>,
}

impl<'de: 'a, 'a> Deserialize<'de> for Owners<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let Some(raw) = Option::<&'de RawValue>::deserialize(deserializer)? else {
            return Ok(Owners::default());
        };
        if let Ok(fields) = serde_json::from_str(raw.get()) {
            return Ok(Owners::Fields(fields));
        }
        let whole: Option<Vec<OwnerReference>> =
            serde_json::from_str(raw.get()).map_err(serde::de::Error::custom)?;
        Ok(Owners::Whole(Cow::Owned(whole.unwrap_or_default())))
    }
}

/// What the cache reads of one owner reference.
pub(super) struct OwnerView<'r> {
    pub api_version: &'r str,
    pub kind: &'r str,
    pub name: &'r str,
    pub uid: &'r str,
    pub controller: Option<bool>,
    pub block_owner_deletion: Option<bool>,
    /// It has fields beyond these.
    pub more: bool,
}

impl Owners<'_> {
    pub fn views(&self) -> impl Iterator<Item = OwnerView<'_>> {
        let (whole, fields) = match self {
            Owners::Whole(references) => (&references[..], &[][..]),
            Owners::Fields(fields) => (&[][..], &fields[..]),
        };
        (whole.iter())
            .map(|r| OwnerView {
                api_version: &r.api_version,
                kind: &r.kind,
                name: &r.name,
                uid: &r.uid,
                controller: r.controller,
                block_owner_deletion: r.block_owner_deletion,
                more: !r.extra.is_empty(),
            })
            .chain(fields.iter().map(|f| OwnerView {
                api_version: &f.0.api_version,
                kind: &f.0.kind,
                name: &f.0.name,
                uid: &f.0.uid,
                controller: f.0.controller,
                block_owner_deletion: f.0.block_owner_deletion,
                more: false,
            }))
    }

    pub fn into_references(self) -> Vec<OwnerReference> {
        match self {
            Owners::Whole(references) => references.into_owned(),
            Owners::Fields(fields) => (fields.into_iter())
                .map(|MapOnly(f)| OwnerReference {
                    api_version: f.api_version.into_owned(),
                    kind: f.kind.into_owned(),
                    name: f.name.into_owned(),
                    uid: f.uid.into_owned(),
                    controller: f.controller,
                    block_owner_deletion: f.block_owner_deletion,
                    ..OwnerReference::default()
                })
                .collect(),
        }
    }
}

#[derive(Deserialize, Default)]
pub(super) struct SpecFields<'a> {
    #[serde(default, borrow, deserialize_with = "null_as_default")]
    pub containers: Vec<MapOnly<ContainerFields<'a>>>,
    #[serde(default, borrow)]
    pub host: Cow<'a, str>,
}

#[derive(Deserialize, Default)]
pub(super) struct ContainerFields<'a> {
    #[serde(default, borrow, deserialize_with = "null_as_default")]
    pub ports: Vec<MapOnly<PortFields<'a>>>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub(super) struct PortFields<'a> {
    #[serde(default, borrow)]
    pub name: Cow<'a, str>,
    #[serde(default)]
    pub container_port: i64,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub(super) struct StatusFields<'a> {
    #[serde(default)]
    pub phase: PodPhase,
    #[serde(rename = "podIP", default, borrow)]
    pub pod_ip: Cow<'a, str>,
    #[serde(default, borrow, deserialize_with = "null_as_default")]
    pub conditions: Vec<MapOnly<ConditionFields<'a>>>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub container_statuses: Vec<MapOnly<ContainerStatusFields>>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub(super) struct ConditionFields<'a> {
    #[serde(rename = "type", default, borrow)]
    pub type_: Cow<'a, str>,
    #[serde(default, borrow)]
    pub status: Cow<'a, str>,
    #[serde(default, borrow)]
    pub last_transition_time: Option<Cow<'a, str>>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub(super) struct ContainerStatusFields {
    #[serde(default)]
    pub restart_count: i64,
}

/// A value read from a JSON object only, as the whole decode reads its structs (serde
/// reads a derived struct from an array too, field by field).
#[derive(Default)]
pub(super) struct MapOnly<T>(pub T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for MapOnly<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Fields<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for Fields<T> {
            type Value = T;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
                T::deserialize(serde::de::value::MapAccessDeserializer::new(map))
            }
        }
        deserializer
            .deserialize_map(Fields(PhantomData))
            .map(MapOnly)
    }
}

/// A decoded (so owned) value; an explicit `null` as the default, as the whole decode's
/// `null_as_default` reads it.
fn owned_or_default<'de, 'a, D, T>(deserializer: D) -> Result<Cow<'a, T>, D::Error>
where
    D: Deserializer<'de>,
    T: ToOwned + ?Sized,
    T::Owned: Default + Deserialize<'de>,
{
    Ok(Cow::Owned(null_as_default(deserializer)?))
}

impl<'a> From<&'a Pod> for PodFields<'a> {
    fn from(pod: &'a Pod) -> PodFields<'a> {
        let meta = &pod.metadata;
        PodFields {
            kind: Cow::Borrowed(&pod.kind),
            api_version: Cow::Borrowed(&pod.api_version),
            metadata: MapOnly(MetaFields {
                name: Cow::Borrowed(&meta.name),
                namespace: Cow::Borrowed(&meta.namespace),
                uid: Cow::Borrowed(&meta.uid),
                labels: Labels::Set(Cow::Borrowed(&meta.labels)),
                creation_timestamp: meta.creation_timestamp.as_deref().map(Cow::Borrowed),
                deletion_timestamp: meta.deletion_timestamp.as_deref().map(Cow::Borrowed),
                finalizers: Cow::Borrowed(&meta.finalizers),
                owner_references: Owners::Whole(Cow::Borrowed(&meta.owner_references)),
            }),
            spec: MapOnly(SpecFields {
                containers: (pod.spec.containers.iter())
                    .map(|container| {
                        MapOnly(ContainerFields {
                            ports: (container.ports.iter())
                                .map(|port| {
                                    MapOnly(PortFields {
                                        name: Cow::Borrowed(&port.name),
                                        container_port: port.container_port,
                                    })
                                })
                                .collect(),
                        })
                    })
                    .collect(),
                host: Cow::Borrowed(&pod.spec.host),
            }),
            status: pod.status.as_ref().map(|status| {
                MapOnly(StatusFields {
                    phase: status.phase,
                    pod_ip: Cow::Borrowed(&status.pod_ip),
                    conditions: (status.conditions.iter())
                        .map(|condition| {
                            MapOnly(ConditionFields {
                                type_: Cow::Borrowed(&condition.type_),
                                status: Cow::Borrowed(&condition.status),
                                last_transition_time: (condition.last_transition_time)
                                    .as_deref()
                                    .map(Cow::Borrowed),
                            })
                        })
                        .collect(),
                    container_statuses: (status.container_statuses.iter())
                        .map(|c| {
                            MapOnly(ContainerStatusFields {
                                restart_count: c.restart_count,
                            })
                        })
                        .collect(),
                })
            }),
        }
    }
}
