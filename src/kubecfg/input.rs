//! The objects of `-f`, read item by item: [`Manifests`] keeps the input's text and where
//! each object is in it, and decodes an object only when asked, so `kcm create -f` and
//! `kcm apply -f` of a List of 60,000 pods hold the file and one object at a time, not
//! 60,000 decoded objects and their documents (issue 25: 333 MB for a 10.8 MB file).
//!
//! Every object is decoded and validated once when the input is read (nothing is
//! written if one is invalid), then again, one at a time, as it is written. A JSON
//! document is indexed without being decoded (its list's items are borrowed slices of
//! the text); a YAML document is decoded whole, and each of its objects kept as compact
//! JSON text.

use std::ops::Range;
use std::path::Path;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

use super::manifest::{
    parse_object, read_input, split_yaml, take_list_items, Manifest, Parsed, Source, SyntaxError,
};

/// The objects of an input, each decoded and validated once, kept as text.
pub(super) struct Manifests {
    sources: Vec<Source>,
    items: Vec<Item>,
    namespace: Option<String>,
    /// The ReplicationControllers, decoded (the overlap check needs them all at once).
    controllers: Vec<Manifest>,
}

/// Where one object is.
struct Item {
    /// The source it comes from.
    source: usize,
    /// `rc.yaml`, `all.yaml: document 2`, `stdin: items[1]`.
    origin: String,
    text: Text,
}

/// An object's JSON text.
enum Text {
    /// Bytes of its source's text (JSON input).
    Span(Range<usize>),
    /// Its own (YAML input, re-encoded as JSON).
    Owned(Box<str>),
}

/// What a JSON document is: a list, when it has an `items` array and no `kind` or one
/// ending in `List` (other fields are skipped unread).
#[derive(Deserialize)]
struct ListProbe<'t> {
    #[serde(default, borrow)]
    kind: Option<std::borrow::Cow<'t, str>>,
    #[serde(default, borrow)]
    items: Option<Vec<&'t RawValue>>,
}

impl Manifests {
    /// Reads `-f`'s input, decodes and validates every object (one at a time), and
    /// keeps where each is. Objects keep the input's order (files sorted by name).
    ///
    /// # Errors
    /// As [`read_input`]; text that is neither JSON nor YAML; every object that does
    /// not decode or is invalid, each named by its origin; an input without objects.
    pub(super) fn read(path: &Path, namespace: Option<&str>) -> anyhow::Result<Manifests> {
        let sources = read_input(path)?;
        let mut items = Vec::new();
        for (index, source) in sources.iter().enumerate() {
            index_source(index, source, &mut items)?;
        }
        let mut manifests = Manifests {
            sources,
            items,
            namespace: namespace.map(str::to_string),
            controllers: Vec::new(),
        };
        let input = match manifests.sources.as_slice() {
            [only] => only.name.clone(),
            _ => path.display().to_string(),
        };
        anyhow::ensure!(!manifests.items.is_empty(), "{input}: no objects");
        let mut invalid = Vec::new();
        let mut controllers = Vec::new();
        for parsed in manifests.iter() {
            let parsed = parsed?;
            if let Err(e) = parsed.manifest.validate() {
                invalid.push(format!("{}: {e}", parsed.origin));
            }
            if matches!(parsed.manifest, Manifest::Controller(_)) {
                controllers.push(parsed.manifest);
            }
        }
        manifests.controllers = controllers;
        anyhow::ensure!(invalid.is_empty(), "{}", invalid.join("; "));
        tracing::debug!(
            input = %path.display(),
            files = manifests.sources.len(),
            objects = manifests.items.len(),
            "read manifests"
        );
        Ok(manifests)
    }

    /// How many objects the input holds.
    pub(super) fn len(&self) -> usize {
        self.items.len()
    }

