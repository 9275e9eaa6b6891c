//! Shared, indexed caches of one kind, each fed by one list-and-watch: client-go's
//! `SharedIndexInformer` (reflector + indexer + event handlers), which the manager
//! adopted in 2015, for kcm.
//!
//! 2014 had no cache: every sync listed its namespace's pods from the apiserver, so a
//! resync of 1,000 controllers in one namespace read that namespace 1,000 times. Here one
//! [`Informer`] per kind lists once, then follows one etcd watch, and every controller
//! reads from its store: the replication manager and the endpoints controller share the
//! pod informer, so pods are watched once and stored once.
//!
//! The store keeps a compact form of each object ([`Cached`]): for pods, [`CachedPod`]
//! holds only what the controllers read (labels, phase, host, IP, ports, creation time,
//! resourceVersion), with label sets shared between the pods that carry the same ones.
//! A decoded `Pod` costs about six times its JSON document; a `CachedPod` less than one.
//!
//! Invariants:
//! - the store mirrors etcd at [`Informer::revision`]: every event up to that revision has
//!   been applied, and none after it (a value that does not decode is not an object of
//!   the kind: its key is removed, and its name is remembered as taken);
//! - subscribers get a [`Delta`] for every change, after the store has applied it, in
//!   revision order; a subscriber only sees changes made after it subscribed;
//! - the revision never goes backwards; `synced` turns true once, after the first list.
//!
//! Unlike the resumable watch (`etcd_watcher`), the reflector here needs no previous
//! values and no 2014 translation table: it mirrors keys, so a PUT is an upsert and a
//! DELETE a removal.

//!
//! Layout: [`cached`] (what the store keeps of each typed kind, and a stored pod decoded
//! straight into its cached form), [`pod_fields`] (the fields of a pod that form reads),
//! [`stored`] (one value as read, before it decodes), [`handoff`] (the pods a process
//! creates, handed to its own informer in cached form), [`kind`] ([`Reflected`]:
//! what an informer needs of its items, where they live and how a value decodes),
//! [`node`] (Node documents and the kubelets' registrations, which are no typed kind),
//! [`store`] (items by namespace with the label
//! index, and deltas), [`reflector`] (the [`Informer`] itself) and [`factory`] (the
//! [`InformerFactory`] that hands out one informer per kind).

mod cached;
mod factory;
mod handoff;
mod intern;
mod key;
mod kind;
mod node;
mod pod_fields;
mod reflector;
mod store;
mod stored;

pub use cached::{
    Cached, CachedPod, ControllerRef, Interners, Ownership, PodOwnership, PodPorts, Uid,
};
pub use factory::InformerFactory;
pub use handoff::Handoff;
pub use key::{NotAnObjectKey, ObjectKey};
pub use kind::Reflected;
pub use node::{CachedNode, NodeLease, Registration};
pub use reflector::{
    ControllerInformer, DeploymentInformer, EndpointsInformer, Informer, NodeInformer,
    NodeLeaseInformer, PodInformer, RegistrationInformer, RemoteSource, ReplicaSetInformer,
    ServiceInformer, Source,
};
pub use store::{Delta, Namespace};
pub use stored::Stored;
