//! `kcm watch`: the typed events of one kind, as the 2014 apiserver's watch served them,
//! printed as text or wire-form JSON, optionally with the etcd event behind each.

use std::time::Duration;

use anyhow::Context as _;

use super::resource::Kind;
use crate::api::{
    self, Deployment, Endpoints, Object, Pod, ReplicaSet, ReplicationController, Service,
};
use crate::client::Target;
use crate::etcd_watcher::{self, Update, WatchEvent, Watcher};
use crate::labels::Selector;
use crate::registry::Registry;

/// How `kcm watch` prints each event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WatchOutput {
    /// `ADDED pods/default/web-7xk2p rv=1234`
    Text,
    /// One wire-form event per line: `{"type":"ADDED","object":{...}}`
    Json,
}

/// `kcm watch KIND [NAME]`.
#[derive(Clone, Debug)]
pub struct WatchOptions {
    pub kind: Kind,
    /// Watch only this object (needs one namespace and no selector).
    pub name: Option<String>,
    pub namespace: String,
    /// Watch every namespace; `namespace` is then ignored.
    pub all_namespaces: bool,
    pub selector: Option<Selector>,
    /// Start after this revision; empty lists the current objects first (as ADDED).
    pub resource_version: String,
    pub output: WatchOutput,
    /// Also print the etcd event each event came from.
    pub raw: bool,
}

/// `kcm watch KIND [NAME]`: prints the typed events of one kind until the process ends;
/// resumes after a disconnect and lists again after compaction, saying so on stderr.
///
/// A `--resource-version` ahead of etcd's revision is waited for (as an etcd watch from a
/// future revision waits), saying so; one already compacted ends the watch with the
/// apiserver's "too old resource version: N (M)", M being the compacted revision.
///
/// # Errors
/// A NAME with `--all-namespaces` or `--selector`, etcd unreachable at start, or the
/// watch failing for good (e.g. its starting revision was compacted).
pub async fn watch(target: &Target, options: WatchOptions) -> anyhow::Result<()> {
    match options.kind {
        Kind::Pods => watch_kind::<Pod>(target, options).await,
        Kind::Replicationcontrollers => watch_kind::<ReplicationController>(target, options).await,
        Kind::Replicasets => watch_kind::<ReplicaSet>(target, options).await,
        Kind::Deployments => watch_kind::<Deployment>(target, options).await,
        Kind::Services => watch_kind::<Service>(target, options).await,
        Kind::Endpoints => watch_kind::<Endpoints>(target, options).await,
    }
}

/// How often `kcm watch` reads etcd's revision while it waits for a future
/// `--resource-version`.
const FUTURE_REVISION_POLL: Duration = Duration::from_millis(500);

pub(super) async fn watch_kind<T: Object>(
    target: &Target,
    options: WatchOptions,
) -> anyhow::Result<()> {
    if options.name.is_some() {
        anyhow::ensure!(
            !options.all_namespaces,
            "a NAME needs one namespace; drop --all-namespaces"
        );
        anyhow::ensure!(
            options.selector.is_none(),
            "a NAME names one object; drop --selector"
        );
    }
    let start = etcd_watcher::parse_watch_resource_version(&options.resource_version)?;
    let (client, registry) = super::connect(target).await?;
    let namespace = (!options.all_namespaces).then_some(options.namespace.as_str());
    let key = api::list_key::<T>(registry.prefix(), namespace);
    if let Some(start) = start {
        wait_for_revision(&registry, &key, start).await?;
    }
    let watcher = Watcher::new(&client, registry);
    let filter = etcd_watcher::selector_filter::<T>(options.selector.clone().unwrap_or_default());
    let mut watch = match &options.name {
        Some(name) => {
            watcher.resumable_object::<T>(&options.namespace, name, &options.resource_version)?
        }
        None => watcher.resumable_list::<T>(namespace, &options.resource_version, filter)?,
    };
    let mut stdout = std::io::stdout().lock();
    // The revision delivered last, to tell a relist after compaction from one after etcd
    // went back in time (which the watcher warns about itself).
    let mut last_revision = start;
    loop {
        let update = watch.next().await;
        match update {
            Update::Event(event, raw) => {
                print_event(&mut stdout, &event, raw.as_ref(), &options)
                    .context("write to stdout")?;
            }
            Update::Resumed { from, reason } => {
                eprintln!("kcm watch: resuming after revision {from} ({reason})");
            }
            Update::Error(status) if status.code == 410 => {
                let start = start.unwrap_or(0);
                let compacted = compact_revision(&client, &key, start).await;
                anyhow::bail!("watch {}: {}", T::RESOURCE, too_old(start, compacted));
            }
            Update::Error(status) => anyhow::bail!("watch {}: {}", T::RESOURCE, status.message),
            Update::Relisted {
                revision,
                added,
                modified,
                deleted,
            } => {
                let why = match last_revision {
                    Some(last) if revision >= last => {
                        format!("the history after revision {last} has been compacted; ")
                    }
                    _ => String::new(),
                };
                eprintln!(
                    "kcm watch: {why}listed at revision {revision} ({added} added, {modified} modified, {deleted} deleted)"
                );
            }
        }
        last_revision = watch.revision();
    }
}

