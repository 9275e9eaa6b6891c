//! Field paths and sets of them: what server-side apply records as a manager's fields in
//! `metadata.managedFields` (`fieldsType: FieldsV1`), and what its conflicts name.
//!
//! Mirrors structured-merge-diff's `fieldpath` package (`element.go`, `path.go`, `set.go`,
//! `serialize.go`, `serialize-pe.go`), which kube-apiserver's field manager uses; kcm's own
//! code, written from the rules below. The served schema's side (which paths an object
//! has, its lists' keys) is [`typed`].
//!
//! - A path is a list of [`PathElement`]s from the object's root: a field (`f:spec`), a
//!   list item by its key fields (`k:{"name":"web"}`), a set item by its value
//!   (`v:"example.com/hold"`), or an item of a list without keys by its index (`i:0`).
//! - A [`Set`] is a trie of paths. A path is a member when it was inserted, so a path can
//!   be a member and also lead to other members: FieldsV1 writes that node as
//!   `{".": {}, ...}`, a member leading nowhere as `{}`, and a node that is not a member
//!   as its children alone.
//! - Elements are ordered as structured-merge-diff orders them, so a set serializes as
//!   kube-apiserver serializes it: fields (by name) before keys before values before
//!   indexes; values numbers first (ints and floats compared as numbers), then strings,
//!   booleans, lists, maps and null.
//!
//! Invariants: every operation keeps a set normalised (no child set is empty), so two sets
//! with the same members are equal; serialization and parsing are inverses on every set
//! (a unit test round-trips them); parsing refuses what it cannot read with one message
//! naming the element.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::{Map, Value};

pub mod apply;
pub mod compare;
pub mod managed;
pub mod merge;
pub mod typed;

/// One step of a path.
#[derive(Clone, Debug)]
pub enum PathElement {
    /// A field of an object (`f:replicas`).
    Field(String),
    /// An item of a list keyed by fields (`k:{"containerPort":80,"protocol":"TCP"}`): its
    /// key fields and their values, sorted by name.
    Key(Vec<(String, Value)>),
    /// An item of a set by its value (`v:"example.com/hold"`).
    Value(Value),
    /// An item of a list without keys, by its index (`i:0`).
    Index(usize),
}

impl PathElement {
    /// A key element from its fields, in any order.
    pub fn key(mut fields: Vec<(String, Value)>) -> PathElement {
        fields.sort_by(|a, b| a.0.cmp(&b.0));
        PathElement::Key(fields)
    }

    /// The element as FieldsV1 spells it (`f:spec`, `k:{"name":"web"}`, `v:1`, `i:0`).
    pub fn serialize(&self) -> String {
        match self {
            PathElement::Field(name) => format!("f:{name}"),
            PathElement::Key(fields) => {
                let object: Map<String, Value> = fields.iter().cloned().collect();
                format!("k:{}", Value::Object(object))
            }
            PathElement::Value(value) => format!("v:{value}"),
            PathElement::Index(index) => format!("i:{index}"),
        }
    }

    /// The element of a FieldsV1 key.
    ///
    /// # Errors
    /// What is wrong with `text`, naming it.
    pub fn parse(text: &str) -> Result<PathElement, String> {
        let invalid = |why: &str| format!("invalid field path element {text:?}: {why}");
        let Some((kind, rest)) = text.split_once(':') else {
            return Err(invalid("no type prefix (f:, k:, v: or i:)"));
        };
        match kind {
            "f" => Ok(PathElement::Field(rest.to_string())),
            "k" => match serde_json::from_str(rest) {
                Ok(Value::Object(fields)) if !fields.is_empty() => {
                    Ok(PathElement::key(fields.into_iter().collect()))
                }
                _ => Err(invalid("a key must be a JSON object of one or more fields")),
            },
            "v" => serde_json::from_str(rest)
                .map(PathElement::Value)
                .map_err(|e| invalid(&format!("the value is not JSON: {e}"))),
            "i" => rest
                .parse()
                .map(PathElement::Index)
                .map_err(|_| invalid("the index is not a number")),
            _ => Err(invalid("unknown type prefix")),
        }
    }

