//! Label sets and label selectors: which objects a replication controller or service owns.
//!
//! Mirrors 2014 Kubernetes `pkg/labels/labels.go` (`Set`) and `pkg/labels/selector.go`
//! (`Selector`, `ParseSelector`), extended with the set-based grammar (`in`, `notin`, exists,
//! `!`) that Kubernetes unified into its selector parser in 2015.
//!
//! Invariants:
//! - A [`Set`] is a plain sorted map; it does not validate its keys or values (the api module
//!   does that with [`validate_key`] and [`validate_value`]).
//! - Every [`Requirement`] built by [`Requirement::new`] or by parsing has a valid key, valid
//!   values and the right number of values for its operator.
//! - A [`Selector`] keeps its requirements sorted by key, then operator, then values, without
//!   duplicates, so selectors that mean the same requirements compare equal whatever order
//!   they were written in.
//! - For every selector built from valid requirements, parsing its `Display` form gives an
//!   equal selector.
//!
//! Matching follows 2014, where a missing key reads as the empty string: `k=` matches an
//! object without `k` (2014's `hasTerm` compared `ls.Get(label) == value`), whereas modern
//! Kubernetes requires the key to exist.

use std::collections::{btree_map, BTreeMap, BTreeSet};
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Longest allowed label value and name part of a label key, in bytes.
const MAX_NAME_LEN: usize = 63;
/// Longest allowed DNS-1123 subdomain (a key prefix or an object name), in bytes.
const MAX_SUBDOMAIN_LEN: usize = 253;

const REASON_EMPTY: &str = "must not be empty";
const REASON_SUBDOMAIN_CHARS: &str = "must consist of lowercase alphanumeric characters, '-' or \
     '.', and must start and end with an alphanumeric character";
const REASON_NAME_CHARS: &str = "must consist of alphanumeric characters, '-', '_' or '.', and \
     must start and end with an alphanumeric character";
const REASON_VALUE_CHARS: &str = "must be empty or consist of alphanumeric characters, '-', '_' \
     or '.', and must start and end with an alphanumeric character";
const REASON_TOO_MANY_SLASHES: &str = "must have at most one '/' separating a prefix from a name";
const REASON_EMPTY_IN_SET: &str = "must not be empty inside a value set";

/// A set of labels attached to an object: a map from key to value, iterated in key order.
///
/// Mirrors 2014's `labels.Set`. A missing key reads as the empty string when matching.
/// The set does not validate its contents; see [`validate_key`] and [`validate_value`].
/// It serializes as a JSON object.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Set(BTreeMap<String, String>);

impl Set {
    /// Returns an empty set.
    pub fn new() -> Set {
        Set(BTreeMap::new())
    }

    /// Returns the value of `key`, or `None` if the set has no such key.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }

    /// Returns whether the set has `key` (with any value, including the empty one).
    pub fn has(&self, key: &str) -> bool {
        self.0.contains_key(key)
    }

    /// Sets `key` to `value`, returning the previous value if there was one.
    pub fn insert(&mut self, key: impl Into<String>, value: impl Into<String>) -> Option<String> {
        self.0.insert(key.into(), value.into())
    }

    /// Iterates over the `(key, value)` pairs in key order.
    pub fn iter(&self) -> btree_map::Iter<'_, String, String> {
        self.0.iter()
    }

    /// Returns the number of labels.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Returns whether the set has no labels.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Returns the selector that matches objects carrying all of these labels: one `k=v`
    /// requirement per pair, like 2014's `SelectorFromSet`. An empty set gives
    /// [`Selector::everything()`].
    ///
    /// The pairs are not validated; a set with an invalid key or value gives a selector whose
    /// string form does not parse.
    pub fn as_selector(&self) -> Selector {
        let requirements = self
            .0
            .iter()
            .map(|(key, value)| Requirement {
                key: key.clone(),
                operator: Operator::Equals,
                values: BTreeSet::from([value.clone()]),
            })
            .collect();
        Selector::from_requirements(requirements)
    }

    /// Returns the underlying map.
    pub fn as_map(&self) -> &BTreeMap<String, String> {
        &self.0
    }
}

impl From<BTreeMap<String, String>> for Set {
    fn from(map: BTreeMap<String, String>) -> Set {
        Set(map)
    }
}

impl<K: Into<String>, V: Into<String>> FromIterator<(K, V)> for Set {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Set {
        Set(iter
            .into_iter()
            .map(|(key, value)| (key.into(), value.into()))
            .collect())
    }
}

impl<'a> IntoIterator for &'a Set {
    type Item = (&'a String, &'a String);
    type IntoIter = btree_map::Iter<'a, String, String>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

/// Formats the set as `k=v` pairs sorted by key and joined by `,`; an empty set is `""`.
impl fmt::Display for Set {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (key, value)) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{key}={value}")?;
        }
        Ok(())
    }
}

/// How a [`Requirement`] compares a label with its values.
///
/// The declaration order is the canonical order of requirements on the same key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Operator {
    /// `k=v`: the label's value (`""` when the key is missing) equals `v`.
    Equals,
    /// `k==v`: same meaning as [`Operator::Equals`]; kept apart so the selector displays the
    /// way it was written.
    DoubleEquals,
    /// `k!=v`: the label's value (`""` when the key is missing) differs from `v`, so an
    /// object without `k` matches.
    NotEquals,
    /// `k in (a,b)`: the key is present and its value is one of the values.
    In,
    /// `k notin (a,b)`: the key is absent, or its value is none of the values.
    NotIn,
    /// `k`: the key is present, with any value.
    Exists,
    /// `!k`: the key is absent.
    DoesNotExist,
}

