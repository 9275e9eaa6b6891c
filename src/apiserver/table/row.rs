//! A row's cells as a printer makes them ([`Cell`]), and encoded once per object
//! ([`encode`], [`write`]): what the watch cache keeps beside each item, so that a Table is
//! built by copying bytes.
//!
//! A cell is fixed by its object, except a time's "how long ago" (the Age column, an
//! event's Last Seen, a pod's last restart), which is fixed only when the row is served.
//! An encoded row keeps the fixed cells as their JSON and leaves the others open.
//!
//! The encoding is a run of segments, each a tag byte and its data (integers
//! little-endian):
//! - `J`, a `u32` length, then JSON text: fixed cells, with the commas between them;
//! - `S`, an `i128` of nanoseconds since the Unix epoch: [`Cell::Since`] a time;
//! - `U`: [`Cell::Since`] no time (`<unknown>`);
//! - `C`, an `i64` count, then the time as `S` has it: [`Cell::CountSince`];
//! - `K`, a `u32` length, then JSON text: the row's `conditions` (last, at most once).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;

use super::format::{
    human_duration, nanoseconds_between, parse_timestamp, translate_timestamp_since,
};
use super::Cells;

/// One cell of a row, as a printer makes it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Cell {
    /// A string or an integer, fixed by the object.
    Fixed(Value),
    /// `translateTimestampSince`: how long ago the time was (`HumanDuration`), or
    /// `<unknown>` for none.
    Since(Option<SystemTime>),
    /// `"{count} ({how long ago} ago)"`: a pod's restarts and the last one's time.
    CountSince(i64, SystemTime),
}

impl Cell {
    /// [`Cell::Since`] an RFC 3339 timestamp; no time when it is missing or unparsable.
    pub(crate) fn since(timestamp: Option<&str>) -> Cell {
        Cell::Since(timestamp.and_then(parse_timestamp))
    }

    /// The cell's value at `now`.
    pub(crate) fn render(&self, now: SystemTime) -> Value {
        match self {
            Cell::Fixed(value) => value.clone(),
            Cell::Since(time) => Value::from(translate_timestamp_since(*time, now)),
            Cell::CountSince(count, time) => {
                Value::from(count_translate_timestamp_since(*count, *time, now))
            }
        }
    }
}

impl From<Value> for Cell {
    fn from(value: Value) -> Cell {
        Cell::Fixed(value)
    }
}

impl From<&str> for Cell {
    fn from(text: &str) -> Cell {
        Cell::Fixed(Value::from(text))
    }
}

impl From<String> for Cell {
    fn from(text: String) -> Cell {
        Cell::Fixed(Value::from(text))
    }
}

impl From<i64> for Cell {
    fn from(number: i64) -> Cell {
        Cell::Fixed(Value::from(number))
    }
}

impl From<usize> for Cell {
    fn from(number: usize) -> Cell {
        Cell::Fixed(Value::from(number))
    }
}

fn count_translate_timestamp_since(count: i64, time: SystemTime, now: SystemTime) -> String {
    format!(
        "{count} ({} ago)",
        human_duration(nanoseconds_between(time, now))
    )
}

/// The cells' values at `now`.
pub(crate) fn render(cells: &[Cell], now: SystemTime) -> Vec<Value> {
    cells.iter().map(|cell| cell.render(now)).collect()
}

const ENCODES: &str = "a JSON value always encodes";

