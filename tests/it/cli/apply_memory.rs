//! What `kcm apply -f` of a 60,000-pod List costs in memory (issue 33): at most five times
//! its file plus 40 MiB of peak resident set, measured as a user would (`wait4`'s
//! `ru_maxrss`), for the two Lists docs/PERFORMANCE.md compares (one container with a
//! named port each, and one with a pull policy instead), each written to etcd whole, as a
//! user's apply is: the input is read one object at a time while earlier ones are being
//! written, so the peak is only what a user sees when the whole apply runs. kcm is started
//! from a small process, not this one (see [`kcm_peak_rss`]): a child reports at least
//! its parent's peak, and this harness's passed the bound while the suite ran.

use std::path::Path;
use std::time::{Duration, Instant};

use etcd_client::GetOptions;

use crate::support::kcm::kcm_peak_rss;
use crate::support::{start_etcd, with_timeout};

/// How many pods each List holds.
const PODS: usize = 60_000;
/// Bound on the whole test: 120,000 applies by a debug build on a shared machine.
const LIMIT: Duration = Duration::from_secs(900);
const POD_PREFIX: &str = "/registry/pods/default/";

/// The JSON text of the `i`th pod of a List.
type PodText = fn(usize) -> String;

/// A pod with a named port (the issue's List, 14.8 MB).
fn named_port_pod(i: usize) -> String {
    format!(
        r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"named-{i:05}","labels":{{"app":"load","tier":"backend"}}}},"spec":{{"containers":[{{"name":"web","image":"docker.io/nginx:1.25.3","ports":[{{"name":"http","containerPort":8080,"protocol":"TCP"}}]}}]}}}}"#
    )
}

/// A pod without ports (docs/PERFORMANCE.md's List of issue 25, 14.2 MB).
fn plain_pod(i: usize) -> String {
    format!(
        r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"plain-{i:05}","labels":{{"app":"load","tier":"backend","shard":"shard-{:02}"}}}},"spec":{{"containers":[{{"name":"web","image":"docker.io/nginx:1.25.3","imagePullPolicy":"IfNotPresent"}}]}}}}"#,
        i % 10
    )
}

/// Writes a compact `kind: List` of `PODS` pods made by `pod` to `path`; its size in bytes.
fn write_list(path: &Path, pod: PodText) -> u64 {
    let items: Vec<String> = (0..PODS).map(pod).collect();
    let list = format!(
        r#"{{"apiVersion":"v1","kind":"List","items":[{}]}}"#,
        items.join(",")
    );
    std::fs::write(path, &list).unwrap();
    list.len() as u64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_of_a_60000_pod_list_peaks_under_five_times_its_file_plus_40_mib() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let endpoint = etcd.endpoint();
        let mut client = etcd.client().await;
        let dir = tempfile::tempdir().unwrap();
        let lists = [
            ("named-port.json", named_port_pod as PodText),
            ("plain.json", plain_pod),
        ];
        // Both at once, each its own process (and its own peak): one at a time, the
        // 120,000 writes of a debug build took over four minutes of the suite.
        let applies = lists.into_iter().map(|(name, pod)| {
            let path = dir.path().join(name);
            let bytes = write_list(&path, pod);
            let endpoint = endpoint.clone();
            async move {
                let started = Instant::now();
                let measured =
                    kcm_peak_rss(&endpoint, &["apply", "-f", path.to_str().unwrap()]).await;
                (name, bytes, measured, started.elapsed())
            }
        });
        for (name, bytes, measured, took) in futures::future::join_all(applies).await {
            let Some((output, peak_kib)) = measured else {
                return;
            };
            let stdout = output.success();
            let bound_kib = (5 * bytes + (40 << 20)) / 1024;
            eprintln!(
                "{name}: {bytes} bytes, peak RSS {peak_kib} KiB ({:.1} x the file, bound {bound_kib} KiB), {:.1} s",
                (peak_kib * 1024) as f64 / bytes as f64,
                took.as_secs_f64()
            );
            assert_eq!(stdout.lines().count(), PODS, "{name}: one line per pod");
            assert!(stdout.lines().all(|line| line.ends_with(" created")), "{name}");
            assert!(
                peak_kib <= bound_kib,
                "{name}: peak RSS {peak_kib} KiB over 5 x {bytes} bytes + 40 MiB ({bound_kib} KiB)"
            );
        }
        let stored = client
            .get(
                POD_PREFIX,
                Some(GetOptions::new().with_prefix().with_count_only()),
            )
            .await
            .unwrap()
            .count();
        assert_eq!(stored, i64::try_from(2 * PODS).unwrap(), "every pod of both Lists");
    })
    .await;
}
