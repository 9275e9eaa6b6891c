//! The kubecfg verbs: `create`, `apply`, `get`, `resize`, `delete`, `stop`, `run`,
//! `describe` and `watch`, and kubectl's later ones: `scale`, `set image`,
//! `create deployment` and `rollout`, talking to etcd directly instead of to an apiserver.
//!
//! Mirrors 2014's `cmd/kubecfg/kubecfg.go` and `pkg/kubecfg/` (`kubecfg.go`:
//! `ResizeController`, `StopController`, `RunController`; `resource_printer.go`: the
//! tables), with kubectl's habits for flags and messages (`-f`, `-n`, `-A`, `-l`, `-o`,
//! `pods "x" not found`, `replicationcontrollers/web created`).
//!
//! Invariants:
//! - `create` and `apply` decode and validate every object of their input before they
//!   write any, so an invalid file writes nothing;
//! - the formatting (tables, ages, `describe`) is pure, over objects already read, and
//!   unit-tested; the verbs only read, write and print;
//! - every verb writes its results to stdout and nothing else there; warnings and notes go
//!   to stderr, errors are returned (and printed once by `main`).
//!
//! Layout: one file per verb, holding the verb's options (built by `cli::kubecfg` from its
//! flags) and its code: `get`, `create` (with `create deployment`), `apply`, `delete`,
//! `describe`, `rollout`, `scale` (`resize`), `stop`, `run`, `set` (`set image`), `watch`.
//! Verbs import only the shared files, which import no verb: `resource` (kubectl's names
//! of kinds and objects), `print` (tables, ages, stdout), `storage` (kubectl's wording of
//! storage errors, the one create and update), `manifest` (the `-f` input), `overlap`
//! (overlapping controllers) and `deployments` (a deployment with its ReplicaSets).

mod apply;
mod create;
mod delete;
mod deployments;
mod describe;
mod events;
mod get;
mod input;
mod manifest;
mod overlap;
mod print;
mod resource;
pub mod rollout;
mod run;
mod scale;
mod set;
mod stop;
mod storage;
mod watch;

/// The manager kcm's CLI writes are recorded as in `metadata.managedFields` (of objects
/// that track them: those made through the API).
pub const CLI_FIELD_MANAGER: &str = "kcm";

/// Connects to `target` for a command: its writes of objects made through the API are
/// recorded as [`CLI_FIELD_MANAGER`]'s, as the API records kubectl's.
///
/// # Errors
/// As [`Target::connect`](crate::client::Target::connect).
pub(crate) async fn connect(
    target: &crate::client::Target,
) -> anyhow::Result<(etcd_client::Client, crate::registry::Registry)> {
    let (client, registry) = target.connect().await?;
    let ownership = std::sync::Arc::new(crate::apiserver::FieldOwnership);
    Ok((
        client,
        registry.with_field_manager(ownership, CLI_FIELD_MANAGER),
    ))
}

pub use self::apply::{
    apply, three_way_merge, Applied, ApplyOptions, ServerSide, LAST_APPLIED_ANNOTATION,
};
pub use self::create::{
    create, create_deployment, new_deployment, CreateDeploymentOptions, CreateOptions,
};
pub use self::delete::{delete, delete_write, pending, Cascade, DeleteOptions, DeleteWrite};
pub use self::deployments::split_replica_sets;
pub use self::describe::{describe, describe_controller, ownership_lines, DescribeOptions};
pub use self::get::{get, GetOptions, GetOutput};
pub use self::manifest::{
    parse_manifests, FilenameOptions, Manifest, ETCD_MAX_REQUEST_BYTES, MAX_INPUT_BYTES,
};
pub use self::print::{age, render_objects, render_objects_as, render_table, Printable};
pub use self::resource::{kind_reference, kubectl_kind, Kind, Workload, WorkloadKind};
pub use self::rollout::{RolloutOptions, RolloutStatusOptions};
pub use self::run::{run, run_objects, RunOptions};
pub use self::scale::{resize, ResizeOptions};
pub use self::set::{parse_image_update, set_image, set_images, SetImageOptions, Templated};
pub use self::stop::{stop, Interrupted, StopOptions};
pub use self::watch::{watch, WatchOptions, WatchOutput};

#[cfg(test)]
mod tests;
