//! The input of `kcm create -f` and `kcm apply -f`: a file, a directory of manifests or
//! stdin, read with a bound; JSON or YAML, several documents separated by `---`, `List`s;
//! each object decoded as its kind and validated before anything is written. kubectl's
//! `resource.FilenameOptions` and its builder's decoding; reads no etcd.
//!
//! Invariants:
//! - at most [`MAX_INPUT_BYTES`] are read in all, so `-f /dev/zero` or `yes | kcm create
//!   -f -` fails fast with the limit named instead of filling memory;
//! - every error names the file, the document (counted from 1, named when a file holds
//!   several), the list item (`items[1]`) and the field (`spec.replicas`);
//! - each object is written by `storage::create_object` (a new object) or
//!   `storage::update_object` (a stored one, `kcm apply`): the one place per kind of write,
//!   where checks on the object about to be written belong.

use std::io::Read as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use serde::Deserialize as _;
use serde_json::Value;

use super::resource::reference;
use crate::api::{
    self, Deployment, Endpoints, Object, ObjectMeta, Pod, ReplicaSet, ReplicationController,
    Service, ValidationError,
};

/// The most `-f` reads in all (a file, stdin, or the manifests of a directory together).
/// No object can exceed etcd's request limit ([`ETCD_MAX_REQUEST_BYTES`] by default), so
/// this leaves room for many objects while keeping `-f /dev/zero` quick and small.
pub const MAX_INPUT_BYTES: u64 = 16 << 20;

/// etcd's default `--max-request-bytes`: no single write, and so no object, is larger.
pub const ETCD_MAX_REQUEST_BYTES: u64 = 1536 << 10;

/// UTF-8's byte order mark, dropped from the start of an input.
const BYTE_ORDER_MARK: char = '\u{feff}';

/// The file name endings a directory given to `-f` is read for (kubectl's).
const MANIFEST_EXTENSIONS: [&str; 3] = ["json", "yaml", "yml"];

/// What `-f` reads, for `kcm create -f FILE` and `kcm apply -f FILE` (kubectl's
/// `resource.FilenameOptions`).
#[derive(Clone, Debug)]
pub struct FilenameOptions {
    /// A manifest file (JSON or YAML, one or more documents, each one object or a
    /// `List`), a directory of `.json`/`.yaml`/`.yml` files (not its subdirectories), or
    /// `-` for stdin.
    pub filename: PathBuf,
    /// Namespace of objects that name none (`default` when `None`); an object naming
    /// another namespace is an error.
    pub namespace: Option<String>,
}

/// One object of a `create` input, decoded as its kind (boxed: the kinds differ in size).
#[derive(Debug, Clone, PartialEq)]
pub enum Manifest {
    Controller(Box<ReplicationController>),
    ReplicaSet(Box<ReplicaSet>),
    Deployment(Box<Deployment>),
    Pod(Box<Pod>),
    Service(Box<Service>),
    Endpoints(Box<Endpoints>),
}

/// Runs `$body` with `$object` bound to a reference to the typed object inside a
/// [`Manifest`].
macro_rules! with_manifest {
    ($manifest:expr, $object:ident => $body:expr) => {
        match $manifest {
            $crate::kubecfg::manifest::Manifest::Controller($object) => {
                let $object: &$crate::api::ReplicationController = $object;
                $body
            }
            $crate::kubecfg::manifest::Manifest::ReplicaSet($object) => {
                let $object: &$crate::api::ReplicaSet = $object;
                $body
            }
            $crate::kubecfg::manifest::Manifest::Deployment($object) => {
                let $object: &$crate::api::Deployment = $object;
                $body
            }
            $crate::kubecfg::manifest::Manifest::Pod($object) => {
                let $object: &$crate::api::Pod = $object;
                $body
            }
            $crate::kubecfg::manifest::Manifest::Service($object) => {
                let $object: &$crate::api::Service = $object;
                $body
            }
            $crate::kubecfg::manifest::Manifest::Endpoints($object) => {
                let $object: &$crate::api::Endpoints = $object;
                $body
            }
        }
    };
}
pub(super) use with_manifest;

