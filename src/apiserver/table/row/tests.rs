//! Unit tests of encoded rows: every kind of cell, written at two times.

use std::time::Duration;

use proptest::prelude::*;
use serde_json::{json, Value};

use super::super::fixtures::now;
use super::*;

/// `cells` encoded, then written at `at`, as the JSON object they make.
fn written(cells: &Cells, at: SystemTime) -> Value {
    let mut encoded = Vec::new();
    encode(cells, &mut encoded);
    let mut out = vec![b'{'];
    write(&encoded, at, &mut out);
    out.push(b'}');
    serde_json::from_slice(&out).unwrap_or_else(|e| {
        panic!("{e}: {}", String::from_utf8_lossy(&out));
    })
}

/// What [`write`] must give: the cells rendered at `at`, and the conditions.
fn rendered((cells, conditions): &Cells, at: SystemTime) -> Value {
    let mut row = json!({"cells": render(cells, at)});
    if let Some(conditions) = conditions {
        row["conditions"] = conditions.clone();
    }
    row
}

#[test]
fn an_encoded_row_writes_its_cells_as_rendered_at_the_time_it_is_served() {
    let ten_minutes_ago = now() - Duration::from_secs(600);
    let before_the_epoch = UNIX_EPOCH - Duration::new(86_400, 500);
    let rows: Vec<Cells> = vec![
        (vec![], None),
        (vec![Cell::from("only")], None),
        (vec![Cell::Since(Some(ten_minutes_ago))], None),
        (vec![Cell::Since(None), Cell::Since(None)], None),
        (
            vec![
                Cell::from("web-1"),
                Cell::from("1/1"),
                Cell::CountSince(3, ten_minutes_ago),
                Cell::Since(Some(ten_minutes_ago)),
                Cell::from(7i64),
                Cell::from("quote \" and \\ and \u{e9}"),
                Cell::Since(Some(before_the_epoch)),
            ],
            Some(json!([{"type": "Completed", "status": "True"}])),
        ),
        (vec![Cell::from(json!(null))], Some(json!([]))),
    ];
    for cells in &rows {
        for at in [now(), now() + Duration::from_secs(3 * 86_400)] {
            assert_eq!(written(cells, at), rendered(cells, at), "{cells:?}");
        }
    }
    // The open cells move with the time they are written at; the fixed ones do not.
    let row = &rows[4];
    assert_eq!(
        written(row, now())["cells"],
        json!([
            "web-1",
            "1/1",
            "3 (10m ago)",
            "10m",
            7,
            "quote \" and \\ and \u{e9}",
            "56y"
        ])
    );
    assert_eq!(
        written(row, now() + Duration::from_secs(3 * 86_400))["cells"],
        json!([
            "web-1",
            "1/1",
            "3 (3d ago)",
            "3d",
            7,
            "quote \" and \\ and \u{e9}",
            "56y"
        ])
    );
}

#[test]
fn times_survive_their_encoding_to_the_nanosecond() {
    for time in [
        UNIX_EPOCH,
        now(),
        now() + Duration::from_nanos(999_999_999),
        UNIX_EPOCH - Duration::new(62_135_596_800, 0), // 0001-01-01
        UNIX_EPOCH - Duration::from_nanos(1),
    ] {
        assert_eq!(time_from_nanoseconds(nanoseconds_since_epoch(time)), time);
    }
}

#[test]
fn since_reads_a_timestamp_or_none() {
    assert_eq!(
        Cell::since(Some("2026-11-26T18:01:03Z")).render(now()),
        json!("10m")
    );
    assert_eq!(Cell::since(Some("yesterday")), Cell::Since(None));
    assert_eq!(Cell::since(None).render(now()), json!("<unknown>"));
}

/// A time from 0001-01-01 to 9999-12-31, to the nanosecond.
fn time_strategy() -> impl Strategy<Value = SystemTime> {
    (-62_135_596_800i64..253_402_300_799, 0u32..1_000_000_000).prop_map(|(seconds, nanos)| {
        let whole = Duration::new(seconds.unsigned_abs(), 0);
        let time = if seconds >= 0 {
            UNIX_EPOCH + whole
        } else {
            UNIX_EPOCH - whole
        };
        time + Duration::from_nanos(u64::from(nanos))
    })
}

fn cell_strategy() -> impl Strategy<Value = Cell> {
    prop_oneof![
        any::<String>().prop_map(Cell::from),
        any::<i64>().prop_map(Cell::from),
        proptest::option::of(time_strategy()).prop_map(Cell::Since),
        (any::<i64>(), time_strategy()).prop_map(|(count, time)| Cell::CountSince(count, time)),
    ]
}

proptest! {
    /// Any row, encoded and written at any time, is the row rendered at that time.
    #[test]
    fn any_row_is_written_as_it_renders(
        cells in proptest::collection::vec(cell_strategy(), 0..12),
        conditions in proptest::option::of(any::<String>().prop_map(|m| json!([{"message": m}]))),
        at in time_strategy(),
    ) {
        let row = (cells, conditions);
        prop_assert_eq!(written(&row, at), rendered(&row, at));
    }
}
