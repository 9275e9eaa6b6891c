use super::*;
use crate::apiserver::table::PODS;

fn decode(_: &str, _: &str, kv: &RawEvent) -> anyhow::Result<Value> {
    Ok(serde_json::from_slice(&kv.value)?)
}

static CODEC: Codec = Codec {
    resource: "pods",
    dir: "pods",
    namespaced: true,
    decode: &decode,
    printer: &PODS,
};

fn put(key: &str, revision: i64, labels: &str) -> RawEvent {
    RawEvent {
        kind: RawKind::Put,
        key: format!("/r/pods/{key}"),
        value: format!(r#"{{"metadata":{{"labels":{{"app":"{labels}"}}}}}}"#).into_bytes(),
        create_revision: revision,
        mod_revision: revision,
        version: 1,
        prev: None,
    }
}

fn delete(key: &str, revision: i64) -> RawEvent {
    RawEvent {
        kind: RawKind::Delete,
        value: Vec::new(),
        ..put(key, revision, "")
    }
}

fn cache(window: usize) -> WatchCache {
    let cache = WatchCache::new(
        &CODEC,
        Config {
            window,
            broadcast_capacity: 4,
        },
        Arc::default(),
    );
    cache.replace(BTreeSet::new(), ListReason::Initial, 10);
    cache
}

fn revisions(events: &[Arc<Event>]) -> Vec<(i64, bool)> {
    events.iter().map(|e| (e.revision(), e.deleted)).collect()
}

#[test]
fn a_watch_from_inside_the_window_replays_exactly_the_later_events() {
    let cache = cache(100);
    cache.apply("/r/pods/", &[put("a/x", 11, "1"), put("a/y", 12, "1")]);
    cache.apply("/r/pods/", &[delete("a/x", 13)]);
    let sub = cache.subscribe_from(11).unwrap();
    assert_eq!(revisions(&sub.initial), [(12, false), (13, true)]);
    // The deleted object's last state carries the delete's revision.
    assert_eq!(
        sub.initial[1].object.object()["metadata"]["resourceVersion"],
        "13"
    );
    assert_eq!(sub.initial[1].prev.as_ref().unwrap().revision, 11);
    assert!(cache.subscribe_from(10).is_ok());
    assert_eq!(cache.revision(), 13);
}

#[test]
fn a_watch_from_the_windows_first_revision_needs_its_events_read_back() {
    let cache = cache(100);
    cache.apply("/r/pods/", &[put("a/x", 11, "1")]);
    // 10 is the list's revision: its events never reached the window.
    assert!(matches!(
        cache.subscribe_at(10),
        Err(NotInWindow::StartUnread(10))
    ));
    assert!(matches!(cache.subscribe_at(9), Err(NotInWindow::TooOld(_))));
    let read_back = cache.decode("/r/pods/", &put("a/w", 10, "1")).unwrap();
    cache.state.write().unwrap().start_events = Some((
        10,
        vec![Arc::new(Event {
            object: Arc::new(read_back),
            prev: None,
            deleted: false,
        })],
    ));
    let sub = cache.subscribe_at(10).unwrap();
    assert_eq!(revisions(&sub.initial), [(10, false), (11, false)]);
    // From inside the window, the revision's own events come from the window.
    assert_eq!(
        revisions(&cache.subscribe_at(11).unwrap().initial),
        [(11, false)]
    );
    // A read-back of a revision the window has moved past is ignored.
    let moved = self::cache(1);
    moved.apply("/r/pods/", &[put("a/x", 11, "1")]);
    moved.apply("/r/pods/", &[put("a/x", 12, "1")]);
    moved.state.write().unwrap().start_events = Some((10, Vec::new()));
    assert!(matches!(
        moved.subscribe_at(11),
        Err(NotInWindow::StartUnread(11))
    ));
}

#[test]
fn a_watch_from_before_the_window_is_too_old() {
    let cache = cache(2);
    for revision in 11..=14 {
        cache.apply("/r/pods/", &[put("a/x", revision, "1")]);
    }
    assert_eq!(cache.subscribe_from(11).unwrap_err().oldest, 12);
    assert_eq!(
        revisions(&cache.subscribe_from(12).unwrap().initial),
        [(13, false), (14, false)]
    );
}

#[test]
fn a_relist_after_compaction_becomes_the_events_between_the_two_states() {
    let cache = cache(100);
    cache.apply("/r/pods/", &[put("a/x", 11, "1"), put("a/y", 12, "1")]);
    let mut listed = BTreeSet::new();
    for item in [put("a/y", 15, "2"), put("b/z", 14, "1")] {
        let item = cache.decode("/r/pods/", &item).unwrap();
        listed.insert(ByKey(Arc::new(item)));
    }
    assert_eq!(cache.replace(listed, ListReason::Compacted, 20), 3);
    let sub = cache.subscribe_from(12).unwrap();
    assert_eq!(
        revisions(&sub.initial),
        [(14, false), (15, false), (20, true)]
    );
    assert_eq!(cache.list(Some("a")).0.len(), 1);
    assert_eq!(cache.namespaces(), ["a", "b"]);
}

#[tokio::test]
async fn a_subscriber_too_far_behind_loses_its_receiver() {
    let cache = cache(100);
    let mut sub = cache.subscribe_snapshot(None);
    for revision in 11..=20 {
        cache.apply("/r/pods/", &[put("a/x", revision, "1")]);
    }
    assert!(matches!(
        sub.rx.recv().await,
        Err(broadcast::error::RecvError::Lagged(_))
    ));
}

#[test]
fn namespaces_do_not_match_their_prefixes() {
    let cache = cache(100);
    cache.apply(
        "/r/pods/",
        &[
            put("a/x", 11, "1"),
            put("ab/x", 12, "1"),
            put("a-b/x", 13, "1"),
        ],
    );
    assert_eq!(cache.list(Some("a")).0.len(), 1);
    assert_eq!(cache.subscribe_snapshot(Some("a")).initial.len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_consistent_read_is_served_by_a_cache_that_has_reached_etcds_revision() {
    let cache = cache(100);
    let reads = ConsistentReads::default();
    assert!(reads.fresh(&cache, 10).await);
    assert!(reads.fresh(&cache, 9).await);
    assert_eq!(reads.fallback_count("pods"), 0);
}

#[tokio::test(start_paused = true)]
async fn a_consistent_read_waits_for_the_cache_to_catch_up() {
    let cache = cache(100);
    let reads = ConsistentReads::default();
    let catch_up = async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        // Another resource's write: only a progress notification brings the cache there.
        cache.advance(12);
    };
    let (fresh, ()) = tokio::join!(reads.fresh(&cache, 12), catch_up);
    assert!(fresh);
    assert_eq!(reads.fallback_count("pods"), 0);
}

#[tokio::test(start_paused = true)]
async fn a_cache_that_does_not_catch_up_leaves_the_read_to_etcd_and_counts_it() {
    let cache = cache(100);
    cache.apply("/r/pods/", &[put("a/x", 11, "1")]);
    let reads = ConsistentReads::default();
    let started = tokio::time::Instant::now();
    assert!(!reads.fresh(&cache, 12).await);
    assert!(started.elapsed() >= Duration::from_secs(3));
    assert_eq!(reads.fallback_count("pods"), 1);
    // The wait asked the cache's etcd watch for a progress notification.
    tokio::time::timeout(Duration::from_secs(1), cache.progress_requests.notified())
        .await
        .expect("a progress request is pending");
    assert!(!reads.fresh(&cache, 13).await);
    assert_eq!(reads.fallback_count("pods"), 2);
    // Once it caught up, the cache serves again.
    cache.advance(13);
    assert!(reads.fresh(&cache, 13).await);
    assert_eq!(reads.fallback_count("pods"), 2);
}

#[test]
fn items_encode_as_serde_json_does_and_know_where_their_metadata_is() {
    for object in [
        serde_json::json!({"kind": "Pod", "metadata": {"name": "a\"b", "labels": {"é": "1"}},
            "spec": {"containers": []}}),
        serde_json::json!({"metadata": "not an object", "x": 1}),
        serde_json::json!({"x": [1, 2.5, null]}),
    ] {
        let item = Item::new("ns", "a", 7, object.clone(), &PODS);
        let mut stamped = object.clone();
        set_resource_version(&mut stamped, 7);
        assert_eq!(item.json(), serde_json::to_vec(&stamped).unwrap());
        // Decoded again from its JSON, it is the object stamped (preserve_order: the
        // members keep their order).
        assert_eq!(item.object(), stamped);
        let metadata = stamped.get("metadata").filter(|m| m.is_object());
        assert_eq!(
            item.metadata_json(),
            metadata.map(|m| serde_json::to_vec(m).unwrap()).as_deref(),
            "{object}"
        );
    }
}

#[test]
fn an_item_keeps_its_namespace_and_name_in_one_key() {
    let item = Item::new("ns", "a", 7, serde_json::json!({}), &PODS);
    assert_eq!(
        (item.key(), item.namespace(), item.name()),
        ("ns/a", "ns", "a")
    );
    // Labels and JSON follow the key in the item's one buffer.
    let item = Item::new(
        "ns",
        "a",
        7,
        serde_json::json!({"metadata": {"labels": {"app": "web"}}}),
        &PODS,
    );
    assert_eq!(item.labels().iter().collect::<Vec<_>>(), [("app", "web")]);
    assert_eq!(item.object()["metadata"]["resourceVersion"], "7");
    assert_eq!(item.key(), "ns/a");
    let item = Item::new("", "node-1", 7, serde_json::json!({}), &PODS);
    assert_eq!(
        (item.key(), item.namespace(), item.name()),
        ("node-1", "", "node-1")
    );
    let stamped = item.stamped(9);
    assert_eq!((stamped.key(), stamped.revision), ("node-1", 9));
    assert_eq!(stamped.object()["metadata"]["resourceVersion"], "9");
}

#[test]
fn packed_labels_read_as_the_set_they_were_packed_from() {
    use crate::labels::{Selector, Set};
    let object = serde_json::json!({"metadata": {"labels": {
        "app": "web", "tier": "", "é/ü": "ß", "count": 3, "x.io/long-key": "v".repeat(63),
    }}});
    let mut buffer = Vec::new();
    PackedLabels::pack(&object, &mut buffer);
    let packed = PackedLabels(&buffer);
    // Values that are not strings are left out, as a Set leaves them out.
    let set: Set = [
        ("app", "web".to_string()),
        ("tier", String::new()),
        ("é/ü", "ß".to_string()),
        ("x.io/long-key", "v".repeat(63)),
    ]
    .into_iter()
    .collect();
    let pairs: Set = packed.iter().collect();
    assert_eq!(pairs, set);
    assert_eq!(Labels::get(&packed, "count"), None);
    for selector in [
        "app=web",
        "app!=web",
        "tier=",
        "missing=",
        "tier",
        "!tier",
        "count",
        "app in (db,web),tier=",
        "app notin (web)",
        "x.io/long-key",
    ] {
        let selector: Selector = selector.parse().unwrap();
        assert_eq!(
            selector.matches(&packed),
            selector.matches(&set),
            "{selector}"
        );
    }
    let mut buffer = Vec::new();
    PackedLabels::pack(
        &serde_json::json!({"metadata": {"labels": "x"}}),
        &mut buffer,
    );
    let none = PackedLabels(&buffer);
    assert_eq!(none.iter().count(), 0);
    assert!("a=".parse::<Selector>().unwrap().matches(&none));
}

#[tokio::test]
async fn the_broadcast_ring_lives_while_someone_watches() {
    let cache = cache(100);
    let ring = |cache: &WatchCache| cache.state.read().unwrap().tx.get().is_some();
    cache.apply("/r/pods/", &[put("a/x", 11, "1")]);
    assert!(!ring(&cache), "nobody watches: no ring");
    let mut sub = cache.subscribe_from(11).unwrap();
    assert!(ring(&cache));
    cache.apply("/r/pods/", &[put("a/y", 12, "1")]);
    assert_eq!(sub.rx.recv().await.unwrap().revision(), 12);
    drop(sub);
    // The next event finds nobody and drops the ring; a later subscriber gets a new one
    // and every event after what it read.
    cache.apply("/r/pods/", &[put("a/z", 13, "1")]);
    assert!(!ring(&cache));
    let mut sub = cache.subscribe_snapshot(Some("a"));
    assert_eq!(sub.initial.len(), 3);
    cache.apply("/r/pods/", &[delete("a/x", 14)]);
    let event = sub.rx.recv().await.unwrap();
    assert_eq!((event.revision(), event.deleted), (14, true));
}