impl Manifest {
    /// `replicationcontrollers/web`, as printed after a write.
    pub fn reference(&self) -> String {
        with_manifest!(self, object => reference(object))
    }

    /// The object's metadata.
    pub fn metadata(&self) -> &ObjectMeta {
        with_manifest!(self, object => object.metadata())
    }

    /// # Errors
    /// The object's [`ValidationError`].
    pub fn validate(&self) -> Result<(), ValidationError> {
        with_manifest!(self, object => api::validate(object))
    }
}

/// One object of an input: where it is, what it decoded to, and the document as written.
#[derive(Debug, Clone)]
pub(super) struct Parsed {
    /// Where the object is, for messages: `rc.yaml`, `all.yaml: document 2`,
    /// `stdin: items[1]`.
    pub origin: String,
    pub manifest: Manifest,
    /// The object as written, with the namespace filled in as in `manifest`: what
    /// `apply` merges into the stored object, leaving alone what the input does not say.
    pub document: Value,
}

/// Decodes a `create` input: JSON or YAML documents (YAML's separated by `---`), each one
/// object or a list (`{"kind": "List", "items": [...]}`, `kind` optional), each object
/// dispatched on its `kind`. Objects without a namespace get `namespace` (or `default`).
///
/// # Errors
/// Text that is neither JSON nor YAML (naming `source`, the document and the line and
/// column), a document or item that is not an object or has an unknown kind, an object
/// that does not decode as its kind (naming the field), a namespace that contradicts
/// `namespace`, or no object at all.
pub fn parse_manifests(
    source: &str,
    text: &str,
    namespace: Option<&str>,
) -> anyhow::Result<Vec<Manifest>> {
    let parsed = parse_source(source, text, namespace)?;
    anyhow::ensure!(!parsed.is_empty(), "{source}: no objects");
    Ok(parsed.into_iter().map(|parsed| parsed.manifest).collect())
}

/// [`parse_manifests`] with each object's origin and document; an input without objects
/// (empty, or only `---`) yields none.
pub(super) fn parse_source(
    source: &str,
    text: &str,
    namespace: Option<&str>,
) -> anyhow::Result<Vec<Parsed>> {
    let documents = split_documents(text).map_err(|e| {
        let document = if e.index > 0 {
            format!(" document {}:", e.index + 1)
        } else {
            String::new()
        };
        anyhow::anyhow!("parse {source}:{document} {}", e.message)
    })?;
    let several = documents.len() > 1;
    let mut parsed = Vec::new();
    for (index, document) in documents.into_iter().enumerate() {
        let origin = if several {
            format!("{source}: document {}", index + 1)
        } else {
            source.to_string()
        };
        let mut document = document;
        match take_list_items(&mut document) {
            Some(items) => {
                for (index, item) in items.into_iter().enumerate() {
                    let origin = format!("{origin}: items[{index}]");
                    parsed.push(parse_object(origin, item, namespace)?);
                }
            }
            None => parsed.push(parse_object(origin, document, namespace)?),
        }
    }
    Ok(parsed)
}

/// A document's items, taken out of it, when it is a list: an `items` array, and no
/// `kind` or one ending in `List`.
pub(super) fn take_list_items(document: &mut Value) -> Option<Vec<Value>> {
    document.get("items")?.as_array()?;
    let is_list = document
        .get("kind")
        .and_then(Value::as_str)
        .is_none_or(|kind| kind.ends_with("List"));
    if !is_list {
        return None;
    }
    match document.as_object_mut()?.remove("items") {
        Some(Value::Array(items)) => Some(items),
        _ => None,
    }
}

