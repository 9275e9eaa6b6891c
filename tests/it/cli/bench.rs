//! `kcm bench --quick`: the smoke run of the benchmark. It checks the output's shape (one
//! row per figure, every column filled, ratios present, `--json` parseable, `--svg` an SVG
//! with both curves), never its timings: those belong in docs/PERFORMANCE.md.

use std::time::Duration;

use etcd_client::GetOptions;
use serde_json::Value;

use crate::support::etcd::etcd_binary;
use crate::support::kcm::kcm_command;
use crate::support::{start_etcd, with_timeout};

const LIMIT: Duration = Duration::from_secs(120);

/// The figures every full report has: (scenario, rows).
const EXPECTED_ROWS: [(&str, usize); 16] = [
    ("scale-up", 1),
    ("scale-down", 1),
    ("rs-scale-up", 1),
    ("rs-scale-down", 1),
    ("rollout", 1),
    ("heal", 2),
    ("resync", 2),
    ("watch", 1),
    ("resume", 1),
    // `kcm controller-manager`'s three, then `kcm-controller-manager`'s (built beside kcm).
    ("memory", 6),
    ("api-list", 4),
    ("api-watch", 3),
    ("api-get", 4),
    ("api-create", 1),
    ("api-update", 2),
    ("api-apply", 2),
];

