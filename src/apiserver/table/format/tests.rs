//! Unit tests of the Tables' formatting: `HumanDuration`, ages, label selectors and labels.

use serde_json::{json, Value};

use super::super::fixtures::now;
use super::*;

const SECOND: i64 = 1_000_000_000;
const MINUTE: i64 = 60 * SECOND;
const HOUR: i64 = 60 * MINUTE;
const DAY: i64 = 24 * HOUR;
const MILLISECOND: i64 = 1_000_000;

// ---- HumanDuration ------------------------------------------------------------------

#[test]
fn human_duration_matches_kubernetes_test_human_duration() {
    #[track_caller]
    fn check(nanoseconds: i64, expected: &str) {
        assert_eq!(human_duration(nanoseconds), expected, "{nanoseconds}ns");
    }
    check(SECOND, "1s");
    check(70 * SECOND, "70s");
    check(190 * SECOND, "3m10s");
    check(70 * MINUTE, "70m");
    check(47 * HOUR, "47h");
    check(49 * HOUR, "2d1h");
    check((8 * 24 + 2) * HOUR, "8d");
    check(367 * DAY, "367d");
    check((365 * 2 * 24 + 25) * HOUR, "2y1d");
    check((365 * 8 * 24 + 2) * HOUR, "8y");
}

#[test]
fn human_duration_matches_kubernetes_test_human_duration_boundaries() {
    #[track_caller]
    fn check(nanoseconds: i64, expected: &str) {
        assert_eq!(human_duration(nanoseconds), expected, "{nanoseconds}ns");
    }
    let year = 365 * DAY;
    check(-2 * SECOND, "<invalid>");
    check(-2 * SECOND + 1, "0s");
    check(0, "0s");
    check(SECOND - MILLISECOND, "0s");
    check(2 * MINUTE - MILLISECOND, "119s");
    check(2 * MINUTE, "2m");
    check(2 * MINUTE + SECOND, "2m1s");
    check(10 * MINUTE - MILLISECOND, "9m59s");
    check(10 * MINUTE, "10m");
    check(10 * MINUTE + SECOND, "10m");
    check(3 * HOUR - MILLISECOND, "179m");
    check(3 * HOUR, "3h");
    check(3 * HOUR + MINUTE, "3h1m");
    check(8 * HOUR - MILLISECOND, "7h59m");
    check(8 * HOUR, "8h");
    check(8 * HOUR + 59 * MINUTE, "8h");
    check(2 * DAY - MILLISECOND, "47h");
    check(2 * DAY, "2d");
    check(2 * DAY + HOUR, "2d1h");
    check(8 * DAY - MILLISECOND, "7d23h");
    check(8 * DAY, "8d");
    check(8 * DAY + 23 * HOUR, "8d");
    check(2 * year - MILLISECOND, "729d");
    check(2 * year, "2y");
    check(2 * year + 23 * HOUR, "2y");
    check(2 * year + 23 * HOUR + 59 * MINUTE, "2y");
    check(2 * year + DAY - MILLISECOND, "2y");
    check(2 * year + DAY, "2y1d");
    check(3 * year, "3y");
    check(4 * year, "4y");
    check(5 * year, "5y");
    check(6 * year, "6y");
    check(7 * year, "7y");
    check(8 * year - MILLISECOND, "7y364d");
    check(8 * year, "8y");
    check(8 * year + 364 * DAY, "8y");
    check(9 * year, "9y");
    check(i64::MAX, "292y");
    check(i64::MIN, "<invalid>");
}

#[test]
fn ages_come_from_the_creation_timestamp() {
    #[track_caller]
    fn check(timestamp: Option<&str>, expected: &str) {
        assert_eq!(
            translate_timestamp_since(timestamp.and_then(parse_timestamp), now()),
            expected,
            "{timestamp:?}"
        );
    }
    check(Some("2026-11-26T18:01:03Z"), "10m");
    check(Some("2026-11-26T18:11:00Z"), "3s");
    check(Some("2026-11-26T18:11:03.999999Z"), "0s");
    check(Some("2026-11-26T18:11:04Z"), "0s"); // a second in the future
    check(Some("2026-11-26T18:11:06Z"), "<invalid>");
    check(Some("2026-11-26T19:01:03+01:00"), "10m");
    check(Some("2026-11-26T17:01:03-01:00"), "10m");
    check(Some("2026-11-25T18:11:03Z"), "24h");
    check(Some("2024-11-26T18:11:03Z"), "2y");
    check(Some("2024-11-25T18:11:03Z"), "2y1d");
    check(Some("not a time"), "<unknown>");
    check(Some("2026-11-26"), "<unknown>");
    check(Some("2026-11-26T18:01:03+1:00"), "<unknown>");
    check(Some(""), "<unknown>");
    check(None, "<unknown>");
}

// ---- selectors ----------------------------------------------------------------------

#[test]
fn format_label_selector_matches_metav1() {
    #[track_caller]
    fn check(selector: Value, expected: &str) {
        assert_eq!(
            format_label_selector(Some(&selector)),
            expected,
            "{selector}"
        );
    }
    check(json!({"matchLabels":{"app":"web"}}), "app=web");
    check(
        json!({"matchLabels":{"tier":"fe","app":"web"}}),
        "app=web,tier=fe",
    );
    check(
        json!({"matchLabels":{"app":"web"},"matchExpressions":[
            {"key":"env","operator":"In","values":["prod","dev"]},
            {"key":"zone","operator":"NotIn","values":["b","a"]},
            {"key":"canary","operator":"Exists"},
            {"key":"legacy","operator":"DoesNotExist","values":[]}]}),
        "app=web,canary,env in (dev,prod),!legacy,zone notin (a,b)",
    );
    check(
        json!({"matchExpressions":[{"key":"example.com/x","operator":"In","values":["1"]}]}),
        "example.com/x in (1)",
    );
    check(json!({}), "<none>");
    check(json!({"matchLabels":{},"matchExpressions":[]}), "<none>");
    check(json!(null), "<none>");
    check(
        json!({"matchExpressions":[{"key":"a","operator":"Near","values":["1"]}]}),
        "<error>",
    );
    check(
        json!({"matchExpressions":[{"key":"a","operator":"In","values":[]}]}),
        "<error>",
    );
    check(
        json!({"matchExpressions":[{"key":"a","operator":"Exists","values":["x"]}]}),
        "<error>",
    );
    check(json!({"matchLabels":{"bad key":"x"}}), "<error>");
    check(json!({"matchLabels":{"a":"bad value!"}}), "<error>");
    check(json!({"matchLabels":{"a":1}}), "<error>");
    check(json!({"matchLabels":{"Example.com/a":"x"}}), "<error>");
    check(json!("app=web"), "<error>");
    assert_eq!(format_label_selector(None), "<none>");
    assert_eq!(label_selector_string(None), Ok(String::new()));
}

#[test]
fn format_labels_sorts_and_says_none_when_empty() {
    assert_eq!(
        format_labels(Some(&json!({"name":"web","app":"x"}))),
        "app=x,name=web"
    );
    assert_eq!(format_labels(Some(&json!({}))), "<none>");
    assert_eq!(format_labels(None), "<none>");
    assert_eq!(format_labels(Some(&json!("x"))), "<none>");
}