impl Operator {
    /// Returns the operator's spelling: `=`, `==`, `!=`, `in`, `notin`, `exists` or `!`
    /// (the names modern Kubernetes gives them).
    pub fn as_str(self) -> &'static str {
        match self {
            Operator::Equals => "=",
            Operator::DoubleEquals => "==",
            Operator::NotEquals => "!=",
            Operator::In => "in",
            Operator::NotIn => "notin",
            Operator::Exists => "exists",
            Operator::DoesNotExist => "!",
        }
    }

    /// Describes how many values the operator takes, for error messages.
    fn value_count_rule(self) -> &'static str {
        match self {
            Operator::Equals | Operator::DoubleEquals | Operator::NotEquals => "exactly one value",
            Operator::In | Operator::NotIn => "at least one value",
            Operator::Exists | Operator::DoesNotExist => "no values",
        }
    }

    fn accepts_value_count(self, count: usize) -> bool {
        match self {
            Operator::Equals | Operator::DoubleEquals | Operator::NotEquals => count == 1,
            Operator::In | Operator::NotIn => count >= 1,
            Operator::Exists | Operator::DoesNotExist => count == 0,
        }
    }

    fn is_set_based(self) -> bool {
        matches!(self, Operator::In | Operator::NotIn)
    }
}

/// Formats the operator as [`Operator::as_str`] does.
impl fmt::Display for Operator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One condition of a selector: a key, an operator and its values.
///
/// Built only through [`Requirement::new`] or by parsing a [`Selector`], so the key and
/// values are valid and the value count fits the operator. Requirements order by key, then
/// operator, then values.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Requirement {
    key: String,
    operator: Operator,
    values: BTreeSet<String>,
}

impl Requirement {
    /// Builds a requirement after validating it.
    ///
    /// `values` must hold exactly one value for `=`, `==` and `!=`, at least one for `in` and
    /// `notin` (where the empty value is not allowed, because `k in ()` does not parse), and
    /// none for exists and `!`. Duplicate values of `in` and `notin` collapse.
    ///
    /// # Errors
    ///
    /// Returns a [`ParseSelectorError`] whose `input` is a best-effort rendering of the
    /// requirement and whose `kind` is [`ParseErrorKind::InvalidKey`],
    /// [`ParseErrorKind::WrongValueCount`] or [`ParseErrorKind::InvalidValue`].
    pub fn new<I, S>(
        key: impl Into<String>,
        operator: Operator,
        values: I,
    ) -> Result<Requirement, ParseSelectorError>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let key = key.into();
        let values: Vec<String> = values.into_iter().map(Into::into).collect();
        let input = render_unchecked(&key, operator, &values);
        Requirement::build(key, operator, values).map_err(|kind| ParseSelectorError { input, kind })
    }

    /// Validates the parts and builds the requirement; the parser's entry point.
    fn build(
        key: String,
        operator: Operator,
        values: Vec<String>,
    ) -> Result<Requirement, ParseErrorKind> {
        if let Err(reason) = validate_key(&key) {
            return Err(ParseErrorKind::InvalidKey { key, reason });
        }
        if !operator.accepts_value_count(values.len()) {
            return Err(ParseErrorKind::WrongValueCount {
                key,
                operator,
                count: values.len(),
            });
        }
        for value in &values {
            let check = if operator.is_set_based() && value.is_empty() {
                Err(REASON_EMPTY_IN_SET.to_owned())
            } else {
                validate_value(value)
            };
            if let Err(reason) = check {
                return Err(ParseErrorKind::InvalidValue {
                    key,
                    value: value.clone(),
                    reason,
                });
            }
        }
        Ok(Requirement {
            key,
            operator,
            values: values.into_iter().collect(),
        })
    }

    /// Returns the label key this requirement looks at.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// Returns the operator.
    pub fn operator(&self) -> Operator {
        self.operator
    }

    /// Returns the values, sorted; empty for exists and `!`.
    pub fn values(&self) -> &BTreeSet<String> {
        &self.values
    }

    /// Returns whether `labels` satisfy this requirement.
    ///
    /// A missing key reads as `""` for `=`, `==` and `!=` (2014 semantics), so `k=` matches
    /// an object without `k` and `k!=v` matches an object without `k`. `in` needs the key
    /// present; `notin` matches when the key is absent.
    pub fn matches(&self, labels: &Set) -> bool {
        match self.operator {
            Operator::Equals | Operator::DoubleEquals => {
                self.values.contains(labels.get(&self.key).unwrap_or(""))
            }
            Operator::NotEquals => !self.values.contains(labels.get(&self.key).unwrap_or("")),
            Operator::In => labels
                .get(&self.key)
                .is_some_and(|value| self.values.contains(value)),
            Operator::NotIn => labels
                .get(&self.key)
                .is_none_or(|value| !self.values.contains(value)),
            Operator::Exists => labels.has(&self.key),
            Operator::DoesNotExist => !labels.has(&self.key),
        }
    }
}

/// Formats the requirement as `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k` or
/// `!k`, with set values sorted.
impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let values: Vec<&str> = self.values.iter().map(String::as_str).collect();
        f.write_str(&render(&self.key, self.operator, &values))
    }
}

/// Renders a requirement's parts in the selector syntax.
fn render(key: &str, operator: Operator, values: &[&str]) -> String {
    let joined = values.join(",");
    match operator {
        Operator::Equals | Operator::DoubleEquals | Operator::NotEquals => {
            format!("{key}{operator}{joined}")
        }
        Operator::In | Operator::NotIn => format!("{key} {operator} ({joined})"),
        Operator::Exists => key.to_owned(),
        Operator::DoesNotExist => format!("!{key}"),
    }
}

fn render_unchecked(key: &str, operator: Operator, values: &[String]) -> String {
    let values: Vec<&str> = values.iter().map(String::as_str).collect();
    render(key, operator, &values)
}

/// A conjunction of [`Requirement`]s: an object matches when it satisfies all of them.
///
/// Mirrors 2014's `Selector` interface (`andTerm` of `hasTerm`/`notHasTerm`) plus the
/// set-based requirements. The requirements are kept sorted by key, then operator, then
/// values, with duplicates removed, so equal selectors compare equal. The empty selector,
/// [`Selector::everything()`], matches every object and displays as `""`.
///
/// The string form round-trips: parsing a selector's `Display` gives an equal selector. It
/// is also the serde representation.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Selector {
    requirements: Vec<Requirement>,
}

impl Selector {
    /// Returns the selector with no requirements, which matches every object.
    pub fn everything() -> Selector {
        Selector::default()
    }

    /// Builds a selector from requirements in any order; they are sorted and deduplicated.
    pub fn from_requirements(mut requirements: Vec<Requirement>) -> Selector {
        requirements.sort();
        requirements.dedup();
        Selector { requirements }
    }