/// A document that is neither JSON nor YAML.
#[derive(Debug, PartialEq)]
pub(super) struct SyntaxError {
    /// The document's index in its input.
    pub(super) index: usize,
    /// The parser's message, with line and column.
    pub(super) message: String,
}

/// The documents of one input, empty ones (`---` alone, comments) left out. JSON (one
/// value, or several in a row) is read as JSON, for its exact messages; anything else,
/// and JSON that does not parse but is valid YAML, as YAML.
fn split_documents(text: &str) -> Result<Vec<Value>, SyntaxError> {
    let json_like = text.trim_start().starts_with(['{', '[']);
    if json_like {
        let mut documents = Vec::new();
        for (index, document) in serde_json::Deserializer::from_str(text)
            .into_iter::<Value>()
            .enumerate()
        {
            match document {
                Ok(document) => documents.push(document),
                Err(e) => {
                    // A YAML flow mapping followed by `---` starts like JSON.
                    return split_yaml(text).map_err(|_| SyntaxError {
                        index,
                        message: e.to_string(),
                    });
                }
            }
        }
        return Ok(documents);
    }
    split_yaml(text)
}

pub(super) fn split_yaml(text: &str) -> Result<Vec<Value>, SyntaxError> {
    let mut documents = Vec::new();
    for (index, document) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
        let document = Value::deserialize(document).map_err(|e| SyntaxError {
            index,
            message: e.to_string(),
        })?;
        if !document.is_null() {
            documents.push(document);
        }
    }
    Ok(documents)
}

/// Decodes one object (a document, or an item of a list) as its kind.
pub(super) fn parse_object(
    origin: String,
    value: Value,
    namespace: Option<&str>,
) -> anyhow::Result<Parsed> {
    let mut document = value;
    let manifest = decode_object(&document, namespace).with_context(|| origin.clone())?;
    // The namespace the object is written to, in the document as in the object.
    if let Some(meta) = document.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert(
            "namespace".to_string(),
            Value::String(manifest.metadata().namespace.clone()),
        );
    }
    Ok(Parsed {
        origin,
        manifest,
        document,
    })
}

fn decode_object(value: &Value, namespace: Option<&str>) -> anyhow::Result<Manifest> {
    let what = match value {
        Value::Object(_) => "",
        Value::Array(_) => "an array",
        Value::String(_) => "a string",
        Value::Number(_) => "a number",
        Value::Bool(_) => "a boolean",
        Value::Null => "null",
    };
    anyhow::ensure!(
        what.is_empty(),
        "{what}, not an object (a list is {{\"kind\": \"List\", \"items\": [...]}})"
    );
    let kind = value.get("kind").and_then(Value::as_str).unwrap_or("");
    Ok(match kind {
        "ReplicationController" => {
            Manifest::Controller(Box::new(decode_manifest(value, namespace)?))
        }
        "ReplicaSet" => {
            let mut rs: ReplicaSet = decode_manifest(value, namespace)?;
            // The apiserver's defaulting: a created ReplicaSet states its replicas.
            rs.spec.replicas.get_or_insert(1);
            Manifest::ReplicaSet(Box::new(rs))
        }
        "Deployment" => {
            let mut deployment: Deployment = decode_manifest(value, namespace)?;
            // The apiserver's defaulting (`SetDefaults_Deployment`).
            deployment.set_defaults();
            Manifest::Deployment(Box::new(deployment))
        }
        "Pod" => Manifest::Pod(Box::new(decode_manifest(value, namespace)?)),
        "Service" => Manifest::Service(Box::new(decode_manifest(value, namespace)?)),
        "Endpoints" => Manifest::Endpoints(Box::new(decode_manifest(value, namespace)?)),
        "" => anyhow::bail!(
            "no \"kind\" (one of ReplicationController, ReplicaSet, Deployment, Pod, Service, Endpoints)"
        ),
        other => anyhow::bail!(
            "unknown kind {other:?} (expected ReplicationController, ReplicaSet, Deployment, Pod, Service or Endpoints)"
        ),
    })
}

