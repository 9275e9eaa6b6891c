//! Requirements and selectors (2014 `pkg/labels/selector.go`: `Selector`, `andTerm`,
//! `hasTerm`, `notHasTerm`; 2015's set-based `Requirement`).

use std::collections::BTreeSet;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::validation::REASON_EMPTY_IN_SET;
use super::{validate_key, validate_value, Labels};

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
    pub(super) fn value_count_rule(self) -> &'static str {
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
    pub(super) key: String,
    pub(super) operator: Operator,
    pub(super) values: BTreeSet<String>,
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
    pub(super) fn build(
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
    pub fn matches(&self, labels: &(impl Labels + ?Sized)) -> bool {
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
    pub fn matches(&self, labels: &(impl Labels + ?Sized)) -> bool {
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
    /// The key is not a valid label key (see [`validate_key`](super::validate_key)).
    #[error("invalid key {key:?}: {reason}")]
    InvalidKey {
        /// The key as written, trimmed.
        key: String,
        /// Why it is invalid.
        reason: String,
    },
    /// A value is not a valid label value (see [`validate_value`](super::validate_value)), or is empty inside a
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
