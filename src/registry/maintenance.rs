//! etcd's Maintenance API as kcm uses it: which alarms are raised.

use std::time::Duration;

use super::alarms::EtcdAlarm;
use super::errors::describe_etcd_error;

/// The alarms raised in etcd's cluster (each once, in a fixed order), read with the
/// Maintenance API's alarm list (`etcdctl alarm list`), which etcd 3.4 answers for any
/// authenticated user. etcd sends every alarm request through raft, so a read costs a
/// round trip to the leader and a WAL entry: cheap, but read it seconds apart, not in a
/// loop.
///
/// # Errors
/// When etcd does not answer within `limit`, or refuses.
pub async fn active_alarms(
    client: &etcd_client::Client,
    limit: Duration,
) -> Result<Vec<EtcdAlarm>, String> {
    use etcd_client::{AlarmAction, AlarmType};
    let mut maintenance = client.maintenance_client();
    let list = maintenance.alarm(AlarmAction::Get, AlarmType::None, None);
    let response = match tokio::time::timeout(limit, list).await {
        Ok(Ok(response)) => response,
        Ok(Err(e)) => return Err(describe_etcd_error(&e)),
        Err(_) => {
            return Err(format!(
                "no answer within {}",
                humantime::format_duration(limit)
            ))
        }
    };
    let mut alarms: Vec<EtcdAlarm> = response
        .alarms()
        .iter()
        .filter_map(|member| match member.alarm() {
            AlarmType::Nospace => Some(EtcdAlarm::NoSpace),
            AlarmType::Corrupt => Some(EtcdAlarm::Corrupt),
            AlarmType::None => None,
        })
        .collect();
    alarms.sort();
    alarms.dedup();
    Ok(alarms)
}
