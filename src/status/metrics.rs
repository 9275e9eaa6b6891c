//! Every metric kcm exports ([`Metrics`]) and their Prometheus text (`/metrics`): the
//! controllers' counters, and the watches', informers' and work queues' figures, read
//! from their owners when rendered. Registered under a name, so a new leadership term
//! replaces its predecessor's series instead of adding to them.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry as PromRegistry;

use crate::etcd_watcher::{LoopReport, WatchMetrics, LOOP_RESTARTS, SHORT_LIVED};

/// Label set for per-watch metrics: the resource watched.
pub type ResourceLabel = Vec<(&'static str, &'static str)>;

/// Reads the length of a work queue.
type QueueDepth = Box<dyn Fn() -> usize + Send + Sync>;

/// Reads whether an informer has listed.
type SyncedProbe = Box<dyn Fn() -> bool + Send + Sync>;

/// One exported watch: its counters, and whether something runs it now (a stopped
/// informer's watch is neither connected nor disconnected).
struct ExportedWatch {
    metrics: Arc<WatchMetrics>,
    active: bool,
}

/// Every metric kcm exports. Cheap to share behind an `Arc`.
pub struct Metrics {
    registry: PromRegistry,
    /// Syncs by controller (`replication`, `endpoints`) and result (`ok`, `error`).
    pub syncs: Family<Vec<(&'static str, &'static str)>, Counter>,
    /// Duration of one sync by controller, seconds.
    pub sync_duration: Family<ResourceLabel, Histogram>,
    pub pods_created: Counter,
    pub pods_deleted: Counter,
    /// Replication controllers whose selector overlaps another's (they fight over pods).
    pub replication_overlapping: Gauge,
    /// Keys waiting in the work queues, by controller.
    pub queue_depth: Family<ResourceLabel, Gauge>,
    /// Endpoints objects written (created or updated) and deleted.
    pub endpoints_writes: Counter,
    /// 1 while this process runs the controllers (with `--leader-elect`: while it
    /// leads), else 0.
    pub leader: Gauge,
    /// Events by result (`written`, `skipped`, `dropped`, `failed`): `record::Counts`.
    pub events: Family<Vec<(&'static str, &'static str)>, Counter>,
    watch_restarts: Family<ResourceLabel, Counter>,
    watch_relists: Family<ResourceLabel, Counter>,
    watch_decode_errors: Family<ResourceLabel, Counter>,
    watch_last_revision: Family<ResourceLabel, Gauge>,
    watch_rewinds: Family<ResourceLabel, Counter>,
    watch_skipped_keys: Family<ResourceLabel, Counter>,
    watch_disconnected: Family<ResourceLabel, Gauge<f64, std::sync::atomic::AtomicU64>>,
    watch_looping: Family<ResourceLabel, Gauge>,
    informer_synced: Family<ResourceLabel, Gauge>,
    // Keyed by name, so that a new leadership term replaces its predecessor's entries
    // instead of adding to them.
    watches: Mutex<BTreeMap<&'static str, ExportedWatch>>,
    queue_sources: Mutex<BTreeMap<&'static str, QueueDepth>>,
    informers: Mutex<BTreeMap<&'static str, SyncedProbe>>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// Every metric at zero, registered under the `kcm` prefix.
    pub fn new() -> Metrics {
        let mut registry = PromRegistry::with_prefix("kcm");
        let metrics = Metrics {
            syncs: Family::default(),
            sync_duration: Family::new_with_constructor(|| {
                Histogram::new(exponential_buckets(0.0005, 2.0, 16))
            }),
            pods_created: Counter::default(),
            pods_deleted: Counter::default(),
            replication_overlapping: Gauge::default(),
            queue_depth: Family::default(),
            endpoints_writes: Counter::default(),
            leader: Gauge::default(),
            events: Family::default(),
            watch_restarts: Family::default(),
            watch_relists: Family::default(),
            watch_decode_errors: Family::default(),
            watch_last_revision: Family::default(),
            watch_rewinds: Family::default(),
            watch_skipped_keys: Family::default(),
            watch_disconnected: Family::default(),
            watch_looping: Family::default(),
            informer_synced: Family::default(),
            watches: Mutex::default(),
            queue_sources: Mutex::default(),
            informers: Mutex::default(),
            registry: PromRegistry::default(),
        };
        metrics.register_controllers(&mut registry);
        metrics.register_watches(&mut registry);
        Metrics {
            registry,
            ..metrics
        }
    }

