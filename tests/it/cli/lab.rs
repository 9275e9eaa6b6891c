//! `kcm lab` against a real etcd: every scenario at its quick size, with the 2014 figure
//! showing the weakness and kcm's not, both counted from etcd's history by the lab. A lab
//! that stopped demonstrating anything fails here.

use std::time::Duration;

use serde_json::Value;

use crate::support::kcm::{run_kcm, run_kcm_within};
use crate::support::{start_etcd, with_timeout};

/// The chart `kcm lab --svg` wrote: one polyline per loop, each named in the legend.
fn assert_two_series(path: &std::path::Path) {
    let svg = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("kcm lab --svg wrote no {}: {e}", path.display()));
    assert_eq!(svg.matches("<polyline").count(), 2, "{svg}");
    assert!(
        svg.contains(">2014</text>") && svg.contains(">kcm</text>"),
        "{svg}"
    );
}

/// `kcm lab --quick --sync-period 1s` on the etcd at `endpoint`, its table as JSON in
/// `json`.
fn quick_lab<'a>(endpoint: &'a str, json: &'a std::path::Path) -> Vec<&'a str> {
    vec![
        "lab",
        "--quick",
        "--sync-period",
        "1s",
        "--etcd-servers",
        endpoint,
        "--json",
        json.to_str().unwrap(),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lab_shows_the_2014_weaknesses_that_kcm_fixed_on_a_given_etcd() {
    with_timeout(Duration::from_secs(150), async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        let json = dir.path().join("lab.json");
        // A directory that does not exist yet: kcm lab creates it.
        let charts = dir.path().join("charts");
        let endpoint = etcd.endpoint();
        let scenarios = [
            "overcreate",
            "resync",
            "burst",
            "orphans",
            "victims",
            "names",
            "status",
        ];
        let mut args = quick_lab(&endpoint, &json);
        args.extend(["--svg", charts.to_str().unwrap()]);
        args.extend(scenarios);
        let output = run_kcm(&args, &[]).await;
        assert!(output.status.success(), "{}", output.stderr);
        assert!(output.stdout.contains("| orphans |"), "{}", output.stdout);
        for scenario in scenarios {
            assert_two_series(&charts.join(format!("{scenario}.svg")));
        }
        let document: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        let rows = document["scenarios"].as_array().unwrap();
        let figure = |scenario: &str, which: &str| {
            rows.iter()
                .find(|row| row["scenario"] == scenario)
                .unwrap_or_else(|| panic!("a row for {scenario}: {document}"))[which]
                .as_f64()
                .unwrap()
        };
        // orphans: the deleted controller was short of 2 of 3 pods. 2014 creates them
        // after the delete; kcm creates nothing.
        assert_eq!(figure("orphans", "v2014"), 2.0, "{document}");
        assert_eq!(figure("orphans", "kcm"), 0.0, "{document}");
        // victims: 5 → 2 with the first 3 pods in key order running. 2014 deletes exactly
        // those; kcm deletes the 2 pending ones first, so only 1 running pod goes.
        assert_eq!(figure("victims", "v2014"), 3.0, "{document}");
        assert_eq!(figure("victims", "kcm"), 1.0, "{document}");
        // overcreate: two managers scale one controller 0 → 100. 2014's each create what
        // they miss from their own list; kcm's slot names never let it pass 100.
        assert_eq!(figure("overcreate", "kcm"), 100.0, "{document}");
        // 2014's over-creation is a race: both managers must list before either's creates
        // land. Under a loaded machine (the suite in parallel) one manager's whole burst
        // may land first, once in a while; the scenario runs again, twice at most, until
        // it shows, kcm held to 100 each time.
        let mut v2014 = vec![figure("overcreate", "v2014")];
        while v2014.iter().all(|&peak| peak <= 100.0) && v2014.len() < 3 {
            let again = dir.path().join(format!("overcreate-{}.json", v2014.len()));
            let mut args = quick_lab(&endpoint, &again);
            args.push("overcreate");
            let output = run_kcm(&args, &[]).await;
            assert!(output.status.success(), "{}", output.stderr);
            let document: Value = serde_json::from_slice(&std::fs::read(&again).unwrap()).unwrap();
            let row = &document["scenarios"][0];
            assert_eq!(row["scenario"], "overcreate", "{document}");
            assert_eq!(row["kcm"].as_f64(), Some(100.0), "{document}");
            v2014.push(row["v2014"].as_f64().unwrap());
        }
        assert!(
            v2014.iter().any(|&peak| peak > 100.0),
            "2014's two managers never passed 100 in {} runs: {v2014:?}",
            v2014.len()
        );
        // resync: 10 converged controllers × 3 pods, a namespace each; etcd's own count of range requests
        // per period. 2014 lists the controllers and then each one's pods on every tick
        // (11 per tick); kcm's caches answer, so etcd serves none.
        assert!(figure("resync", "v2014") >= 7.0, "{document}");
        assert_eq!(figure("resync", "kcm"), 0.0, "{document}");
        // burst: one controller 0 → 200. 2014 starts one create per missing pod at once;
        // kcm's slow-start batches (1, 2, 4, ...) never have all 200 in flight.
        assert!(figure("burst", "kcm") < 200.0, "{document}");
        // 2014 issues one create per missing pod before awaiting any: (nearly) all 200
        // in flight at once; a create may complete before the last one is issued (1999 of
        // 2000 at the full size).
        assert!(figure("burst", "v2014") >= 190.0, "{document}");
        // names: 0 → 3. 2014's pods are named by their UIDs, none after the controller;
        // every one of kcm's is `web-…` (weakness 12).
        assert_eq!(figure("names", "v2014"), 0.0, "{document}");
        assert_eq!(figure("names", "kcm"), 3.0, "{document}");
        // status: 0 → 3. A watcher of the controller sees no write of 2014's loop after the
        // scale-up (status was computed at read time, weakness 11); kcm writes its status.
        assert_eq!(figure("status", "v2014"), 0.0, "{document}");
        assert!(figure("status", "kcm") >= 1.0, "{document}");
        // Every row names the weaknesses of docs/2014.md it shows.
        for (scenario, weaknesses) in [("names", 12), ("status", 11), ("orphans", 10)] {
            let row = rows.iter().find(|row| row["scenario"] == scenario).unwrap();
            assert_eq!(
                row["weaknesses"],
                serde_json::json!([weaknesses]),
                "{document}"
            );
        }
        // Nothing is left under the lab's prefix in a given etcd.
        let left = etcd
            .client()
            .await
            .get(
                "/kcm-lab-",
                Some(
                    etcd_client::GetOptions::new()
                        .with_prefix()
                        .with_count_only(),
                ),
            )
            .await
            .unwrap()
            .count();
        assert_eq!(left, 0);
    })
    .await;
}

/// `stale-watch` compacts etcd, so it runs on the lab's own etcd (a real one it starts)
/// and refuses one named with `--etcd-servers`. After a compaction during a cut watch the
/// 2014 loop's watch fails forever and only its tick reacts to a scale-up; kcm's relists
/// and reacts to the event. `heal` alike: 2014 does not watch pods and waits for its tick.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lab_stale_watch_and_heal_run_on_its_own_etcd_and_2014_waits_for_the_tick() {
    with_timeout(Duration::from_secs(90), async {
        // Skipped locally without etcd, a failure under CI (as start_etcd).
        let Some(binary) = crate::support::etcd::etcd_binary() else {
            return;
        };
        let refused = run_kcm(
            &["lab", "stale-watch", "--etcd-servers", "http://127.0.0.1:1"],
            &[],
        )
        .await;
        assert_eq!(refused.status.code(), Some(1), "{}", refused.stderr);
        assert!(
            refused.stderr.contains(
                "stale-watch compacts etcd's history, so it runs only on the private etcd kcm lab starts, not on one named with --etcd-servers"
            ),
            "{}",
            refused.stderr
        );

        let dir = tempfile::tempdir().unwrap();
        // An --svg directory that cannot be made (under a file) is named before anything runs.
        let file = dir.path().join("a-file");
        std::fs::write(&file, "").unwrap();
        let unwritable = file.join("charts");
        let refused = run_kcm(
            &[
                "lab",
                "overcreate",
                "--etcd-servers",
                "http://127.0.0.1:1",
                "--svg",
                unwritable.to_str().unwrap(),
            ],
            &[],
        )
        .await;
        assert_eq!(refused.status.code(), Some(1), "{}", refused.stderr);
        assert!(
            refused.stderr.contains(&format!(
                "kcm: create the --svg directory {}: ",
                unwritable.display()
            )),
            "{}",
            refused.stderr
        );

        let json = dir.path().join("lab.json");
        let output = run_kcm(
            &[
                "lab",
                "--quick",
                "--sync-period",
                "1s",
                "--etcd-binary",
                binary.to_str().unwrap(),
                "--json",
                json.to_str().unwrap(),
                "--svg",
                dir.path().to_str().unwrap(),
                "stale-watch",
                "heal",
            ],
            &[],
        )
        .await;
        assert!(output.status.success(), "{}", output.stderr);
        let document: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        for (i, scenario) in ["stale-watch", "heal"].into_iter().enumerate() {
            assert_two_series(&dir.path().join(format!("{scenario}.svg")));
            let row = &document["scenarios"][i];
            assert_eq!(row["scenario"], scenario, "{document}");
            let (v2014, kcm) = (row["v2014"].as_f64().unwrap(), row["kcm"].as_f64().unwrap());
            assert!(v2014 > kcm, "2014 waits for its tick, kcm does not: {document}");
        }
        // The 2014 watch really hit the compaction and stayed dead: after the compaction
        // it was opened again (and failed) every period, where kcm's relisted once and
        // opened none.
        let reopened = &document["scenarios"][0]["also"][0];
        assert_eq!(
            reopened["measure"], "watches the loop opened per period after the compaction",
            "{document}"
        );
        assert!(reopened["v2014"].as_f64().unwrap() >= 1.0, "{document}");
        assert!(reopened["kcm"].as_f64().unwrap() < 0.5, "{document}");
    })
    .await;
}

