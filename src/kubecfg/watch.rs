//! `kcm watch`: the typed events of one kind, as the 2014 apiserver's watch served them,
//! printed as text or wire-form JSON, optionally with the etcd event behind each.

use super::*;

/// `kcm watch KIND [NAME]`: prints the typed events of one kind until the process ends;
/// resumes after a disconnect and lists again after compaction, saying so on stderr.
///
/// # Errors
/// A NAME with `--all-namespaces` or `--selector`, etcd unreachable at start, or the
/// watch failing for good (e.g. its starting revision was compacted).
pub async fn watch(target: &Target, options: WatchOptions) -> anyhow::Result<()> {
    match options.kind {
        Kind::Pods => watch_kind::<Pod>(target, options).await,
        Kind::Replicationcontrollers => watch_kind::<ReplicationController>(target, options).await,
        Kind::Services => watch_kind::<Service>(target, options).await,
        Kind::Endpoints => watch_kind::<Endpoints>(target, options).await,
    }
}

pub(super) async fn watch_kind<T: Object>(
    target: &Target,
    options: WatchOptions,
) -> anyhow::Result<()> {
    let (client, registry) = target.connect().await?;
    let watcher = Watcher::new(&client, registry);
    let filter = etcd_watcher::selector_filter::<T>(options.selector.clone().unwrap_or_default());
    let mut watch = match &options.name {
        Some(name) => {
            anyhow::ensure!(
                !options.all_namespaces,
                "a NAME needs one namespace; drop --all-namespaces"
            );
            anyhow::ensure!(
                options.selector.is_none(),
                "a NAME names one object; drop --selector"
            );
            watcher.resumable_object::<T>(&options.namespace, name, &options.resource_version)?
        }
        None => {
            let namespace = (!options.all_namespaces).then_some(options.namespace.as_str());
            watcher.resumable_list::<T>(namespace, &options.resource_version, filter)?
        }
    };
    let mut stdout = std::io::stdout().lock();
    loop {
        match watch.next().await {
            Update::Event(event, raw) => {
                print_event(&mut stdout, &event, raw.as_ref(), &options)
                    .context("write to stdout")?;
            }
            Update::Resumed { from, reason } => {
                eprintln!("kcm watch: resuming after revision {from} ({reason})");
            }
            Update::Error(status) => anyhow::bail!("watch {}: {}", T::RESOURCE, status.message),
            Update::Relisted {
                revision,
                added,
                modified,
                deleted,
            } => {
                eprintln!(
                    "kcm watch: listed at revision {revision} ({added} added, {modified} modified, {deleted} deleted)"
                );
            }
        }
    }
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