    /// Every object, decoded one at a time, in the input's order.
    pub(super) fn iter(&self) -> impl Iterator<Item = anyhow::Result<Parsed>> + '_ {
        self.items.iter().map(|item| self.decode(item))
    }

    /// The objects that are ReplicationControllers (the overlap check needs them all).
    pub(super) fn controllers(&self) -> &[Manifest] {
        &self.controllers
    }

    fn decode(&self, item: &Item) -> anyhow::Result<Parsed> {
        let text = match &item.text {
            Text::Span(range) => &self.sources[item.source].text[range.clone()],
            Text::Owned(text) => text,
        };
        let value: Value =
            serde_json::from_str(text).map_err(|e| anyhow::anyhow!("{}: {e}", item.origin))?;
        parse_object(item.origin.clone(), value, self.namespace.as_deref())
    }
}

/// Adds the objects of `source` (its documents, and the items of its lists) to `items`.
fn index_source(index: usize, source: &Source, items: &mut Vec<Item>) -> anyhow::Result<()> {
    let text = source.text.as_str();
    let documents = match json_documents(text) {
        Ok(Some(documents)) => documents,
        Ok(None) => return index_yaml(index, source, items, None),
        // A YAML flow mapping followed by `---` starts like JSON: JSON's message when it
        // is not YAML either.
        Err(json) => return index_yaml(index, source, items, Some(json)),
    };
    let several = documents.len() > 1;
    for (number, document) in documents.into_iter().enumerate() {
        let origin = match several {
            true => format!("{}: document {}", source.name, number + 1),
            false => source.name.clone(),
        };
        let span = |raw: &RawValue| {
            let start = raw.get().as_ptr() as usize - text.as_ptr() as usize;
            Text::Span(start..start + raw.get().len())
        };
        let list = serde_json::from_str::<ListProbe>(document.get())
            .ok()
            .filter(|probe| {
                probe
                    .kind
                    .as_deref()
                    .is_none_or(|kind| kind.ends_with("List"))
            })
            .and_then(|probe| probe.items);
        match list {
            Some(list) => items.extend(list.into_iter().enumerate().map(|(i, raw)| Item {
                source: index,
                origin: format!("{origin}: items[{i}]"),
                text: span(raw),
            })),
            None => items.push(Item {
                source: index,
                origin,
                text: span(document),
            }),
        }
    }
    Ok(())
}

/// The JSON documents of `text` (one value, or several in a row), undecoded; `None` when
/// it does not start like JSON, the document's index and JSON's message when it does
/// but does not parse.
fn json_documents(text: &str) -> Result<Option<Vec<&RawValue>>, SyntaxError> {
    if !text.trim_start().starts_with(['{', '[']) {
        return Ok(None);
    }
    let mut documents = Vec::new();
    for (index, document) in serde_json::Deserializer::from_str(text)
        .into_iter::<&RawValue>()
        .enumerate()
    {
        match document {
            Ok(document) => documents.push(document),
            Err(e) => {
                return Err(SyntaxError {
                    index,
                    message: e.to_string(),
                })
            }
        }
    }
    Ok(Some(documents))
}

