//! Field selectors (`?fieldSelector=spec.nodeName=node-1,status.phase!=Failed`): parsing,
//! validation against what each served resource supports, and matching on served objects.
//!
//! Mirrors `staging/src/k8s.io/apimachinery/pkg/fields/selector.go` (`ParseSelector`,
//! `splitTerms`, `splitTerm`, `EscapeValue`, `UnescapeValue`, `RequiresExactMatch`), the
//! field-label conversion functions of `pkg/apis/core/v1/conversion.go` (Pod, Node,
//! ReplicationController, Event, Namespace, Service) and `runtime.Scheme`'s
//! `DefaultMetaV1FieldSelectorConversion` for kinds without one (Endpoints, and apps/v1
//! Deployment and ReplicaSet), and the selectable-fields functions
//! `pkg/registry/core/pod/strategy.go` `ToSelectableFields` (`PodToSelectableFields`),
//! `pkg/registry/core/event/strategy.go` `ToSelectableFields`,
//! `pkg/registry/core/node/strategy.go` `NodeToSelectableFields`,
//! `pkg/registry/core/namespace/strategy.go` `NamespaceToSelectableFields`,
//! `pkg/registry/core/replicationcontroller/strategy.go` `ControllerToSelectableFields`,
//! `pkg/registry/core/service/strategy.go` and `staging/src/k8s.io/apiserver/pkg/registry/
//! generic/matcher.go` `ObjectMetaFieldsSet`, all as of Kubernetes 1.32.
//!
//! The grammar is this file's; what each resource's selectors may name, and how each
//! field reads (its `GetAttrs`), is a [`SelectableFields`] static its row in
//! `resources::RESOURCES` points at.
//!
//! Invariants:
//! - a [`FieldSelector`] keeps its requirements sorted by field, operator and value,
//!   without duplicates, so selectors that mean the same compare equal whatever order they
//!   were written in, and for every parsed selector `parse(display) == selector`;
//! - values are held unescaped and written escaped ([`escape_value`]), so any string,
//!   commas, `=` and backslashes included, survives a round trip;
//! - the grammar is exactly `fields.ParseSelector`'s: no whitespace is trimmed (`a = b`
//!   is field `"a "` and value `" b"`), empty terms are skipped (`a=b,` is `a=b`), the
//!   first `!=`, `==` or `=` splits a term (field names take no escapes), terms are
//!   checked in sorted order so the error names the same term kube-apiserver's does;
//! - parsing accepts any field name (an empty one too, as Kubernetes does); which fields
//!   a resource supports is [`FieldSelector::validate`]'s business, with kube-apiserver's
//!   messages, which differ by kind (`field label not supported: x` for kinds with their
//!   own conversion function, `"x" is not a known field selector: only
//!   "metadata.name", "metadata.namespace"` for the others);
//! - matching reads a field's value as the selectable-fields functions produce it from
//!   the served (core/v1, apps/v1) object: a missing string is "", booleans are
//!   `true`/`false`, counts are decimal, and a field outside the resource's set reads
//!   as "" (`fields.Set.Get`).

use std::fmt;
use std::str::FromStr;

use serde_json::Value;

/// `=` (also written `==`) or `!=`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum FieldOperator {
    /// `=` or `==`: the field's value is the requirement's value.
    Equals,
    /// `!=`: the field's value is anything else.
    NotEquals,
}

impl FieldOperator {
    /// The operator as written back: `=` or `!=` (`==` is written `=`).
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            FieldOperator::Equals => "=",
            FieldOperator::NotEquals => "!=",
        }
    }
}

/// One `field op value` term of a selector; `value` is unescaped.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct FieldRequirement {
    /// The field label (`spec.nodeName`).
    pub field: String,
    /// `=` or `!=`.
    pub operator: FieldOperator,
    /// The literal value compared with the field's (unescaped).
    pub value: String,
}

impl FieldRequirement {
    fn matches_value(&self, actual: &str) -> bool {
        match self.operator {
            FieldOperator::Equals => actual == self.value,
            FieldOperator::NotEquals => actual != self.value,
        }
    }
}

impl fmt::Display for FieldRequirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}{}{}",
            self.field,
            self.operator.as_str(),
            escape_value(&self.value)
        )
    }
}

/// A parsed field selector: the AND of its requirements. The empty selector selects
/// everything.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct FieldSelector {
    requirements: Vec<FieldRequirement>,
}

/// Why a field selector was refused: kube-apiserver answers each with 400 BadRequest and
/// this Display as the Status message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum FieldSelectorError {
    /// A term with no `=`, `==` or `!=` (`a`, or `c` in `a=b,,c`).
    UnparsableTerm {
        /// The whole selector as given.
        selector: String,
        /// The term that has no operator.
        term: String,
    },
    /// A backslash not followed by `\`, `,` or `=` (or ending the value).
    InvalidEscapeSequence {
        /// The sequence, `\x`, or `\` alone at the end.
        sequence: String,
    },
    /// A `,` or `=` in a value without its backslash (`a=b=c`).
    UnescapedCharacter {
        /// The character.
        character: char,
    },
    /// The resource does not support selecting on `field`.
    UnsupportedField {
        /// The resource asked (`pods`).
        resource: String,
        /// The field refused.
        field: String,
        /// Which kube-apiserver message the resource's kind gives.
        rejection: Rejection,
    },
}

/// Which message kube-apiserver gives for an unsupported field: kinds with their own
/// field-label conversion function say one thing, the rest another.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Rejection {
    /// `field label not supported: <field>` (Pod, Node, ReplicationController, Event,
    /// Namespace, Service).
    FieldLabelNotSupported,
    /// `"<field>" is not a known field selector: only "metadata.name",
    /// "metadata.namespace"` (`DefaultMetaV1FieldSelectorConversion`: Endpoints,
    /// Deployment, ReplicaSet).
    NotAKnownFieldSelector,
}