/// The scenarios of weaknesses 5 and 7 on a given etcd: `overlap` (two controllers of one
/// selector: 2014's fight for as long as they run, kcm's ReplicaSets settle, kcm's own
/// ReplicationControllers fight as 2014's do) and `event-wait` (a scale-up waits for
/// 2014's resync of many controllers in one namespace; kcm's queue does not hold it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lab_overlap_fights_in_2014_and_settles_as_replica_sets_and_events_wait_for_2014s_resync() {
    with_timeout(Duration::from_secs(90), async {
        let Some(etcd) = start_etcd().await else {
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        let json = dir.path().join("lab.json");
        let endpoint = etcd.endpoint();
        let output = run_kcm_within(
            Duration::from_secs(80),
            &[
                "lab",
                "--quick",
                "--sync-period",
                "1s",
                "--etcd-servers",
                &endpoint,
                "--json",
                json.to_str().unwrap(),
                "overlap",
                "event-wait",
            ],
            &[],
        )
        .await;
        assert!(output.status.success(), "{}", output.stderr);
        let document: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        let [overlap, event_wait] = [0, 1].map(|i| document["scenarios"][i].clone());
        let figure = |row: &Value, which: &str| row[which].as_f64().unwrap();
        // overlap: 3 and 5 replicas, one selector. 2014's pair still creates and deletes
        // two periods after it started; the ReplicaSets under kcm made their 8 pods and
        // then wrote none.
        assert_eq!(overlap["weaknesses"], serde_json::json!([5]), "{document}");
        assert!(figure(&overlap, "v2014") > 0.0, "{document}");
        assert_eq!(figure(&overlap, "kcm"), 0.0, "{document}");
        let controllers = &overlap["also"][0];
        assert_eq!(
            controllers["measure"],
            "two ReplicationControllers: pod creates and deletes per minute",
            "{document}"
        );
        assert!(figure(controllers, "kcm") > 0.0, "{document}");
        // event-wait: kcm's scale-ups reach their first pod without waiting for any
        // resync (well within a period); 2014's wait for its resync, every controller
        // listing the namespace's 2,000 pods, and take several times as long.
        assert_eq!(
            event_wait["weaknesses"],
            serde_json::json!([7, 2]),
            "{document}"
        );
        assert!(figure(&event_wait, "kcm") < 0.5, "{document}");
        assert!(
            figure(&event_wait, "v2014") > 4.0 * figure(&event_wait, "kcm"),
            "{document}"
        );
    })
    .await;
}