    /// Registers the controllers' metrics: syncs, pods written, overlaps, work queues,
    /// endpoints writes and leadership.
    fn register_controllers(&self, registry: &mut PromRegistry) {
        registry.register(
            "syncs",
            "Controller syncs by controller and result",
            self.syncs.clone(),
        );
        registry.register(
            "sync_duration_seconds",
            "Duration of one controller sync",
            self.sync_duration.clone(),
        );
        registry.register(
            "pods_created",
            "Pods created by the replication manager",
            self.pods_created.clone(),
        );
        registry.register(
            "pods_deleted",
            "Pods deleted by the replication manager",
            self.pods_deleted.clone(),
        );
        registry.register(
            "replication_overlapping_controllers",
            "Replication controllers whose pods another controller's selector matches, or whose selector matches another's pods",
            self.replication_overlapping.clone(),
        );
        registry.register(
            "workqueue_depth",
            "Keys waiting in a work queue",
            self.queue_depth.clone(),
        );
        registry.register(
            "endpoints_writes",
            "Endpoints objects written or deleted",
            self.endpoints_writes.clone(),
        );
        registry.register(
            "leader",
            "1 while this process runs the controllers (leads, with --leader-elect)",
            self.leader.clone(),
        );
        registry.register(
            "events",
            "Events by result: recorded (queued), dropped (the queue was full), skipped (the spam filter), combined (into a later write of the same event), written, failed (etcd)",
            self.events.clone(),
        );
    }

    /// Registers the watches' and informers' metrics, which [`Metrics::render`] reads
    /// from their owners.
    fn register_watches(&self, registry: &mut PromRegistry) {
        registry.register(
            "watch_restarts",
            "Watches re-opened from their last resourceVersion",
            self.watch_restarts.clone(),
        );
        registry.register(
            "watch_relists",
            "Lists done by watches (at start and after compaction)",
            self.watch_relists.clone(),
        );
        registry.register(
            "watch_decode_errors",
            "Stored values skipped because they did not decode",
            self.watch_decode_errors.clone(),
        );
        registry.register(
            "watch_last_revision",
            "Last etcd revision a watch delivered or passed",
            self.watch_last_revision.clone(),
        );
        registry.register(
            "watch_rewinds",
            "Times etcd's revision went backwards (a restored store) or its cluster changed, each followed by a list from scratch",
            self.watch_rewinds.clone(),
        );
        registry.register(
            "watch_skipped_keys",
            "Keys skipped because they have more segments than the key layout allows",
            self.watch_skipped_keys.clone(),
        );
        registry.register(
            "watch_disconnected_seconds",
            "How long a watch has been without a live etcd watch (0 while it has one)",
            self.watch_disconnected.clone(),
        );
        registry.register(
            "watch_looping",
            format!(
                "1 while a watch restarts in a loop: its last {LOOP_RESTARTS} connections to etcd in a row each ended within {}s of being made; 0 again once one has lived {}s",
                SHORT_LIVED.as_secs(),
                SHORT_LIVED.as_secs()
            ),
            self.watch_looping.clone(),
        );
        registry.register(
            "informer_synced",
            "1 once the shared informer of a resource has listed, 0 before and after it runs",
            self.informer_synced.clone(),
        );
    }

    /// Exports a watch's counters under `resource`, replacing any watch exported under
    /// that name before.
    pub fn register_watch(&self, resource: &'static str, watch: Arc<WatchMetrics>) {
        self.watches.lock().expect("metrics lock").insert(
            resource,
            ExportedWatch {
                metrics: watch,
                active: true,
            },
        );
    }

    /// The counters of the watch of `resource`, made on first use and kept for the
    /// process's life: the informers of successive leadership terms count into the
    /// same counters (Prometheus counters never go back).
    pub fn watch_metrics(&self, resource: &'static str) -> Arc<WatchMetrics> {
        let mut watches = self.watches.lock().expect("metrics lock");
        let watch = watches.entry(resource).or_insert_with(|| ExportedWatch {
            metrics: Arc::default(),
            active: true,
        });
        watch.active = true;
        watch.metrics.clone()
    }

    /// Exports whether the informer of `resource` has synced, as `kcm_informer_synced`.
    pub fn register_informer(
        &self,
        resource: &'static str,
        synced: impl Fn() -> bool + Send + Sync + 'static,
    ) {
        self.informer_synced
            .get_or_create(&vec![("resource", resource)])
            .set(0);
        self.informers
            .lock()
            .expect("metrics lock")
            .insert(resource, Box::new(synced));
    }

    /// The informer of `resource` stopped (its term ended): not synced, and its watch
    /// no longer counts for `/healthz`.
    pub fn informer_stopped(&self, resource: &'static str) {
        self.informers
            .lock()
            .expect("metrics lock")
            .remove(resource);
        self.informer_synced
            .get_or_create(&vec![("resource", resource)])
            .set(0);
        if let Some(watch) = self.watches.lock().expect("metrics lock").get_mut(resource) {
            watch.active = false;
        }
    }

    /// Exports the length of a work queue under `controller`, replacing any queue
    /// exported under that name before.
    pub fn register_queue(
        &self,
        controller: &'static str,
        depth: impl Fn() -> usize + Send + Sync + 'static,
    ) {
        self.queue_sources
            .lock()
            .expect("metrics lock")
            .insert(controller, Box::new(depth));
    }