impl fmt::Display for FieldSelectorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FieldSelectorError::UnparsableTerm { selector, term } => {
                write!(f, "invalid selector: '{selector}'; can't understand '{term}'")
            }
            FieldSelectorError::InvalidEscapeSequence { sequence } => {
                write!(f, "invalid field selector: invalid escape sequence: {sequence}")
            }
            // Go formats the rune with %v, which prints its code point (61 for `=`).
            FieldSelectorError::UnescapedCharacter { character } => write!(
                f,
                "invalid field selector: unescaped character in value: {}",
                u32::from(*character)
            ),
            FieldSelectorError::UnsupportedField {
                field, rejection, ..
            } => match rejection {
                Rejection::FieldLabelNotSupported => {
                    write!(f, "field label not supported: {field}")
                }
                Rejection::NotAKnownFieldSelector => write!(
                    f,
                    "{} is not a known field selector: only \"metadata.name\", \"metadata.namespace\"",
                    go_quote(field)
                ),
            },
        }
    }
}

impl std::error::Error for FieldSelectorError {}

impl FieldSelector {
    /// The selector that selects everything (what an empty `fieldSelector` means).
    pub(crate) fn everything() -> FieldSelector {
        FieldSelector::default()
    }

    /// Parses `fieldSelector` as `fields.ParseSelector` does: comma-separated
    /// `field=value`, `field==value` or `field!=value` terms, values escaped with `\`
    /// (`\,`, `\=`, `\\`). The empty string (and a string of commas) is everything.
    pub(crate) fn parse(selector: &str) -> Result<FieldSelector, FieldSelectorError> {
        let mut terms = split_terms(selector);
        terms.sort_unstable();
        let mut requirements = Vec::with_capacity(terms.len());
        for term in terms.into_iter().filter(|term| !term.is_empty()) {
            let Some((field, operator, raw_value)) = split_term(term) else {
                return Err(FieldSelectorError::UnparsableTerm {
                    selector: selector.to_string(),
                    term: term.to_string(),
                });
            };
            requirements.push(FieldRequirement {
                field: field.to_string(),
                operator,
                value: unescape_value(raw_value)?,
            });
        }
        Ok(FieldSelector::from_requirements(requirements))
    }

    /// The selector of exactly `requirements` (sorted and deduplicated).
    pub(crate) fn from_requirements(mut requirements: Vec<FieldRequirement>) -> FieldSelector {
        requirements.sort();
        requirements.dedup();
        FieldSelector { requirements }
    }

    /// Its requirements, sorted by field, operator and value.
    pub(crate) fn requirements(&self) -> &[FieldRequirement] {
        &self.requirements
    }

    /// Whether it selects everything.
    pub(crate) fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// Checks every field against what `resource` (a served plural, `pods`) supports
    /// (`selectable`, its row's), as kube-apiserver's field-label conversion does before a
    /// list or watch; the error's Display is kube-apiserver's message for the first
    /// unsupported field.
    pub(crate) fn validate(
        &self,
        resource: &str,
        selectable: &SelectableFields,
    ) -> Result<(), FieldSelectorError> {
        self.convert(resource, selectable).map(drop)
    }

    /// The selector as kube-apiserver's conversion leaves it for `resource`: validated
    /// ([`FieldSelector::validate`]) and with legacy aliases renamed (a pod's `spec.host`
    /// becomes `spec.nodeName`). Use this one for [`FieldSelector::requires_exact_match`].
    pub(crate) fn convert(
        &self,
        resource: &str,
        selectable: &SelectableFields,
    ) -> Result<FieldSelector, FieldSelectorError> {
        let mut converted = Vec::with_capacity(self.requirements.len());
        for requirement in &self.requirements {
            let Some(field) = selectable.canonical(&requirement.field) else {
                return Err(FieldSelectorError::UnsupportedField {
                    resource: resource.to_string(),
                    field: requirement.field.clone(),
                    rejection: selectable.rejection,
                });
            };
            converted.push(FieldRequirement {
                field: field.to_string(),
                operator: requirement.operator,
                value: requirement.value.clone(),
            });
        }
        Ok(FieldSelector::from_requirements(converted))
    }

    /// Whether `object`, a served object (core/v1 or apps/v1 JSON) of the resource whose
    /// fields are `selectable`, meets every requirement, reading each field as
    /// [`SelectableFields::value`] does. Meant for a selector that passed
    /// [`FieldSelector::validate`]: an unsupported field reads as "".
    pub(crate) fn matches(&self, selectable: &SelectableFields, object: &Value) -> bool {
        self.requirements.iter().all(|requirement| {
            requirement.matches_value(&selectable.value(&requirement.field, object))
        })
    }

    /// The value `field` must equal for the selector to match, if one of its
    /// requirements is `field=value` (`metadata.name=web` for a watch of one object,
    /// `spec.nodeName=n` for an indexed list). `!=` requirements never count.
    pub(crate) fn requires_exact_match(&self, field: &str) -> Option<&str> {
        self.requirements
            .iter()
            .find(|r| r.operator == FieldOperator::Equals && r.field == field)
            .map(|r| r.value.as_str())
    }
}

impl FromStr for FieldSelector {
    type Err = FieldSelectorError;

    fn from_str(selector: &str) -> Result<FieldSelector, FieldSelectorError> {
        FieldSelector::parse(selector)
    }
}

impl fmt::Display for FieldSelector {
    /// The requirements joined by `,`, values escaped: parses back to an equal selector.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, requirement) in self.requirements.iter().enumerate() {
            if index > 0 {
                f.write_str(",")?;
            }
            write!(f, "{requirement}")?;
        }
        Ok(())
    }
}