/// Runs `command` (a `kcm bench`) to its end and returns its stdout and stderr, failing the
/// test with both unless it succeeded.
async fn bench_succeeds(command: &mut tokio::process::Command) -> (String, String) {
    let output = command.output().await.expect("run kcm bench");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        output.status.success(),
        "kcm bench failed: {stderr}\n{stdout}"
    );
    (stdout, stderr)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quick_bench_prints_a_row_per_figure_and_writes_json_and_svg() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let dir = tempfile::tempdir().expect("temp dir");
        let (json, svg) = (dir.path().join("bench.json"), dir.path().join("bench.svg"));
        let (stdout, _) = bench_succeeds(
            kcm_command()
                .args(["--etcd-servers", &etcd.endpoint(), "bench", "--quick"])
                .arg("--json")
                .arg(&json)
                .arg("--svg")
                .arg(&svg),
        )
        .await;

        // The table: a header, a rule, one line per figure, a footer.
        let lines: Vec<&str> = stdout.lines().collect();
        for column in [
            "scenario", "measure", "kcm", "baseline", "ratio", "target", "met",
        ] {
            assert!(
                lines[0].contains(column),
                "no {column} column: {}",
                lines[0]
            );
        }
        assert!(lines[1].starts_with("---"), "{stdout}");
        let rows: Vec<&str> = lines[2..lines.len() - 1].to_vec();
        assert_eq!(rows.len(), 33, "{stdout}");
        for (scenario, count) in EXPECTED_ROWS {
            let found = rows.iter().filter(|r| r.starts_with(scenario)).count();
            assert_eq!(found, count, "rows of {scenario}: {stdout}");
        }
        for row in &rows {
            // Every row has a ratio: a number with two decimals, in the ratio column.
            let has_ratio = row
                .split_whitespace()
                .any(|cell| cell.contains('.') && cell.parse::<f64>().is_ok());
            assert!(has_ratio, "no ratio in {row:?}");
        }
        assert!(lines.last().unwrap().contains("etcd"), "{stdout}");

        // The JSON has every figure, with its ratio.
        let report: Value =
            serde_json::from_slice(&std::fs::read(&json).expect("read --json")).expect("JSON");
        let json_rows = report["rows"].as_array().expect("rows");
        assert_eq!(json_rows.len(), 33);
        let memory: Vec<&str> = json_rows
            .iter()
            .filter(|row| row["scenario"] == "memory")
            .filter_map(|row| row["measure"].as_str())
            .collect();
        assert!(
            memory[..3]
                .iter()
                .all(|m| m.contains("kcm controller-manager"))
                && memory[3..]
                    .iter()
                    .all(|m| m.contains("kcm-controller-manager")),
            "{memory:?}"
        );
        for row in json_rows {
            for field in [
                "scenario", "measure", "unit", "kcm", "baseline", "ratio", "target",
            ] {
                assert!(!row[field].is_null(), "{field} missing in {row}");
            }
            assert!(row["ratio"].as_f64().is_some_and(f64::is_finite), "{row}");
        }
        assert_eq!(report["quick"], true);
        assert!(report["sizes"]["scale_replicas"].as_u64().unwrap() > 0);
        for scenario in ["scale-up", "scale-down", "rs-scale-up", "rs-scale-down"] {
            // Only this process's CPU: the etcd it was given is no child of its own.
            let measure = json_rows
                .iter()
                .find(|row| row["scenario"] == scenario)
                .and_then(|row| row["measure"].as_str())
                .unwrap_or_default();
            assert!(
                measure.contains("CPU a pod: this process ") && !measure.contains("etcd "),
                "{measure}"
            );
            for who in ["kcm", "baseline"] {
                let curve = report["curves"][scenario][who].as_array();
                assert!(
                    curve.is_some_and(|c| !c.is_empty()),
                    "no {who} curve for {scenario}"
                );
            }
        }

        // The picture: two panels, each with both polylines.
        let svg = std::fs::read_to_string(&svg).expect("read --svg");
        assert!(svg.starts_with("<svg"), "{svg}");
        assert_eq!(svg.matches("<polyline").count(), 4, "{svg}");

        // Nothing is left behind in the etcd it was given.
        let left = etcd
            .client()
            .await
            .get(
                "/kcm-bench",
                Some(GetOptions::new().with_prefix().with_count_only()),
            )
            .await
            .expect("count leftovers")
            .count();
        assert_eq!(left, 0, "keys left under /kcm-bench*");

        // Nor is its history compacted: the scale rows compact only the bench's own etcd.
        etcd.client()
            .await
            .get("/kcm-bench", Some(GetOptions::new().with_revision(1)))
            .await
            .expect("the given etcd's history still starts at revision 1");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_starts_its_own_etcd_when_none_is_given() {
    let Some(etcd) = etcd_binary() else { return };
    with_timeout(LIMIT, async {
        let (stdout, _) = bench_succeeds(
            kcm_command()
                .args(["bench", "--quick", "--tmpfs", "heal", "resync", "scale-up"])
                .arg("--etcd-binary")
                .arg(&etcd),
        )
        .await;
        let rows: Vec<&str> = stdout
            .lines()
            .filter(|l| l.starts_with("heal") || l.starts_with("resync"))
            .collect();
        assert_eq!(rows.len(), 4, "{stdout}");
        assert!(stdout.contains("private, tmpfs"), "{stdout}");
        // With its own etcd it splits the CPU of each side's run between etcd and itself.
        let scale = stdout
            .lines()
            .find(|l| l.starts_with("scale-up"))
            .expect("a scale-up row");
        assert!(
            scale.contains("CPU a pod: etcd ") && scale.contains(" µs, this process "),
            "{scale}"
        );
    })
    .await;
}

/// A private etcd snapshots every 10,000 entries (etcd 3.6's default, not 3.4's 100,000):
/// the raft log it keeps in memory, and with it the pace of its GC, is then alike for both
/// sides of a scale row. Its log, in a given `--data-dir`, says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_private_etcd_snapshots_every_10000_entries() {
    let Some(etcd) = etcd_binary() else { return };
    with_timeout(LIMIT, async {
        // On /dev/shm, for speed; a given data dir outlives the run, with etcd's log.
        let data_dir = tempfile::Builder::new()
            .prefix("kcm-bench-it-")
            .tempdir_in("/dev/shm")
            .expect("a dir on /dev/shm");
        let (stdout, _) = bench_succeeds(
            kcm_command()
                .args(["bench", "--quick", "watch", "--etcd-binary"])
                .arg(&etcd)
                .arg("--data-dir")
                .arg(data_dir.path()),
        )
        .await;
        assert!(stdout.contains("private, disk"), "{stdout}");
        let log = std::fs::read_to_string(data_dir.path().join("etcd.log")).expect("etcd's log");
        assert!(log.contains("snapshot count = 10000"), "{log}");
    })
    .await;
}