    /// The metrics in Prometheus text format.
    pub fn render(&self) -> String {
        use std::sync::atomic::Ordering::Relaxed;
        for (resource, exported) in self.watches.lock().expect("metrics lock").iter() {
            let labels = vec![("resource", *resource)];
            let watch = &exported.metrics;
            catch_up(
                &self.watch_restarts.get_or_create(&labels),
                watch.restarts.load(Relaxed),
            );
            catch_up(
                &self.watch_relists.get_or_create(&labels),
                watch.relists.load(Relaxed),
            );
            catch_up(
                &self.watch_decode_errors.get_or_create(&labels),
                watch.decode_errors.load(Relaxed),
            );
            self.watch_last_revision
                .get_or_create(&labels)
                .set(watch.last_revision.load(Relaxed));
            catch_up(
                &self.watch_rewinds.get_or_create(&labels),
                watch.rewinds.load(Relaxed),
            );
            catch_up(
                &self.watch_skipped_keys.get_or_create(&labels),
                watch.skipped_keys.load(Relaxed),
            );
            let disconnected = watch
                .disconnected_for()
                .filter(|_| exported.active)
                .map_or(0.0, |(for_, _)| for_.as_secs_f64());
            self.watch_disconnected
                .get_or_create(&labels)
                .set(disconnected);
            let looping = exported.active && watch.looping().is_some();
            self.watch_looping
                .get_or_create(&labels)
                .set(i64::from(looping));
        }
        for (resource, synced) in self.informers.lock().expect("metrics lock").iter() {
            self.informer_synced
                .get_or_create(&vec![("resource", *resource)])
                .set(i64::from(synced()));
        }
        for (controller, depth) in self.queue_sources.lock().expect("metrics lock").iter() {
            self.queue_depth
                .get_or_create(&vec![("controller", *controller)])
                .set(depth() as i64);
        }
        let mut text = String::new();
        encode(&mut text, &self.registry).expect("writing to a String cannot fail");
        text
    }

    /// The watches without a live etcd watch: resource, for how long, and why.
    pub fn disconnected_watches(&self) -> Vec<(&'static str, Duration, String)> {
        self.watches
            .lock()
            .expect("metrics lock")
            .iter()
            .filter(|(_, watch)| watch.active)
            .filter_map(|(resource, watch)| {
                let (for_, reason) = watch.metrics.disconnected_for()?;
                Some((*resource, for_, reason))
            })
            .collect()
    }

    /// The watches restarting in a loop, and how.
    pub fn looping_watches(&self) -> Vec<(&'static str, LoopReport)> {
        self.watches
            .lock()
            .expect("metrics lock")
            .iter()
            .filter(|(_, watch)| watch.active)
            .filter_map(|(resource, watch)| Some((*resource, watch.metrics.looping()?)))
            .collect()
    }

    /// Current value of a watch counter, for tests and `describe`.
    pub fn watch(&self, resource: &str) -> Option<Arc<WatchMetrics>> {
        self.watches
            .lock()
            .expect("metrics lock")
            .get(resource)
            .map(|w| w.metrics.clone())
    }
}

/// Moves a Prometheus counter up to a watch's atomic counter (which only grows).
fn catch_up(counter: &Counter, value: u64) {
    let current = counter.get();
    if value > current {
        counter.inc_by(value - current);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use super::Metrics;

    fn series(text: &str, name: &str) -> Vec<String> {
        text.lines()
            .filter(|line| line.starts_with(name))
            .map(String::from)
            .collect()
    }

    #[test]
    fn a_second_term_replaces_the_first_terms_series_instead_of_adding_to_them() {
        let metrics = Metrics::new();
        for term in 0..3 {
            let watch = metrics.watch_metrics("pods");
            watch.restarts.fetch_add(1, Ordering::Relaxed);
            metrics.register_informer("pods", move || term >= 1);
            metrics.register_queue("replication", move || term);
            let text = metrics.render();
            assert_eq!(
                series(&text, "kcm_workqueue_depth"),
                [format!(
                    "kcm_workqueue_depth{{controller=\"replication\"}} {term}"
                )]
            );
            assert_eq!(
                series(&text, "kcm_informer_synced"),
                [format!(
                    "kcm_informer_synced{{resource=\"pods\"}} {}",
                    i64::from(term >= 1)
                )]
            );
            // The counter goes on counting across terms; it never goes back.
            assert_eq!(
                series(&text, "kcm_watch_restarts_total"),
                [format!(
                    "kcm_watch_restarts_total{{resource=\"pods\"}} {}",
                    term + 1
                )]
            );
            metrics.informer_stopped("pods");
            assert_eq!(
                series(&metrics.render(), "kcm_informer_synced"),
                ["kcm_informer_synced{resource=\"pods\"} 0"]
            );
        }
    }
}
