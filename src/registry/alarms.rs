//! etcd's alarms and its raw refusals, in words an operator can act on: what each alarm
//! means and how to clear it ([`EtcdAlarm::explain`]; `super::active_alarms` reads which
//! are raised),
//! and the hint [`super::describe_etcd_error`] adds to etcd's own message when a request
//! is refused for space or size ([`hint`]).
//!
//! etcd's alarms are cluster-wide (raised through raft), so any member's answer lists
//! them all; a NOSPACE alarm raised by several members is one alarm here.

/// How to clear a NOSPACE alarm, etcd's maintenance guide in one line.
pub const NOSPACE_FIX: &str = "`etcdctl alarm list`; free space with `etcdctl compact REV` \
(REV: the revision `etcdctl endpoint status -w json` shows) and `etcdctl defrag` (or by \
deleting objects); then `etcdctl alarm disarm`; or restart etcd with a larger \
--quota-backend-bytes";

/// An alarm etcd has raised.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum EtcdAlarm {
    /// The backend reached `--quota-backend-bytes`: every write but a delete is refused.
    NoSpace,
    /// A member's data differs from the others': etcd refuses requests.
    Corrupt,
}

impl EtcdAlarm {
    /// etcd's name for it (`etcdctl alarm list` shows `alarm:NOSPACE`).
    pub fn name(self) -> &'static str {
        match self {
            EtcdAlarm::NoSpace => "NOSPACE",
            EtcdAlarm::Corrupt => "CORRUPT",
        }
    }

    /// What it means for kcm and what the operator does about it, one line.
    pub fn explain(self) -> String {
        match self {
            EtcdAlarm::NoSpace => format!(
                "etcd's space quota is exhausted (alarm NOSPACE): it refuses every write \
                 except deletes until space is freed and the alarm disarmed: {NOSPACE_FIX}"
            ),
            EtcdAlarm::Corrupt => "etcd raised alarm CORRUPT: a member's data differs from the \
                 others' and etcd refuses requests; see `etcdctl alarm list` and etcd's log, \
                 and replace the corrupt member"
                .to_string(),
        }
    }
}

impl std::fmt::Display for EtcdAlarm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// True when etcd refused a request because its NOSPACE alarm is raised.
pub fn is_no_space(error: &etcd_client::Error) -> bool {
    matches!(error, etcd_client::Error::GRpcStatus(status)
        if status.message().contains("database space exceeded"))
}

/// What to tell the user about an etcd error message, when it is one of the refusals an
/// operator must act on: the NOSPACE alarm ("database space exceeded"), a request over
/// `--max-request-bytes` (etcd's "request is too large", or gRPC's "received message
/// larger than max" for one more than 512 KiB over it), a corrupt cluster.
pub(super) fn hint(message: &str) -> Option<String> {
    if message.contains("database space exceeded") {
        Some(EtcdAlarm::NoSpace.explain())
    } else if message.contains("request is too large")
        || message.contains("received message larger than max")
    {
        Some(
            "the object is larger than etcd accepts in one request (its --max-request-bytes, \
             1.5 MiB unless set): make it smaller, or raise --max-request-bytes on every etcd \
             member"
                .to_string(),
        )
    } else if message.contains("etcdserver: corrupt cluster") {
        Some(EtcdAlarm::Corrupt.explain())
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn check_hint(message: &str, expected: Option<&str>) {
        let hint = hint(message);
        match expected {
            None => assert_eq!(hint, None, "{message}"),
            Some(words) => assert!(
                hint.as_deref().is_some_and(|hint| hint.contains(words)),
                "{message}: {hint:?}"
            ),
        }
    }

    #[test]
    fn etcd_refusals_an_operator_must_act_on_get_a_hint_naming_the_fix() {
        check_hint(
            "etcdserver: mvcc: database space exceeded",
            Some("etcd's space quota is exhausted (alarm NOSPACE)"),
        );
        check_hint(
            "etcdserver: mvcc: database space exceeded",
            Some("--quota-backend-bytes"),
        );
        check_hint(
            "etcdserver: mvcc: database space exceeded",
            Some("`etcdctl alarm disarm`"),
        );
        check_hint(
            "etcdserver: request is too large",
            Some("--max-request-bytes"),
        );
        check_hint(
            "grpc: received message larger than max (2097152 vs. 2621440)",
            Some("--max-request-bytes"),
        );
        check_hint("etcdserver: corrupt cluster", Some("alarm CORRUPT"));
        check_hint("etcdserver: request timed out", None);
        // Our own decoder's limit on a response is not etcd's limit on a request.
        check_hint("decoded message length too large", None);
    }
}
