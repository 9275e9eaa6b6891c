//! `kcm soak-check` (hidden): the checkers and instruments of `scripts/soak.sh`, the fault
//! classes too slow for the test suite (issue 25). Each check reads etcd's own history as
//! `etcdctl watch --rev R -w json` wrote it (one watch response per line, keys and values
//! in base64): a watch opened before the fault keeps delivering across a compaction, so
//! the history survives the compaction that frees a full etcd.
//!
//! - `rollout`: at every revision from `--from`, active pods of the namespace ≤ replicas +
//!   maxSurge and Ready pods ≥ replicas − maxUnavailable (the rollout invariant of
//!   docs/invariants.md, as `tests/it/controllers/deployment.rs` replays it);
//! - `owners`: no pod ever has two controller references, and no pod is created or
//!   deleted after `--settled`;
//! - `gc`: no pod is deleted while an owner of it lives (G1), none without owners (G4), and
//!   at the end no pod is left whose owners are all gone;
//! - `replay`: `kcm watch -o json` events replayed onto the state at the watch's
//!   resourceVersion give etcd's final state, and revisions never go backwards;
//! - `proxy`: a TCP proxy in front of etcd, cut by SIGUSR1 and restored by SIGUSR2;
//! - `chart`: an SVG of a CSV's columns over its first (seconds), with `measure::chart`.
//!
//! Each check prints one line of figures and fails (exit 1) naming the first violations.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::BufRead as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use base64::Engine as _;
use serde::Deserialize;
use serde_json::Value;

use crate::measure::chart::{self, Panel, Series};
use crate::measure::proxy::CutProxy;

/// One `kcm soak-check` run.
#[derive(Clone, Debug)]
pub enum Check {
    Rollout {
        history: PathBuf,
        pods: String,
        from: i64,
        replicas: i64,
        max_surge: i64,
        max_unavailable: i64,
    },
    Owners {
        history: PathBuf,
        pods: String,
        settled: i64,
    },
    Gc {
        history: PathBuf,
        pods: String,
        owners: String,
    },
    Replay {
        state: PathBuf,
        events: PathBuf,
        final_state: PathBuf,
        pods: String,
    },
    Proxy {
        upstream: SocketAddr,
    },
    Chart {
        csv: PathBuf,
        svg: PathBuf,
        title: String,
    },
}

/// Runs `check`, printing its figures.
///
/// # Errors
/// A file that cannot be read or parsed, or the check's violations.
pub async fn run(check: Check) -> anyhow::Result<()> {
    match check {
        Check::Rollout {
            history,
            pods,
            from,
            replicas,
            max_surge,
            max_unavailable,
        } => rollout(
            &history,
            &pods,
            from,
            replicas + max_surge,
            replicas - max_unavailable,
        ),
        Check::Owners {
            history,
            pods,
            settled,
        } => owners(&history, &pods, settled),
        Check::Gc {
            history,
            pods,
            owners,
        } => gc(&history, &pods, &owners),
        Check::Replay {
            state,
            events,
            final_state,
            pods,
        } => replay(&state, &events, &final_state, &pods),
        Check::Proxy { upstream } => proxy(upstream).await,
        Check::Chart { csv, svg, title } => draw(&csv, &svg, &title),
    }
}

/// One event of etcd's history.
#[derive(Debug)]
struct Event {
    revision: i64,
    key: String,
    put: bool,
    create_revision: i64,
    /// The document written (`Null` for a DELETE or a value that is not JSON).
    value: Value,
}

#[derive(Deserialize)]
struct WatchLine {
    #[serde(rename = "Events", default)]
    events: Vec<WatchEvent>,
}

#[derive(Deserialize)]
struct WatchEvent {
    #[serde(rename = "type", default)]
    kind: i32,
    kv: KeyValue,
}

#[derive(Deserialize)]
struct KeyValue {
    key: String,
    #[serde(default)]
    create_revision: i64,
    #[serde(default)]
    mod_revision: i64,
    #[serde(default)]
    value: String,
}

fn unbase64(text: &str) -> anyhow::Result<Vec<u8>> {
    Ok(base64::engine::general_purpose::STANDARD.decode(text)?)
}