/// Adds the objects of a YAML `source`, each kept as compact JSON. `json`: the error of
/// reading it as JSON, reported instead of YAML's when it is not YAML either.
fn index_yaml(
    index: usize,
    source: &Source,
    items: &mut Vec<Item>,
    json: Option<SyntaxError>,
) -> anyhow::Result<()> {
    let documents = split_yaml(&source.text).map_err(|yaml| {
        let SyntaxError { index: n, message } = json.unwrap_or(yaml);
        let document = match n > 0 {
            true => format!(" document {}:", n + 1),
            false => String::new(),
        };
        anyhow::anyhow!("parse {}:{document} {message}", source.name)
    })?;
    let several = documents.len() > 1;
    for (number, mut document) in documents.into_iter().enumerate() {
        let origin = match several {
            true => format!("{}: document {}", source.name, number + 1),
            false => source.name.clone(),
        };
        let own = |value: &Value| -> Text { Text::Owned(value.to_string().into_boxed_str()) };
        match take_list_items(&mut document) {
            Some(list) => items.extend(list.iter().enumerate().map(|(i, item)| Item {
                source: index,
                origin: format!("{origin}: items[{i}]"),
                text: own(item),
            })),
            None => items.push(Item {
                source: index,
                origin,
                text: own(&document),
            }),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(name: &str, text: &str) -> anyhow::Result<Manifests> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        Manifests::read(&path, None)
    }

    fn origins_and_names(manifests: &Manifests) -> Vec<(String, String)> {
        manifests
            .iter()
            .map(|p| {
                let p = p.unwrap();
                let origin = p.origin.rsplit('/').next().unwrap().to_string();
                (origin, p.manifest.metadata().name.clone())
            })
            .collect()
    }

    #[test]
    fn a_json_list_is_indexed_as_slices_of_its_text_and_decoded_one_item_at_a_time() {
        let list = r#"{"kind": "List", "items": [
            {"kind": "Pod", "metadata": {"name": "a"}},
            {"kind": "Pod", "metadata": {"name": "b"}, "spec": {"containers": []}}
        ], "metadata": {}} {"kind": "Pod", "metadata": {"name": "c"}}"#;
        let manifests = read("pods.json", list).unwrap();
        assert_eq!(manifests.len(), 3);
        assert!(manifests
            .items
            .iter()
            .all(|item| matches!(item.text, Text::Span(_))));
        assert_eq!(
            origins_and_names(&manifests),
            [
                ("pods.json: document 1: items[0]".into(), "a".into()),
                ("pods.json: document 1: items[1]".into(), "b".into()),
                ("pods.json: document 2".into(), "c".into()),
            ]
        );
        // The documents keep the namespace they are written to.
        let first = manifests.iter().next().unwrap().unwrap();
        assert_eq!(first.document["metadata"]["namespace"], "default");
    }

    #[test]
    fn a_json_list_after_a_byte_order_mark_is_indexed_as_json() {
        let list = "\u{feff}{\"kind\": \"List\", \"items\": [{\"kind\": \"Pod\", \"metadata\": {\"name\": \"a\"}}]}";
        let manifests = read("bom.json", list).unwrap();
        assert!(matches!(manifests.items[0].text, Text::Span(_)));
        assert_eq!(manifests.len(), 1);
    }

    #[test]
    fn yaml_lists_and_objects_that_are_not_lists_are_read_too() {
        let yaml = "kind: PodList\nitems:\n- kind: Pod\n  metadata: {name: a}\n---\nkind: Pod\nmetadata: {name: b}\nitems: not a list\n";
        let manifests = read("all.yaml", yaml).unwrap();
        assert_eq!(
            origins_and_names(&manifests),
            [
                ("all.yaml: document 1: items[0]".into(), "a".into()),
                ("all.yaml: document 2".into(), "b".into()),
            ]
        );
        // An object with an `items` field whose kind is not a list is one object.
        let json = r#"{"kind": "Pod", "metadata": {"name": "p"}, "items": [1]}"#;
        assert_eq!(read("p.json", json).unwrap().len(), 1);
    }

    #[test]
    fn every_bad_item_is_named_and_json_errors_keep_json_messages() {
        let list = r#"{"kind": "List", "items": [
            {"kind": "Pod", "metadata": {"name": "ok"}},
            {"kind": "Pod", "metadata": {"name": "Bad_Name"}},
            {"kind": "Pod", "metadata": {"name": "x"}, "spec": {"containers": "no"}}
        ]}"#;
        let error = format!("{:#}", read("pods.json", list).err().unwrap());
        assert!(error.contains("pods.json: items[2]"), "{error}");
        let invalid = r#"{"kind": "List", "items": [
            {"kind": "Pod", "metadata": {"name": "Bad_Name"}}
        ]}"#;
        let error = format!("{:#}", read("pods.json", invalid).err().unwrap());
        assert!(error.contains("pods.json: items[0]: "), "{error}");
        let broken = r#"{"kind": "Pod", "metadata": {"name": "a"}"#;
        let error = format!("{:#}", read("p.json", broken).err().unwrap());
        assert!(
            error.starts_with("parse ") && error.contains("p.json: EOF while parsing"),
            "{error}"
        );
        let empty = format!("{:#}", read("e.yaml", "---\n").err().unwrap());
        assert!(empty.ends_with("e.yaml: no objects"), "{empty}");
    }
}
