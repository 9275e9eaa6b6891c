//! `kcm create`: the manifests of its input (one object or a list, dispatched on `kind`),
//! decoded and validated before anything is written.

use super::*;

/// One object of a `create` input, decoded as its kind (boxed: the kinds differ in size).
#[derive(Debug, Clone, PartialEq)]
pub enum Manifest {
    Controller(Box<ReplicationController>),
    Pod(Box<Pod>),
    Service(Box<Service>),
    Endpoints(Box<Endpoints>),
}

/// Runs `$body` with `$object` bound to a reference to the typed object inside a
/// [`Manifest`].
macro_rules! with_manifest {
    ($manifest:expr, $object:ident => $body:expr) => {
        match $manifest {
            Manifest::Controller($object) => {
                let $object: &ReplicationController = $object;
                $body
            }
            Manifest::Pod($object) => {
                let $object: &Pod = $object;
                $body
            }
            Manifest::Service($object) => {
                let $object: &Service = $object;
                $body
            }
            Manifest::Endpoints($object) => {
                let $object: &Endpoints = $object;
                $body
            }
        }
    };
}

impl Manifest {
    /// `replicationcontrollers/web`, as printed after a write.
    pub fn reference(&self) -> String {
        with_manifest!(self, object => reference(object))
    }

    /// # Errors
    /// The object's [`ValidationError`].
    pub fn validate(&self) -> Result<(), ValidationError> {
        with_manifest!(self, object => api::validate(object))
    }

    async fn create(&self, registry: &Registry) -> anyhow::Result<()> {
        with_manifest!(self, object => create_object(registry, object).await)
    }
}

/// `{resource}/{name}`, kubectl's way of naming an object in output.
pub(super) fn reference<T: Object>(object: &T) -> String {
    format!("{}/{}", T::RESOURCE, object.metadata().name)
}

/// Decodes a `create` input: one object, or a list (`{"kind": "List", "items": [...]}`,
/// `kind` optional), each item dispatched on its `kind`. Objects without a namespace get
/// `namespace` (or `default`).
///
/// # Errors
/// Invalid JSON (naming `source` and serde's line and column), an item that is not an
/// object or has an unknown kind (naming its index), an item that does not decode as its
/// kind, a namespace that contradicts `namespace`, or a resourceVersion (which only
/// stored objects have).
pub fn parse_manifests(
    source: &str,
    text: &str,
    namespace: Option<&str>,
) -> anyhow::Result<Vec<Manifest>> {
    let document: Value = serde_json::from_str(text).with_context(|| format!("parse {source}"))?;
    let is_list = document.get("items").is_some_and(Value::is_array)
        && document
            .get("kind")
            .and_then(Value::as_str)
            .is_none_or(|kind| kind.ends_with("List"));
    let manifests = if is_list {
        let Some(Value::Array(items)) = document.get("items").cloned() else {
            unreachable!("checked above")
        };
        items
            .into_iter()
            .enumerate()
            .map(|(index, item)| {
                parse_manifest(item, namespace).with_context(|| format!("{source}: item {index}"))
            })
            .collect::<anyhow::Result<Vec<_>>>()?
    } else {
        vec![parse_manifest(document, namespace).with_context(|| source.to_string())?]
    };
    anyhow::ensure!(!manifests.is_empty(), "{source}: no objects to create");
    Ok(manifests)
}

pub(super) fn parse_manifest(value: Value, namespace: Option<&str>) -> anyhow::Result<Manifest> {
    anyhow::ensure!(value.is_object(), "not a JSON object");
    let kind = value.get("kind").and_then(Value::as_str).unwrap_or("");
    Ok(match kind {
        "ReplicationController" => {
            Manifest::Controller(Box::new(decode_manifest(value, namespace)?))
        }
        "Pod" => Manifest::Pod(Box::new(decode_manifest(value, namespace)?)),
        "Service" => Manifest::Service(Box::new(decode_manifest(value, namespace)?)),
        "Endpoints" => Manifest::Endpoints(Box::new(decode_manifest(value, namespace)?)),
        "" => anyhow::bail!("no \"kind\" (one of ReplicationController, Pod, Service, Endpoints)"),
        other => anyhow::bail!(
            "unknown kind {other:?} (expected ReplicationController, Pod, Service or Endpoints)"
        ),
    })
}

pub(super) fn decode_manifest<T: Object>(
    value: Value,
    namespace: Option<&str>,
) -> anyhow::Result<T> {
    let mut object: T =
        serde_json::from_value(value).with_context(|| format!("decode {}", T::KIND))?;
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
    anyhow::ensure!(
        meta.resource_version.is_none(),
        "{} {:?}: metadata.resourceVersion may not be set on an object to be created",
        T::KIND,
        meta.name
    );
    Ok(object)
}

/// Reads the input of `-f`: a file, or stdin for `-`. Returns the name to use in
/// messages and the text.
pub(super) fn read_input(path: &Path) -> anyhow::Result<(String, String)> {
    if path == Path::new("-") {
        let text = std::io::read_to_string(std::io::stdin()).context("read stdin")?;
        return Ok(("stdin".to_string(), text));
    }
    let name = path.display().to_string();
    let text = std::fs::read_to_string(path).with_context(|| format!("read {name}"))?;
    Ok((name, text))
}

/// `kcm create -f FILE`: decodes and validates every object, then creates each
/// (create-if-absent), printing `replicationcontrollers/web created` per object.
///
/// # Errors
/// Bad input (nothing is written), etcd unreachable, or objects that could not be
/// created (`... already exists`); the others are still created.
pub async fn create(target: &Target, options: CreateOptions) -> anyhow::Result<()> {
    let (source, text) = read_input(&options.filename)?;
    let manifests = parse_manifests(&source, &text, options.namespace.as_deref())?;
    let invalid: Vec<String> = manifests
        .iter()
        .filter_map(|manifest| manifest.validate().err())
        .map(|e| e.to_string())
        .collect();
    anyhow::ensure!(invalid.is_empty(), "{}", invalid.join("; "));

    let (_client, registry) = target.connect().await?;
    super::overlap::refuse_overlapping_manifests(&registry, &manifests).await?;
    let mut failures = Vec::new();
    for manifest in &manifests {
        match manifest.create(&registry).await {
            Ok(()) => emit(&format!("{} created\n", manifest.reference()))?,
            Err(e) => failures.push(format!("{e:#}")),
        }
    }
    match failures.len() {
        0 => Ok(()),
        1 => anyhow::bail!("{}", failures[0]),
        n => anyhow::bail!(
            "{n} of {} objects not created: {}",
            manifests.len(),
            failures.join("; ")
        ),
    }
}

pub(super) async fn create_object<T: Object>(
    registry: &Registry,
    object: &T,
) -> anyhow::Result<()> {
    registry
        .create(object)
        .await
        .map(drop)
        .map_err(|e| storage_error::<T>(e, &object.metadata().name))
}