/// Splits at commas not escaped by a backslash; escapes stay in the terms.
fn split_terms(selector: &str) -> Vec<&str> {
    if selector.is_empty() {
        return Vec::new();
    }
    let mut terms = Vec::new();
    let mut start = 0;
    let mut after_backslash = false;
    for (index, c) in selector.char_indices() {
        if after_backslash {
            after_backslash = false;
        } else if c == '\\' {
            after_backslash = true;
        } else if c == ',' {
            terms.push(&selector[start..index]);
            start = index + 1;
        }
    }
    terms.push(&selector[start..]);
    terms
}

/// Splits a term at the first `!=`, `==` or `=` (tried in that order at each position):
/// `(field, operator, raw value)`.
fn split_term(term: &str) -> Option<(&str, FieldOperator, &str)> {
    const OPERATORS: [(&str, FieldOperator); 3] = [
        ("!=", FieldOperator::NotEquals),
        ("==", FieldOperator::Equals),
        ("=", FieldOperator::Equals),
    ];
    term.char_indices().find_map(|(index, _)| {
        let rest = &term[index..];
        OPERATORS.iter().find_map(|(written, operator)| {
            rest.strip_prefix(written)
                .map(|value| (&term[..index], *operator, value))
        })
    })
}

/// Escapes a literal value for a field selector: `\` → `\\`, `,` → `\,`, `=` → `\=`
/// (`fields.EscapeValue`).
pub(crate) fn escape_value(value: &str) -> String {
    let mut escaped = String::with_capacity(value.len());
    for c in value.chars() {
        if matches!(c, '\\' | ',' | '=') {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    escaped
}

/// The literal value of an escaped field-selector value (`fields.UnescapeValue`): only
/// `\\`, `\,` and `\=` are escapes, and `,` and `=` must be escaped.
pub(crate) fn unescape_value(raw: &str) -> Result<String, FieldSelectorError> {
    let mut value = String::with_capacity(raw.len());
    let mut after_backslash = false;
    for c in raw.chars() {
        if after_backslash {
            if !matches!(c, '\\' | ',' | '=') {
                return Err(FieldSelectorError::InvalidEscapeSequence {
                    sequence: format!("\\{c}"),
                });
            }
            value.push(c);
            after_backslash = false;
            continue;
        }
        match c {
            '\\' => after_backslash = true,
            ',' | '=' => return Err(FieldSelectorError::UnescapedCharacter { character: c }),
            _ => value.push(c),
        }
    }
    if after_backslash {
        return Err(FieldSelectorError::InvalidEscapeSequence {
            sequence: "\\".to_string(),
        });
    }
    Ok(value)
}

/// What one resource's field selectors may name and what those fields read on its
/// objects: its field-label conversion function and its `GetAttrs` (the
/// selectable-fields function of its `strategy.go`). Each
/// [`Resource`](super::resources::Resource) row points at its own.
#[derive(Debug)]
pub(crate) struct SelectableFields {
    /// The fields accepted, as kube-apiserver 1.32 lists them: every namespaced resource
    /// `metadata.name` and `metadata.namespace`, cluster-scoped ones `metadata.name` only,
    /// plus the kind's own.
    pub fields: &'static [&'static str],
    /// Legacy names accepted and renamed: `(alias, field)`. Not listed in `fields`.
    pub aliases: &'static [(&'static str, &'static str)],
    /// The message an unsupported field gets.
    pub rejection: Rejection,
    /// The value of one of `fields` on a served object of the kind.
    pub read: fn(field: &str, object: &Value) -> String,
}

/// Selectable fields are statics; a set is equal only to itself.
impl PartialEq for SelectableFields {
    fn eq(&self, other: &SelectableFields) -> bool {
        std::ptr::eq(self, other)
    }
}

impl Eq for SelectableFields {}

impl SelectableFields {
    /// The field `label` stands for, if the resource accepts it.
    fn canonical<'a>(&self, label: &'a str) -> Option<&'a str> {
        if self.fields.contains(&label) {
            return Some(label);
        }
        self.aliases
            .iter()
            .find(|(alias, _)| *alias == label)
            .map(|(_, field)| *field)
    }

    /// The value of `field` on `object`, a served object of the resource, as
    /// kube-apiserver's selectable-fields function for the kind produces it from the
    /// internal object: strings as they are ("" when missing), booleans as
    /// `true`/`false`, counts in decimal (`0` when missing). A field outside the set
    /// (including a pod's `status.podIPs`, accepted but never populated by Kubernetes)
    /// reads as "".
    pub(crate) fn value(&self, field: &str, object: &Value) -> String {
        match self.canonical(field) {
            Some(field) => (self.read)(field, object),
            None => String::new(),
        }
    }
}

const POD_FIELDS: &[&str] = &[
    "metadata.name",
    "metadata.namespace",
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "spec.hostNetwork",
    "status.phase",
    "status.podIP",
    "status.podIPs",
    "status.nominatedNodeName",
];

const EVENT_FIELDS: &[&str] = &[
    "metadata.name",
    "metadata.namespace",
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
];

const METADATA_FIELDS: &[&str] = &["metadata.name", "metadata.namespace"];

/// A kind with a field-label conversion function of its own accepting `fields`.
const fn own(
    fields: &'static [&'static str],
    read: fn(&str, &Value) -> String,
) -> SelectableFields {
    SelectableFields {
        fields,
        aliases: &[],
        rejection: Rejection::FieldLabelNotSupported,
        read,
    }
}

/// Kinds without a conversion function of their own (Endpoints, Deployments,
/// ReplicaSets, and the documents): `metadata.name` and `metadata.namespace` only.
/// (ReplicaSet's selectable fields have status.replicas, but apps/v1 registers no
/// conversion, so 1.32 refuses it: kubernetes issue #135136.)
pub(crate) static METADATA: SelectableFields = SelectableFields {
    fields: METADATA_FIELDS,
    aliases: &[],
    rejection: Rejection::NotAKnownFieldSelector,
    read: metadata_value,
};