/// The scenarios of weaknesses 8 and 13, on the lab's own etcd (`failing-create` turns
/// its authentication on; a given etcd is refused): creates etcd refuses, tried by 2014
/// for every missing pod every tick and by kcm about once a period; and a deleted pod
/// with the controller watch cut, replaced by 2014 only once the watch is back and by
/// kcm while the cut lasts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lab_failing_creates_back_off_and_a_cut_controller_watch_stops_only_2014s_tick() {
    with_timeout(Duration::from_secs(90), async {
        let Some(binary) = crate::support::etcd::etcd_binary() else {
            return;
        };
        let refused = run_kcm(
            &[
                "lab",
                "failing-create",
                "--etcd-servers",
                "http://127.0.0.1:1",
            ],
            &[],
        )
        .await;
        assert_eq!(refused.status.code(), Some(1), "{}", refused.stderr);
        assert!(
            refused
                .stderr
                .contains("failing-create turns etcd's authentication on"),
            "{}",
            refused.stderr
        );
        let dir = tempfile::tempdir().unwrap();
        let json = dir.path().join("lab.json");
        let output = run_kcm_within(
            Duration::from_secs(80),
            &[
                "lab",
                "--quick",
                "--sync-period",
                "1s",
                "--etcd-binary",
                binary.to_str().unwrap(),
                "--json",
                json.to_str().unwrap(),
                "failing-create",
                "watch-cut",
            ],
            &[],
        )
        .await;
        assert!(output.status.success(), "{}", output.stderr);
        let document: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        let [failing, cut] = [0, 1].map(|i| document["scenarios"][i].clone());
        let figure = |row: &Value, which: &str| row[which].as_f64().unwrap();
        // failing-create: 10 missing pods, a 1 s period. 2014 tries all 10 every tick (at
        // least 8 a second, counted by etcd); kcm's slow start tries one, then backs off:
        // at most two a second.
        assert_eq!(failing["weaknesses"], serde_json::json!([8]), "{document}");
        assert!(figure(&failing, "v2014") >= 8.0 * 60.0, "{document}");
        assert!(figure(&failing, "kcm") <= 2.0 * 60.0, "{document}");
        assert!(figure(&failing, "kcm") > 0.0, "{document}");
        // watch-cut: the watch stays cut for 3 periods (3 s) after the delete. 2014 runs
        // no tick without a watch, so the pod comes back only after the cut; kcm replaces
        // it from its pod watch during the cut.
        assert_eq!(cut["weaknesses"], serde_json::json!([13]), "{document}");
        assert!(figure(&cut, "v2014") >= 3.0, "{document}");
        assert!(figure(&cut, "kcm") < 3.0, "{document}");
    })
    .await;
}

