//! Unit tests of the registry that need no etcd: fences, error classification, key ranges.

use super::*;
use tokio_util::sync::CancellationToken;

#[test]
fn a_fence_slot_holds_the_current_term_until_it_is_lost_or_cleared() {
    let slot = FenceSlot::default();
    assert!(slot.current().is_none());
    let lost = CancellationToken::new();
    slot.set(Fence::new("/e/a", 7, lost.clone()));
    assert_eq!(slot.current().map(|f| f.create_revision), Some(7));
    lost.cancel();
    assert!(slot.current().is_none(), "a lost term is not handed out");
    let next = CancellationToken::new();
    slot.set(Fence::new("/e/b", 9, next.clone()));
    assert_eq!(slot.current().map(|f| f.key), Some(b"/e/b".to_vec()));
    slot.clear();
    assert!(next.is_cancelled() && slot.current().is_none());
}

#[tokio::test]
async fn a_fenced_registry_without_a_term_refuses_writes_without_asking_etcd() {
    // Nothing listens on port 1; the refusal comes before any connection attempt.
    let client = Client::connect(["http://127.0.0.1:1"], None).await.unwrap();
    let registry = Registry::new(&client, "/registry")
        .unwrap()
        .with_fence(FenceSlot::default());
    let mut pod = api::Pod::default();
    pod.metadata.name = "a".into();
    pod.metadata.namespace = "ns".into();
    let refused = registry.create(&pod).await.unwrap_err();
    assert!(refused.is_fenced(), "{refused}");
    assert_eq!(
        refused.to_string(),
        "create /registry/pods/ns/a: refused, this process is not the leader (leadership lost)"
    );
    let refused = registry.delete::<api::Pod>("ns", "a", None).await;
    assert!(matches!(
        refused,
        Err(StorageError::Fenced { op: "delete", .. })
    ));
}

#[test]
fn only_calls_that_never_left_are_resent() {
    let check = |status: tonic::Status, expected: bool| {
        let error = etcd_client::Error::GRpcStatus(status);
        assert_eq!(is_unsent(&error), expected, "{error}");
    };
    check(tonic::Status::unavailable("tcp connect error"), true);
    check(tonic::Status::unavailable("h2 protocol error"), false);
    check(tonic::Status::deadline_exceeded("tcp connect error"), false);
    check(
        tonic::Status::unknown("etcdserver: request timed out"),
        false,
    );
}

#[test]
fn prefix_range_end_increments_the_last_byte() {
    assert_eq!(prefix_range_end(b"/registry/pods/"), b"/registry/pods0");
    assert_eq!(prefix_range_end(b"a\xff"), b"b");
    assert_eq!(prefix_range_end(b"\xff\xff"), b"\0");
}

#[test]
fn an_incarnation_known_by_its_create_revision_is_one_compare() {
    let read = |created| Incarnation {
        key: "/registry/controllers/ns/web".into(),
        read_at: 40,
        created,
    };
    // Each compare as etcd-client shows it.
    let asks = |incarnation: Incarnation| -> Vec<String> {
        incarnation.compares().map(|c| format!("{c:?}")).collect()
    };
    let known = asks(read(Some(12)));
    assert_eq!(known.len(), 1, "{known:?}");
    assert!(
        known[0].contains("result: Equal") && known[0].contains("CreateRevision(12)"),
        "{known:?}"
    );
    // Without the create revision: the key exists, and was created at or before the read.
    let unknown = asks(read(None));
    assert_eq!(unknown.len(), 2, "{unknown:?}");
    assert!(
        unknown[0].contains("result: Greater") && unknown[0].contains("CreateRevision(0)"),
        "{unknown:?}"
    );
    assert!(
        unknown[1].contains("result: Less") && unknown[1].contains("CreateRevision(41)"),
        "{unknown:?}"
    );
}
