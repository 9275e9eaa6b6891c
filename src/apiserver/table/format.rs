//! How Tables print values: timestamps and ages (`HumanDuration`,
//! `translateTimestampSince`), labels and label selectors (`FormatLabelSelector`).

use std::time::{Duration, SystemTime};

use serde_json::{Map, Value};

/// Parses an RFC 3339 timestamp (`2026-11-26T18:01:03Z`, fractional seconds and numeric
/// offsets allowed).
pub fn parse_timestamp(timestamp: &str) -> Option<SystemTime> {
    if let Ok(time) = humantime::parse_rfc3339(timestamp) {
        return Some(time);
    }
    // humantime only reads UTC; apply a `+hh:mm` / `-hh:mm` offset by hand.
    let split = timestamp.len().checked_sub(6)?;
    let (local, offset) = (timestamp.get(..split)?, timestamp.get(split..)?);
    let offset_bytes = offset.as_bytes();
    let sign: i64 = match offset_bytes[0] {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    if offset_bytes[3] != b':' {
        return None;
    }
    let hours: u64 = offset.get(1..3)?.parse().ok()?;
    let minutes: u64 = offset.get(4..6)?.parse().ok()?;
    let local = humantime::parse_rfc3339(&format!("{local}Z")).ok()?;
    let offset = Duration::from_secs(hours * 3600 + minutes * 60);
    if sign > 0 {
        local.checked_sub(offset)
    } else {
        local.checked_add(offset)
    }
}

/// `now - then` in nanoseconds, saturated to the range of Go's `time.Duration`.
pub(super) fn nanoseconds_between(then: SystemTime, now: SystemTime) -> i64 {
    let nanoseconds = match now.duration_since(then) {
        Ok(elapsed) => elapsed.as_nanos() as i128,
        Err(error) => -(error.duration().as_nanos() as i128),
    };
    nanoseconds.clamp(i64::MIN as i128, i64::MAX as i128) as i64
}

/// `translateTimestampSince`: [`human_duration`] of `now - time`, or `"<unknown>"` for
/// no time (a missing or unparsable timestamp).
pub(super) fn translate_timestamp_since(time: Option<SystemTime>, now: SystemTime) -> String {
    match time {
        Some(then) => human_duration(nanoseconds_between(then, now)),
        None => "<unknown>".to_string(),
    }
}

/// `duration.HumanDuration` for a Go `time.Duration` (nanoseconds): a succinct
/// representation with about 2-3 significant figures ("90s", "3m10s", "70m", "2d1h",
/// "2y1d"); "0s" for up to two seconds in the future, "<invalid>" beyond.
pub fn human_duration(nanoseconds: i64) -> String {
    const SECOND: i64 = 1_000_000_000;
    const MINUTE: i64 = 60 * SECOND;
    const HOUR: i64 = 60 * MINUTE;
    let seconds = nanoseconds / SECOND;
    if seconds < -1 {
        return "<invalid>".to_string();
    } else if seconds < 0 {
        return "0s".to_string();
    } else if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = nanoseconds / MINUTE;
    if minutes < 10 {
        let s = (nanoseconds / SECOND) % 60;
        if s == 0 {
            return format!("{minutes}m");
        }
        return format!("{minutes}m{s}s");
    } else if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = nanoseconds / HOUR;
    if hours < 8 {
        let m = (nanoseconds / MINUTE) % 60;
        if m == 0 {
            return format!("{hours}h");
        }
        format!("{hours}h{m}m")
    } else if hours < 48 {
        format!("{hours}h")
    } else if hours < 24 * 8 {
        let h = hours % 24;
        if h == 0 {
            return format!("{}d", hours / 24);
        }
        format!("{}d{h}h", hours / 24)
    } else if hours < 24 * 365 * 2 {
        format!("{}d", hours / 24)
    } else if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        if dy == 0 {
            return format!("{}y", hours / 24 / 365);
        }
        format!("{}y{dy}d", hours / 24 / 365)
    } else {
        format!("{}y", hours / 24 / 365)
    }
}

// ---------------------------------------------------------------------------------------
// Labels and selectors