/// Pods: `PodToSelectableFields`; `spec.host` is accepted "for backwards compatibility
/// with old v1 clients which send spec.host".
pub(crate) static PODS: SelectableFields = SelectableFields {
    fields: POD_FIELDS,
    aliases: &[("spec.host", "spec.nodeName")],
    rejection: Rejection::FieldLabelNotSupported,
    read: pod_value,
};

/// Events: the event strategy's `ToSelectableFields`.
pub(crate) static EVENTS: SelectableFields = own(EVENT_FIELDS, event_value);

/// Nodes (cluster-scoped: no `metadata.namespace`): `NodeToSelectableFields`.
pub(crate) static NODES: SelectableFields = own(
    &["metadata.name", "spec.unschedulable"],
    |field, node| match field {
        "spec.unschedulable" => bool_at(node, &["spec", "unschedulable"]).to_string(),
        _ => metadata_value(field, node),
    },
);

/// Namespaces (cluster-scoped): `NamespaceToSelectableFields`.
pub(crate) static NAMESPACES: SelectableFields = own(
    &["metadata.name", "status.phase"],
    |field, namespace| match field {
        "status.phase" => string_at(namespace, &["status", "phase"]).to_string(),
        _ => metadata_value(field, namespace),
    },
);

/// Secrets: `SelectableFields` of the secret strategy.
pub(crate) static SECRETS: SelectableFields = own(
    &["metadata.name", "metadata.namespace", "type"],
    |field, secret| match field {
        "type" => string_at(secret, &["type"]).to_string(),
        _ => metadata_value(field, secret),
    },
);

/// ReplicationControllers: `ControllerToSelectableFields`.
pub(crate) static REPLICATION_CONTROLLERS: SelectableFields = own(
    &["metadata.name", "metadata.namespace", "status.replicas"],
    |field, rc| match field {
        "status.replicas" => match at(rc, &["status", "replicas"]) {
            Some(Value::Number(n)) if n.is_i64() || n.is_u64() => n.to_string(),
            _ => "0".to_string(),
        },
        _ => metadata_value(field, rc),
    },
);

/// Services: the service strategy's `SelectableFields`.
pub(crate) static SERVICES: SelectableFields = own(
    &[
        "metadata.name",
        "metadata.namespace",
        "spec.clusterIP",
        "spec.type",
    ],
    |field, service| match field {
        "spec.clusterIP" => string_at(service, &["spec", "clusterIP"]).to_string(),
        "spec.type" => string_at(service, &["spec", "type"]).to_string(),
        _ => metadata_value(field, service),
    },
);

/// `ObjectMetaFieldsSet`: `metadata.name` and `metadata.namespace`; "" for anything else.
fn metadata_value(field: &str, object: &Value) -> String {
    match field {
        "metadata.name" => string_at(object, &["metadata", "name"]).to_string(),
        "metadata.namespace" => string_at(object, &["metadata", "namespace"]).to_string(),
        _ => String::new(),
    }
}

/// A pod's fields: `spec.hostNetwork` as `true`/`false`, `status.podIP` from
/// `status.podIPs[0]` (else `status.podIP`), `spec.serviceAccountName` falling back to
/// the deprecated `spec.serviceAccount`.
fn pod_value(field: &str, pod: &Value) -> String {
    let text = |path: &[&str]| string_at(pod, path).to_string();
    match field {
        "spec.nodeName" => text(&["spec", "nodeName"]),
        "spec.restartPolicy" => text(&["spec", "restartPolicy"]),
        "spec.schedulerName" => text(&["spec", "schedulerName"]),
        "spec.serviceAccountName" => match string_at(pod, &["spec", "serviceAccountName"]) {
            "" => text(&["spec", "serviceAccount"]),
            name => name.to_string(),
        },
        "spec.hostNetwork" => bool_at(pod, &["spec", "hostNetwork"]).to_string(),
        "status.phase" => text(&["status", "phase"]),
        "status.podIP" => match at(pod, &["status", "podIPs"]).and_then(Value::as_array) {
            Some(ips) if !ips.is_empty() => string_at(&ips[0], &["ip"]).to_string(),
            _ => text(&["status", "podIP"]),
        },
        "status.nominatedNodeName" => text(&["status", "nominatedNodeName"]),
        _ => metadata_value(field, pod),
    }
}

/// An event's fields: `source` from `source.component` falling back to
/// `reportingComponent`.
fn event_value(field: &str, event: &Value) -> String {
    let text = |path: &[&str]| string_at(event, path).to_string();
    match field {
        "source" => match string_at(event, &["source", "component"]) {
            "" => text(&["reportingComponent"]),
            component => component.to_string(),
        },
        "reason" | "reportingComponent" | "type" => text(&[field]),
        _ => match field.strip_prefix("involvedObject.") {
            Some(field) => text(&["involvedObject", field]),
            None => metadata_value(field, event),
        },
    }
}

fn at<'a>(object: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(object, |value, key| value.get(*key))
}

fn string_at<'a>(object: &'a Value, path: &[&str]) -> &'a str {
    at(object, path).and_then(Value::as_str).unwrap_or("")
}

fn bool_at(object: &Value, path: &[&str]) -> bool {
    at(object, path).and_then(Value::as_bool).unwrap_or(false)
}

