//! CPU time of this process and of the private etcd, from `/proc/PID/stat`: where a scale
//! row's two cores went, kcm's run beside the baseline's.

use std::time::Duration;

/// CPU time (user + system) of the process `pid` (`self` for this one); `None` when
/// `/proc` does not tell.
pub(super) fn cpu_time(pid: &str) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&stat)
}

/// utime + stime of one `/proc/PID/stat` line. The command name (field 2) is in
/// parentheses and may hold spaces, so the fields are counted after its `)`.
fn parse_stat(stat: &str) -> Option<Duration> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    // After the name: state (3) ... utime (14), stime (15).
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    // SAFETY: sysconf reads a constant of the system.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let ticks = u64::try_from(ticks).ok().filter(|&t| t > 0)?;
    Some(Duration::from_nanos(
        (utime + stime) * 1_000_000_000 / ticks,
    ))
}

/// CPU time of this process and of etcd at one moment.
#[derive(Clone, Copy, Debug)]
pub(super) struct CpuMark {
    this: Option<Duration>,
    etcd: Option<Duration>,
}

impl CpuMark {
    pub(super) fn now(etcd_pid: Option<u32>) -> CpuMark {
        CpuMark {
            this: cpu_time("self"),
            etcd: etcd_pid.and_then(|pid| cpu_time(&pid.to_string())),
        }
    }

    /// The CPU time spent since `self` per item, for `n` items: (this process, etcd).
    pub(super) fn per_item_since(
        self,
        etcd_pid: Option<u32>,
        n: usize,
    ) -> (Option<Duration>, Option<Duration>) {
        let now = CpuMark::now(etcd_pid);
        let per = |then: Option<Duration>, now: Option<Duration>| {
            Some(now?.checked_sub(then?)? / u32::try_from(n.max(1)).ok()?)
        };
        (per(self.this, now.this), per(self.etcd, now.etcd))
    }
}

/// `CPU a pod: etcd 152 vs 135 µs, this process 64 vs 42 µs` for kcm's run against the
/// baseline's; empty when neither is known.
pub(super) fn describe(
    kcm: (Option<Duration>, Option<Duration>),
    baseline: (Option<Duration>, Option<Duration>),
) -> String {
    let pair = |what: &str, a: Option<Duration>, b: Option<Duration>| {
        Some(format!(
            "{what} {} vs {} µs",
            a?.as_micros(),
            b?.as_micros()
        ))
    };
    let parts: Vec<String> = [
        pair("etcd", kcm.1, baseline.1),
        pair("this process", kcm.0, baseline.0),
    ]
    .into_iter()
    .flatten()
    .collect();
    if parts.is_empty() {
        String::new()
    } else {
        format!("; CPU a pod: {}", parts.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_times_are_read_after_a_name_with_spaces_and_parentheses() {
        let ticks = u64::try_from(unsafe { libc::sysconf(libc::_SC_CLK_TCK) }).unwrap();
        let stat =
            "4242 (tokio (rt) w) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 9 0 1 2 3";
        assert_eq!(
            parse_stat(stat),
            Some(Duration::from_nanos(300 * 1_000_000_000 / ticks))
        );
        assert_eq!(parse_stat("4242 (etcd S 1"), None);
    }

    #[test]
    fn this_process_reads_its_own_cpu_time() {
        assert!(cpu_time("self").is_some());
        assert_eq!(cpu_time("0"), None);
    }

    #[test]
    fn the_description_names_what_is_known() {
        let us = Duration::from_micros;
        assert_eq!(
            describe((Some(us(64)), Some(us(152))), (Some(us(42)), Some(us(135)))),
            "; CPU a pod: etcd 152 vs 135 µs, this process 64 vs 42 µs"
        );
        assert_eq!(
            describe((Some(us(64)), None), (Some(us(42)), None)),
            "; CPU a pod: this process 64 vs 42 µs"
        );
        assert_eq!(describe((None, None), (None, None)), "");
    }
}