/// Appends `cells` (and the row's conditions) to `out`, encoded as the module says.
pub(crate) fn encode((cells, conditions): &Cells, out: &mut Vec<u8>) {
    let mut fixed = Vec::new();
    let flush = |fixed: &mut Vec<u8>, out: &mut Vec<u8>| {
        if !fixed.is_empty() {
            out.push(b'J');
            push_len(fixed.len(), out);
            out.append(fixed);
        }
    };
    for (index, cell) in cells.iter().enumerate() {
        if index > 0 {
            fixed.push(b',');
        }
        match cell {
            Cell::Fixed(value) => serde_json::to_writer(&mut fixed, value).expect(ENCODES),
            Cell::Since(time) => {
                flush(&mut fixed, out);
                match time {
                    Some(time) => {
                        out.push(b'S');
                        out.extend_from_slice(&nanoseconds_since_epoch(*time).to_le_bytes());
                    }
                    None => out.push(b'U'),
                }
            }
            Cell::CountSince(count, time) => {
                flush(&mut fixed, out);
                out.push(b'C');
                out.extend_from_slice(&count.to_le_bytes());
                out.extend_from_slice(&nanoseconds_since_epoch(*time).to_le_bytes());
            }
        }
    }
    flush(&mut fixed, out);
    if let Some(conditions) = conditions {
        out.push(b'K');
        let json = serde_json::to_vec(conditions).expect(ENCODES);
        push_len(json.len(), out);
        out.extend_from_slice(&json);
    }
}

/// Writes a row encoded by [`encode`] as JSON members at `now`: `"cells":[...]`, then
/// `,"conditions":...` when it has them (as a `TableRow` orders them).
pub(crate) fn write(encoded: &[u8], now: SystemTime, out: &mut Vec<u8>) {
    out.extend_from_slice(b"\"cells\":[");
    let mut rest = encoded;
    while let Some((&tag, after)) = rest.split_first() {
        rest = after;
        match tag {
            b'J' => out.extend_from_slice(take_counted(&mut rest)),
            b'S' => write_text(
                &translate_timestamp_since(Some(take_time(&mut rest)), now),
                out,
            ),
            b'U' => write_text(&translate_timestamp_since(None, now), out),
            b'C' => {
                let count = i64::from_le_bytes(*take::<8>(&mut rest));
                let time = take_time(&mut rest);
                write_text(&count_translate_timestamp_since(count, time, now), out);
            }
            b'K' => {
                out.extend_from_slice(b"],\"conditions\":");
                out.extend_from_slice(take_counted(&mut rest));
                return;
            }
            _ => unreachable!("a row is encoded by `encode` alone"),
        }
    }
    out.push(b']');
}

fn write_text(text: &str, out: &mut Vec<u8>) {
    serde_json::to_writer(&mut *out, text).expect(ENCODES);
}

fn push_len(len: usize, out: &mut Vec<u8>) {
    let len = u32::try_from(len).expect("a row shorter than 4 GiB");
    out.extend_from_slice(&len.to_le_bytes());
}

fn take<'a, const N: usize>(rest: &mut &'a [u8]) -> &'a [u8; N] {
    let (bytes, after) = rest
        .split_first_chunk::<N>()
        .expect("a row is encoded by `encode` alone");
    *rest = after;
    bytes
}

fn take_counted<'a>(rest: &mut &'a [u8]) -> &'a [u8] {
    let len = u32::from_le_bytes(*take::<4>(rest)) as usize;
    let (bytes, after) = rest.split_at(len);
    *rest = after;
    bytes
}

fn take_time(rest: &mut &[u8]) -> SystemTime {
    time_from_nanoseconds(i128::from_le_bytes(*take::<16>(rest)))
}

/// Nanoseconds from the Unix epoch to `time` (negative before it).
fn nanoseconds_since_epoch(time: SystemTime) -> i128 {
    match time.duration_since(UNIX_EPOCH) {
        Ok(after) => after.as_nanos() as i128,
        Err(before) => -(before.duration().as_nanos() as i128),
    }
}

fn time_from_nanoseconds(nanoseconds: i128) -> SystemTime {
    let duration = |n: u128| Duration::new((n / 1_000_000_000) as u64, (n % 1_000_000_000) as u32);
    if nanoseconds >= 0 {
        UNIX_EPOCH + duration(nanoseconds as u128)
    } else {
        UNIX_EPOCH - duration(nanoseconds.unsigned_abs())
    }
}

#[cfg(test)]
mod tests;
