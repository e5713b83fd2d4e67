//! NetworkPolicy derivation (the NetworkPolicy member's pure part): ingress as the user gives it
//! (an empty list is refused, fail-closed), egress derived — DNS, the database port the DSN
//! connects to ([`super::connection_urls::database_port`]), the broker port
//! the TransportURLSecret step resolved, Keystone, one rule for the NFS exports, one rule for the
//! networks the RBD backends name — plus `additionalEgress`. An RBD backend naming no networks
//! still reaches its Ceph cluster: the monitor ports (3300, 6789) to its monitors' addresses
//! (port-scoped when a monitor is given by name), and the OSD ports (6800-7300) port-scoped,
//! because OSD addresses come from the monitors' map at run time, not from the spec.

use super::backend_projection::ProjectedBackend;
use super::connection_urls::database_port;
use crate::crd::{BackendType, CinderSpec};
use crate::names;
use k8s_openapi::api::networking::v1::{
    IPBlock, NetworkPolicyEgressRule, NetworkPolicyPeer, NetworkPolicyPort, NetworkPolicySpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use std::collections::BTreeSet;
use std::net::IpAddr;

/// NFS ports: nfsd and the portmapper.
pub(crate) const NFS_PORTS: [(i32, &str); 3] = [(2049, "TCP"), (111, "TCP"), (111, "UDP")];
/// Ceph monitor ports (msgr2, msgr1).
pub(crate) const CEPH_MON_PORTS: [i32; 2] = [3300, 6789];
/// Ceph OSD port range.
pub(crate) const CEPH_OSD_PORTS: (i32, i32) = (6800, 7300);

/// The policy cannot be derived.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum NetworkPolicyError {
    #[error(
        "spec.networkPolicy.ingress is empty; refusing a policy that would cut off every client (fail-closed)"
    )]
    EmptyIngress,
    #[error("the broker port is not resolved yet")]
    BrokerPortUnknown,
}

fn port(p: i32, protocol: &str) -> NetworkPolicyPort {
    NetworkPolicyPort {
        port: Some(IntOrString::Int(p)),
        protocol: Some(protocol.to_string()),
        end_port: None,
    }
}

fn rule(
    ports: Vec<NetworkPolicyPort>,
    to: Option<Vec<NetworkPolicyPeer>>,
) -> NetworkPolicyEgressRule {
    NetworkPolicyEgressRule {
        ports: Some(ports),
        to,
    }
}

fn cidr_peer(cidr: String) -> NetworkPolicyPeer {
    NetworkPolicyPeer {
        ip_block: Some(IPBlock { cidr, except: None }),
        ..Default::default()
    }
}

/// The single-address peer of `ip`.
fn host_peer(ip: IpAddr) -> NetworkPolicyPeer {
    cidr_peer(if ip.is_ipv4() {
        format!("{ip}/32")
    } else {
        format!("{ip}/128")
    })
}

/// The addresses of one `monitors` entry (`10.0.0.1`, `10.0.0.1:6789`, `[::1]:3300` or
/// `[v2:10.0.0.1:3300/0,v1:10.0.0.1:6789/0]`); None when it names a host by name.
pub(crate) fn monitor_addresses(entry: &str) -> Option<Vec<IpAddr>> {
    let inner = entry
        .strip_prefix('[')
        .and_then(|e| e.strip_suffix(']'))
        .filter(|e| e.contains(','));
    let parts: Vec<&str> = match inner {
        Some(list) => list.split(',').collect(),
        None => vec![entry],
    };
    parts
        .into_iter()
        .map(|p| {
            let p = p.trim();
            let p = p
                .strip_prefix("v1:")
                .or_else(|| p.strip_prefix("v2:"))
                .unwrap_or(p);
            let p = p.split('/').next().unwrap_or(p);
            p.parse::<std::net::SocketAddr>()
                .map(|s| s.ip())
                .or_else(|_| p.parse::<IpAddr>())
                .or_else(|_| {
                    p.trim_start_matches('[')
                        .trim_end_matches(']')
                        .parse::<IpAddr>()
                })
                .ok()
        })
        .collect()
}

/// The port of the Keystone endpoint URL (443 / 80 by scheme when absent).
pub(crate) fn url_port(url: &str) -> Option<i32> {
    let (scheme, rest) = url.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let explicit = if host_port.starts_with('[') {
        host_port.rsplit_once("]:").map(|(_, p)| p)
    } else {
        host_port.rsplit_once(':').map(|(_, p)| p)
    };
    match explicit {
        Some(p) => p.parse().ok(),
        None => match scheme {
            "https" => Some(443),
            "http" => Some(80),
            _ => None,
        },
    }
}