/// Calls `each` with every event of the history file under `prefix`, in revision order,
/// then with `None` after the last event of each revision (so a check counts once per
/// revision). Returns the events read and the last revision.
fn for_each_event(
    history: &Path,
    prefix: &str,
    mut each: impl FnMut(Option<&Event>, i64),
) -> anyhow::Result<(usize, i64)> {
    let file = std::fs::File::open(history)
        .with_context(|| format!("open the history {}", history.display()))?;
    let (mut n, mut last) = (0usize, 0i64);
    for (i, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line?;
        if !line.starts_with('{') {
            continue;
        }
        let parsed: WatchLine = serde_json::from_str(&line)
            .with_context(|| format!("line {} of {}", i + 1, history.display()))?;
        for e in parsed.events {
            let key = String::from_utf8(unbase64(&e.kv.key)?)?;
            if !key.starts_with(prefix) {
                continue;
            }
            let revision = e.kv.mod_revision;
            if last != 0 && revision != last {
                each(None, last);
            }
            anyhow::ensure!(
                revision >= last,
                "history goes back: {revision} after {last}"
            );
            let value = if e.kind == 0 {
                serde_json::from_slice(&unbase64(&e.kv.value)?).unwrap_or(Value::Null)
            } else {
                Value::Null
            };
            let event = Event {
                revision,
                key,
                put: e.kind == 0,
                create_revision: e.kv.create_revision,
                value,
            };
            each(Some(&event), revision);
            n += 1;
            last = revision;
        }
    }
    if last != 0 {
        each(None, last);
    }
    anyhow::ensure!(n > 0, "no event under {prefix} in {}", history.display());
    Ok((n, last))
}

fn is_active(pod: &Value) -> bool {
    let phase = pod["status"]["phase"].as_str().unwrap_or("Pending");
    phase != "Succeeded" && phase != "Failed" && pod["metadata"]["deletionTimestamp"].is_null()
}

fn is_ready(pod: &Value) -> bool {
    pod["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Ready" && c["status"] == "True")
}

/// The uids of the object's owner references, controllers only with `controllers`.
fn owner_uids(doc: &Value, controllers: bool) -> Vec<String> {
    doc["metadata"]["ownerReferences"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| !controllers || r["controller"] == true)
        .filter_map(|r| r["uid"].as_str().map(str::to_string))
        .collect()
}

/// Fails with the first violations (at most 10 shown) when there are any.
fn verdict(summary: String, violations: &[String]) -> anyhow::Result<()> {
    if violations.is_empty() {
        println!("{summary}; ok");
        return Ok(());
    }
    let shown: Vec<&str> = violations.iter().take(10).map(String::as_str).collect();
    anyhow::bail!(
        "{summary}; {} violation(s):\n  {}",
        violations.len(),
        shown.join("\n  ")
    )
}

fn rollout(history: &Path, pods: &str, from: i64, max: i64, min_ready: i64) -> anyhow::Result<()> {
    // pod key → (active, ready); the counts kept in step.
    let mut state: HashMap<String, (bool, bool)> = HashMap::new();
    let (mut active, mut ready) = (0i64, 0i64);
    let (mut checked, mut peak, mut trough) = (0usize, 0i64, i64::MAX);
    let mut violations = Vec::new();
    let (n, last) = for_each_event(history, pods, |event, revision| {
        let Some(event) = event else {
            if revision >= from {
                checked += 1;
                peak = peak.max(active);
                trough = trough.min(ready);
                if active > max {
                    violations.push(format!("{active} active pods > {max} at {revision}"));
                }
                if ready < min_ready {
                    violations.push(format!("{ready} ready pods < {min_ready} at {revision}"));
                }
            }
            return;
        };
        let new = event
            .put
            .then(|| (is_active(&event.value), is_ready(&event.value)));
        let old = match new {
            Some(now) => state.insert(event.key.clone(), now),
            None => state.remove(&event.key),
        };
        for (sign, (a, r)) in [(-1, old), (1, new)]
            .into_iter()
            .filter_map(|(s, v)| v.map(|v| (s, v)))
        {
            active += sign * i64::from(a);
            ready += sign * i64::from(a && r);
        }
    })?;
    anyhow::ensure!(checked > 0, "no revision at or after {from} (last {last})");
    verdict(
        format!(
            "rollout: {n} pod events, {checked} revisions checked ({from}..={last}); \
             active ≤ {peak} (bound {max}), ready ≥ {trough} (bound {min_ready}), \
             {active} active and {ready} ready at the end"
        ),
        &violations,
    )
}