/// `--api`: the scale scenarios' controllers run as clients of an apiserver (2014's
/// topology); each row says so, and has no target (the targets are the etcd mode's).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_api_runs_the_scale_scenarios_through_an_apiserver() {
    let Some(etcd) = etcd_binary() else { return };
    with_timeout(LIMIT, async {
        let (stdout, _) = bench_succeeds(
            kcm_command()
                .args([
                    "bench",
                    "--quick",
                    "--tmpfs",
                    "--api",
                    "scale-up",
                    "rs-scale-down",
                ])
                .arg("--etcd-binary")
                .arg(&etcd),
        )
        .await;
        let rows: Vec<&str> = stdout
            .lines()
            .filter(|l| l.starts_with("scale-up") || l.starts_with("rs-scale-down"))
            .collect();
        assert_eq!(rows.len(), 2, "{stdout}");
        for row in rows {
            assert!(row.contains("through the API"), "{row}");
        }
    })
    .await;
}

/// `--controller-baseline`: the scale rows' baseline writes are guarded by a controller of
/// their own (written under the baseline's namespace, as etcd's history shows) and watched
/// a second time; each row says so and has no target. With `--repeat`, each run's ratio
/// and measure are printed as it ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_controller_baseline_guards_the_baseline_writes_with_a_controller() {
    with_timeout(LIMIT, async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let client = etcd.client().await;
        let dir = tempfile::tempdir().expect("temp dir");
        let json = dir.path().join("bench.json");
        let (stdout, stderr) = bench_succeeds(
            kcm_command()
                .args(["--etcd-servers", &etcd.endpoint(), "bench", "--quick"])
                .args(["--controller-baseline", "--repeat", "2"])
                .args(["scale-up", "rs-scale-down"])
                .arg("--json")
                .arg(&json),
        )
        .await;
        let report: Value =
            serde_json::from_slice(&std::fs::read(&json).expect("read --json")).expect("JSON");
        for scenario in ["scale-up", "rs-scale-down"] {
            let row = stdout
                .lines()
                .find(|l| l.starts_with(&format!("{scenario} ")))
                .unwrap_or_else(|| panic!("no {scenario} row: {stdout}"));
            assert!(
                row.contains("each also comparing its controller's key, watched twice"),
                "{row}"
            );
            // No target: the targets are against raw writes.
            let json_row = report["rows"]
                .as_array()
                .and_then(|rows| rows.iter().find(|r| r["scenario"] == scenario))
                .unwrap_or_else(|| panic!("no {scenario} in the JSON"));
            assert!(json_row["met"].is_null(), "{json_row}");
            let runs = stderr
                .lines()
                .filter(|l| l.starts_with(&format!("kcm bench:   {scenario} ")))
                .count();
            assert_eq!(runs, 2, "one line per run of {scenario}: {stderr}");
        }

        // Each side's controller is in etcd's history: kcm's in namespace kcm, and the
        // baseline's (which no manager runs for) in namespace base, written before the
        // baseline's first pod.
        let history = crate::support::history::read(
            &client,
            "/kcm-bench",
            "/kcm-benci",
            0,
            "/kcm-bench~sentinel",
        )
        .await;
        for (kind, dir) in [
            ("ReplicationController", "/controllers/base/web"),
            ("ReplicaSet", "/replicasets/base/web"),
        ] {
            let written = history
                .iter()
                .filter(|e| e.put && e.key.ends_with(dir))
                .count();
            // Two runs, each measuring the baseline twice.
            assert_eq!(written, 4, "the baseline's {kind} of each side: {dir}");
        }
        let first_controller = history
            .iter()
            .position(|e| e.key.ends_with("/controllers/base/web"))
            .expect("the baseline's controller");
        let first_pod = history
            .iter()
            .position(|e| e.put && e.key.contains("/pods/base/"))
            .expect("the baseline's pods");
        assert!(first_controller < first_pod, "guard written first");
    })
    .await;
}
