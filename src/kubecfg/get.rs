//! `kcm get KIND[,KIND...] [NAME]`: one table per kind (or JSON), as 2014's `kubecfg
//! list`/`get` and kubectl's `get` print them (`pkg/cmd/get`); the tables are
//! [`super::print`]'s.

use std::time::SystemTime;

use serde_json::{json, Value};

use super::print::{emit, render_objects_as, to_json};
use super::resource::Kind;
use super::storage::storage_error;
use crate::api::{
    self, Deployment, Endpoints, Object, Pod, ReplicaSet, ReplicationController, Service,
};
use crate::client::Target;
use crate::labels::Selector;
use crate::registry::{ObjectList, Registry, StorageError};

/// How `kcm get` prints what it read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GetOutput {
    /// Aligned columns.
    Table,
    /// The table plus more columns (images, labels).
    Wide,
    /// The object, or a `List` of them, as JSON.
    Json,
}

/// `kcm get KIND[,KIND...] [NAME]`.
#[derive(Clone, Debug)]
pub struct GetOptions {
    /// One or more kinds (`rs,rc`), each printed as its own table, in this order.
    pub kinds: Vec<Kind>,
    /// Print only this object (then `all_namespaces` is false and `selector` is `None`).
    pub name: Option<String>,
    pub namespace: String,
    /// List every namespace (adds a NAMESPACE column); `namespace` is then ignored.
    pub all_namespaces: bool,
    pub selector: Option<Selector>,
    pub output: GetOutput,
}

/// What `kcm get` read of one kind: the rendered table (without a trailing blank line)
/// or the JSON objects.
struct Part {
    /// Rows rendered, `None` when nothing matched (then the table is not printed).
    table: Option<String>,
    /// The objects, for `-o json`.
    items: Vec<Value>,
    /// The etcd revision of the read.
    resource_version: i64,
    /// The named object is not stored: kubectl's `replicasets "web" not found`.
    missing: Option<String>,
}

/// `kcm get KIND[,KIND...] [NAME]`: one table per kind, separated by a blank line; with
/// more than one kind, names carry kubectl's kind prefix (`replicaset.apps/web`) and
/// `-o json` prints one `List` of everything.
///
/// # Errors
/// `pods "x" not found`, a malformed NAME, or etcd failing. Malformed objects in a list
/// are warnings on stderr, not errors.
pub async fn get(target: &Target, options: GetOptions) -> anyhow::Result<()> {
    let (_client, registry) = super::connect(target).await?;
    let show_kind = options.kinds.len() > 1;
    let mut parts = Vec::with_capacity(options.kinds.len());
    for kind in &options.kinds {
        let part = match kind {
            Kind::Pods => read_kind::<Pod>(&registry, &options, show_kind).await,
            Kind::Replicationcontrollers => {
                read_kind::<ReplicationController>(&registry, &options, show_kind).await
            }
            Kind::Replicasets => read_kind::<ReplicaSet>(&registry, &options, show_kind).await,
            Kind::Deployments => read_kind::<Deployment>(&registry, &options, show_kind).await,
            Kind::Services => read_kind::<Service>(&registry, &options, show_kind).await,
            Kind::Endpoints => read_kind::<Endpoints>(&registry, &options, show_kind).await,
        }?;
        parts.push(part);
    }
    // Like kubectl, what was found is printed and what was not is the error (exit 1).
    let missing: Vec<String> = parts.iter().filter_map(|p| p.missing.clone()).collect();
    let result = if missing.is_empty() {
        Ok(())
    } else {
        Err(anyhow::anyhow!(missing.join("; ")))
    };
    if missing.len() == parts.len() {
        return result;
    }
    parts.retain(|p| p.missing.is_none());
    print_parts(parts, &options)?;
    result
}

/// Prints what `kcm get` read: the tables, or the JSON.
fn print_parts(mut parts: Vec<Part>, options: &GetOptions) -> anyhow::Result<()> {
    if options.output == GetOutput::Json {
        // One named object of one kind prints as itself, as kubectl does.
        if options.name.is_some() && options.kinds.len() == 1 {
            let item = parts.pop().and_then(|mut p| p.items.pop());
            return emit(&format!("{:#}\n", item.unwrap_or_default()));
        }
        let resource_version = parts.iter().map(|p| p.resource_version).max();
        let items: Vec<Value> = parts.into_iter().flat_map(|p| p.items).collect();
        let document = json!({
            "kind": "List",
            "apiVersion": api::API_VERSION,
            "metadata": {"resourceVersion": resource_version.unwrap_or_default().to_string()},
            "items": items,
        });
        return emit(&format!("{document:#}\n"));
    }
    let tables: Vec<String> = parts.into_iter().filter_map(|p| p.table).collect();
    if tables.is_empty() {
        match (!options.all_namespaces).then_some(options.namespace.as_str()) {
            Some(namespace) => eprintln!("No resources found in {namespace} namespace."),
            None => eprintln!("No resources found."),
        }
        return Ok(());
    }
    emit(&tables.join("\n"))
}

/// Reads what `options` asks of kind `T`: the named object or the matching list.
async fn read_kind<T: Object>(
    registry: &Registry,
    options: &GetOptions,
    show_kind: bool,
) -> anyhow::Result<Part> {
    let now = SystemTime::now();
    let wide = options.output == GetOutput::Wide;
    let (objects, resource_version) = if let Some(name) = &options.name {
        let object: T = match registry.get(&options.namespace, name).await {
            Ok(object) => object,
            Err(e @ StorageError::NotFound { .. }) => {
                return Ok(Part {
                    table: None,
                    items: Vec::new(),
                    resource_version: 0,
                    missing: Some(storage_error::<T>(e, name).to_string()),
                })
            }
            Err(e) => return Err(storage_error::<T>(e, name)),
        };
        let revision = object.metadata().resource_version.map_or(0, |rv| rv.0);
        (vec![object], revision)
    } else {
        let namespace = (!options.all_namespaces).then_some(options.namespace.as_str());
        let selector = options.selector.clone().unwrap_or_default();
        let list: ObjectList<T> = registry.list(namespace, &selector).await?;
        for error in &list.errors {
            eprintln!("kcm: warning: skipping {error}");
        }
        (list.items, list.resource_version.0)
    };
    if options.output == GetOutput::Json {
        return Ok(Part {
            table: None,
            items: objects
                .into_iter()
                .map(to_json)
                .collect::<anyhow::Result<_>>()?,
            resource_version,
            missing: None,
        });
    }
    let table = (!objects.is_empty())
        .then(|| render_objects_as(&objects, wide, options.all_namespaces, show_kind, now));
    Ok(Part {
        table,
        items: Vec::new(),
        resource_version,
        missing: None,
    })
}