/// Decodes `value` as `T`; an error names the field (`spec.replicas: invalid type ...`).
/// The namespace is filled from `namespace` (or `default`) when the object names none.
fn decode_manifest<T: Object>(value: &Value, namespace: Option<&str>) -> anyhow::Result<T> {
    let mut object: T = serde_path_to_error::deserialize(value).map_err(|e| {
        let name = value
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .map(|name| format!(" {name:?}"))
            .unwrap_or_default();
        anyhow::anyhow!("decode {}{name}: {e}", T::KIND)
    })?;
    let meta = object.metadata_mut();
    match namespace {
        Some(flag) if !meta.namespace.is_empty() && meta.namespace != flag => anyhow::bail!(
            "{} {:?} is in namespace {:?}, not --namespace {flag:?}",
            T::KIND,
            meta.name,
            meta.namespace
        ),
        _ if meta.namespace.is_empty() => {
            meta.namespace = namespace.unwrap_or(api::DEFAULT_NAMESPACE).to_string();
        }
        _ => {}
    }
    Ok(object)
}

// ---------------------------------------------------------------------------------------
// Reading the input

/// One input of `-f`: its name in messages and its text.
#[derive(Debug, PartialEq)]
pub(super) struct Source {
    pub name: String,
    pub text: String,
}

/// Reads the input of `-f`: stdin for `-`; the files ending in `.json`, `.yaml` or `.yml`
/// of a directory, sorted by name (not its subdirectories: kubectl's default without
/// `-R`); anything else as one file. At most [`MAX_INPUT_BYTES`] in all.
///
/// # Errors
/// A file that cannot be read or is not UTF-8, a directory without manifests, or more
/// than [`MAX_INPUT_BYTES`].
pub(super) fn read_input(path: &Path) -> anyhow::Result<Vec<Source>> {
    let mut budget = Budget::new();
    if path == Path::new("-") {
        let text = budget.read("stdin", std::io::stdin().lock())?;
        return Ok(vec![Source {
            name: "stdin".to_string(),
            text,
        }]);
    }
    let name = path.display().to_string();
    if !path.is_dir() {
        let file = std::fs::File::open(path).with_context(|| format!("read {name}"))?;
        let text = budget.read(&name, file)?;
        return Ok(vec![Source { name, text }]);
    }
    let mut files = Vec::new();
    for entry in std::fs::read_dir(path).with_context(|| format!("read directory {name}"))? {
        let entry = entry.with_context(|| format!("read directory {name}"))?;
        let file = entry.path();
        let is_manifest = file
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| MANIFEST_EXTENSIONS.contains(&e));
        // `is_file` follows symlinks; a device or a FIFO named `x.yaml` is not read.
        if is_manifest && file.is_file() {
            files.push(file);
        }
    }
    anyhow::ensure!(
        !files.is_empty(),
        "directory {name} holds no .json, .yaml or .yml files (subdirectories are not read)"
    );
    files.sort();
    budget.directory = Some(name);
    files
        .into_iter()
        .map(|file| {
            let name = file.display().to_string();
            let opened = std::fs::File::open(&file).with_context(|| format!("read {name}"))?;
            let text = budget.read(&name, opened)?;
            Ok(Source { name, text })
        })
        .collect()
}

/// What is left of [`MAX_INPUT_BYTES`] while an input is read.
struct Budget {
    left: u64,
    /// The directory being read, for the message when its files together are too large.
    directory: Option<String>,
}

impl Budget {
    fn new() -> Budget {
        Budget {
            left: MAX_INPUT_BYTES,
            directory: None,
        }
    }