fn owners(history: &Path, pods: &str, settled: i64) -> anyhow::Result<()> {
    let mut controller_of: HashMap<String, String> = HashMap::new();
    let (mut creates, mut deletes, mut changes_after) = (0usize, 0usize, 0usize);
    let mut violations = Vec::new();
    let (n, last) = for_each_event(history, pods, |event, _| {
        let Some(event) = event else { return };
        let after = event.revision > settled;
        if !event.put {
            deletes += 1;
            controller_of.remove(&event.key);
            if after {
                violations.push(format!("{} deleted at {}", event.key, event.revision));
            }
            return;
        }
        let controllers = owner_uids(&event.value, true);
        if controllers.len() > 1 {
            violations.push(format!(
                "{} has {} controllers at {}",
                event.key,
                controllers.len(),
                event.revision
            ));
        }
        if event.create_revision == event.revision {
            creates += 1;
            if after {
                violations.push(format!("{} created at {}", event.key, event.revision));
            }
        }
        let controller = controllers.into_iter().next().unwrap_or_default();
        let before = controller_of.insert(event.key.clone(), controller.clone());
        if after && before.is_some_and(|b| b != controller) {
            changes_after += 1;
            violations.push(format!(
                "{} changed controller at {}",
                event.key, event.revision
            ));
        }
    })?;
    let mut per_owner: BTreeMap<&str, usize> = BTreeMap::new();
    for owner in controller_of.values() {
        *per_owner.entry(owner.as_str()).or_default() += 1;
    }
    let counts: Vec<String> = per_owner
        .iter()
        .map(|(o, c)| format!("{}: {c}", if o.is_empty() { "none" } else { o }))
        .collect();
    verdict(
        format!(
            "owners: {n} pod events to {last}, {creates} creates, {deletes} deletes, \
             {changes_after} controller changes after {settled}; pods at the end by \
             controller uid {{{}}}",
            counts.join(", ")
        ),
        &violations,
    )
}

fn gc(history: &Path, pods: &str, owners_prefix: &str) -> anyhow::Result<()> {
    let common = common_prefix(pods, owners_prefix);
    // owner key → uid, and the live uids.
    let mut owner_at: HashMap<String, String> = HashMap::new();
    let mut live: HashSet<String> = HashSet::new();
    let mut pod_owners: HashMap<String, Vec<String>> = HashMap::new();
    let (mut deleted, mut owner_deletes) = (0usize, 0usize);
    let mut violations = Vec::new();
    let (n, last) = for_each_event(history, &common, |event, _| {
        let Some(event) = event else { return };
        if event.key.starts_with(owners_prefix) {
            if let Some(uid) = owner_at.remove(&event.key) {
                live.remove(&uid);
            }
            if event.put {
                let uid = event.value["metadata"]["uid"].as_str().unwrap_or_default();
                owner_at.insert(event.key.clone(), uid.to_string());
                live.insert(uid.to_string());
            } else {
                owner_deletes += 1;
            }
        } else if event.key.starts_with(pods) {
            if event.put {
                pod_owners.insert(event.key.clone(), owner_uids(&event.value, false));
                return;
            }
            deleted += 1;
            let owners = pod_owners.remove(&event.key).unwrap_or_default();
            if owners.is_empty() {
                violations.push(format!(
                    "{} had no owner, deleted at {}",
                    event.key, event.revision
                ));
            }
            if let Some(alive) = owners.iter().find(|uid| live.contains(*uid)) {
                violations.push(format!(
                    "{} deleted at {} while its owner {alive} lived",
                    event.key, event.revision
                ));
            }
        }
    })?;
    let (mut kept, mut left) = (0usize, 0usize);
    for (key, owners) in &pod_owners {
        if owners.iter().any(|uid| live.contains(uid)) {
            kept += 1;
        } else {
            left += 1;
            if left <= 10 {
                violations.push(format!("{key} left at the end, every owner gone"));
            }
        }
    }
    verdict(
        format!(
            "gc: {n} events to {last}; {owner_deletes} owner deletes, {deleted} pod deletes, \
             none with a live owner; {kept} pods kept with a live owner, {left} left whose \
             owners are gone"
        ),
        &violations,
    )
}

fn common_prefix(a: &str, b: &str) -> String {
    a.chars()
        .zip(b.chars())
        .take_while(|(x, y)| x == y)
        .map(|(x, _)| x)
        .collect()
}

/// `etcdctl get --prefix -w json` output: key (after `pods`) → mod_revision.
fn etcd_state(path: &Path, pods: &str) -> anyhow::Result<BTreeMap<String, i64>> {
    #[derive(Deserialize)]
    struct Range {
        #[serde(default)]
        kvs: Vec<KeyValue>,
    }
    let text = std::fs::read_to_string(path).with_context(|| format!("read {}", path.display()))?;
    let range: Range =
        serde_json::from_str(&text).with_context(|| format!("parse {}", path.display()))?;
    let mut state = BTreeMap::new();
    for kv in range.kvs {
        let key = String::from_utf8(unbase64(&kv.key)?)?;
        if let Some(rest) = key.strip_prefix(pods) {
            state.insert(rest.to_string(), kv.mod_revision);
        }
    }
    Ok(state)
}