    /// The order of the element's kind: fields, keys, values, indexes.
    fn rank(&self) -> u8 {
        match self {
            PathElement::Field(_) => 0,
            PathElement::Key(_) => 1,
            PathElement::Value(_) => 2,
            PathElement::Index(_) => 3,
        }
    }
}

impl Ord for PathElement {
    fn cmp(&self, other: &PathElement) -> Ordering {
        match (self, other) {
            (PathElement::Field(a), PathElement::Field(b)) => a.cmp(b),
            (PathElement::Key(a), PathElement::Key(b)) => {
                let fields = a
                    .iter()
                    .zip(b)
                    .map(|((an, av), (bn, bv))| an.cmp(bn).then_with(|| compare_values(av, bv)));
                fields
                    .fold(Ordering::Equal, Ordering::then)
                    .then(a.len().cmp(&b.len()))
            }
            (PathElement::Value(a), PathElement::Value(b)) => compare_values(a, b),
            (PathElement::Index(a), PathElement::Index(b)) => a.cmp(b),
            _ => self.rank().cmp(&other.rank()),
        }
    }
}

impl PartialOrd for PathElement {
    fn partial_cmp(&self, other: &PathElement) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Equal when ordered equal: `1` and `1.0` are one value, as in structured-merge-diff.
impl PartialEq for PathElement {
    fn eq(&self, other: &PathElement) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for PathElement {}

/// The total order of JSON values: numbers (compared as numbers), strings, booleans,
/// lists (item by item, then by length), maps (entry by entry in key order, then by size),
/// null.
pub fn compare_values(a: &Value, b: &Value) -> Ordering {
    fn rank(value: &Value) -> u8 {
        match value {
            Value::Number(_) => 0,
            Value::String(_) => 1,
            Value::Bool(_) => 2,
            Value::Array(_) => 3,
            Value::Object(_) => 4,
            Value::Null => 5,
        }
    }
    match (a, b) {
        (Value::Number(a), Value::Number(b)) => match (a.as_i64(), b.as_i64()) {
            (Some(a), Some(b)) => a.cmp(&b),
            _ => {
                let (a, b) = (a.as_f64().unwrap_or(0.0), b.as_f64().unwrap_or(0.0));
                a.total_cmp(&b)
            }
        },
        (Value::String(a), Value::String(b)) => a.cmp(b),
        (Value::Bool(a), Value::Bool(b)) => a.cmp(b),
        (Value::Array(a), Value::Array(b)) => a
            .iter()
            .zip(b)
            .map(|(a, b)| compare_values(a, b))
            .fold(Ordering::Equal, Ordering::then)
            .then(a.len().cmp(&b.len())),
        (Value::Object(a), Value::Object(b)) => {
            let mut a: Vec<_> = a.iter().collect();
            let mut b: Vec<_> = b.iter().collect();
            a.sort_by(|x, y| x.0.cmp(y.0));
            b.sort_by(|x, y| x.0.cmp(y.0));
            a.iter()
                .zip(&b)
                .map(|((an, av), (bn, bv))| an.cmp(bn).then_with(|| compare_values(av, bv)))
                .fold(Ordering::Equal, Ordering::then)
                .then(a.len().cmp(&b.len()))
        }
        _ => rank(a).cmp(&rank(b)),
    }
}

/// A path as conflicts and errors print it: `.spec.replicas`,
/// `.spec.containers[name="web"].image`, `.metadata.finalizers[="example.com/hold"]`,
/// `.spec.ports[containerPort=80,protocol="TCP"]`, `.items[0]`.
pub fn display(path: &[PathElement]) -> String {
    let mut text = String::new();
    for element in path {
        match element {
            PathElement::Field(name) => {
                text.push('.');
                text.push_str(name);
            }
            PathElement::Key(fields) => {
                let fields: Vec<String> = fields
                    .iter()
                    .map(|(name, value)| format!("{name}={value}"))
                    .collect();
                write!(text, "[{}]", fields.join(",")).expect("a String takes any write");
            }
            PathElement::Value(value) => {
                write!(text, "[={value}]").expect("a String takes any write");
            }
            PathElement::Index(index) => {
                write!(text, "[{index}]").expect("a String takes any write");
            }
        }
    }
    text
}

/// One node of a [`Set`]: whether the path to it is a member, and the paths below it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Node {
    member: bool,
    children: Set,
}

impl Node {
    fn is_empty(&self) -> bool {
        !self.member && self.children.is_empty()
    }
}

/// A set of paths (see the module's documentation).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Set {
    nodes: BTreeMap<PathElement, Node>,
}

