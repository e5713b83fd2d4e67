//! Service ClusterIP allocation: the range a cluster hands ClusterIPs out of ([`ServiceCidr`],
//! `10.96.0.0/16` unless a cluster is given another, so clusters whose addresses reach the host
//! can each use their own), and the pure choice of a free address or the check of one a client
//! asked for, as the real API server's allocator refuses them.

use std::collections::BTreeSet;
use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

use crate::error::{ApiError, Cause};

/// An IPv4 range of Service ClusterIPs (`a.b.c.d/prefix`, prefix 8 to 30).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ServiceCidr {
    network: Ipv4Addr,
    prefix: u8,
}

/// The range of a cluster given none: `10.96.0.0/16` (inside a real cluster's default
/// `10.96.0.0/12`).
pub const DEFAULT_SERVICE_CIDR: ServiceCidr = ServiceCidr {
    network: Ipv4Addr::new(10, 96, 0, 0),
    prefix: 16,
};

impl Default for ServiceCidr {
    fn default() -> Self {
        DEFAULT_SERVICE_CIDR
    }
}

/// Why a text is not a [`ServiceCidr`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CidrError {
    #[error("{0:?} is not an IPv4 CIDR such as 10.96.0.0/16")]
    Syntax(String),
    #[error("the prefix of {0:?} must be between 8 and 30")]
    Prefix(String),
    #[error("{text:?} has host bits set; the network is {network}")]
    HostBits { text: String, network: ServiceCidr },
}

impl ServiceCidr {
    /// The range `network/prefix`; the network must have no host bits set.
    pub fn new(network: Ipv4Addr, prefix: u8) -> Result<Self, CidrError> {
        let text = format!("{network}/{prefix}");
        if !(8..=30).contains(&prefix) {
            return Err(CidrError::Prefix(text));
        }
        let mask = u32::MAX << (32 - prefix);
        let masked = Ipv4Addr::from(u32::from(network) & mask);
        if masked != network {
            return Err(CidrError::HostBits {
                text,
                network: ServiceCidr {
                    network: masked,
                    prefix,
                },
            });
        }
        Ok(ServiceCidr { network, prefix })
    }

    /// The network address.
    pub fn network(&self) -> Ipv4Addr {
        self.network
    }

    /// The prefix length.
    pub fn prefix(&self) -> u8 {
        self.prefix
    }

    /// How many addresses the range holds (network and broadcast included).
    pub fn size(&self) -> u32 {
        1u32 << (32 - self.prefix)
    }

    /// Whether `ip` is an address of the range that may be allocated (neither its network nor
    /// its broadcast address).
    pub fn allocatable(&self, ip: Ipv4Addr) -> bool {
        let offset = u32::from(ip).wrapping_sub(u32::from(self.network));
        u32::from(ip) >= u32::from(self.network) && offset >= 1 && offset < self.size() - 1
    }

    /// The address at `offset` from the network address.
    fn at(&self, offset: u32) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.network) + offset)
    }

    /// A free address for a new Service: the first one not in `used` from a start derived from
    /// `seed` (the store's resourceVersion, so successive Services get successive addresses),
    /// wrapping around; an error when every address is taken.
    pub fn allocate(&self, seed: u64, used: &BTreeSet<Ipv4Addr>) -> Result<Ipv4Addr, ApiError> {
        let usable = self.size() - 2;
        let start = (seed % u64::from(usable)) as u32;
        (0..usable)
            .map(|step| self.at(1 + (start + step) % usable))
            .find(|ip| !used.contains(ip))
            .ok_or_else(|| {
                ApiError::internal(format!(
                    "failed to allocate a serviceIP: range is full (the range of valid IPs is {self})"
                ))
            })
    }

    /// Checks a ClusterIP a client asked for (`spec.clusterIP` of a new Service): it must be an
    /// IPv4 address of the range that no other Service holds. `None` (headless) is always allowed.
    pub fn check_requested(&self, requested: &str, used: &BTreeSet<Ipv4Addr>) -> Option<Cause> {
        if requested == "None" {
            return None;
        }
        let field = "spec.clusterIPs";
        let invalid = |why: String| {
            Some(Cause::new(
                "FieldValueInvalid",
                field,
                format!("Invalid value: []string{{\"{requested}\"}}: {why}"),
            ))
        };
        match Ipv4Addr::from_str(requested) {
            Err(_) => {
                invalid("must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)".into())
            }
            Ok(ip) if !self.allocatable(ip) => invalid(format!(
                "failed to allocate IP {ip}: the provided IP ({ip}) is not in the valid range. The range of valid IPs is {self}"
            )),
            Ok(ip) if used.contains(&ip) => invalid(format!(
                "failed to allocate IP {ip}: provided IP is already allocated"
            )),
            Ok(_) => None,
        }
    }
}

impl fmt::Display for ServiceCidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix)
    }
}

impl FromStr for ServiceCidr {
    type Err = CidrError;

