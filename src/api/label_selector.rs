//! `LabelSelector`: the selector of the apps/v1 kinds, `{"matchLabels": {..},
//! "matchExpressions": [{"key", "operator", "values"}]}`, over kcm's [`labels::Selector`].
//!
//! Mirrors `metav1.LabelSelector` (`k8s.io/apimachinery/pkg/apis/meta/v1/types.go`),
//! `LabelSelectorAsSelector` and `ParseToLabelSelector` (`helpers.go`) and
//! `ValidateLabelSelector` (`validation/validation.go`); none of them existed in 2014.
//!
//! Invariants:
//! - a missing selector selects nothing and an empty one (`{}`) everything
//!   ([`label_selector_as_selector`]);
//! - a selector that passes [`validate_label_selector`] converts ([`LabelSelector::to_selector`]);
//! - converting to a [`Selector`] and back gives a selector that matches exactly the same
//!   label sets, whatever kcm's 2014 matching rules (a missing key reads as `""`) would
//!   otherwise make of `matchLabels` with an empty value.

use serde::{Deserialize, Serialize};

use super::meta::null_as_default;
use super::validation::validate_labels;
use super::{Extra, FieldError};
use crate::labels::{self, Operator, ParseSelectorError, Requirement, Selector, Set};

/// `metav1.LabelSelector`: `matchLabels` pairs and `matchExpressions`, all ANDed.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct LabelSelector {
    /// `key: value` pairs an object must carry exactly.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Set::is_empty"
    )]
    pub match_labels: Set,
    /// Set-based requirements.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub match_expressions: Vec<LabelSelectorRequirement>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// `metav1.LabelSelectorRequirement`: one element of `matchExpressions`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct LabelSelectorRequirement {
    #[serde(default)]
    pub key: String,
    pub operator: LabelSelectorOperator,
    /// At least one for `In` and `NotIn`, none for `Exists` and `DoesNotExist`.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub values: Vec<String>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// `metav1.LabelSelectorOperator`. Another string makes the document undecodable: a
/// selector kcm cannot read must not be acted on.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LabelSelectorOperator {
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

impl LabelSelectorOperator {
    fn as_operator(self) -> Operator {
        match self {
            LabelSelectorOperator::In => Operator::In,
            LabelSelectorOperator::NotIn => Operator::NotIn,
            LabelSelectorOperator::Exists => Operator::Exists,
            LabelSelectorOperator::DoesNotExist => Operator::DoesNotExist,
        }
    }

    fn takes_values(self) -> bool {
        matches!(
            self,
            LabelSelectorOperator::In | LabelSelectorOperator::NotIn
        )
    }
}

/// A [`Selector`] that no [`LabelSelector`] means exactly (see
/// [`LabelSelector::from_selector`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("selector requirement {requirement:?} has no LabelSelector form: {reason}")]
pub struct UnrepresentableSelector {
    /// The requirement, in selector syntax.
    pub requirement: String,
    /// Why no LabelSelector says the same.
    pub reason: &'static str,
}

impl LabelSelector {
    /// Whether the selector has no requirements (and so selects everything).
    pub fn is_empty(&self) -> bool {
        self.match_labels.is_empty() && self.match_expressions.is_empty()
    }

    /// The [`Selector`] this selector means (`metav1.LabelSelectorAsSelector` for a present
    /// selector): every `matchLabels` pair and every expression, ANDed; `{}` is
    /// [`Selector::everything()`].
    ///
    /// A `matchLabels` pair `k: ""` requires `k` to be present with the empty value, as in
    /// Kubernetes; since kcm's `k=` also matches an object without `k` (2014), it becomes
    /// the two requirements `k` and `k=`.
    ///
    /// # Errors
    /// A [`ParseSelectorError`] naming the first invalid key or value, or an operator with
    /// the wrong number of values.
    pub fn to_selector(&self) -> Result<Selector, ParseSelectorError> {
        let mut requirements = Vec::new();
        for (key, value) in &self.match_labels {
            if value.is_empty() {
                requirements.push(Requirement::new(key, Operator::Exists, [""; 0])?);
            }
            requirements.push(Requirement::new(key, Operator::Equals, [value])?);
        }
        for expression in &self.match_expressions {
            requirements.push(Requirement::new(
                &expression.key,
                expression.operator.as_operator(),
                &expression.values,
            )?);
        }
        Ok(Selector::from_requirements(requirements))
    }