/// The apiserver's "too old resource version: N (M)", and what to do about it.
fn too_old(start: i64, compacted: Option<i64>) -> String {
    match compacted {
        Some(compacted) => format!(
            "too old resource version: {start} ({compacted}): etcd has compacted the \
             revisions before {compacted}; list again with --resource-version \"\" (or 0), \
             or start at {compacted} or later"
        ),
        None => format!(
            "too old resource version: {start}: etcd has compacted it; list again with \
             --resource-version \"\" (or 0)"
        ),
    }
}

/// Returns once etcd's revision has reached `start`; while it has not, says so on stderr
/// (the apiserver's "Too large resource version") and polls.
///
/// # Errors
/// etcd failing to answer.
async fn wait_for_revision(registry: &Registry, key: &str, start: i64) -> anyhow::Result<()> {
    let mut current = current_revision(registry, key).await?;
    if current >= start {
        return Ok(());
    }
    eprintln!(
        "kcm watch: resourceVersion {start} is ahead of etcd's current revision {current}; \
         waiting for it (too large resource version)"
    );
    let mut poll = tokio::time::interval(FUTURE_REVISION_POLL);
    poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while current < start {
        poll.tick().await;
        current = current_revision(registry, key).await?;
    }
    eprintln!("kcm watch: etcd reached revision {start}");
    Ok(())
}

/// etcd's current revision, from the header of a count-only read of `key` (readable by
/// whoever may watch it).
async fn current_revision(registry: &Registry, key: &str) -> anyhow::Result<i64> {
    let options = etcd_client::GetOptions::new().with_count_only();
    let response = registry
        .kv()
        .get(key, Some(options))
        .await
        .with_context(|| format!("read etcd's revision (at {key})"))?;
    Ok(response.header().map_or(0, |h| h.revision()))
}

/// The revision etcd has compacted up to, learnt from a watch on `key` from `revision`
/// (etcd cancels it and names the compacted revision); `None` when etcd does not say so
/// within a few seconds.
async fn compact_revision(client: &etcd_client::Client, key: &str, revision: i64) -> Option<i64> {
    let probe = async {
        let options = etcd_client::WatchOptions::new().with_start_revision(revision.max(1));
        let mut stream = client.watch_client().watch(key, Some(options)).await.ok()?;
        while let Some(response) = stream.message().await.ok()? {
            if response.compact_revision() > 0 {
                return Some(response.compact_revision());
            }
            if response.canceled() || !response.events().is_empty() {
                return None;
            }
        }
        None
    };
    tokio::time::timeout(Duration::from_secs(5), probe)
        .await
        .ok()
        .flatten()
}

pub(super) fn print_event<T: Object>(
    out: &mut impl std::io::Write,
    event: &WatchEvent<T>,
    raw: Option<&etcd_watcher::RawInfo>,
    options: &WatchOptions,
) -> std::io::Result<()> {
    match options.output {
        WatchOutput::Text => {
            if options.raw {
                match raw {
                    Some(raw) => writeln!(out, "  etcd: {raw}")?,
                    None => writeln!(out, "  etcd: (from a list)")?,
                }
            }
            let object = event.object();
            let meta = object.map(|o| o.metadata());
            writeln!(
                out,
                "{} {}/{}/{} rv={}",
                event.type_name(),
                T::RESOURCE,
                meta.map_or("", |m| m.namespace.as_str()),
                meta.map_or("", |m| m.name.as_str()),
                event.revision().unwrap_or(0)
            )?;
        }
        WatchOutput::Json => {
            let mut value = serde_json::to_value(event).map_err(std::io::Error::other)?;
            if options.raw {
                value["raw"] = serde_json::to_value(raw).map_err(std::io::Error::other)?;
            }
            writeln!(out, "{value}")?;
        }
    }
    out.flush()
}