    /// Reads `reader` to its end, or fails as soon as it holds more than is left: memory
    /// and time stay bounded whatever the input (`/dev/zero`, an endless pipe).
    fn read(&mut self, name: &str, reader: impl std::io::Read) -> anyhow::Result<String> {
        let mut bytes = Vec::new();
        reader
            .take(self.left.saturating_add(1))
            .read_to_end(&mut bytes)
            .with_context(|| format!("read {name}"))?;
        let len = bytes.len() as u64;
        if len > self.left {
            let what = match &self.directory {
                Some(directory) => format!("manifests in {directory} (at {name})"),
                None => format!("manifest {name}"),
            };
            anyhow::bail!(
                "{what}: larger than {} MiB; an object cannot exceed etcd's request limit \
                 (--max-request-bytes, {} MiB by default)",
                MAX_INPUT_BYTES >> 20,
                ETCD_MAX_REQUEST_BYTES as f64 / f64::from(1 << 20)
            );
        }
        self.left -= len;
        let mut text = String::from_utf8(bytes).map_err(|e| {
            anyhow::anyhow!(
                "{name}: not UTF-8 text (invalid byte at offset {})",
                e.utf8_error().valid_up_to()
            )
        })?;
        // A byte order mark (some Windows editors write one) is not part of the text: JSON
        // refuses it, so a JSON List starting with one was read as YAML, every item decoded
        // at once (549 MB for a List of 14.8 MB, issue 33).
        if text.starts_with(BYTE_ORDER_MARK) {
            text.drain(..BYTE_ORDER_MARK.len_utf8());
        }
        Ok(text)
    }
}