impl Set {
    /// The empty set.
    pub fn new() -> Set {
        Set::default()
    }

    /// Whether the set has no member.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Adds `path` (the empty path, the object itself, is not a member of any set).
    pub fn insert(&mut self, path: &[PathElement]) {
        let Some((last, parents)) = path.split_last() else {
            return;
        };
        let mut set = self;
        for element in parents {
            // Cloned only for a node that is not there yet.
            if !set.nodes.contains_key(element) {
                set.nodes.insert(element.clone(), Node::default());
            }
            set = &mut set.nodes.get_mut(element).expect("just made").children;
        }
        match set.nodes.get_mut(last) {
            Some(node) => node.member = true,
            None => {
                let node = Node {
                    member: true,
                    children: Set::new(),
                };
                set.nodes.insert(last.clone(), node);
            }
        }
    }

    /// Whether `path` is a member.
    pub fn has(&self, path: &[PathElement]) -> bool {
        let Some((last, parents)) = path.split_last() else {
            return false;
        };
        let mut set = self;
        for element in parents {
            match set.nodes.get(element) {
                Some(node) => set = &node.children,
                None => return false,
            }
        }
        set.nodes.get(last).is_some_and(|node| node.member)
    }

    /// What the set holds at `element`, one step down: whether that path is a member, and
    /// the set of paths below it (relative to it).
    pub fn get(&self, element: &PathElement) -> Option<(bool, &Set)> {
        self.nodes
            .get(element)
            .map(|node| (node.member, &node.children))
    }

    /// Every member, in order (a path before the paths below it).
    pub fn paths(&self) -> Vec<Vec<PathElement>> {
        fn walk(set: &Set, prefix: &mut Vec<PathElement>, out: &mut Vec<Vec<PathElement>>) {
            for (element, node) in &set.nodes {
                prefix.push(element.clone());
                if node.member {
                    out.push(prefix.clone());
                }
                walk(&node.children, prefix, out);
                prefix.pop();
            }
        }
        let mut out = Vec::new();
        walk(self, &mut Vec::new(), &mut out);
        out
    }

    /// The paths in either set.
    pub fn union(&self, other: &Set) -> Set {
        self.clone().merged(other)
    }

    /// This set with `other`'s paths added (a union that reuses this set).
    pub fn merged(mut self, other: &Set) -> Set {
        self.merge(other);
        self
    }

    fn merge(&mut self, other: &Set) {
        for (element, node) in &other.nodes {
            match self.nodes.get_mut(element) {
                Some(mine) => {
                    mine.member |= node.member;
                    mine.children.merge(&node.children);
                }
                None => {
                    self.nodes.insert(element.clone(), node.clone());
                }
            }
        }
    }

    /// This set without `other`'s paths (a difference that reuses this set).
    pub fn without(mut self, other: &Set) -> Set {
        self.remove(other);
        self
    }

    fn remove(&mut self, other: &Set) {
        for (element, theirs) in &other.nodes {
            let Some(mine) = self.nodes.get_mut(element) else {
                continue;
            };
            mine.member &= !theirs.member;
            mine.children.remove(&theirs.children);
            if mine.is_empty() {
                self.nodes.remove(element);
            }
        }
    }