    /// Returns whether the selector has no requirements (and so matches everything).
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// Returns whether `labels` satisfy every requirement; the empty selector matches all.
    pub fn matches(&self, labels: &Set) -> bool {
        self.requirements
            .iter()
            .all(|requirement| requirement.matches(labels))
    }

    /// Returns the requirements in canonical order.
    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }

    /// Returns the value `key` must have if the selector has a `key=value` or `key==value`
    /// requirement (the first one, if there are several), like 2014's `RequiresExactMatch`.
    ///
    /// Callers that index objects by this value must remember that `key=` (`Some("")`) also
    /// matches objects without `key`.
    pub fn requires_exact_match(&self, key: &str) -> Option<&str> {
        self.requirements
            .iter()
            .filter(|requirement| requirement.key == key)
            .filter(|requirement| {
                matches!(
                    requirement.operator,
                    Operator::Equals | Operator::DoubleEquals
                )
            })
            .find_map(|requirement| requirement.values.first())
            .map(String::as_str)
    }
}

/// Formats the requirements in canonical order joined by `,`; [`Selector::everything()`]
/// is `""`.
impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, requirement) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{requirement}")?;
        }
        Ok(())
    }
}

/// Parses a selector.
///
/// Grammar: requirements separated by `,` (a comma inside parentheses belongs to a value
/// list), each one of `k=v`, `k==v`, `k!=v` (2014), or `k in (a,b)`, `k notin (a,b)`, `k`,
/// `!k` (2015 set-based). Whitespace is allowed around every token. An empty or
/// all-whitespace string is [`Selector::everything()`]. Unlike 2014's `ParseSelector`,
/// empty requirements (`a=b,,c=d`, a trailing comma) are rejected instead of skipped.
impl FromStr for Selector {
    type Err = ParseSelectorError;

    fn from_str(input: &str) -> Result<Selector, ParseSelectorError> {
        parse_selector(input).map_err(|kind| ParseSelectorError {
            input: input.to_owned(),
            kind,
        })
    }
}

impl Serialize for Selector {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Selector {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Selector, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// Why a selector (or a [`Requirement::new`] call) was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid selector {input:?}: {kind}")]
pub struct ParseSelectorError {
    /// The whole text that was parsed, or a rendering of the rejected requirement.
    pub input: String,
    /// What is wrong, naming the offending piece.
    pub kind: ParseErrorKind,
}

/// What is wrong with a selector. Byte positions are offsets into
/// [`ParseSelectorError::input`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseErrorKind {
    /// The key is not a valid label key (see [`validate_key`]).
    #[error("invalid key {key:?}: {reason}")]
    InvalidKey {
        /// The key as written, trimmed.
        key: String,
        /// Why it is invalid.
        reason: String,
    },
    /// A value is not a valid label value (see [`validate_value`]), or is empty inside a
    /// value set.
    #[error("invalid value {value:?} for key {key:?}: {reason}")]
    InvalidValue {
        /// The requirement's key.
        key: String,
        /// The value as written, trimmed.
        value: String,
        /// Why it is invalid.
        reason: String,
    },
    /// The operator is none of `=`, `==`, `!=`, `in`, `notin` (e.g. `<`, `=>`, `foo`).
    #[error("unknown operator {piece:?}")]
    UnknownOperator {
        /// The operator as written.
        piece: String,
    },
    /// Nothing (or only whitespace) between two commas, or before or after a comma.
    #[error("empty requirement at byte {position}")]
    EmptyRequirement {
        /// Where the empty requirement starts.
        position: usize,
    },
    /// `in` or `notin` without a parenthesized value list (`k in`, `k in a`).
    #[error("missing parenthesized value list for key {key:?}")]
    MissingValues {
        /// The requirement's key.
        key: String,
    },
    /// `k in ()`: a value set with no values.
    #[error("empty value set for key {key:?}")]
    EmptyValueSet {
        /// The requirement's key.
        key: String,
    },
    /// A value list whose `(` is never closed.
    #[error("unclosed parenthesis in the value list for key {key:?}")]
    UnclosedParenthesis {
        /// The requirement's key.
        key: String,
    },
    /// A token where none is allowed: after a value (`a=b c`), after a value list, after
    /// `!k`, an operator after `!` (`!a=b`), or a stray parenthesis.
    #[error("unexpected {token:?} at byte {position}")]
    UnexpectedToken {
        /// The token as written.
        token: String,
        /// Where the token starts.
        position: usize,
    },
    /// [`Requirement::new`] got a number of values its operator does not take.
    #[error("operator {:?} on key {key:?} takes {}, got {count}", operator.as_str(), operator.value_count_rule())]
    WrongValueCount {
        /// The requirement's key.
        key: String,
        /// The operator.
        operator: Operator,
        /// How many values were given.
        count: usize,
    },
}

/// Characters that start an operator in the equality forms (or an unknown operator).
const OPERATOR_CHARS: [char; 4] = ['=', '!', '<', '>'];

fn is_operator_char(c: char) -> bool {
    OPERATOR_CHARS.contains(&c)
}

fn is_special(c: char) -> bool {
    is_operator_char(c) || c == '(' || c == ')'
}

fn parse_selector(input: &str) -> Result<Selector, ParseErrorKind> {
    if input.trim().is_empty() {
        return Ok(Selector::everything());
    }
    let mut requirements = Vec::new();
    for (offset, piece) in split_requirements(input) {
        if piece.trim().is_empty() {
            return Err(ParseErrorKind::EmptyRequirement { position: offset });
        }
        requirements.push(parse_requirement(piece, offset)?);
    }
    Ok(Selector::from_requirements(requirements))
}

/// Splits `input` at commas outside parentheses, returning each piece with its byte offset.
/// An unclosed parenthesis makes the rest of the input one piece, which the requirement
/// parser then reports.
fn split_requirements(input: &str) -> Vec<(usize, &str)> {
    let mut pieces = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in input.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                pieces.push((start, &input[start..i]));
                start = i + 1;
            }
            _ => {}
        }
    }
    pieces.push((start, &input[start..]));
    pieces
}