/// Quotes a string as Go's `%q` does for the strings a field label can hold.
fn go_quote(text: &str) -> String {
    let mut quoted = String::with_capacity(text.len() + 2);
    quoted.push('"');
    for c in text.chars() {
        match c {
            '"' => quoted.push_str("\\\""),
            '\\' => quoted.push_str("\\\\"),
            '\n' => quoted.push_str("\\n"),
            '\r' => quoted.push_str("\\r"),
            '\t' => quoted.push_str("\\t"),
            '\u{7}' => quoted.push_str("\\a"),
            '\u{8}' => quoted.push_str("\\b"),
            '\u{b}' => quoted.push_str("\\v"),
            '\u{c}' => quoted.push_str("\\f"),
            c if c < ' ' || c == '\u{7f}' => quoted.push_str(&format!("\\x{:02x}", u32::from(c))),
            c => quoted.push(c),
        }
    }
    quoted.push('"');
    quoted
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// The selectable fields of the served resource `plural`.
    fn selectable(plural: &str) -> &'static SelectableFields {
        super::super::resources::find_by_name(plural)
            .filter(|resource| resource.plural == plural)
            .map(|resource| resource.fields)
            .unwrap_or_else(|| panic!("{plural} is not served"))
    }

    /// The fields `resource` (a served plural) can be selected on.
    fn supported_fields(plural: &str) -> &'static [&'static str] {
        selectable(plural).fields
    }

    fn requirement(field: &str, operator: FieldOperator, value: &str) -> FieldRequirement {
        FieldRequirement {
            field: field.to_string(),
            operator,
            value: value.to_string(),
        }
    }

    fn eq(field: &str, value: &str) -> FieldRequirement {
        requirement(field, FieldOperator::Equals, value)
    }

    fn ne(field: &str, value: &str) -> FieldRequirement {
        requirement(field, FieldOperator::NotEquals, value)
    }

    #[track_caller]
    fn check_parse(input: &str, expected: &[FieldRequirement], expected_display: &str) {
        let selector = match FieldSelector::parse(input) {
            Ok(selector) => selector,
            Err(err) => panic!("parsing {input:?} failed: {err}"),
        };
        assert_eq!(selector.requirements(), expected, "input {input:?}");
        assert_eq!(selector.to_string(), expected_display, "input {input:?}");
        let reparsed: FieldSelector = expected_display.parse().unwrap();
        assert_eq!(reparsed, selector, "round trip of {input:?}");
    }

    #[track_caller]
    fn check_parse_error(input: &str, expected: FieldSelectorError, message: &str) {
        match FieldSelector::parse(input) {
            Ok(selector) => panic!("{input:?} parsed as {selector:?}, expected {expected:?}"),
            Err(err) => {
                assert_eq!(err, expected, "input {input:?}");
                assert_eq!(err.to_string(), message, "input {input:?}");
            }
        }
    }

    #[track_caller]
    fn check_matches(resource: &str, selector: &str, object: &Value, expected: bool) {
        let parsed = FieldSelector::parse(selector).unwrap();
        parsed
            .validate(resource, selectable(resource))
            .unwrap_or_else(|err| panic!("{selector:?} on {resource}: {err}"));
        assert_eq!(
            parsed.matches(selectable(resource), object),
            expected,
            "{selector:?} on {resource} {object}"
        );
    }

    #[track_caller]
    fn check_unsupported(resource: &str, selector: &str, message: &str) {
        let parsed = FieldSelector::parse(selector).unwrap();
        match parsed.validate(resource, selectable(resource)) {
            Ok(()) => panic!("{selector:?} was accepted for {resource}"),
            Err(err) => assert_eq!(err.to_string(), message, "{selector:?} on {resource}"),
        }
    }

    #[test]
    fn selectors_parse_into_sorted_requirements() {
        use FieldOperator::*;
        let cases: &[(&str, &[FieldRequirement], &str)] = &[
            (
                "metadata.name=web",
                &[eq("metadata.name", "web")],
                "metadata.name=web",
            ),
            (
                "metadata.name==web",
                &[eq("metadata.name", "web")],
                "metadata.name=web",
            ),
            (
                "status.phase!=Failed",
                &[ne("status.phase", "Failed")],
                "status.phase!=Failed",
            ),
            (
                // kubectl describe node
                "spec.nodeName=node-1,status.phase!=Succeeded,status.phase!=Failed",
                &[
                    eq("spec.nodeName", "node-1"),
                    ne("status.phase", "Failed"),
                    ne("status.phase", "Succeeded"),
                ],
                "spec.nodeName=node-1,status.phase!=Failed,status.phase!=Succeeded",
            ),
            (
                // kubectl describe on a node's events: an empty value
                "involvedObject.name=node-1,involvedObject.namespace=,involvedObject.kind=Node",
                &[
                    eq("involvedObject.kind", "Node"),
                    eq("involvedObject.name", "node-1"),
                    eq("involvedObject.namespace", ""),
                ],
                "involvedObject.kind=Node,involvedObject.name=node-1,involvedObject.namespace=",
            ),
            ("a=b,a=b,a==b", &[eq("a", "b")], "a=b"),
            ("a=b,", &[eq("a", "b")], "a=b"),
            (",a=b,,", &[eq("a", "b")], "a=b"),
            ("a=", &[eq("a", "")], "a="),
            ("a!=", &[ne("a", "")], "a!="),
            // the value may start with an operator character
            ("a=!b", &[eq("a", "!b")], "a=!b"),
            // the first operator splits; the field takes no escapes
            ("a!b!=c", &[ne("a!b", "c")], "a!b!=c"),
            // Kubernetes accepts an empty field name; validation refuses it
            ("=b", &[eq("", "b")], "=b"),
            // no whitespace is trimmed
            (
                "metadata.name = web",
                &[eq("metadata.name ", " web")],
                "metadata.name = web",
            ),
            (" a=b", &[eq(" a", "b")], " a=b"),
        ];
        for (input, expected, display) in cases {
            check_parse(input, expected, display);
        }
        assert_eq!(ne("a", "b").operator, NotEquals);
    }

    #[test]
    fn empty_selectors_select_everything() {
        for input in ["", ",", ",,,"] {
            let selector = FieldSelector::parse(input).unwrap();
            assert!(selector.is_empty(), "{input:?}");
            assert_eq!(selector, FieldSelector::everything());
            assert_eq!(selector.to_string(), "");
            assert!(selector.matches(selectable("pods"), &json!({})));
            assert_eq!(selector.validate("nodes", selectable("nodes")), Ok(()));
        }
    }

    #[test]
    fn escaped_values_parse_to_their_literals() {
        let cases: &[(&str, &[FieldRequirement], &str)] = &[
            (r"a=x\,y", &[eq("a", "x,y")], r"a=x\,y"),
            (r"a=x\=y", &[eq("a", "x=y")], r"a=x\=y"),
            (r"a=x\\y", &[eq("a", r"x\y")], r"a=x\\y"),
            (r"a=\\,b=c", &[eq("a", r"\"), eq("b", "c")], r"a=\\,b=c"),
            (
                r"a=\\\,,b=c",
                &[eq("a", r"\,"), eq("b", "c")],
                r"a=\\\,,b=c",
            ),
            (
                r"k=\,,k2=v2",
                &[eq("k", ","), eq("k2", "v2")],
                r"k=\,,k2=v2",
            ),
            (r"a!=\=\=", &[ne("a", "==")], r"a!=\=\="),
        ];
        for (input, expected, display) in cases {
            check_parse(input, expected, display);
        }
    }

    #[test]
    fn malformed_selectors_are_refused_with_kubernetes_messages() {
        check_parse_error(
            "a",
            FieldSelectorError::UnparsableTerm {
                selector: "a".into(),
                term: "a".into(),
            },
            "invalid selector: 'a'; can't understand 'a'",
        );
        check_parse_error(
            "a=b,,c",
            FieldSelectorError::UnparsableTerm {
                selector: "a=b,,c".into(),
                term: "c".into(),
            },
            "invalid selector: 'a=b,,c'; can't understand 'c'",
        );
        // terms are checked in sorted order, so the first bad one in that order is named
        check_parse_error(
            "z,a=b,m",
            FieldSelectorError::UnparsableTerm {
                selector: "z,a=b,m".into(),
                term: "m".into(),
            },
            "invalid selector: 'z,a=b,m'; can't understand 'm'",
        );
        check_parse_error(
            "a=b=c",
            FieldSelectorError::UnescapedCharacter { character: '=' },
            "invalid field selector: unescaped character in value: 61",
        );
        check_parse_error(
            "a===b",
            FieldSelectorError::UnescapedCharacter { character: '=' },
            "invalid field selector: unescaped character in value: 61",
        );
        check_parse_error(
            r"a=x\y",
            FieldSelectorError::InvalidEscapeSequence {
                sequence: r"\y".into(),
            },
            r"invalid field selector: invalid escape sequence: \y",
        );
        check_parse_error(
            r"a=x\",
            FieldSelectorError::InvalidEscapeSequence {
                sequence: r"\".into(),
            },
            r"invalid field selector: invalid escape sequence: \",
        );
        // an escaped `=` in the field part does not hide the operator after it
        check_parse_error(
            r"a\=b=c",
            FieldSelectorError::UnescapedCharacter { character: '=' },
            "invalid field selector: unescaped character in value: 61",
        );
    }

    #[test]
    fn display_round_trips_any_value() {
        let values = [
            "",
            "plain",
            ",",
            "=",
            r"\",
            r"a\,b=c,,\\",
            "spaces are kept ",
            "ünïcödé,=",
        ];
        for value in values {
            for operator in [FieldOperator::Equals, FieldOperator::NotEquals] {
                let selector = FieldSelector::from_requirements(vec![
                    requirement("metadata.name", operator, value),
                    eq("spec.nodeName", value),
                ]);
                let written = selector.to_string();
                let reparsed = FieldSelector::parse(&written)
                    .unwrap_or_else(|err| panic!("{written:?}: {err}"));
                assert_eq!(reparsed, selector, "{written:?}");
            }
        }
        assert_eq!(escape_value(r"a\b,c=d"), r"a\\b\,c\=d");
        assert_eq!(unescape_value(r"a\\b\,c\=d").unwrap(), r"a\b,c=d");
    }

    #[test]
    fn requirement_order_does_not_change_the_selector() {
        let a = FieldSelector::parse("status.phase!=Failed,spec.nodeName=n1").unwrap();
        let b = FieldSelector::parse("spec.nodeName==n1,status.phase!=Failed").unwrap();
        assert_eq!(a, b);
        assert_eq!(a.to_string(), "spec.nodeName=n1,status.phase!=Failed");
    }

    #[test]
    fn exact_matches_come_from_equality_requirements_only() {
        let selector: FieldSelector = "metadata.name=web,status.phase!=Failed".parse().unwrap();
        assert_eq!(selector.requires_exact_match("metadata.name"), Some("web"));
        assert_eq!(selector.requires_exact_match("status.phase"), None);
        assert_eq!(selector.requires_exact_match("spec.nodeName"), None);
        let empty_value: FieldSelector = "spec.nodeName=".parse().unwrap();
        assert_eq!(empty_value.requires_exact_match("spec.nodeName"), Some(""));
        assert_eq!(
            FieldSelector::everything().requires_exact_match("metadata.name"),
            None
        );
        // after conversion a legacy alias counts under its new name
        let legacy: FieldSelector = "spec.host=node-1".parse().unwrap();
        let converted = legacy.convert("pods", selectable("pods")).unwrap();
        assert_eq!(converted.to_string(), "spec.nodeName=node-1");
        assert_eq!(
            converted.requires_exact_match("spec.nodeName"),
            Some("node-1")
        );
    }

    fn pod() -> Value {
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "frontend-hcfvf", "namespace": "default"},
            "spec": {
                "nodeName": "node-1",
                "restartPolicy": "Always",
                "schedulerName": "default-scheduler",
                "serviceAccountName": "builder",
                "hostNetwork": true,
            },
            "status": {
                "phase": "Running",
                "podIP": "10.244.0.13",
                "podIPs": [{"ip": "10.244.0.13"}, {"ip": "fd00::13"}],
                "nominatedNodeName": "node-2",
            },
        })
    }

    #[test]
    fn every_pod_field_matches_its_served_value() {
        let pod = pod();
        let cases = [
            ("metadata.name=frontend-hcfvf", true),
            ("metadata.name=other", false),
            ("metadata.namespace=default", true),
            ("metadata.namespace!=default", false),
            ("spec.nodeName=node-1", true),
            ("spec.nodeName=node-2", false),
            ("spec.host=node-1", true),
            ("spec.restartPolicy=Always", true),
            ("spec.schedulerName=default-scheduler", true),
            ("spec.serviceAccountName=builder", true),
            ("spec.hostNetwork=true", true),
            ("spec.hostNetwork=false", false),
            ("status.phase=Running", true),
            ("status.phase!=Running", false),
            ("status.podIP=10.244.0.13", true),
            ("status.podIP=fd00::13", false),
            // accepted, but Kubernetes never fills it in: it reads as ""
            ("status.podIPs=10.244.0.13", false),
            ("status.podIPs=", true),
            ("status.nominatedNodeName=node-2", true),
            (
                "spec.nodeName=node-1,status.phase!=Succeeded,status.phase!=Failed",
                true,
            ),
            ("spec.nodeName=node-1,status.phase=Pending", false),
        ];
        for (selector, expected) in cases {
            check_matches("pods", selector, &pod, expected);
        }
    }

    #[test]
    fn missing_pod_fields_read_as_kubernetes_defaults() {
        let bare = json!({"metadata": {"name": "p", "namespace": "ns"}, "spec": {}, "status": {}});
        let cases = [
            ("spec.nodeName=", true),
            ("spec.restartPolicy=", true),
            ("spec.schedulerName=", true),
            ("spec.serviceAccountName=", true),
            ("spec.hostNetwork=false", true),
            ("status.phase=", true),
            ("status.podIP=", true),
            ("status.nominatedNodeName=", true),
        ];
        for (selector, expected) in cases {
            check_matches("pods", selector, &bare, expected);
        }
        // podIP without podIPs, and the deprecated serviceAccount alias
        let legacy = json!({
            "metadata": {"name": "p"},
            "spec": {"serviceAccount": "old-style"},
            "status": {"podIP": "10.0.0.9", "podIPs": []},
        });
        check_matches("pods", "status.podIP=10.0.0.9", &legacy, true);
        check_matches("pods", "spec.serviceAccountName=old-style", &legacy, true);
        check_matches("pods", "metadata.namespace=", &legacy, true);
    }

    #[test]
    fn every_event_field_matches_its_served_value() {
        let event = json!({
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": "web.17f0", "namespace": "default"},
            "involvedObject": {
                "kind": "Deployment",
                "namespace": "default",
                "name": "web",
                "uid": "37177d16-6fac-496b-aed2-d4d31a1d7f48",
                "apiVersion": "apps/v1",
                "resourceVersion": "144",
                "fieldPath": "spec.template",
            },
            "reason": "ScalingReplicaSet",
            "source": {"component": "deployment-controller"},
            "reportingComponent": "kcm-deployment",
            "type": "Normal",
        });
        let cases = [
            ("metadata.name=web.17f0", true),
            ("metadata.namespace=default", true),
            ("involvedObject.kind=Deployment", true),
            ("involvedObject.namespace=default", true),
            ("involvedObject.name=web", true),
            ("involvedObject.uid=37177d16-6fac-496b-aed2-d4d31a1d7f48", true),
            ("involvedObject.apiVersion=apps/v1", true),
            ("involvedObject.resourceVersion=144", true),
            ("involvedObject.fieldPath=spec.template", true),
            ("reason=ScalingReplicaSet", true),
            ("reportingComponent=kcm-deployment", true),
            ("source=deployment-controller", true),
            ("source=kcm-deployment", false),
            ("type=Normal", true),
            ("type=Warning", false),
            // kubectl describe deployment
            (
                "involvedObject.name=web,involvedObject.namespace=default,involvedObject.kind=Deployment,involvedObject.uid=37177d16-6fac-496b-aed2-d4d31a1d7f48",
                true,
            ),
            ("involvedObject.name=web,involvedObject.kind=Pod", false),
        ];
        for (selector, expected) in cases {
            check_matches("events", selector, &event, expected);
        }
        // source falls back to reportingComponent when source.component is empty
        let new_style = json!({"metadata": {"name": "e"}, "reportingComponent": "kubelet"});
        check_matches("events", "source=kubelet", &new_style, true);
        check_matches("events", "involvedObject.namespace=", &new_style, true);
    }

    #[test]
    fn every_node_field_matches_its_served_value() {
        let cordoned = json!({"metadata": {"name": "node-1"}, "spec": {"unschedulable": true}});
        let schedulable = json!({"metadata": {"name": "node-2"}, "spec": {}});
        let cases = [
            ("metadata.name=node-1", &cordoned, true),
            ("metadata.name=node-1", &schedulable, false),
            ("spec.unschedulable=true", &cordoned, true),
            ("spec.unschedulable=false", &cordoned, false),
            ("spec.unschedulable=false", &schedulable, true),
            ("spec.unschedulable!=true", &schedulable, true),
        ];
        for (selector, object, expected) in cases {
            check_matches("nodes", selector, object, expected);
        }
    }

    #[test]
    fn other_kinds_match_their_own_fields() {
        let rc = json!({"metadata": {"name": "frontend", "namespace": "default"},
                        "status": {"replicas": 2}});
        check_matches("replicationcontrollers", "status.replicas=2", &rc, true);
        check_matches("replicationcontrollers", "status.replicas!=2", &rc, false);
        let new_rc = json!({"metadata": {"name": "new"}, "status": {}});
        check_matches("replicationcontrollers", "status.replicas=0", &new_rc, true);

        let namespace = json!({"metadata": {"name": "default"}, "status": {"phase": "Active"}});
        check_matches("namespaces", "status.phase=Active", &namespace, true);
        check_matches("namespaces", "metadata.name=kube-system", &namespace, false);

        let service = json!({"metadata": {"name": "web", "namespace": "default"},
                             "spec": {"clusterIP": "10.96.215.222", "type": "ClusterIP"}});
        check_matches("services", "spec.clusterIP=10.96.215.222", &service, true);
        check_matches("services", "spec.type=NodePort", &service, false);

        let deployment = json!({"metadata": {"name": "web", "namespace": "default"}});
        check_matches("deployments", "metadata.name=web", &deployment, true);
        check_matches(
            "deployments",
            "metadata.namespace=kube-system",
            &deployment,
            false,
        );
        check_matches("replicasets", "metadata.name=web", &deployment, true);
        check_matches("endpoints", "metadata.namespace=default", &deployment, true);
    }

    #[test]
    fn unsupported_fields_are_refused_with_kube_apiservers_message() {
        let cases = [
            (
                "pods",
                "status.hostIP=1.2.3.4",
                "field label not supported: status.hostIP",
            ),
            ("pods", "=b", "field label not supported: "),
            (
                "pods",
                "metadata.name = web",
                "field label not supported: metadata.name ",
            ),
            ("events", "message=x", "field label not supported: message"),
            (
                "nodes",
                "metadata.namespace=",
                "field label not supported: metadata.namespace",
            ),
            (
                "nodes",
                "spec.nodeName=x",
                "field label not supported: spec.nodeName",
            ),
            (
                "namespaces",
                "name=default",
                "field label not supported: name",
            ),
            (
                "replicationcontrollers",
                "spec.replicas=1",
                "field label not supported: spec.replicas",
            ),
            (
                "services",
                "spec.ports=80",
                "field label not supported: spec.ports",
            ),
            (
                "replicasets",
                "status.replicas=0",
                r#""status.replicas" is not a known field selector: only "metadata.name", "metadata.namespace""#,
            ),
            (
                "deployments",
                "spec.paused=true",
                r#""spec.paused" is not a known field selector: only "metadata.name", "metadata.namespace""#,
            ),
            (
                "endpoints",
                "subsets=x",
                r#""subsets" is not a known field selector: only "metadata.name", "metadata.namespace""#,
            ),
            (
                "deployments",
                "a\"b=x",
                r#""a\"b" is not a known field selector: only "metadata.name", "metadata.namespace""#,
            ),
        ];
        for (resource, selector, message) in cases {
            check_unsupported(resource, selector, message);
        }
        let err = FieldSelector::parse("metadata.name=web,status.hostIP=1.2.3.4")
            .unwrap()
            .validate("pods", selectable("pods"))
            .unwrap_err();
        assert_eq!(
            err,
            FieldSelectorError::UnsupportedField {
                resource: "pods".into(),
                field: "status.hostIP".into(),
                rejection: Rejection::FieldLabelNotSupported,
            }
        );
    }

    #[test]
    fn supported_fields_are_kube_apiservers_1_32_lists() {
        let metadata = ["metadata.name", "metadata.namespace"];
        let cases: &[(&str, &[&str])] = &[
            ("pods", POD_FIELDS),
            ("events", EVENT_FIELDS),
            ("nodes", &["metadata.name", "spec.unschedulable"]),
            ("namespaces", &["metadata.name", "status.phase"]),
            (
                "replicationcontrollers",
                &["metadata.name", "metadata.namespace", "status.replicas"],
            ),
            (
                "services",
                &[
                    "metadata.name",
                    "metadata.namespace",
                    "spec.clusterIP",
                    "spec.type",
                ],
            ),
            ("endpoints", &metadata),
            ("deployments", &metadata),
            ("replicasets", &metadata),
        ];
        for (resource, expected) in cases {
            assert_eq!(supported_fields(resource), *expected, "{resource}");
            for field in supported_fields(resource) {
                let selector = FieldSelector::from_requirements(vec![eq(field, "x")]);
                assert_eq!(
                    selector.validate(resource, selectable(resource)),
                    Ok(()),
                    "{resource} {field}"
                );
            }
        }
        assert!(POD_FIELDS.contains(&"spec.hostNetwork"));
        assert_eq!(EVENT_FIELDS.len(), 13);
    }

    #[test]
    fn every_served_resource_has_a_field_table() {
        for resource in super::super::resources::RESOURCES {
            let fields = supported_fields(resource.plural);
            assert!(fields.contains(&"metadata.name"), "{}", resource.plural);
            assert_eq!(
                fields.contains(&"metadata.namespace"),
                resource.namespaced,
                "{}",
                resource.plural
            );
        }
    }

    #[test]
    fn go_quoting_escapes_like_percent_q() {
        assert_eq!(go_quote("spec.x"), r#""spec.x""#);
        assert_eq!(go_quote("a\"b\\c"), r#""a\"b\\c""#);
        assert_eq!(go_quote("tab\there\n"), r#""tab\there\n""#);
        assert_eq!(go_quote("\u{1}"), r#""\x01""#);
        assert_eq!(go_quote("é"), "\"é\"");
    }
}