    /// The selector that matches exactly the label sets `selector` matches
    /// (`metav1.ParseToLabelSelector`, with kcm's 2014 matching rules): `k=v` and `k==v`
    /// become `matchLabels` (a second one on the same key an `In`), `k!=v` a `NotIn`, the
    /// set-based forms the expression of the same name.
    ///
    /// # Errors
    /// [`UnrepresentableSelector`] for `k=` without a `k` requirement next to it (it also
    /// matches objects without `k`) and for `k!=` (`k` present with a non-empty value): no
    /// LabelSelector says either.
    pub fn from_selector(selector: &Selector) -> Result<LabelSelector, UnrepresentableSelector> {
        let has_exists = |key: &str| {
            selector
                .requirements()
                .iter()
                .any(|r| r.key() == key && r.operator() == Operator::Exists)
        };
        let is_empty_equality = |r: &Requirement| {
            matches!(r.operator(), Operator::Equals | Operator::DoubleEquals)
                && r.values().iter().all(String::is_empty)
        };
        let unrepresentable = |r: &Requirement, reason| UnrepresentableSelector {
            requirement: r.to_string(),
            reason,
        };
        let mut label_selector = LabelSelector::default();
        for requirement in selector.requirements() {
            let key = requirement.key();
            let values: Vec<String> = requirement.values().iter().cloned().collect();
            let (operator, values) = match requirement.operator() {
                Operator::Equals | Operator::DoubleEquals => {
                    let value = &values[0];
                    if value.is_empty() && !has_exists(key) {
                        return Err(unrepresentable(
                            requirement,
                            "it also matches objects without the key",
                        ));
                    }
                    if !label_selector.match_labels.has(key) {
                        label_selector.match_labels.insert(key, value);
                        continue;
                    }
                    if value.is_empty() {
                        return Err(unrepresentable(
                            requirement,
                            "a second value for the key that is empty",
                        ));
                    }
                    (LabelSelectorOperator::In, values)
                }
                Operator::NotEquals if values[0].is_empty() => {
                    return Err(unrepresentable(
                        requirement,
                        "no expression requires a non-empty value",
                    ))
                }
                Operator::NotEquals | Operator::NotIn => (LabelSelectorOperator::NotIn, values),
                Operator::In => (LabelSelectorOperator::In, values),
                // `k` next to `k=` is what `matchLabels: {k: ""}` means; it is implied.
                Operator::Exists
                    if selector
                        .requirements()
                        .iter()
                        .any(|r| r.key() == key && is_empty_equality(r)) =>
                {
                    continue
                }
                Operator::Exists => (LabelSelectorOperator::Exists, values),
                Operator::DoesNotExist => (LabelSelectorOperator::DoesNotExist, values),
            };
            label_selector
                .match_expressions
                .push(LabelSelectorRequirement {
                    key: key.to_string(),
                    operator,
                    values,
                    extra: Extra::new(),
                });
        }
        Ok(label_selector)
    }
}

/// `metav1.LabelSelectorAsSelector`: a missing selector (`None`) selects nothing, so it
/// gives `Ok(None)`; a present one gives [`LabelSelector::to_selector`].
///
/// # Errors
/// As [`LabelSelector::to_selector`].
pub fn label_selector_as_selector(
    selector: Option<&LabelSelector>,
) -> Result<Option<Selector>, ParseSelectorError> {
    selector.map(LabelSelector::to_selector).transpose()
}

/// Validates a selector at `field` (`ValidateLabelSelector`): valid `matchLabels`, valid
/// expression keys and values, and values for `In` and `NotIn` but not for `Exists` and
/// `DoesNotExist`. Stricter than Kubernetes in one point: an `In`/`NotIn` value may not be
/// empty (kcm's selector syntax has no `k in ("")`).
pub fn validate_label_selector(
    selector: &LabelSelector,
    field: &str,
    errors: &mut Vec<FieldError>,
) {
    validate_labels(
        &format!("{field}.matchLabels"),
        &selector.match_labels,
        errors,
    );
    for (i, expression) in selector.match_expressions.iter().enumerate() {
        let at = format!("{field}.matchExpressions[{i}]");
        if let Err(reason) = labels::validate_key(&expression.key) {
            errors.push(FieldError::new(
                format!("{at}.key"),
                format!("{:?} {reason}", expression.key),
            ));
        }
        match (
            expression.operator.takes_values(),
            expression.values.is_empty(),
        ) {
            (true, true) => errors.push(FieldError::new(
                format!("{at}.values"),
                "must be specified when `operator` is 'In' or 'NotIn'",
            )),
            (false, false) => errors.push(FieldError::new(
                format!("{at}.values"),
                "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            )),
            _ => {}
        }
        for (j, value) in expression.values.iter().enumerate() {
            let check = if value.is_empty() {
                Err("must not be empty".to_string())
            } else {
                labels::validate_value(value)
            };
            if let Err(reason) = check {
                errors.push(FieldError::new(
                    format!("{at}.values[{j}]"),
                    format!("{value:?} {reason}"),
                ));
            }
        }
    }
}
