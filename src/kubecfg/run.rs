//! `kcm run`: 2014's `RunController`, a controller (and a service) selected by
//! `name=NAME`.

use anyhow::Context as _;

use super::overlap::refuse_overlapping;
use super::print::emit;
use super::resource::reference;
use super::storage::create_object;
use crate::api::{
    self, Container, ContainerPort, IntOrString, ObjectMeta, PodSpec, PodTemplateSpec,
    ReplicationController, ReplicationControllerSpec, Service, ServiceSpec,
};
use crate::client::Target;
use crate::labels::Set;

/// `kcm run NAME --image IMG`.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Name of the controller (and of the service with `expose`); its pods are labelled
    /// `name=NAME`.
    pub name: String,
    pub image: String,
    /// `spec.replicas` of the controller, 0 to [`api::MAX_REPLICAS`].
    pub replicas: i64,
    /// The container port (named `http`).
    pub port: Option<u16>,
    /// Also create a Service NAME selecting `name=NAME`, forwarding to `port` (only
    /// with a `port`).
    pub expose: bool,
    /// The service's port; default `port`.
    pub service_port: Option<u16>,
    pub namespace: String,
}

/// The controller (and, with `--expose`, the service) `kcm run` creates, as 2014's
/// `RunController` built them: everything labelled and selected by `name=NAME`.
pub fn run_objects(options: &RunOptions) -> (ReplicationController, Option<Service>) {
    let labels: Set = [("name", options.name.as_str())].into_iter().collect();
    let meta = ObjectMeta {
        labels: labels.clone(),
        ..ObjectMeta::named(&options.namespace, &options.name)
    };
    let ports = options
        .port
        .map(|port| ContainerPort {
            name: "http".to_string(),
            container_port: i64::from(port),
            protocol: "TCP".to_string(),
            ..ContainerPort::default()
        })
        .into_iter()
        .collect();
    let controller = ReplicationController {
        metadata: meta.clone(),
        spec: ReplicationControllerSpec {
            replicas: options.replicas,
            selector: labels.clone(),
            template: Some(PodTemplateSpec {
                metadata: ObjectMeta {
                    labels: labels.clone(),
                    ..ObjectMeta::default()
                },
                spec: PodSpec {
                    containers: vec![Container {
                        name: options.name.clone(),
                        image: options.image.clone(),
                        ports,
                        ..Container::default()
                    }],
                    ..PodSpec::default()
                },
                ..PodTemplateSpec::default()
            }),
            ..ReplicationControllerSpec::default()
        },
        ..ReplicationController::default()
    };
    let service = match (options.expose, options.port) {
        (true, Some(port)) => Some(Service {
            metadata: meta,
            spec: ServiceSpec {
                selector: labels,
                port: i64::from(options.service_port.unwrap_or(port)),
                protocol: "TCP".to_string(),
                container_port: Some(IntOrString::Int(i64::from(port))),
                ..ServiceSpec::default()
            },
            ..Service::default()
        }),
        _ => None,
    };
    (controller, service)
}

/// `kcm run NAME --image IMG`: creates the controller, and with `--expose` its service.
/// Both are validated before either is written.
///
/// # Errors
/// An invalid name or image, `... already exists`, a controller selecting `name=NAME`
/// already (the two would fight over pods), or etcd failing.
pub async fn run(target: &Target, options: RunOptions) -> anyhow::Result<()> {
    anyhow::ensure!(
        !options.image.trim().is_empty(),
        "--image must not be empty"
    );
    let (controller, service) = run_objects(&options);
    api::validate(&controller)?;
    if let Some(service) = &service {
        api::validate(service)?;
    }
    let (_client, registry) = super::connect(target).await?;
    refuse_overlapping(&registry, &[&controller]).await?;
    create_object(&registry, &controller).await?;
    emit(&format!("{} created\n", reference(&controller)))?;
    if let Some(service) = &service {
        create_object(&registry, service).await.with_context(|| {
            format!(
                "{} was created, but not its service",
                reference(&controller)
            )
        })?;
        emit(&format!("{} created\n", reference(service)))?;
    }
    Ok(())
}
