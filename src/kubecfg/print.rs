//! What the verbs print and how: [`render_objects`] (the `get` table of each kind: the
//! columns and cells of the Table the API serves, `apiserver::TablePrinter`, so
//! `kcm get` and `kubectl get` agree), `Printable` (the pod rows `describe` shows),
//! `render_table`, kubectl's `age`, the `Pod Template:` section every `describe` shows,
//! and [`emit`], the one writer to stdout. 2014's `pkg/kubecfg/resource_printer.go`. Pure
//! but for [`emit`]; imports no verb.

use std::fmt::Write as _;
use std::io::Write as _;
use std::time::{Duration, SystemTime};

use anyhow::Context as _;
use serde_json::Value;

use super::resource::kind_reference;
use crate::api::{self, ContainerPort, Object, ObjectMeta, Pod, PodTemplateSpec, ReplicaSet};
use crate::apiserver::TablePrinter;

/// What a table shows for an absent value.
pub(super) const NONE: &str = "<none>";

/// Writes `text` to stdout. A closed pipe (`kcm get pods | head -1`) is not an error.
pub(super) fn emit(text: &str) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e).context("write to stdout"),
        _ => Ok(()),
    }
}

/// A kind `kcm describe` prints rows of (a controller's pods); `kcm get` prints the
/// API's Tables instead ([`render_objects`]).
pub trait Printable: Object {
    /// The column headers (without NAMESPACE).
    fn headers(wide: bool) -> Vec<&'static str>;
    /// One row, matching [`Printable::headers`]; `now` is the reference for AGE.
    fn cells(&self, wide: bool, now: SystemTime) -> Vec<String>;
}

/// A ReplicaSet's selector in selector syntax (`app=web,tier in (front)`), `<none>` when
/// missing or unreadable.
pub(super) fn selector_text(rs: &ReplicaSet) -> String {
    label_selector_text(rs.spec.selector.as_ref())
}

/// A label selector in selector syntax, `<none>` when missing or unreadable.
pub(super) fn label_selector_text(selector: Option<&api::LabelSelector>) -> String {
    let selector = selector
        .and_then(|s| s.to_selector().ok())
        .map(|s| s.to_string())
        .unwrap_or_default();
    or_none(selector)
}

impl Printable for Pod {
    fn headers(wide: bool) -> Vec<&'static str> {
        let mut headers = vec!["NAME", "READY", "STATUS", "RESTARTS", "HOST", "IP", "AGE"];
        if wide {
            headers.extend(["IMAGES", "LABELS"]);
        }
        headers
    }

    fn cells(&self, wide: bool, now: SystemTime) -> Vec<String> {
        let summary = PodSummary::of(self);
        let mut cells = vec![
            self.metadata.name.clone(),
            format!("{}/{}", summary.ready, summary.containers),
            summary.status,
            summary.restarts.to_string(),
            or_none(pod_host(self).to_string()),
            or_none(self.pod_ip().unwrap_or_default().to_string()),
            age_of(&self.metadata, now),
        ];
        if wide {
            cells.push(or_none(join(
                self.spec.containers.iter().map(|c| c.image.as_str()),
            )));
            cells.push(or_none(self.metadata.labels.to_string()));
        }
        cells
    }
}

/// What kubectl's pod table shows of a pod's containers (`printPod`).
#[derive(Debug, PartialEq, Eq)]
pub(super) struct PodSummary {
    /// Containers ready and running.
    pub ready: usize,
    /// Containers in the spec.
    pub containers: usize,
    /// The phase, or the reason of a waiting (`ImagePullBackOff`, `CrashLoopBackOff`) or
    /// terminated container (the first container's wins), or `Terminating`.
    pub status: String,
    /// Restarts of every container.
    pub restarts: i64,
}

impl PodSummary {
    pub fn of(pod: &Pod) -> PodSummary {
        let containers = pod.spec.containers.len();
        let statuses = pod
            .status
            .as_ref()
            .map(|s| s.container_statuses.as_slice())
            .unwrap_or_default();
        let mut status = pod.phase().to_string();
        let (mut ready, mut restarts) = (0, 0);
        for container in statuses.iter().rev() {
            restarts += container.restart_count;
            let state = &container.state;
            if let Some(reason) = state.waiting_reason() {
                status = reason.to_string();
            } else if let Some(terminated) = &state.terminated {
                status = if terminated.reason.is_empty() {
                    format!("ExitCode:{}", terminated.exit_code)
                } else {
                    terminated.reason.clone()
                };
            } else if container.ready && state.running.is_some() {
                ready += 1;
            }
        }
        // A pod that reports no containers (a 2014 document) is as ready as its phase says.
        if statuses.is_empty() && pod.is_ready() {
            ready = containers;
        }
        if pod.metadata.deletion_timestamp.is_some() {
            status = "Terminating".to_string();
        }
        PodSummary {
            ready,
            containers,
            status,
            restarts,
        }
    }
}

/// The node a pod is bound to: `spec.host`, else what its status reports.
pub(super) fn pod_host(pod: &Pod) -> &str {
    if pod.spec.host.is_empty() {
        pod.status.as_ref().map_or("", |s| s.host.as_str())
    } else {
        &pod.spec.host
    }
}

pub(super) fn join<'a>(parts: impl Iterator<Item = &'a str>) -> String {
    parts.collect::<Vec<_>>().join(",")
}

pub(super) fn or_none(text: String) -> String {
    if text.is_empty() {
        NONE.to_string()
    } else {
        text
    }
}

/// The table of `objects`: a NAMESPACE column first when `all_namespaces`.
pub fn render_objects<T: Object>(
    objects: &[T],
    wide: bool,
    all_namespaces: bool,
    now: SystemTime,
) -> String {
    render_objects_as(objects, wide, all_namespaces, false, now)
}

