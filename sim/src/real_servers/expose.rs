//! A host server made reachable from pods as a Service, as a cluster reaches an external
//! database: a Service without a selector (`<name>.<namespace>.svc`, port `port` named `name`)
//! and an EndpointSlice of that Service naming `127.0.0.1:<target>`. The service proxy runs on
//! the host, so its forward to the loopback address reaches the server; pods reach the
//! ClusterIP through their gateway. Idempotent: existing objects are left as they are when they
//! already say this, replaced otherwise.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort, EndpointSlice};
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};

use crate::controllers::endpointslices::SERVICE_NAME_LABEL;

/// The `endpointslice.kubernetes.io/managed-by` value of the slices made here.
pub const MANAGED_BY: &str = "real-servers.sim.cinder.openstack.c5c3.io";

/// Makes `127.0.0.1:target` reachable as `<name>.<namespace>.svc:<port>`.
pub async fn expose(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    port: u16,
    target: u16,
) -> Result<(), kube::Error> {
    let services: Api<Service> = Api::namespaced(client.clone(), namespace);
    let service = Service {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(namespace.to_owned()),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            ports: Some(vec![ServicePort {
                name: Some(name.to_owned()),
                port: i32::from(port),
                protocol: Some("TCP".to_owned()),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    };
    let current = services.get_opt(name).await?;
    let has_port = current
        .as_ref()
        .and_then(|s| s.spec.as_ref())
        .and_then(|s| s.ports.as_ref())
        .is_some_and(|ports| ports.iter().any(|p| p.port == i32::from(port)));
    if !has_port {
        if current.is_some() {
            services.delete(name, &DeleteParams::default()).await?;
        }
        services.create(&PostParams::default(), &service).await?;
    }

    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), namespace);
    let slice_name = format!("{name}-host");
    let slice = EndpointSlice {
        metadata: ObjectMeta {
            name: Some(slice_name.clone()),
            namespace: Some(namespace.to_owned()),
            labels: Some(BTreeMap::from([
                (SERVICE_NAME_LABEL.to_owned(), name.to_owned()),
                (
                    "endpointslice.kubernetes.io/managed-by".to_owned(),
                    MANAGED_BY.to_owned(),
                ),
            ])),
            ..ObjectMeta::default()
        },
        address_type: "IPv4".to_owned(),
        endpoints: Some(vec![Endpoint {
            addresses: vec!["127.0.0.1".to_owned()],
            conditions: Some(EndpointConditions {
                ready: Some(true),
                serving: Some(true),
                terminating: Some(false),
            }),
            ..Endpoint::default()
        }]),
        ports: Some(vec![EndpointPort {
            name: Some(name.to_owned()),
            port: Some(i32::from(target)),
            protocol: Some("TCP".to_owned()),
            ..EndpointPort::default()
        }]),
    };
    let current = slices.get_opt(&slice_name).await?;
    let same = current
        .as_ref()
        .is_some_and(|s| s.ports == slice.ports && s.endpoints == slice.endpoints);
    if !same {
        if current.is_some() {
            slices.delete(&slice_name, &DeleteParams::default()).await?;
        }
        slices.create(&PostParams::default(), &slice).await?;
    }
    Ok(())
}