    fn from_str(text: &str) -> Result<Self, CidrError> {
        let syntax = || CidrError::Syntax(text.to_string());
        let (ip, prefix) = text.split_once('/').ok_or_else(syntax)?;
        let ip = Ipv4Addr::from_str(ip).map_err(|_| syntax())?;
        let prefix = u8::from_str(prefix).map_err(|_| syntax())?;
        ServiceCidr::new(ip, prefix).map_err(|error| match error {
            CidrError::HostBits { network, .. } => CidrError::HostBits {
                text: text.to_string(),
                network,
            },
            CidrError::Prefix(_) => CidrError::Prefix(text.to_string()),
            other => other,
        })
    }
}

/// The ClusterIPs the Services in `services` hold (`spec.clusterIP` and `spec.clusterIPs`),
/// except the one named `except` (namespace, name): the Service being written.
pub fn used_ips<'a>(
    services: impl Iterator<Item = &'a serde_json::Value>,
    except: (&str, &str),
) -> BTreeSet<Ipv4Addr> {
    let mut used = BTreeSet::new();
    for service in services {
        let meta = &service["metadata"];
        if meta["namespace"].as_str() == Some(except.0) && meta["name"].as_str() == Some(except.1) {
            continue;
        }
        let spec = &service["spec"];
        let ips = spec["clusterIPs"]
            .as_array()
            .into_iter()
            .flatten()
            .chain(std::iter::once(&spec["clusterIP"]));
        used.extend(
            ips.filter_map(serde_json::Value::as_str)
                .filter_map(|ip| Ipv4Addr::from_str(ip).ok()),
        );
    }
    used
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cidr(text: &str) -> ServiceCidr {
        text.parse().unwrap()
    }

    #[test]
    fn parses_and_refuses_bad_ranges() {
        assert_eq!(cidr("10.96.0.0/16"), DEFAULT_SERVICE_CIDR);
        assert_eq!(cidr("10.97.16.0/20").to_string(), "10.97.16.0/20");
        assert!(matches!(
            "10.96.0.1/16".parse::<ServiceCidr>(),
            Err(CidrError::HostBits { .. })
        ));
        assert!(matches!(
            "10.96.0.0/31".parse::<ServiceCidr>(),
            Err(CidrError::Prefix(_))
        ));
        assert!(matches!(
            "10.96.0.0".parse::<ServiceCidr>(),
            Err(CidrError::Syntax(_))
        ));
        assert!(matches!(
            "x/16".parse::<ServiceCidr>(),
            Err(CidrError::Syntax(_))
        ));
    }

    #[test]
    fn allocates_inside_the_range_skipping_used_and_edges() {
        let range = cidr("10.97.16.0/30");
        // two usable addresses: .1 and .2
        let mut used = BTreeSet::new();
        let first = range.allocate(7, &used).unwrap();
        assert!(range.allocatable(first));
        used.insert(first);
        let second = range.allocate(7, &used).unwrap();
        assert_ne!(first, second);
        assert!(range.allocatable(second));
        used.insert(second);
        let full = range.allocate(7, &used).unwrap_err();
        assert_eq!(full.code, 500);
        assert!(full.message.contains("range is full"), "{}", full.message);
        assert!(!range.allocatable(Ipv4Addr::new(10, 97, 16, 0)));
        assert!(!range.allocatable(Ipv4Addr::new(10, 97, 16, 3)));
        assert!(!range.allocatable(Ipv4Addr::new(10, 96, 0, 1)));
    }

    #[test]
    fn successive_seeds_give_distinct_addresses_in_a_16() {
        let range = DEFAULT_SERVICE_CIDR;
        let mut used = BTreeSet::new();
        for seed in 0..1000u64 {
            let ip = range.allocate(seed * 65_534, &used).unwrap();
            assert!(used.insert(ip), "{ip} handed out twice");
        }
    }

    #[test]
    fn requested_addresses_are_checked() {
        let range = cidr("10.96.0.0/16");
        let used: BTreeSet<Ipv4Addr> = [Ipv4Addr::new(10, 96, 0, 5)].into_iter().collect();
        assert_eq!(range.check_requested("None", &used), None);
        assert_eq!(range.check_requested("10.96.3.4", &used), None);
        let taken = range.check_requested("10.96.0.5", &used).unwrap();
        assert!(taken.message.contains("provided IP is already allocated"));
        let outside = range.check_requested("192.168.0.1", &used).unwrap();
        assert!(outside.message.contains("not in the valid range"));
        assert!(outside.message.contains("10.96.0.0/16"));
        assert!(range.check_requested("nonsense", &used).is_some());
    }

    #[test]
    fn used_ips_skip_the_service_being_written() {
        let services = [
            json!({"metadata": {"namespace": "a", "name": "x"}, "spec": {"clusterIP": "10.96.0.2", "clusterIPs": ["10.96.0.2"]}}),
            json!({"metadata": {"namespace": "a", "name": "y"}, "spec": {"clusterIP": "10.96.0.3"}}),
            json!({"metadata": {"namespace": "b", "name": "x"}, "spec": {"clusterIP": "None"}}),
        ];
        let used = used_ips(services.iter(), ("a", "x"));
        assert_eq!(
            used.into_iter().collect::<Vec<_>>(),
            vec![Ipv4Addr::new(10, 96, 0, 3)]
        );
    }
}