/// `labels.FormatLabels`: `k=v` pairs sorted by key, comma-separated; `"<none>"` when
/// empty or not a map.
pub fn format_labels(labels: Option<&Value>) -> String {
    let mut pairs: Vec<(&str, String)> = labels
        .and_then(Value::as_object)
        .map(|labels| {
            labels
                .iter()
                .map(|(key, value)| (key.as_str(), plain_string(value)))
                .collect()
        })
        .unwrap_or_default();
    pairs.sort();
    if pairs.is_empty() {
        return "<none>".to_string();
    }
    pairs
        .iter()
        .map(|(key, value)| format!("{key}={value}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// A JSON scalar as text: a string as itself, anything else as JSON.
pub(super) fn plain_string(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// `metav1.LabelSelectorAsSelector(selector).String()`: requirements sorted by key,
/// `k=v`, `k in (a,b)`, `k notin (a,b)`, `k`, `!k`; `""` for a missing (matches nothing)
/// or empty (matches everything) selector; `Err` for an invalid one.
pub fn label_selector_string(selector: Option<&Value>) -> Result<String, String> {
    let selector = match selector {
        None | Some(Value::Null) => return Ok(String::new()),
        Some(Value::Object(selector)) => selector,
        Some(other) => return Err(format!("not a label selector: {other}")),
    };
    let no_labels = Map::new();
    let match_labels = match selector.get("matchLabels") {
        None | Some(Value::Null) => &no_labels,
        Some(Value::Object(labels)) => labels,
        Some(other) => return Err(format!("matchLabels is not a map: {other}")),
    };
    let match_expressions: &[Value] = match selector.get("matchExpressions") {
        None | Some(Value::Null) => &[],
        Some(Value::Array(expressions)) => expressions,
        Some(other) => return Err(format!("matchExpressions is not a list: {other}")),
    };
    if match_labels.is_empty() && match_expressions.is_empty() {
        return Ok(String::new());
    }
    let mut requirements: Vec<(String, String)> = Vec::new();
    for (key, value) in match_labels {
        let value = value
            .as_str()
            .ok_or_else(|| format!("matchLabels[{key}] is not a string"))?;
        validate_label_key(key)?;
        validate_label_value(value)?;
        requirements.push((key.clone(), format!("{key}={value}")));
    }
    for expression in match_expressions {
        let key = expression
            .get("key")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let operator = expression
            .get("operator")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let mut values: Vec<&str> = match expression.get("values") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(values)) => values
                .iter()
                .map(|v| v.as_str().ok_or_else(|| format!("values of {key}: {v}")))
                .collect::<Result<_, _>>()?,
            Some(other) => return Err(format!("values of {key} is not a list: {other}")),
        };
        validate_label_key(key)?;
        for value in &values {
            validate_label_value(value)?;
        }
        values.sort_unstable();
        let text = match operator {
            "In" | "NotIn" => {
                if values.is_empty() {
                    return Err(format!(
                        "{key}: for 'in', 'notin' operators, values set can't be empty"
                    ));
                }
                let word = if operator == "In" { "in" } else { "notin" };
                format!("{key} {word} ({})", values.join(","))
            }
            "Exists" | "DoesNotExist" => {
                if !values.is_empty() {
                    return Err(format!(
                        "{key}: values set must be empty for exists and does not exist"
                    ));
                }
                if operator == "Exists" {
                    key.to_string()
                } else {
                    format!("!{key}")
                }
            }
            other => return Err(format!("{other:?} is not a valid label selector operator")),
        };
        requirements.push((key.to_string(), text));
    }
    requirements.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(requirements
        .into_iter()
        .map(|(_, text)| text)
        .collect::<Vec<_>>()
        .join(","))
}

/// `metav1.FormatLabelSelector`: [`label_selector_string`], `"<none>"` when that is
/// empty, `"<error>"` when the selector is invalid.
pub fn format_label_selector(selector: Option<&Value>) -> String {
    match label_selector_string(selector) {
        Ok(text) if text.is_empty() => "<none>".to_string(),
        Ok(text) => text,
        Err(_) => "<error>".to_string(),
    }
}

/// `[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?`, at most 63 characters.
pub(super) fn is_qualified_name_part(name: &str) -> bool {
    let bytes = name.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes[0].is_ascii_alphanumeric()
        && bytes[bytes.len() - 1].is_ascii_alphanumeric()
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// A DNS-1123 subdomain: lowercase labels of `[a-z0-9]([-a-z0-9]*[a-z0-9])?` joined by
/// dots, at most 253 characters.
pub(super) fn is_dns1123_subdomain(name: &str) -> bool {
    name.len() <= 253
        && name.split('.').all(|label| {
            let bytes = label.as_bytes();
            !bytes.is_empty()
                && bytes[0].is_ascii_alphanumeric()
                && bytes[bytes.len() - 1].is_ascii_alphanumeric()
                && bytes
                    .iter()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        })
}

/// `validation.IsQualifiedName`: `[prefix/]name`.
pub(super) fn validate_label_key(key: &str) -> Result<(), String> {
    let valid = match key.split_once('/') {
        None => is_qualified_name_part(key),
        Some((prefix, name)) => {
            !prefix.is_empty()
                && is_dns1123_subdomain(prefix)
                && !name.contains('/')
                && is_qualified_name_part(name)
        }
    };
    if valid {
        Ok(())
    } else {
        Err(format!("invalid label key {key:?}"))
    }
}

/// `validation.IsValidLabelValue`: empty, or a qualified name part.
pub(super) fn validate_label_value(value: &str) -> Result<(), String> {
    if value.is_empty() || is_qualified_name_part(value) {
        Ok(())
    } else {
        Err(format!("invalid label value {value:?}"))
    }
}

#[cfg(test)]
mod tests;
