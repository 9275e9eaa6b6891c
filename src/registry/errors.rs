//! How storage calls fail: the typed [`StorageError`] callers branch on, and the
//! classification of etcd-client's errors (compacted, too large, never sent).

use super::ResourceVersion;

/// A value under the prefix that could not be decoded as its kind.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed {kind} at {key} (revision {revision}): {message}")]
pub struct DecodeError {
    pub kind: &'static str,
    pub key: String,
    pub revision: i64,
    pub message: String,
}

/// The ways a storage call fails. Callers branch on `NotFound`, `AlreadyExists` and
/// `Conflict`; the rest are reported.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error("{key} not found")]
    NotFound { key: String },
    #[error("{key} already exists")]
    AlreadyExists { key: String },
    #[error("conflict writing {key}: expected resourceVersion {expected}, found {}",
        .actual.map_or("none (deleted)".to_string(), |rv| rv.to_string()))]
    Conflict {
        key: String,
        expected: ResourceVersion,
        actual: Option<ResourceVersion>,
    },
    #[error("{op} {key}: {message}")]
    BadRequest {
        op: &'static str,
        key: String,
        message: String,
    },
    #[error(transparent)]
    Decode(#[from] DecodeError),
    #[error("{op} {key}: {message}")]
    Etcd {
        op: &'static str,
        key: String,
        message: String,
        /// The revision etcd compacted to, when that is why the read failed.
        compacted: bool,
    },
    #[error("update {key}: {source:#}")]
    Update { key: String, source: anyhow::Error },
    /// A fenced registry's write while this process does not hold the leadership (or
    /// found in etcd that it no longer does). Nothing was written.
    #[error("{op} {key}: refused, this process is not the leader (leadership lost)")]
    Fenced { op: &'static str, key: String },
    /// A guarded registry's write after the incarnation it is guarded by ended (the object
    /// was deleted, and maybe written again). Nothing was written.
    /// A registry guarded by an object's unchanged version ([`Registry::guarded_unchanged`])
    /// reports a change of that object the same way: `how` says which guard broke.
    #[error("{op} {key}: refused, {owner} was {how} since it was read")]
    OwnerGone {
        op: &'static str,
        key: String,
        owner: String,
        /// `deleted`, or `changed or deleted` for a guard on the unchanged version.
        how: &'static str,
    },
    /// A write with [`super::KeyCondition`]s after one of them stopped holding. Nothing was
    /// written.
    #[error("{op} {key}: refused, {broken}")]
    ConditionFailed {
        op: &'static str,
        key: String,
        /// What broke, e.g. `/registry/replicasets/default/web exists`.
        broken: String,
    },
}

impl StorageError {
    /// True when the call failed because a revision it needed has been compacted.
    pub fn is_compacted(&self) -> bool {
        matches!(
            self,
            StorageError::Etcd {
                compacted: true,
                ..
            }
        )
    }

    pub fn is_not_found(&self) -> bool {
        matches!(self, StorageError::NotFound { .. })
    }

    /// True when etcd refused the call because its NOSPACE alarm is raised (its space
    /// quota is full): a state the controller manager reports once, not per call.
    pub fn is_no_space(&self) -> bool {
        matches!(self, StorageError::Etcd { message, .. }
            if message.contains("database space exceeded"))
    }

    /// True when a fenced write was refused because leadership was lost.
    pub fn is_fenced(&self) -> bool {
        matches!(self, StorageError::Fenced { .. })
    }
}

/// A one-line description of an etcd-client error (tonic's Display is verbose). etcd's
/// refusals an operator must act on (its space quota, its request size limit) are
/// followed by what they mean and what to do, so every command and log says so.
pub fn describe_etcd_error(error: &etcd_client::Error) -> String {
    let text = etcd_error_text(error);
    match super::alarms::hint(&text) {
        Some(hint) => format!("{text}; {hint}"),
        None => text,
    }
}

fn etcd_error_text(error: &etcd_client::Error) -> String {
    match error {
        etcd_client::Error::GRpcStatus(status) => {
            let message = status.message();
            let text = if message.is_empty() {
                format!("{:?}", status.code())
            } else {
                message.to_string()
            };
            // A transport failure ("transport error") keeps its cause (a TLS alert, a
            // refused connection) in the source chain.
            with_sources(text, std::error::Error::source(status))
        }
        etcd_client::Error::TransportError(e) => {
            with_sources(e.to_string(), std::error::Error::source(e))
        }
        other => other.to_string(),
    }
}

/// True when a call failed before it was sent: the channel could not connect to the member
/// it picked (a member that died). tonic reports that as Unavailable "tcp connect error".
pub(super) fn is_unsent(error: &etcd_client::Error) -> bool {
    matches!(error, etcd_client::Error::GRpcStatus(s)
        if s.code() == tonic::Code::Unavailable && s.message().contains("connect error"))
}

/// `text: source: its source: ...`, leaving out a source whose words are already there
/// (tonic repeats the cause in the status message).
pub(super) fn with_sources(
    mut text: String,
    mut source: Option<&(dyn std::error::Error + 'static)>,
) -> String {
    while let Some(s) = source {
        let part = s.to_string();
        if !text.contains(&part) {
            text = format!("{text}: {part}");
        }
        source = s.source();
    }
    text
}

/// Whether etcd refused because a revision the call names has been compacted.
pub fn is_compacted(error: &etcd_client::Error) -> bool {
    matches!(error, etcd_client::Error::GRpcStatus(s) if s.message().contains("compacted"))
}

/// True when a response exceeded a gRPC message limit: ours when decoding (tonic's
/// "decoded message length too large") or etcd's when sending ("larger than max"). Matched
/// by message, not code: etcd also uses OutOfRange for "revision has been compacted" and
/// ResourceExhausted for "too many requests", which a smaller page does not cure.
pub(super) fn is_too_large(error: &etcd_client::Error) -> bool {
    matches!(error, etcd_client::Error::GRpcStatus(s)
        if s.message().contains("message length too large")
            || s.message().contains("larger than max"))
}

/// A unary call's failure before it is given context.
pub(super) enum RawError {
    Etcd(etcd_client::Error),
    Timeout,
}
