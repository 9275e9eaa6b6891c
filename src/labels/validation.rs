//! Validation of label keys, label values and DNS-1123 subdomains (2014
//! `pkg/util/validation.go`, `pkg/api/validation`).

/// Longest allowed label value and name part of a label key, in bytes.
const MAX_NAME_LEN: usize = 63;
/// Longest allowed DNS-1123 subdomain (a key prefix or an object name), in bytes.
const MAX_SUBDOMAIN_LEN: usize = 253;

pub(super) const REASON_EMPTY: &str = "must not be empty";
pub(super) const REASON_SUBDOMAIN_CHARS: &str =
    "must consist of lowercase alphanumeric characters, '-' or \
     '.', and must start and end with an alphanumeric character";
pub(super) const REASON_NAME_CHARS: &str =
    "must consist of alphanumeric characters, '-', '_' or '.', and \
     must start and end with an alphanumeric character";
pub(super) const REASON_VALUE_CHARS: &str =
    "must be empty or consist of alphanumeric characters, '-', '_' \
     or '.', and must start and end with an alphanumeric character";
pub(super) const REASON_TOO_MANY_SLASHES: &str =
    "must have at most one '/' separating a prefix from a name";
pub(super) const REASON_EMPTY_IN_SET: &str = "must not be empty inside a value set";

/// Checks that `key` is a valid label key: an optional prefix and `/`, then a name.
///
/// The prefix must be a DNS-1123 subdomain (see [`validate_dns_subdomain`]). The name must
/// be 1 to 63 characters of `[A-Za-z0-9._-]`, beginning and ending with an alphanumeric.
///
/// # Errors
///
/// Returns a lowercase phrase saying what is wrong, e.g. "name part must be no more than
/// 63 characters".
pub fn validate_key(key: &str) -> Result<(), String> {
    if key.is_empty() {
        return Err(REASON_EMPTY.to_owned());
    }
    let name = match key.split_once('/') {
        Some((prefix, name)) => {
            if name.contains('/') {
                return Err(REASON_TOO_MANY_SLASHES.to_owned());
            }
            validate_dns_subdomain(prefix).map_err(|reason| format!("prefix part {reason}"))?;
            name
        }
        None => key,
    };
    if name.is_empty() {
        return Err(format!("name part {REASON_EMPTY}"));
    }
    if name.len() > MAX_NAME_LEN {
        return Err(format!(
            "name part must be no more than {MAX_NAME_LEN} characters"
        ));
    }
    if !is_name_like(name) {
        return Err(format!("name part {REASON_NAME_CHARS}"));
    }
    Ok(())
}

/// Checks that `value` is a valid label value: empty, or up to 63 characters of
/// `[A-Za-z0-9._-]` beginning and ending with an alphanumeric.
///
/// # Errors
///
/// Returns a lowercase phrase saying what is wrong, e.g. "must be no more than 63
/// characters".
pub fn validate_value(value: &str) -> Result<(), String> {
    if value.len() > MAX_NAME_LEN {
        return Err(format!("must be no more than {MAX_NAME_LEN} characters"));
    }
    if !value.is_empty() && !is_name_like(value) {
        return Err(REASON_VALUE_CHARS.to_owned());
    }
    Ok(())
}

/// Checks that `s` is a DNS-1123 subdomain: at most 253 characters, made of one or more
/// labels of lowercase alphanumerics and `-`, each beginning and ending with an
/// alphanumeric, joined by `.`. Label key prefixes and object names must be subdomains.
///
/// # Errors
///
/// Returns a lowercase phrase saying what is wrong, e.g. "must not be empty".
pub fn validate_dns_subdomain(s: &str) -> Result<(), String> {
    if s.is_empty() {
        return Err(REASON_EMPTY.to_owned());
    }
    if s.len() > MAX_SUBDOMAIN_LEN {
        return Err(format!(
            "must be no more than {MAX_SUBDOMAIN_LEN} characters"
        ));
    }
    if !s.split('.').all(is_dns_label) {
        return Err(REASON_SUBDOMAIN_CHARS.to_owned());
    }
    Ok(())
}

/// Matches `[a-z0-9]([-a-z0-9]*[a-z0-9])?`.
fn is_dns_label(label: &str) -> bool {
    let is_inner = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    let bytes = label.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(&first), Some(&last)) => {
            is_inner(first) && is_inner(last) && bytes.iter().all(|&c| is_inner(c) || c == b'-')
        }
        _ => false,
    }
}

/// Matches `[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?`.
fn is_name_like(text: &str) -> bool {
    let bytes = text.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && bytes
                    .iter()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}
