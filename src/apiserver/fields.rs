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

use std::borrow::Cow;
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
    #[cfg(test)]
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
    #[cfg(test)]
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
    #[cfg(test)]
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
    #[cfg(test)]
    pub(crate) fn matches(&self, selectable: &SelectableFields, object: &Value) -> bool {
        self.requirements.iter().all(|requirement| {
            requirement.matches_value(&selectable.value(&requirement.field, object))
        })
    }

    /// [`FieldSelector::matches`] of an object known by its namespace and name (a watch
    /// cache item's key), which `object` decodes only when a requirement reads another
    /// field. A watch of one object (`metadata.name=web`, what `kubectl get pod web -w`
    /// and a kubelet's watch of its own Node send) then compares a name per event
    /// instead of decoding every object of the resource.
    pub(crate) fn matches_named(
        &self,
        selectable: &SelectableFields,
        namespace: &str,
        name: &str,
        object: impl FnOnce() -> Value,
    ) -> bool {
        let mut object = Some(object);
        let mut decoded = None;
        self.requirements.iter().all(|requirement| {
            let actual = match selectable.canonical(&requirement.field) {
                Some("metadata.name") => Cow::Borrowed(name),
                Some("metadata.namespace") => Cow::Borrowed(namespace),
                _ => {
                    let object = decoded
                        .get_or_insert_with(|| (object.take().expect("decoded once, then kept"))());
                    Cow::Owned(selectable.value(&requirement.field, object))
                }
            };
            requirement.matches_value(&actual)
        })
    }

    /// The value `field` must equal for the selector to match, if one of its
    /// requirements is `field=value` (`metadata.name=web` for a watch of one object,
    /// `spec.nodeName=n` for an indexed list). `!=` requirements never count.
    #[cfg(test)]
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
pub(crate) const fn own(
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
pub(crate) fn metadata_value(field: &str, object: &Value) -> String {
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

/// The string at `path`; "" when it is missing or not a string.
pub(crate) fn string_at<'a>(object: &'a Value, path: &[&str]) -> &'a str {
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
mod tests;