/// [`render_objects`], with names prefixed by kubectl's kind (`replicaset.apps/web`) when
/// `show_kind`, as `kcm get rs,rc` prints them. The columns are the Table's the API serves
/// for the kind (`apiserver::TablePrinter`), `-o wide`'s included.
pub fn render_objects_as<T: Object>(
    objects: &[T],
    wide: bool,
    all_namespaces: bool,
    show_kind: bool,
    now: SystemTime,
) -> String {
    let printer = TablePrinter::of(T::RESOURCE).expect("every kind kcm get reads is served");
    let mut headers = printer.headers(wide);
    if all_namespaces {
        headers.insert(0, "NAMESPACE".to_string());
    }
    let rows: Vec<Vec<String>> = objects
        .iter()
        .map(|object| {
            let stored = serde_json::to_value(object).unwrap_or_default();
            let mut cells = printer.cells(stored, wide, now);
            if show_kind {
                cells[0] = kind_reference::<T>(&cells[0]);
            }
            if all_namespaces {
                cells.insert(0, object.metadata().namespace.clone());
            }
            cells
        })
        .collect();
    let headers: Vec<&str> = headers.iter().map(String::as_str).collect();
    render_table(&headers, &rows)
}

/// Aligns `rows` under `headers`: each column as wide as its widest cell, columns three
/// spaces apart (kubectl's tabwriter padding), no trailing spaces.
pub fn render_table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let header_row: Vec<String> = headers.iter().map(|h| h.to_string()).collect();
    let mut out = String::new();
    for row in std::iter::once(&header_row).chain(rows) {
        let mut line = String::new();
        for (cell, width) in row.iter().zip(&widths) {
            let _ = write!(line, "{cell:<width$}   ");
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// kubectl's tabwriter with padding 2 (history tables), no trailing spaces.
pub(super) fn render_tabbed(headers: &[&str], rows: &[Vec<String>]) -> String {
    render_table(headers, rows)
        .lines()
        .map(|line| {
            // render_table pads with three spaces; kubectl's history pads with two.
            let mut out = String::new();
            let mut spaces = 0;
            for c in line.chars() {
                if c == ' ' {
                    spaces += 1;
                    continue;
                }
                if spaces > 0 {
                    out.push_str(&" ".repeat(if spaces >= 3 { spaces - 1 } else { spaces }));
                    spaces = 0;
                }
                out.push(c);
            }
            out.push('\n');
            out
        })
        .collect()
}

/// AGE of an object: how long ago its `creationTimestamp` was.
pub(super) fn age_of(meta: &ObjectMeta, now: SystemTime) -> String {
    age(meta.creation_timestamp.as_deref(), now)
}

/// kubectl's `ShortHumanDuration` of `now - created`: `12s`, `5m`, `3h`, `2d`, `3y`;
/// `<unknown>` without a timestamp, `<invalid>` for one that does not parse as RFC 3339
/// or lies more than a second in the future (a little clock skew reads as `0s`).
pub fn age(created: Option<&str>, now: SystemTime) -> String {
    let Some(created) = created else {
        return "<unknown>".to_string();
    };
    let Ok(created) = humantime::parse_rfc3339_weak(created) else {
        return "<invalid>".to_string();
    };
    let seconds = match now.duration_since(created) {
        Ok(elapsed) => elapsed.as_secs(),
        Err(e) if e.duration() < Duration::from_secs(2) => 0,
        Err(_) => return "<invalid>".to_string(),
    };
    let (minutes, hours) = (seconds / 60, seconds / 3600);
    if seconds < 60 {
        format!("{seconds}s")
    } else if minutes < 60 {
        format!("{minutes}m")
    } else if hours < 24 {
        format!("{hours}h")
    } else if hours < 24 * 365 {
        format!("{}d", hours / 24)
    } else {
        format!("{}y", hours / 24 / 365)
    }
}

/// An object as printed by `-o json`: with its `kind` and `apiVersion`.
pub(super) fn to_json<T: Object>(mut object: T) -> anyhow::Result<Value> {
    object.set_type_meta();
    serde_json::to_value(&object).with_context(|| format!("encode {}", T::KIND))
}

/// The `Pod Template:` section of a controller.
pub(super) fn template_text(out: &mut String, template: Option<&PodTemplateSpec>) {
    match template {
        None => {
            let _ = writeln!(out, "{:<14}{NONE}", "Pod Template:");
        }
        Some(template) => {
            out.push_str("Pod Template:\n");
            let _ = writeln!(
                out,
                "  {:<12}{}",
                "Labels:",
                or_none(template.metadata.labels.to_string())
            );
            if template.spec.containers.is_empty() {
                let _ = writeln!(out, "  {:<12}{NONE}", "Containers:");
            } else {
                out.push_str("  Containers:\n");
            }
            for container in &template.spec.containers {
                let _ = writeln!(out, "    {}:", or_none(container.name.clone()));
                let _ = writeln!(
                    out,
                    "      {:<8}{}",
                    "Image:",
                    or_none(container.image.clone())
                );
                let ports: Vec<String> = container.ports.iter().map(port_text).collect();
                let _ = writeln!(out, "      {:<8}{}", "Ports:", or_none(ports.join(", ")));
            }
        }
    }
}

/// `80/TCP (http)`.
pub(super) fn port_text(port: &ContainerPort) -> String {
    let protocol = if port.protocol.is_empty() {
        "TCP"
    } else {
        &port.protocol
    };
    if port.name.is_empty() {
        format!("{}/{protocol}", port.container_port)
    } else {
        format!("{}/{protocol} ({})", port.container_port, port.name)
    }
}
