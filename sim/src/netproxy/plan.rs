//! What the service proxy should serve, from the Services and EndpointSlices it sees (pure):
//! every ClusterIP to hold on the interface, and per TCP Service port (`<clusterIP>:<port>`) its
//! ready endpoints (`address:port` of the slice port with the Service port's name, endpoints
//! whose `conditions.ready` is not false, as kube-proxy reads them). A frontend with no ready
//! endpoint is left out: nothing listens there, so a connection is refused, as kube-proxy's
//! reject rule refuses it.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{Ipv4Addr, SocketAddrV4};

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::ResourceExt;

use crate::controllers::endpointslices::SERVICE_NAME_LABEL;

/// The proxy's desired state.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// Every ClusterIP of a Service with a TCP port.
    pub addresses: BTreeSet<Ipv4Addr>,
    /// Per `<clusterIP>:<port>` with a ready endpoint, those endpoints (sorted, no duplicates).
    pub frontends: BTreeMap<SocketAddrV4, Vec<SocketAddrV4>>,
}

/// The plan for `services` and `slices` (all namespaces).
pub fn plan<'a>(
    services: impl IntoIterator<Item = &'a Service>,
    slices: &[&EndpointSlice],
) -> Plan {
    let mut out = Plan::default();
    for service in services {
        let Some(spec) = &service.spec else { continue };
        let Some(ip) = spec
            .cluster_ip
            .as_deref()
            .and_then(|ip| ip.parse::<Ipv4Addr>().ok())
        else {
            continue;
        };
        if spec.type_.as_deref() == Some("ExternalName") {
            continue;
        }
        let namespace = service.namespace().unwrap_or_default();
        let name = service.name_any();
        let own: Vec<&&EndpointSlice> = slices
            .iter()
            .filter(|s| {
                s.namespace().as_deref() == Some(namespace.as_str())
                    && s.labels().get(SERVICE_NAME_LABEL) == Some(&name)
                    && s.address_type == "IPv4"
            })
            .collect();
        for port in spec.ports.iter().flatten() {
            if port.protocol.as_deref().unwrap_or("TCP") != "TCP" {
                continue;
            }
            let Ok(front_port) = u16::try_from(port.port) else {
                continue;
            };
            out.addresses.insert(ip);
            let port_name = port.name.as_deref().unwrap_or("");
            let mut backends: BTreeSet<SocketAddrV4> = BTreeSet::new();
            for slice in &own {
                let Some(target) = slice
                    .ports
                    .iter()
                    .flatten()
                    .find(|p| p.name.as_deref().unwrap_or("") == port_name)
                    .filter(|p| p.protocol.as_deref().unwrap_or("TCP") == "TCP")
                    .and_then(|p| p.port)
                    .and_then(|p| u16::try_from(p).ok())
                else {
                    continue;
                };
                for endpoint in slice.endpoints.iter().flatten() {
                    let ready = endpoint
                        .conditions
                        .as_ref()
                        .and_then(|c| c.ready)
                        .unwrap_or(true);
                    if !ready {
                        continue;
                    }
                    backends.extend(
                        endpoint
                            .addresses
                            .iter()
                            .filter_map(|a| a.parse::<Ipv4Addr>().ok())
                            .map(|a| SocketAddrV4::new(a, target)),
                    );
                }
            }
            if !backends.is_empty() {
                out.frontends.insert(
                    SocketAddrV4::new(ip, front_port),
                    backends.into_iter().collect(),
                );
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn service(name: &str, ip: &str, ports: serde_json::Value) -> Service {
        serde_json::from_value(json!({
            "metadata": {"namespace": "ns", "name": name},
            "spec": {"clusterIP": ip, "ports": ports},
        }))
        .unwrap()
    }

    fn slice(
        service: &str,
        port_name: &str,
        port: u16,
        endpoints: serde_json::Value,
    ) -> EndpointSlice {
        serde_json::from_value(json!({
            "metadata": {"namespace": "ns", "name": format!("{service}-x"),
                         "labels": {SERVICE_NAME_LABEL: service}},
            "addressType": "IPv4",
            "ports": [{"name": port_name, "port": port, "protocol": "TCP"}],
            "endpoints": endpoints,
        }))
        .unwrap()
    }

    #[test]
    fn ready_endpoints_of_the_named_port_back_each_frontend() {
        let services = [
            service(
                "api",
                "10.97.0.5",
                json!([{"name": "http", "port": 80}, {"name": "dns", "port": 53, "protocol": "UDP"}]),
            ),
            service("idle", "10.97.0.6", json!([{"port": 8080}])),
            service("headless", "None", json!([{"port": 80}])),
        ];
        let api = slice(
            "api",
            "http",
            8776,
            json!([
                {"addresses": ["10.244.1.2"], "conditions": {"ready": true}},
                {"addresses": ["10.244.1.3"], "conditions": {"ready": false}},
                {"addresses": ["10.244.1.4"]},
            ]),
        );
        let other_port = slice(
            "api",
            "metrics",
            9090,
            json!([{"addresses": ["10.244.1.9"]}]),
        );
        let idle = slice(
            "idle",
            "",
            8080,
            json!([{"addresses": ["10.244.2.2"], "conditions": {"ready": false}}]),
        );
        let plan = plan(&services, &[&api, &other_port, &idle]);
        assert_eq!(
            plan.addresses
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>(),
            vec!["10.97.0.5", "10.97.0.6"]
        );
        assert_eq!(plan.frontends.len(), 1, "{plan:?}");
        assert_eq!(
            plan.frontends[&"10.97.0.5:80".parse().unwrap()],
            vec![
                "10.244.1.2:8776".parse().unwrap(),
                "10.244.1.4:8776".parse().unwrap()
            ]
        );
    }

    #[test]
    fn slices_of_other_namespaces_do_not_count() {
        let services = [service("api", "10.97.0.5", json!([{"port": 80}]))];
        let mut foreign = slice("api", "", 8080, json!([{"addresses": ["10.244.1.2"]}]));
        foreign.metadata.namespace = Some("elsewhere".into());
        assert!(plan(&services, &[&foreign]).frontends.is_empty());
    }
}