/// The NetworkPolicy spec, `Ok(None)` when `spec.networkPolicy` is unset (delete any policy).
/// `backends` holds the projected volume backends and the backup target.
pub(crate) fn derive_network_policy(
    cinder: &str,
    spec: &CinderSpec,
    broker_port: Option<u16>,
    backends: &[ProjectedBackend],
) -> Result<Option<NetworkPolicySpec>, NetworkPolicyError> {
    let Some(np) = &spec.network_policy else {
        return Ok(None);
    };
    if np.ingress.is_empty() {
        return Err(NetworkPolicyError::EmptyIngress);
    }
    let broker_port = broker_port.ok_or(NetworkPolicyError::BrokerPortUnknown)?;
    let mut egress = vec![
        rule(vec![port(53, "UDP"), port(53, "TCP")], None),
        rule(
            vec![port(i32::from(database_port(spec.database.port)), "TCP")],
            None,
        ),
        rule(vec![port(i32::from(broker_port), "TCP")], None),
    ];
    if let Some(p) = url_port(&spec.keystone_endpoint) {
        egress.push(rule(vec![port(p, "TCP")], None));
    }
    let nfs_servers: BTreeSet<&str> = backends
        .iter()
        .filter(|b| b.backend_type == Some(BackendType::Nfs))
        .filter_map(|b| b.nfs_server.as_deref())
        .collect();
    if !nfs_servers.is_empty() {
        // Only addresses can be peers; a server given by name leaves the rule port-scoped.
        let ips: Option<Vec<IpAddr>> = nfs_servers
            .iter()
            .map(|s| s.parse::<IpAddr>().ok())
            .collect();
        let to = ips.map(|ips| ips.into_iter().map(host_peer).collect());
        egress.push(rule(
            NFS_PORTS.iter().map(|(p, proto)| port(*p, proto)).collect(),
            to,
        ));
    }
    let rbd_networks: BTreeSet<&str> = backends
        .iter()
        .filter(|b| b.backend_type == Some(BackendType::Rbd))
        .flat_map(|b| b.rbd_networks.iter().map(String::as_str))
        .collect();
    let mon_ports =
        || -> Vec<NetworkPolicyPort> { CEPH_MON_PORTS.iter().map(|p| port(*p, "TCP")).collect() };
    let osd_ports = || NetworkPolicyPort {
        port: Some(IntOrString::Int(CEPH_OSD_PORTS.0)),
        end_port: Some(CEPH_OSD_PORTS.1),
        protocol: Some("TCP".into()),
    };
    if !rbd_networks.is_empty() {
        let mut ports = mon_ports();
        ports.push(osd_ports());
        egress.push(rule(
            ports,
            Some(
                rbd_networks
                    .into_iter()
                    .map(|n| cidr_peer(n.to_string()))
                    .collect(),
            ),
        ));
    }
    let monitors: BTreeSet<&str> = backends
        .iter()
        .filter(|b| b.backend_type == Some(BackendType::Rbd) && b.rbd_networks.is_empty())
        .flat_map(|b| b.rbd_monitors.iter().map(String::as_str))
        .collect();
    if !monitors.is_empty() {
        let ips: Option<BTreeSet<IpAddr>> = monitors.iter().map(|m| monitor_addresses(m)).try_fold(
            BTreeSet::new(),
            |mut all, ips| {
                all.extend(ips?);
                Some(all)
            },
        );
        let to = ips.map(|ips| ips.into_iter().map(host_peer).collect());
        egress.push(rule(mon_ports(), to));
        egress.push(rule(vec![osd_ports()], None));
    }
    egress.extend(np.additional_egress.iter().cloned());
    Ok(Some(NetworkPolicySpec {
        pod_selector: Some(LabelSelector {
            match_labels: Some(
                [
                    (names::LABEL_NAME.to_string(), names::APP_NAME.to_string()),
                    (names::LABEL_INSTANCE.to_string(), cinder.to_string()),
                ]
                .into(),
            ),
            match_expressions: None,
        }),
        policy_types: Some(vec!["Ingress".into(), "Egress".into()]),
        ingress: Some(np.ingress.clone()),
        egress: Some(egress),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::cinder::NetworkPolicySpec as NpSpec;
    use k8s_openapi::api::networking::v1::NetworkPolicyIngressRule;

    fn spec(ingress: Vec<NetworkPolicyIngressRule>) -> CinderSpec {
        let mut s: CinderSpec = serde_norway::from_str(
            r#"{openStackRelease: "2026.1", image: {repository: r, tag: "2026.1"},
                database: {host: db.example, port: 3307, secretRef: {name: d}}, messaging: {clusterRef: {name: q}},
                serviceUser: {secretRef: {name: s}}, keystoneEndpoint: "https://keystone.example/v3"}"#,
        )
        .unwrap();
        s.network_policy = Some(NpSpec {
            ingress,
            additional_egress: vec![rule(vec![port(9999, "TCP")], None)],
        });
        s
    }

    fn backend(name: &str, t: BackendType, nfs: Option<&str>, nets: &[&str]) -> ProjectedBackend {
        ProjectedBackend {
            name: name.into(),
            backend_type: Some(t),
            nfs_server: nfs.map(Into::into),
            rbd_networks: nets.iter().map(|n| n.to_string()).collect(),
            ..Default::default()
        }
    }

    /// The CIDRs a rule allows.
    fn cidrs(r: &NetworkPolicyEgressRule) -> Vec<String> {
        r.to.iter()
            .flatten()
            .map(|p| p.ip_block.as_ref().unwrap().cidr.clone())
            .collect()
    }

    fn ports_of(r: &NetworkPolicyEgressRule) -> Vec<i32> {
        r.ports
            .as_ref()
            .unwrap()
            .iter()
            .map(|p| match p.port {
                Some(IntOrString::Int(n)) => n,
                _ => -1,
            })
            .collect()
    }

    #[test]
    fn egress_has_broker_port_one_nfs_rule_one_rbd_rule_and_additional() {
        let s = spec(vec![NetworkPolicyIngressRule::default()]);
        let backends = [
            backend("n1", BackendType::Nfs, Some("10.0.0.5"), &[]),
            backend("n2", BackendType::Nfs, Some("10.0.0.6"), &[]),
            backend("r1", BackendType::Rbd, None, &["10.1.0.0/24"]),
            backend(
                "r2",
                BackendType::Rbd,
                None,
                &["10.2.0.0/24", "10.1.0.0/24"],
            ),
        ];
        let np = derive_network_policy("c1", &s, Some(5671), &backends)
            .unwrap()
            .unwrap();
        let egress = np.egress.unwrap();
        let all: Vec<Vec<i32>> = egress.iter().map(ports_of).collect();
        assert_eq!(
            all,
            vec![
                vec![53, 53],
                vec![3307],
                vec![5671],
                vec![443],
                vec![2049, 111, 111],
                vec![3300, 6789, 6800],
                vec![9999]
            ]
        );
        let nfs_to = cidrs(&egress[4]);
        assert_eq!(nfs_to, ["10.0.0.5/32", "10.0.0.6/32"]);
        let rbd_to = cidrs(&egress[5]);
        assert_eq!(rbd_to, ["10.1.0.0/24", "10.2.0.0/24"]);
        assert_eq!(egress[5].ports.as_ref().unwrap()[2].end_port, Some(7300));
        assert_eq!(
            np.pod_selector.unwrap().match_labels.unwrap()["app.kubernetes.io/instance"],
            "c1"
        );
    }

    #[test]
    fn nfs_by_host_name_is_port_scoped_and_no_storage_means_no_storage_rules() {
        let s = spec(vec![NetworkPolicyIngressRule::default()]);
        let np = derive_network_policy(
            "c1",
            &s,
            Some(5672),
            &[backend("n", BackendType::Nfs, Some("nfs.example"), &[])],
        )
        .unwrap()
        .unwrap();
        assert!(np.egress.as_ref().unwrap()[4].to.is_none());
        let np = derive_network_policy("c1", &s, Some(5672), &[])
            .unwrap()
            .unwrap();
        assert_eq!(np.egress.unwrap().len(), 5);
    }

    #[test]
    fn rbd_without_networks_reaches_its_monitors_and_the_osd_ports() {
        let s = spec(vec![NetworkPolicyIngressRule::default()]);
        let mut r = backend("r", BackendType::Rbd, None, &[]);
        r.rbd_monitors = vec![
            "10.3.0.1:6789".into(),
            "[v2:10.3.0.2:3300/0,v1:10.3.0.2:6789/0]".into(),
            "10.3.0.1".into(),
        ];
        let np = derive_network_policy("c1", &s, Some(5672), std::slice::from_ref(&r))
            .unwrap()
            .unwrap();
        let egress = np.egress.unwrap();
        assert_eq!(ports_of(&egress[4]), [3300, 6789]);
        let to = cidrs(&egress[4]);
        assert_eq!(to, ["10.3.0.1/32", "10.3.0.2/32"]);
        assert_eq!(ports_of(&egress[5]), [6800]);
        assert_eq!(egress[5].ports.as_ref().unwrap()[0].end_port, Some(7300));
        assert!(egress[5].to.is_none());
        // A monitor by name: the monitor rule is port-scoped.
        r.rbd_monitors.push("mon.ceph.example:6789".into());
        let np = derive_network_policy("c1", &s, Some(5672), &[r])
            .unwrap()
            .unwrap();
        assert!(np.egress.unwrap()[4].to.is_none());
        assert_eq!(
            monitor_addresses("[::1]:3300"),
            Some(vec!["::1".parse().unwrap()])
        );
    }

    #[test]
    fn empty_ingress_is_refused_and_unset_means_none() {
        assert_eq!(
            derive_network_policy("c1", &spec(vec![]), Some(5672), &[]),
            Err(NetworkPolicyError::EmptyIngress)
        );
        let mut s = spec(vec![]);
        s.network_policy = None;
        assert_eq!(derive_network_policy("c1", &s, None, &[]), Ok(None));
        assert_eq!(
            derive_network_policy(
                "c1",
                &spec(vec![NetworkPolicyIngressRule::default()]),
                None,
                &[]
            ),
            Err(NetworkPolicyError::BrokerPortUnknown)
        );
    }

    #[test]
    fn url_ports() {
        assert_eq!(url_port("https://k.example/v3"), Some(443));
        assert_eq!(url_port("http://k.example:5000/v3"), Some(5000));
        assert_eq!(url_port("http://[fd00::1]:35357"), Some(35357));
        assert_eq!(url_port("k.example"), None);
    }
}