fn replay(state: &Path, events: &Path, final_state: &Path, pods: &str) -> anyhow::Result<()> {
    let mut held = etcd_state(state, pods)?;
    let at_start = held.len();
    let want = etcd_state(final_state, pods)?;
    let file = std::fs::File::open(events).with_context(|| format!("open {}", events.display()))?;
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    let mut violations = Vec::new();
    let mut last = 0i64;
    for line in std::io::BufReader::new(file).lines() {
        let line = line?;
        let Ok(event) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let kind = event["type"].as_str().unwrap_or_default().to_string();
        let meta = &event["object"]["metadata"];
        let key = format!(
            "{}/{}",
            meta["namespace"].as_str().unwrap_or_default(),
            meta["name"].as_str().unwrap_or_default()
        );
        let revision: i64 = meta["resourceVersion"]
            .as_str()
            .and_then(|rv| rv.parse().ok())
            .unwrap_or_default();
        if revision < last {
            violations.push(format!("{kind} {key} at {revision} after {last}"));
        }
        last = last.max(revision);
        match kind.as_str() {
            "ADDED" | "MODIFIED" => {
                held.insert(key, revision);
            }
            "DELETED" => {
                held.remove(&key);
            }
            other => violations.push(format!("unexpected event {other}: {line}")),
        }
        *counts.entry(kind).or_default() += 1;
    }
    let missing = want.keys().filter(|k| !held.contains_key(*k)).count();
    let extra = held.keys().filter(|k| !want.contains_key(*k)).count();
    let stale = want
        .iter()
        .filter(|(k, rv)| held.get(*k).is_some_and(|h| h != *rv))
        .count();
    for (k, rv) in want
        .iter()
        .filter(|(k, rv)| held.get(*k) != Some(rv))
        .take(10)
    {
        violations.push(format!(
            "{k}: etcd has rv {rv}, the replay {:?}",
            held.get(k)
        ));
    }
    for k in held.keys().filter(|k| !want.contains_key(*k)).take(10) {
        violations.push(format!("{k}: the replay holds it, etcd does not"));
    }
    let counts: Vec<String> = counts.iter().map(|(k, c)| format!("{k} {c}")).collect();
    verdict(
        format!(
            "replay: {at_start} objects at the start, events {{{}}} up to rv {last}; \
             {} objects in etcd at the end, replay: {missing} missing, {extra} extra, \
             {stale} at another rv",
            counts.join(", "),
            want.len()
        ),
        &violations,
    )
}

async fn proxy(upstream: SocketAddr) -> anyhow::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let proxy = CutProxy::start(upstream).await?;
    let (mut cut, mut restore) = (
        signal(SignalKind::user_defined1())?,
        signal(SignalKind::user_defined2())?,
    );
    let (mut term, mut int) = (
        signal(SignalKind::terminate())?,
        signal(SignalKind::interrupt())?,
    );
    println!("{}", proxy.addr);
    loop {
        tokio::select! {
            _ = cut.recv() => {
                proxy.cut();
                eprintln!("proxy: cut");
            }
            _ = restore.recv() => {
                proxy.restore();
                eprintln!("proxy: restored");
            }
            _ = term.recv() => break,
            _ = int.recv() => break,
        }
    }
    proxy.stop();
    Ok(())
}

fn draw(csv: &Path, svg: &Path, title: &str) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(csv).with_context(|| format!("read {}", csv.display()))?;
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().context("an empty CSV")?.split(',').collect();
    let mut series: Vec<Series> = header[1..]
        .iter()
        .map(|name| Series {
            name: name.to_string(),
            points: Vec::new(),
        })
        .collect();
    for line in lines {
        let fields: Vec<f64> = line
            .split(',')
            .map(|f| f.trim().parse().unwrap_or(0.0))
            .collect();
        for (s, y) in series.iter_mut().zip(fields.iter().skip(1)) {
            s.points.push((fields[0], *y));
        }
    }
    let panel = Panel {
        title: title.to_string(),
        x_label: header[0].to_string(),
        x_unit: "s",
        x_decimals: 0,
        y_decimals: 0,
        series,
    };
    std::fs::write(svg, chart::svg(&[panel])).with_context(|| format!("write {}", svg.display()))
}