/// `--topology api`: both loops as clients of an apiserver the lab serves over its etcd
/// (2014's topology). The weaknesses show through the API as on etcd, and `resync` says
/// what the tier changes: the requests the apiserver served each period. Scenarios that act
/// at the loop's own etcd connection are refused, named.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lab_runs_both_loops_through_an_apiserver_with_topology_api() {
    with_timeout(Duration::from_secs(120), async {
        let Some(binary) = crate::support::etcd::etcd_binary() else {
            return;
        };
        let refused = run_kcm(
            &["lab", "--topology", "api", "stale-watch", "burst"],
            &[],
        )
        .await;
        assert_eq!(refused.status.code(), Some(1), "{}", refused.stderr);
        assert!(
            refused.stderr.contains(
                "stale-watch, burst cut, count or refuse at the loop's own etcd connection, so they run only with --topology etcd"
            ),
            "{}",
            refused.stderr
        );

        let dir = tempfile::tempdir().unwrap();
        let json = dir.path().join("lab.json");
        let output = run_kcm_within(
            Duration::from_secs(100),
            &[
                "lab",
                "--quick",
                "--topology",
                "api",
                "--etcd-binary",
                binary.to_str().unwrap(),
                "--json",
                json.to_str().unwrap(),
                "overcreate",
                "orphans",
                "names",
                "resync",
            ],
            &[],
        )
        .await;
        assert!(output.status.success(), "{}", output.stderr);
        assert!(
            output.stderr.contains("the loops through an apiserver at http://127.0.0.1:"),
            "{}",
            output.stderr
        );
        let document: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        let row = |scenario: &str| {
            document["scenarios"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["scenario"] == scenario)
                .unwrap_or_else(|| panic!("no {scenario} row: {document}"))
                .clone()
        };
        let figures = |scenario: &str| {
            let r = row(scenario);
            (r["v2014"].as_f64().unwrap(), r["kcm"].as_f64().unwrap())
        };
        let (v2014, kcm) = figures("overcreate");
        assert!(v2014 > kcm, "2014 over-creates through the API too: {document}");
        let (v2014, kcm) = figures("orphans");
        assert!(v2014 > 0.0 && kcm == 0.0, "{document}");
        let (v2014, kcm) = figures("names");
        assert!(v2014 == 0.0 && kcm > 0.0, "{document}");
        let served = &row("resync")["also"][0];
        assert_eq!(
            served["measure"], "requests the apiserver served per sync period",
            "{document}"
        );
        // 2014 lists every controller and each one's pods every period; kcm's caches
        // answer from their watches.
        assert!(
            served["v2014"].as_f64().unwrap() > served["kcm"].as_f64().unwrap(),
            "{document}"
        );
    })
    .await;
}