    /// The paths in both sets.
    pub fn intersection(&self, other: &Set) -> Set {
        let mut out = Set::new();
        for (element, node) in &self.nodes {
            let Some(theirs) = other.nodes.get(element) else {
                continue;
            };
            let both = Node {
                member: node.member && theirs.member,
                children: node.children.intersection(&theirs.children),
            };
            if !both.is_empty() {
                out.nodes.insert(element.clone(), both);
            }
        }
        out
    }

    /// The paths of this set that are not in `other`.
    pub fn difference(&self, other: &Set) -> Set {
        let mut out = Set::new();
        for (element, node) in &self.nodes {
            let rest = match other.nodes.get(element) {
                None => node.clone(),
                Some(theirs) => Node {
                    member: node.member && !theirs.member,
                    children: node.children.difference(&theirs.children),
                },
            };
            if !rest.is_empty() {
                out.nodes.insert(element.clone(), rest);
            }
        }
        out
    }

    /// What pruning an applier's earlier paths (this set) removes once `owned` (its new
    /// paths and every other manager's) is owned: structured-merge-diff's prune and then
    /// its add-back of what someone owns. A path nobody owns goes whole, but a field with
    /// something owned below it stays (only what nobody owns below it goes); a list item
    /// nobody owns goes whole even where another manager owns a field of it.
    pub fn to_prune(&self, owned: &Set) -> Set {
        let nothing = Set::new();
        let mut out = Set::new();
        for (element, node) in &self.nodes {
            let (owned_member, owned_below) = match owned.nodes.get(element) {
                Some(theirs) => (theirs.member, &theirs.children),
                None => (false, &nothing),
            };
            // A field leading to something owned stays; a list item does not.
            let leads_to_owned =
                matches!(element, PathElement::Field(_)) && !owned_below.is_empty();
            let whole = node.member && !owned_member && !leads_to_owned;
            let rest = if whole {
                Node {
                    member: true,
                    children: Set::new(),
                }
            } else {
                Node {
                    member: false,
                    children: node.children.to_prune(owned_below),
                }
            };
            if !rest.is_empty() {
                out.nodes.insert(element.clone(), rest);
            }
        }
        out
    }

    /// The set as `metadata.managedFields[].fieldsV1` holds it.
    pub fn to_fields_v1(&self) -> Value {
        Value::Object(self.fields_v1_entries(false))
    }

    fn fields_v1_entries(&self, member: bool) -> Map<String, Value> {
        let mut object = Map::new();
        if member && !self.is_empty() {
            object.insert(".".to_string(), Value::Object(Map::new()));
        }
        for (element, node) in &self.nodes {
            let entries = node.children.fields_v1_entries(node.member);
            object.insert(element.serialize(), Value::Object(entries));
        }
        object
    }

    /// The set `fields` (a `fieldsV1` object) holds.
    ///
    /// # Errors
    /// What is wrong with it, naming the element.
    pub fn from_fields_v1(fields: &Value) -> Result<Set, String> {
        let Value::Object(entries) = fields else {
            return Err("fieldsV1 must be a JSON object".to_string());
        };
        let mut set = Set::new();
        for (key, value) in entries {
            if key == "." {
                continue;
            }
            let element = PathElement::parse(key)?;
            let Value::Object(below) = value else {
                return Err(format!(
                    "the value of field path element {key:?} must be an object"
                ));
            };
            let node = Node {
                member: below.is_empty() || below.contains_key("."),
                children: Set::from_fields_v1(value)?,
            };
            set.nodes.insert(element, node);
        }
        Ok(set)
    }
}

#[cfg(test)]
mod tests;

/// What the tests of the parts share: two times and a writer in apps/v1.
#[cfg(test)]
mod testing {
    use super::managed::Writer;

    pub const T1: &str = "2024-05-01T10:00:00Z";
    pub const T2: &str = "2024-05-01T10:05:00Z";

    /// `manager` writing through the main resource at `now`.
    pub fn writer<'a>(manager: &'a str, now: &'a str) -> Writer<'a> {
        Writer {
            manager,
            api_version: "apps/v1",
            subresource: "",
            now,
        }
    }
}