/// Returns the whitespace-separated words of `text` with their byte offsets.
fn words(text: &str) -> Vec<(usize, &str)> {
    let mut words = Vec::new();
    let mut start = None;
    for (i, c) in text.char_indices() {
        match (c.is_whitespace(), start) {
            (true, Some(s)) => {
                words.push((s, &text[s..i]));
                start = None;
            }
            (false, None) => start = Some(i),
            _ => {}
        }
    }
    if let Some(s) = start {
        words.push((s, &text[s..]));
    }
    words
}

/// Returns the single word of `text` (`""` if it is blank); `base` is `text`'s offset in
/// the input, for the error on a second word.
fn single_word(text: &str, base: usize) -> Result<&str, ParseErrorKind> {
    let words = words(text);
    if let Some(&(at, token)) = words.get(1) {
        return Err(ParseErrorKind::UnexpectedToken {
            token: token.to_owned(),
            position: base + at,
        });
    }
    Ok(words.first().map_or("", |&(_, word)| word))
}

/// Returns the token starting at `text[at..]` that begins with a special character: a run of
/// operator characters, or a single parenthesis.
fn special_token(text: &str, at: usize) -> &str {
    let rest = &text[at..];
    if rest.starts_with(is_operator_char) {
        let end = rest.find(|c| !is_operator_char(c)).unwrap_or(rest.len());
        &rest[..end]
    } else {
        &rest[..1]
    }
}

/// Parses one non-blank requirement; `offset` is the piece's byte offset in the input.
fn parse_requirement(piece: &str, offset: usize) -> Result<Requirement, ParseErrorKind> {
    let base = offset + (piece.len() - piece.trim_start().len());
    let body = piece.trim();

    if let Some(rest) = body.strip_prefix('!') {
        if !rest.starts_with('=') {
            return parse_does_not_exist(rest, base + 1);
        }
    }

    match body.find(is_special) {
        Some(at) if body[at..].starts_with(is_operator_char) => {
            let operator_text = special_token(body, at);
            let operator = match operator_text {
                "=" => Operator::Equals,
                "==" => Operator::DoubleEquals,
                "!=" => Operator::NotEquals,
                _ => {
                    return Err(ParseErrorKind::UnknownOperator {
                        piece: operator_text.to_owned(),
                    })
                }
            };
            let value_at = at + operator_text.len();
            let value = single_word(&body[value_at..], base + value_at)?;
            let key = body[..at].trim();
            Requirement::build(key.to_owned(), operator, vec![value.to_owned()])
        }
        Some(at) if body[at..].starts_with('(') => parse_set_based(body, at, base),
        Some(at) => Err(ParseErrorKind::UnexpectedToken {
            token: special_token(body, at).to_owned(),
            position: base + at,
        }),
        None => parse_exists(body, base),
    }
}

/// Parses `!k`; `rest` is what follows the `!` and starts at byte `base` of the input.
fn parse_does_not_exist(rest: &str, base: usize) -> Result<Requirement, ParseErrorKind> {
    if let Some(at) = rest.find(is_special) {
        return Err(ParseErrorKind::UnexpectedToken {
            token: special_token(rest, at).to_owned(),
            position: base + at,
        });
    }
    let key = single_word(rest, base)?;
    Requirement::build(key.to_owned(), Operator::DoesNotExist, Vec::new())
}

/// Parses a requirement without special characters: `k`, or a set-based form missing its
/// value list.
fn parse_exists(body: &str, base: usize) -> Result<Requirement, ParseErrorKind> {
    let words = words(body);
    let operator_word = words
        .iter()
        .enumerate()
        .skip(1)
        .find(|(_, (_, word))| matches!(*word, "in" | "notin"));
    if let Some((_, &(at, _))) = operator_word {
        return Err(ParseErrorKind::MissingValues {
            key: body[..at].trim().to_owned(),
        });
    }
    let key = single_word(body, base)?;
    Requirement::build(key.to_owned(), Operator::Exists, Vec::new())
}