/// Ends a verb that wrote each object in turn: every failure, with how many objects
/// were not written.
pub(super) fn report_failures(
    failures: Vec<String>,
    total: usize,
    verb: &str,
) -> anyhow::Result<()> {
    match failures.len() {
        0 => Ok(()),
        1 => anyhow::bail!("{}", failures[0]),
        n => anyhow::bail!("{n} of {total} objects not {verb}: {}", failures.join("; ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[track_caller]
    fn check_parse_error(text: &str, namespace: Option<&str>, expected: &str) {
        let err = parse_manifests("in.json", text, namespace).unwrap_err();
        let message = format!("{err:#}");
        assert!(
            message.contains(expected),
            "{message:?} should contain {expected:?}"
        );
    }

    #[test]
    fn a_replica_set_manifest_gets_the_replicas_default() {
        let text = "kind: ReplicaSet\napiVersion: apps/v1\nmetadata: {name: web}\nspec:\n  selector: {matchLabels: {app: web}}\n  template: {metadata: {labels: {app: web}}}\n";
        let manifests = parse_manifests("rs.yaml", text, None).unwrap();
        let Manifest::ReplicaSet(rs) = &manifests[0] else {
            panic!("not a replica set: {manifests:?}")
        };
        assert_eq!(rs.spec.replicas, Some(1));
        assert_eq!(manifests[0].reference(), "replicasets/web");
        manifests[0].validate().unwrap();
    }

    #[test]
    fn a_deployment_manifest_gets_kubernetes_defaults() {
        let text = "kind: Deployment\napiVersion: apps/v1\nmetadata: {name: web}\nspec:\n  selector: {matchLabels: {app: web}}\n  template: {metadata: {labels: {app: web}}}\n";
        let manifests = parse_manifests("deploy.yaml", text, None).unwrap();
        let Manifest::Deployment(d) = &manifests[0] else {
            panic!("not a deployment: {manifests:?}")
        };
        assert_eq!(d.spec.replicas, Some(1));
        assert_eq!(d.spec.revision_history_limit, Some(10));
        assert_eq!(d.spec.progress_deadline_seconds, Some(600));
        let strategy = d.spec.strategy.as_ref().unwrap();
        assert_eq!(strategy.type_.as_deref(), Some("RollingUpdate"));
        assert!(strategy
            .rolling_update
            .as_ref()
            .unwrap()
            .max_surge
            .is_some());
        assert_eq!(manifests[0].reference(), "deployments/web");
        manifests[0].validate().unwrap();
    }

    #[test]
    fn manifests_dispatch_on_kind_and_default_the_namespace() {
        let text = r#"{"kind": "List", "items": [
            {"kind": "Service", "metadata": {"name": "web"}, "spec": {"port": 80}},
            {"kind": "Pod", "metadata": {"name": "p", "namespace": "prod"}},
            {"kind": "Endpoints", "metadata": {"name": "web"}}
        ]}"#;
        let manifests = parse_manifests("in.json", text, None).unwrap();
        let references: Vec<String> = manifests.iter().map(Manifest::reference).collect();
        assert_eq!(references, ["services/web", "pods/p", "endpoints/web"]);
        let Manifest::Service(service) = &manifests[0] else {
            panic!("not a service")
        };
        assert_eq!(service.metadata.namespace, "default");
        let Manifest::Pod(pod) = &manifests[1] else {
            panic!("not a pod")
        };
        assert_eq!(pod.metadata.namespace, "prod");

        let single = r#"{"kind": "ReplicationController", "metadata": {"name": "web"}}"#;
        let manifests = parse_manifests("in.json", single, Some("staging")).unwrap();
        let Manifest::Controller(rc) = &manifests[0] else {
            panic!("not a controller")
        };
        assert_eq!(rc.metadata.key(), "staging/web");
        // A list without a kind is a list too.
        assert_eq!(
            parse_manifests("in.json", r#"{"items": [{"kind": "Pod"}]}"#, None)
                .unwrap()
                .len(),
            1
        );
    }

    #[test]
    fn yaml_documents_and_json_streams_are_read_like_kubectl() {
        let yaml = "# a comment\n---\nkind: Pod\nmetadata:\n  name: a\n---\n---\n\
                    kind: List\nitems:\n- kind: Service\n  metadata: {name: s}\n  spec: {port: 80}\n\
                    - {\"kind\": \"Endpoints\", \"metadata\": {\"name\": \"s\"}}\n";
        let parsed = parse_source("all.yaml", yaml, Some("prod")).unwrap();
        let summary: Vec<(String, String)> = parsed
            .iter()
            .map(|p| (p.origin.clone(), p.manifest.metadata().key()))
            .collect();
        assert_eq!(
            summary,
            [
                ("all.yaml: document 1".into(), "prod/a".into()),
                ("all.yaml: document 2: items[0]".into(), "prod/s".into()),
                ("all.yaml: document 2: items[1]".into(), "prod/s".into()),
            ]
        );
        // The document as written, with the namespace filled in.
        assert_eq!(
            parsed[0].document,
            json!({"kind": "Pod", "metadata": {"name": "a", "namespace": "prod"}})
        );

        // Concatenated JSON objects, and JSON that is really a YAML stream.
        let stream = r#"{"kind": "Pod", "metadata": {"name": "a"}} {"kind": "Pod", "metadata": {"name": "b"}}"#;
        assert_eq!(parse_manifests("s.json", stream, None).unwrap().len(), 2);
        let flow = "{kind: Pod, metadata: {name: a}}\n---\n{kind: Pod, metadata: {name: b}}\n";
        assert_eq!(parse_manifests("s.yaml", flow, None).unwrap().len(), 2);
        // Nothing but separators and comments: no objects.
        assert!(parse_source("e.yaml", "---\n# nothing\n---\n", None)
            .unwrap()
            .is_empty());
        check_parse_error("", None, "in.json: no objects");
    }

    #[test]
    fn manifest_errors_name_the_source_the_document_the_item_and_the_field() {
        check_parse_error(
            "{\"kind\": \n",
            None,
            "parse in.json: EOF while parsing a value at line 2 column 0",
        );
        check_parse_error(
            "kind: Pod\n---\nkind: [Pod\n",
            None,
            "parse in.json: document 2: ",
        );
        check_parse_error(
            r#"{"items": [{"kind": "Pod"}, {"kind": "Widget"}]}"#,
            None,
            "in.json: items[1]: unknown kind \"Widget\"",
        );
        check_parse_error(r#"{"metadata": {}}"#, None, "in.json: no \"kind\"");
        check_parse_error(
            r#"{"items": [7]}"#,
            None,
            "items[0]: a number, not an object",
        );
        check_parse_error(r#"{"items": []}"#, None, "in.json: no objects");
        check_parse_error(
            r#"{"kind": "Pod", "metadata": {"name": "p"}, "status": {"phase": "Waiting"}}"#,
            None,
            "in.json: decode Pod \"p\": status.phase: unknown variant `Waiting`",
        );
        check_parse_error(
            "kind: Pod\n---\nkind: ReplicationController\nmetadata: {name: web}\nspec:\n  replicas: three\n",
            None,
            "in.json: document 2: decode ReplicationController \"web\": spec.replicas: invalid type: string \"three\"",
        );
        check_parse_error(
            r#"{"kind": "Pod", "metadata": {"name": "p", "namespace": "a"}}"#,
            Some("b"),
            "Pod \"p\" is in namespace \"a\", not --namespace \"b\"",
        );
    }

    #[test]
    fn yaml_alias_expansion_is_bounded() {
        // A "billion laughs": each level repeats the previous one nine times.
        let mut text = String::from("a: &a [x, x, x, x, x, x, x, x, x]\n");
        for (prev, next) in ["a", "b", "c", "d", "e", "f", "g", "h"]
            .iter()
            .zip(["b", "c", "d", "e", "f", "g", "h", "i"])
        {
            let refs = vec![format!("*{prev}"); 9].join(", ");
            text.push_str(&format!("{next}: &{next} [{refs}]\n"));
        }
        let error = split_documents(&text).unwrap_err();
        assert!(error.message.contains("repetition limit"), "{error:?}");
    }

    #[test]
    fn the_input_is_read_up_to_a_bound() {
        let mut budget = Budget::new();
        let most = vec![b'#'; MAX_INPUT_BYTES as usize - 3];
        assert_eq!(budget.read("a", &most[..]).unwrap().len(), most.len());
        assert_eq!(budget.read("b", &b"123"[..]).unwrap(), "123");
        let error = budget.read("c", &b"1"[..]).unwrap_err().to_string();
        assert_eq!(
            error,
            "manifest c: larger than 16 MiB; an object cannot exceed etcd's request limit \
             (--max-request-bytes, 1.5 MiB by default)"
        );
        // An endless reader is read only up to the bound.
        let error = Budget::new().read("zero", std::io::repeat(0)).unwrap_err();
        assert!(error.to_string().starts_with("manifest zero: larger than"));
        let error = Budget::new().read("bin", &b"a\xffb"[..]).unwrap_err();
        assert_eq!(
            error.to_string(),
            "bin: not UTF-8 text (invalid byte at offset 1)"
        );
    }

    #[test]
    fn a_directory_is_read_for_its_manifests_in_name_order() {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in [
            ("b.yaml", "kind: Pod\nmetadata: {name: b}\n"),
            ("a.json", r#"{"kind": "Pod", "metadata": {"name": "a"}}"#),
            ("c.yml", "kind: Pod\nmetadata: {name: c}\n"),
            ("notes.txt", "not a manifest"),
        ] {
            std::fs::write(dir.path().join(name), text).unwrap();
        }
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("sub/d.yaml"), "kind: Pod\n").unwrap();
        let names: Vec<String> = super::super::input::Manifests::read(dir.path(), None)
            .unwrap()
            .iter()
            .map(|p| p.unwrap().manifest.metadata().name.clone())
            .collect();
        assert_eq!(names, ["a", "b", "c"]);

        let empty = tempfile::tempdir().unwrap();
        let error = read_input(empty.path()).unwrap_err().to_string();
        assert!(
            error.contains("holds no .json, .yaml or .yml files"),
            "{error}"
        );
    }
}