/// Parses `k in (a,b)` or `k notin (a,b)`; `open` is the index of `(` in `body`, which
/// starts at byte `base` of the input.
fn parse_set_based(body: &str, open: usize, base: usize) -> Result<Requirement, ParseErrorKind> {
    let head = words(&body[..open]);
    // `k (a)` lacks an operator; `in (a)` has one and an empty key, reported by validation.
    let (operator_at, operator_word) = match head.as_slice() {
        [.., last] if head.len() >= 2 || matches!(last.1, "in" | "notin") => *last,
        _ => {
            return Err(ParseErrorKind::UnexpectedToken {
                token: "(".to_owned(),
                position: base + open,
            })
        }
    };
    let operator = match operator_word {
        "in" => Operator::In,
        "notin" => Operator::NotIn,
        _ => {
            return Err(ParseErrorKind::UnknownOperator {
                piece: operator_word.to_owned(),
            })
        }
    };
    let key = body[..operator_at].trim().to_owned();

    let inner_at = open + 1;
    let Some(close) = body[inner_at..].find(')').map(|i| inner_at + i) else {
        return Err(ParseErrorKind::UnclosedParenthesis { key });
    };
    let after_at = close + 1;
    if let Some(&(at, token)) = words(&body[after_at..]).first() {
        return Err(ParseErrorKind::UnexpectedToken {
            token: token.to_owned(),
            position: base + after_at + at,
        });
    }

    let inner = &body[inner_at..close];
    if inner.trim().is_empty() {
        return Err(ParseErrorKind::EmptyValueSet { key });
    }
    let mut values = Vec::new();
    let mut element_at = inner_at;
    for element in inner.split(',') {
        values.push(single_word(element, base + element_at)?.to_owned());
        element_at += element.len() + 1;
    }
    Requirement::build(key, operator, values)
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn set(pairs: &[(&str, &str)]) -> Set {
        pairs.iter().copied().collect()
    }

    #[track_caller]
    fn check_parse(input: &str, expected_display: &str) {
        let selector: Selector = match input.parse() {
            Ok(selector) => selector,
            Err(err) => panic!("parsing {input:?} failed: {err}"),
        };
        assert_eq!(selector.to_string(), expected_display, "input {input:?}");
        let reparsed: Selector = expected_display.parse().unwrap();
        assert_eq!(reparsed, selector, "round trip of {input:?}");
    }

    #[track_caller]
    fn check_parse_error(input: &str, expected: ParseErrorKind) {
        match input.parse::<Selector>() {
            Ok(selector) => panic!("{input:?} parsed as {selector:?}, expected {expected:?}"),
            Err(err) => {
                assert_eq!(err.input, input);
                assert_eq!(err.kind, expected, "input {input:?}");
            }
        }
    }

    #[track_caller]
    fn check_matches(selector: &str, labels: &[(&str, &str)], expected: bool) {
        let parsed: Selector = selector.parse().unwrap();
        let labels = set(labels);
        assert_eq!(
            parsed.matches(&labels),
            expected,
            "selector {selector:?} on labels {labels}"
        );
    }

    fn invalid_key(key: &str, reason: &str) -> ParseErrorKind {
        ParseErrorKind::InvalidKey {
            key: key.to_owned(),
            reason: reason.to_owned(),
        }
    }

    fn invalid_value(key: &str, value: &str, reason: &str) -> ParseErrorKind {
        ParseErrorKind::InvalidValue {
            key: key.to_owned(),
            value: value.to_owned(),
            reason: reason.to_owned(),
        }
    }

    fn unexpected(token: &str, position: usize) -> ParseErrorKind {
        ParseErrorKind::UnexpectedToken {
            token: token.to_owned(),
            position,
        }
    }

    fn unknown_operator(piece: &str) -> ParseErrorKind {
        ParseErrorKind::UnknownOperator {
            piece: piece.to_owned(),
        }
    }

    #[test]
    fn parses_every_form() {
        check_parse("", "");
        check_parse(" \t\n ", "");
        check_parse("a=b", "a=b");
        check_parse("a==b", "a==b");
        check_parse("a!=b", "a!=b");
        check_parse("a=", "a=");
        check_parse("a==", "a==");
        check_parse("a!=", "a!=");
        check_parse("a in (x,y)", "a in (x,y)");
        check_parse("a in (y,x,y)", "a in (x,y)");
        check_parse("a notin (x)", "a notin (x)");
        check_parse("a", "a");
        check_parse("!a", "!a");
        check_parse("example.com/app=web-1", "example.com/app=web-1");
        check_parse("k8s.io/a.b_c-d", "k8s.io/a.b_c-d");
        check_parse("!k8s.io/x", "!k8s.io/x");
        // Keywords are ordinary keys and values outside the operator position.
        check_parse("in", "in");
        check_parse("in in (in,notin)", "in in (in,notin)");
        check_parse("notin notin (x)", "notin notin (x)");
        check_parse("!in", "!in");
        check_parse("in=notin", "in=notin");
    }

    #[test]
    fn tolerates_whitespace_around_every_token() {
        check_parse(" a = b , c in ( x , y ) ", "a=b,c in (x,y)");
        check_parse("a\t!=\tb", "a!=b");
        check_parse("a ==b", "a==b");
        check_parse("a = ", "a=");
        check_parse("! a", "!a");
        check_parse("  a  ", "a");
        check_parse("a in(x)", "a in (x)");
        check_parse("a notin  (x)", "a notin (x)");
        check_parse("a\nin\n(\nx\n)", "a in (x)");
    }

    #[test]
    fn keeps_requirements_in_canonical_order() {
        check_parse("b=1,a=2", "a=2,b=1");
        check_parse("a!=x,a=y,a==z", "a=y,a==z,a!=x");
        check_parse("!a,a,a notin (x),a in (x)", "a in (x),a notin (x),a,!a");
        check_parse("a=b,a=b", "a=b");
        check_parse("a in (y),a in (x)", "a in (x),a in (y)");
        assert_eq!(
            "x=1,y in (a,b),!z".parse::<Selector>().unwrap(),
            "!z , y in (b,a), x=1".parse::<Selector>().unwrap()
        );
    }

    #[test]
    fn rejects_malformed_selectors() {
        use ParseErrorKind::*;
        let key = |key: &str| key.to_owned();

        check_parse_error("a=b,,c=d", EmptyRequirement { position: 4 });
        check_parse_error("a=b,", EmptyRequirement { position: 4 });
        check_parse_error(",a=b", EmptyRequirement { position: 0 });
        check_parse_error("a=b, ,c", EmptyRequirement { position: 4 });

        check_parse_error("a in", MissingValues { key: key("a") });
        check_parse_error("a notin x", MissingValues { key: key("a") });
        check_parse_error("a in (x", UnclosedParenthesis { key: key("a") });
        check_parse_error("a in (x,b=c", UnclosedParenthesis { key: key("a") });
        check_parse_error("a in ()", EmptyValueSet { key: key("a") });
        check_parse_error("a notin ( )", EmptyValueSet { key: key("a") });

        check_parse_error("a<b", unknown_operator("<"));
        check_parse_error("a=>b", unknown_operator("=>"));
        check_parse_error("a>=b", unknown_operator(">="));
        check_parse_error("a===b", unknown_operator("==="));
        check_parse_error("a!b", unknown_operator("!"));
        check_parse_error("a foo (x)", unknown_operator("foo"));

        check_parse_error("!a=b", unexpected("=", 2));
        check_parse_error("!a!=b", unexpected("!=", 2));
        check_parse_error("!!a", unexpected("!", 1));
        check_parse_error("!a b", unexpected("b", 3));
        check_parse_error("a=b c", unexpected("c", 4));
        check_parse_error("x=1, a = b c", unexpected("c", 11));
        check_parse_error("a in (x) y", unexpected("y", 9));
        check_parse_error("a in (x y)", unexpected("y", 8));
        check_parse_error("a b", unexpected("b", 2));
        check_parse_error("(x)", unexpected("(", 0));
        check_parse_error("a (x)", unexpected("(", 2));
        check_parse_error("a)", unexpected(")", 1));

        let name_chars = format!("name part {REASON_NAME_CHARS}");
        check_parse_error("A B=c", invalid_key("A B", &name_chars));
        check_parse_error("-a=b", invalid_key("-a", &name_chars));
        check_parse_error("=b", invalid_key("", REASON_EMPTY));
        check_parse_error("!=b", invalid_key("", REASON_EMPTY));
        check_parse_error("!", invalid_key("", REASON_EMPTY));
        check_parse_error("in (x)", invalid_key("", REASON_EMPTY));
        check_parse_error(
            "Example.com/a",
            invalid_key(
                "Example.com/a",
                &format!("prefix part {REASON_SUBDOMAIN_CHARS}"),
            ),
        );

        check_parse_error("a=-b", invalid_value("a", "-b", REASON_VALUE_CHARS));
        check_parse_error("a=(b)", invalid_value("a", "(b)", REASON_VALUE_CHARS));
        check_parse_error("a in (x,-y)", invalid_value("a", "-y", REASON_VALUE_CHARS));
        check_parse_error("a in (x,)", invalid_value("a", "", REASON_EMPTY_IN_SET));
        check_parse_error("a in (,)", invalid_value("a", "", REASON_EMPTY_IN_SET));
        check_parse_error(
            &format!("a={}", "v".repeat(64)),
            invalid_value("a", &"v".repeat(64), "must be no more than 63 characters"),
        );
    }

    #[test]
    fn parse_errors_display_the_input_and_the_piece() {
        let cases = [
            (
                "a=b,,c",
                r#"invalid selector "a=b,,c": empty requirement at byte 4"#,
            ),
            (
                "A B=c",
                r#"invalid selector "A B=c": invalid key "A B": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"#,
            ),
            ("a<b", r#"invalid selector "a<b": unknown operator "<""#),
            (
                "a=b c",
                r#"invalid selector "a=b c": unexpected "c" at byte 4"#,
            ),
            (
                "a in ()",
                r#"invalid selector "a in ()": empty value set for key "a""#,
            ),
        ];
        for (input, expected) in cases {
            let err = input.parse::<Selector>().unwrap_err();
            assert_eq!(err.to_string(), expected);
        }
    }

    #[test]
    fn requirement_new_validates_its_parts() {
        use Operator::*;
        let ok = [
            Requirement::new("a", Equals, ["b"]),
            Requirement::new("a", NotEquals, [""]),
            Requirement::new("a", In, ["x", "y", "x"]),
            Requirement::new("a", Exists, Vec::<String>::new()),
            Requirement::new("a", DoesNotExist, Vec::<String>::new()),
        ];
        for requirement in ok {
            let requirement = requirement.unwrap();
            let selector = Selector::from_requirements(vec![requirement.clone()]);
            assert_eq!(selector.to_string().parse::<Selector>().unwrap(), selector);
        }

        let wrong_count = |operator, count| ParseErrorKind::WrongValueCount {
            key: "a".to_owned(),
            operator,
            count,
        };
        let cases = [
            (
                Requirement::new("a", Equals, Vec::<String>::new()),
                wrong_count(Equals, 0),
            ),
            (
                Requirement::new("a", DoubleEquals, ["x", "x"]),
                wrong_count(DoubleEquals, 2),
            ),
            (
                Requirement::new("a", In, Vec::<String>::new()),
                wrong_count(In, 0),
            ),
            (Requirement::new("a", Exists, ["x"]), wrong_count(Exists, 1)),
            (
                Requirement::new("a b", Exists, Vec::<String>::new()),
                invalid_key("a b", &format!("name part {REASON_NAME_CHARS}")),
            ),
            (
                Requirement::new("a", NotIn, ["x", ""]),
                invalid_value("a", "", REASON_EMPTY_IN_SET),
            ),
            (
                Requirement::new("a", Equals, ["x,y"]),
                invalid_value("a", "x,y", REASON_VALUE_CHARS),
            ),
        ];
        for (result, expected) in cases {
            assert_eq!(result.unwrap_err().kind, expected);
        }

        let err = Requirement::new("a", In, Vec::<String>::new()).unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"invalid selector "a in ()": operator "in" on key "a" takes at least one value, got 0"#
        );
    }

    #[test]
    fn matching_follows_2014_semantics() {
        // The empty selector matches everything.
        check_matches("", &[], true);
        check_matches("", &[("a", "b")], true);

        check_matches("a=b", &[("a", "b")], true);
        check_matches("a=b", &[("a", "c")], false);
        check_matches("a=b", &[], false);
        check_matches("a==b", &[("a", "b")], true);
        check_matches("a==b", &[("a", "c")], false);

        // 2014: a missing key reads as "", so `k=` matches an object without k.
        check_matches("a=", &[], true);
        check_matches("a=", &[("a", "")], true);
        check_matches("a=", &[("a", "b")], false);

        check_matches("a!=b", &[], true);
        check_matches("a!=b", &[("a", "b")], false);
        check_matches("a!=b", &[("a", "c")], true);
        check_matches("a!=", &[], false);
        check_matches("a!=", &[("a", "")], false);
        check_matches("a!=", &[("a", "x")], true);

        check_matches("a in (b,c)", &[("a", "c")], true);
        check_matches("a in (b,c)", &[("a", "d")], false);
        check_matches("a in (b,c)", &[], false);

        check_matches("a notin (b,c)", &[], true);
        check_matches("a notin (b,c)", &[("a", "b")], false);
        check_matches("a notin (b,c)", &[("a", "d")], true);

        check_matches("a", &[("a", "")], true);
        check_matches("a", &[("b", "x")], false);
        check_matches("!a", &[], true);
        check_matches("!a", &[("a", "x")], false);

        check_matches("a=b,c=d", &[("a", "b"), ("c", "d"), ("e", "f")], true);
        check_matches("a=b,c=d", &[("a", "b")], false);
        check_matches("a=b,a=c", &[("a", "b")], false);
        check_matches("a,!b,c notin (x)", &[("a", "1"), ("c", "y")], true);
    }

    #[test]
    fn requires_exact_match_reports_equality_requirements() {
        let cases = [
            ("a=b,c!=d", "a", Some("b")),
            ("a=b,c!=d", "c", None),
            ("a==b", "a", Some("b")),
            ("a in (b)", "a", None),
            ("a", "a", None),
            ("a=", "a", Some("")),
            ("x=1", "a", None),
            ("", "a", None),
        ];
        for (selector, key, expected) in cases {
            let selector: Selector = selector.parse().unwrap();
            assert_eq!(
                selector.requires_exact_match(key),
                expected,
                "{selector} on {key}"
            );
        }
    }

    #[test]
    fn everything_is_empty_and_displays_as_nothing() {
        let everything = Selector::everything();
        assert!(everything.is_empty());
        assert_eq!(everything.to_string(), "");
        assert_eq!(everything, Selector::default());
        assert_eq!(everything, Selector::from_requirements(Vec::new()));
        assert!(!"a".parse::<Selector>().unwrap().is_empty());
    }

    #[test]
    fn set_basics() {
        let mut labels = Set::new();
        assert!(labels.is_empty());
        assert_eq!(labels.insert("b", "2"), None);
        assert_eq!(labels.insert("a", ""), None);
        assert_eq!(labels.insert("b", "3"), Some("2".to_owned()));
        assert_eq!(labels.len(), 2);
        assert_eq!(labels.get("a"), Some(""));
        assert_eq!(labels.get("b"), Some("3"));
        assert_eq!(labels.get("c"), None);
        assert!(labels.has("a"));
        assert!(!labels.has("c"));
        let keys: Vec<&String> = labels.iter().map(|(key, _)| key).collect();
        assert_eq!(keys, ["a", "b"]);
        let map = BTreeMap::from([
            ("a".to_owned(), "".to_owned()),
            ("b".to_owned(), "3".to_owned()),
        ]);
        assert_eq!(labels.as_map(), &map);
        assert_eq!(Set::from(map), labels);
    }

    #[test]
    fn set_displays_sorted_pairs() {
        let cases = [
            (set(&[]), ""),
            (set(&[("a", "1")]), "a=1"),
            (set(&[("z", "1"), ("a", ""), ("m", "x")]), "a=,m=x,z=1"),
        ];
        for (labels, expected) in cases {
            assert_eq!(labels.to_string(), expected);
        }
    }

    #[test]
    fn set_as_selector_requires_every_pair() {
        let empty = Set::new().as_selector();
        assert!(empty.is_empty());
        assert_eq!(empty, Selector::everything());

        let labels = set(&[("b", "1"), ("a", "2")]);
        let selector = labels.as_selector();
        assert_eq!(selector.to_string(), "a=2,b=1");
        assert_eq!(selector, "b=1,a=2".parse().unwrap());
        assert!(selector.matches(&labels));
        assert!(!selector.matches(&set(&[("a", "2")])));
        assert_eq!(selector.requires_exact_match("a"), Some("2"));
    }

    #[test]
    fn set_serializes_as_a_json_object() {
        let labels = set(&[("name", "web"), ("app", "")]);
        let json = serde_json::to_string(&labels).unwrap();
        assert_eq!(json, r#"{"app":"","name":"web"}"#);
        assert_eq!(serde_json::from_str::<Set>(&json).unwrap(), labels);
        assert_eq!(serde_json::from_str::<Set>("{}").unwrap(), Set::new());
    }

    #[test]
    fn selector_serializes_as_its_string_form() {
        let selector: Selector = "b in (y,x), a=1".parse().unwrap();
        let json = serde_json::to_string(&selector).unwrap();
        assert_eq!(json, r#""a=1,b in (x,y)""#);
        assert_eq!(serde_json::from_str::<Selector>(&json).unwrap(), selector);
        assert_eq!(
            serde_json::from_str::<Selector>(r#""""#).unwrap(),
            Selector::everything()
        );
        let err = serde_json::from_str::<Selector>(r#""a<b""#).unwrap_err();
        assert!(err.to_string().contains("unknown operator"), "{err}");
    }

    #[test]
    fn validates_keys() {
        let name_chars = format!("name part {REASON_NAME_CHARS}");
        let prefix_chars = format!("prefix part {REASON_SUBDOMAIN_CHARS}");
        let long_prefix = format!("{}.com/a", vec!["a".repeat(63); 4].join("."));
        let cases: Vec<(String, Result<(), String>)> = vec![
            ("a".into(), Ok(())),
            ("A-b_c.D9".into(), Ok(())),
            ("9".into(), Ok(())),
            ("x".repeat(63), Ok(())),
            ("example.com/app".into(), Ok(())),
            ("k8s-io.x1/App_Name".into(), Ok(())),
            ("a/b".into(), Ok(())),
            ("".into(), Err(REASON_EMPTY.into())),
            (
                "x".repeat(64),
                Err("name part must be no more than 63 characters".into()),
            ),
            ("-a".into(), Err(name_chars.clone())),
            ("a-".into(), Err(name_chars.clone())),
            ("_a".into(), Err(name_chars.clone())),
            ("a.".into(), Err(name_chars.clone())),
            ("a b".into(), Err(name_chars.clone())),
            ("é".into(), Err(name_chars.clone())),
            ("a/".into(), Err(format!("name part {REASON_EMPTY}"))),
            ("/a".into(), Err(format!("prefix part {REASON_EMPTY}"))),
            ("a/b/c".into(), Err(REASON_TOO_MANY_SLASHES.into())),
            ("Example.com/a".into(), Err(prefix_chars.clone())),
            ("example..com/a".into(), Err(prefix_chars.clone())),
            ("-example.com/a".into(), Err(prefix_chars.clone())),
            ("example-.com/a".into(), Err(prefix_chars.clone())),
            ("exa_mple.com/a".into(), Err(prefix_chars.clone())),
            (
                long_prefix,
                Err("prefix part must be no more than 253 characters".into()),
            ),
        ];
        for (key, expected) in cases {
            assert_eq!(validate_key(&key), expected, "key {key:?}");
        }
    }

    #[test]
    fn validates_values() {
        let cases: Vec<(String, Result<(), String>)> = vec![
            ("".into(), Ok(())),
            ("a".into(), Ok(())),
            ("A.b-c_9".into(), Ok(())),
            ("v".repeat(63), Ok(())),
            (
                "v".repeat(64),
                Err("must be no more than 63 characters".into()),
            ),
            ("-a".into(), Err(REASON_VALUE_CHARS.into())),
            ("a_".into(), Err(REASON_VALUE_CHARS.into())),
            ("a/b".into(), Err(REASON_VALUE_CHARS.into())),
            ("a b".into(), Err(REASON_VALUE_CHARS.into())),
            ("a,b".into(), Err(REASON_VALUE_CHARS.into())),
        ];
        for (value, expected) in cases {
            assert_eq!(validate_value(&value), expected, "value {value:?}");
        }
    }

    #[test]
    fn validates_dns_subdomains() {
        let cases: Vec<(String, Result<(), String>)> = vec![
            ("a".into(), Ok(())),
            ("my-app.example.com".into(), Ok(())),
            ("0.1".into(), Ok(())),
            ("a".repeat(253), Ok(())),
            (
                "a".repeat(254),
                Err("must be no more than 253 characters".into()),
            ),
            ("".into(), Err(REASON_EMPTY.into())),
            ("A".into(), Err(REASON_SUBDOMAIN_CHARS.into())),
            ("a_b".into(), Err(REASON_SUBDOMAIN_CHARS.into())),
            (".a".into(), Err(REASON_SUBDOMAIN_CHARS.into())),
            ("a.".into(), Err(REASON_SUBDOMAIN_CHARS.into())),
            ("a-".into(), Err(REASON_SUBDOMAIN_CHARS.into())),
        ];
        for (name, expected) in cases {
            assert_eq!(validate_dns_subdomain(&name), expected, "name {name:?}");
        }
    }

    /// A short name-like string: `[A-Za-z0-9]([A-Za-z0-9._-]{0,4}[A-Za-z0-9])?`.
    fn name_strategy() -> impl Strategy<Value = String> {
        prop_oneof![
            4 => "[A-Za-z0-9]([A-Za-z0-9._-]{0,4}[A-Za-z0-9])?",
            1 => Just("in".to_owned()),
            1 => Just("notin".to_owned()),
        ]
    }

    fn key_strategy() -> impl Strategy<Value = String> {
        let prefix = proptest::option::weighted(
            0.3,
            "[a-z0-9]([a-z0-9-]{0,3}[a-z0-9])?(\\.[a-z0-9]{1,3}){0,2}",
        );
        (prefix, name_strategy()).prop_map(|(prefix, name)| match prefix {
            Some(prefix) => format!("{prefix}/{name}"),
            None => name,
        })
    }

    fn operator_strategy() -> impl Strategy<Value = Operator> {
        prop::sample::select(vec![
            Operator::Equals,
            Operator::DoubleEquals,
            Operator::NotEquals,
            Operator::In,
            Operator::NotIn,
            Operator::Exists,
            Operator::DoesNotExist,
        ])
    }

    /// Small pools of keys and values, shared by selectors and label sets so that matching
    /// is exercised on keys both have.
    fn pools() -> impl Strategy<Value = (Vec<String>, Vec<String>)> {
        (
            prop::collection::btree_set(key_strategy(), 1..4),
            prop::collection::btree_set(name_strategy(), 1..4),
        )
            .prop_map(|(keys, values)| (keys.into_iter().collect(), values.into_iter().collect()))
    }

    fn requirement_strategy(
        keys: Vec<String>,
        values: Vec<String>,
    ) -> impl Strategy<Value = Requirement> {
        let mut single_values = values.clone();
        single_values.push(String::new());
        let count = values.len();
        (
            prop::sample::select(keys),
            operator_strategy(),
            prop::sample::select(single_values),
            prop::sample::subsequence(values, 1..=count),
        )
            .prop_map(|(key, operator, single, subset)| {
                let values = match operator {
                    Operator::Equals | Operator::DoubleEquals | Operator::NotEquals => vec![single],
                    Operator::In | Operator::NotIn => subset,
                    Operator::Exists | Operator::DoesNotExist => Vec::new(),
                };
                Requirement::new(key, operator, values).unwrap()
            })
    }

    fn labels_strategy(keys: Vec<String>, values: Vec<String>) -> impl Strategy<Value = Set> {
        let mut any_value = values;
        any_value.push(String::new());
        prop::collection::vec(
            (prop::sample::select(keys), prop::sample::select(any_value)),
            0..4,
        )
        .prop_map(|pairs| pairs.into_iter().collect())
    }

    fn case_strategy() -> impl Strategy<Value = (Selector, Vec<Set>)> {
        pools().prop_flat_map(|(keys, values)| {
            (
                prop::collection::vec(requirement_strategy(keys.clone(), values.clone()), 0..5)
                    .prop_map(Selector::from_requirements),
                prop::collection::vec(labels_strategy(keys, values), 1..8),
            )
        })
    }

    /// Renders a requirement with extra whitespace around every token.
    fn spaced(requirement: &Requirement) -> String {
        let key = requirement.key();
        let values: Vec<&str> = requirement.values().iter().map(String::as_str).collect();
        match requirement.operator() {
            Operator::In | Operator::NotIn => format!(
                " {key}  {} ( {} ) ",
                requirement.operator(),
                values.join(" , ")
            ),
            Operator::Exists => format!(" {key} "),
            Operator::DoesNotExist => format!(" ! {key} "),
            operator => format!(" {key} {operator} {} ", values.join("")),
        }
    }

    proptest! {
        #[test]
        fn display_then_parse_round_trips((selector, label_sets) in case_strategy()) {
            let text = selector.to_string();
            let parsed: Selector = text.parse().map_err(|err| TestCaseError::fail(format!("{err}")))?;
            prop_assert_eq!(&parsed, &selector);
            prop_assert_eq!(parsed.to_string(), text);
            for labels in &label_sets {
                prop_assert_eq!(parsed.matches(labels), selector.matches(labels), "labels {}", labels);
            }

            let spaced_text: Vec<String> = selector.requirements().iter().map(spaced).collect();
            let spaced_text = spaced_text.join(",");
            let reparsed: Selector = spaced_text.parse().map_err(|err| TestCaseError::fail(format!("{err}")))?;
            prop_assert_eq!(reparsed, selector);
        }

        #[test]
        fn any_accepted_input_round_trips(
            input in prop_oneof![
                r"[a-c =!<>(),/.\t-]{0,16}",
                r"((in|notin|!|a|b|=|==|!=|\(|\)|,| )){0,10}",
                any::<String>(),
            ]
        ) {
            // Parsing never panics, and whatever parses displays as something that parses
            // back to the same selector.
            if let Ok(selector) = input.parse::<Selector>() {
                let text = selector.to_string();
                let reparsed: Selector = text.parse().map_err(|err| TestCaseError::fail(format!("{err}")))?;
                prop_assert_eq!(reparsed, selector);
            }
        }
    }
}
