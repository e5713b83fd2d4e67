//! Addresses that answer, for simulated pods beside a real control plane.
//!
//! A real kube-apiserver reaches a pod through its IP (the Service proxy subresource forwards
//! `services/{name}:{port}/proxy/...` to an endpoint of the Service). A simulated pod runs
//! nothing, so beside a real control plane ([`super::super::ControllersConfig::real_control_plane`])
//! the kubelet claims a host interface and a free /20 of the service proxy's pool
//! ([`HostInterface::claim`]), gives each running pod an address from it (added to the
//! interface) and answers on each TCP `containerPort` of its containers: `200 OK` to any HTTP
//! request while the pod is Ready, `503` while it is not, as a simulated process would. A
//! pod's address and listeners go when it stops; dropping the network ends every listener
//! and deletes the interface with its addresses. Without root or iproute2 (no interface) pods
//! keep the made-up address [`super::pod_status::pod_ip`] gives, which leads nowhere.

use std::collections::{BTreeSet, HashMap};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Mutex, PoisonError};

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use crate::netproxy::iface::{HostInterface, NetError};
use crate::objects::service_ips::ServiceCidr;

/// One pod's address, its readiness and the tasks answering on its ports.
struct Endpoint {
    ip: Ipv4Addr,
    ready: tokio::sync::watch::Sender<bool>,
    listeners: Vec<JoinHandle<()>>,
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        for listener in &self.listeners {
            listener.abort();
        }
    }
}

/// The pods' addresses on one claimed host interface.
pub struct PodNetwork {
    interface: HostInterface,
    range: ServiceCidr,
    /// By pod uid.
    pods: Mutex<HashMap<String, Endpoint>>,
}

impl std::fmt::Debug for PodNetwork {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PodNetwork")
            .field("interface", &self.interface.name())
            .field("range", &self.range.to_string())
            .finish()
    }
}

/// The TCP container ports of a pod (`spec.containers[].ports[]`, protocol TCP or unset).
pub fn tcp_ports(pod: &Value) -> Vec<u16> {
    let mut ports: Vec<u16> = pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .flat_map(|c| c["ports"].as_array().cloned().unwrap_or_default())
        .filter(|p| p["protocol"].as_str().unwrap_or("TCP") == "TCP")
        .filter_map(|p| p["containerPort"].as_u64())
        .filter_map(|p| u16::try_from(p).ok())
        .collect();
    ports.sort_unstable();
    ports.dedup();
    ports
}

impl PodNetwork {
    /// Claims an interface and its range.
    pub fn claim() -> Result<PodNetwork, NetError> {
        let interface = HostInterface::claim()?;
        let range = interface.range().ok_or(NetError::PoolExhausted)?;
        Ok(PodNetwork {
            interface,
            range,
            pods: Mutex::default(),
        })
    }

    /// The interface's name.
    pub fn interface_name(&self) -> &str {
        self.interface.name()
    }

    /// The address of pod `uid`, giving it one (on the interface, answering on `ports`) when
    /// it has none; its readiness set to `ready`. None when the range is full or the address
    /// cannot be added.
    pub async fn attach(&self, uid: &str, ports: &[u16], ready: bool) -> Option<Ipv4Addr> {
        let fresh = {
            let mut pods = self.pods.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(endpoint) = pods.get(uid) {
                endpoint.ready.send_replace(ready);
                return Some(endpoint.ip);
            }
            let used: BTreeSet<Ipv4Addr> = pods.values().map(|e| e.ip).collect();
            let seed = uid
                .bytes()
                .fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)));
            let ip = self.range.allocate(seed, &used).ok()?;
            let (ready_tx, _) = tokio::sync::watch::channel(ready);
            pods.insert(
                uid.to_owned(),
                Endpoint {
                    ip,
                    ready: ready_tx,
                    listeners: Vec::new(),
                },
            );
            ip
        };
        if let Err(error) = self.interface.add_address(fresh).await {
            tracing::warn!(%error, pod = uid, "pod address not added");
            self.pods
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(uid);
            return None;
        }
        let mut bound = Vec::new();
        for port in ports {
            match TcpListener::bind(SocketAddr::from((fresh, *port))).await {
                Ok(listener) => bound.push(listener),
                Err(error) => tracing::warn!(%error, pod = uid, port, "pod port not bound"),
            }
        }
        let mut pods = self.pods.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(endpoint) = pods.get_mut(uid) else {
            return Some(fresh);
        };
        for listener in bound {
            let ready = endpoint.ready.subscribe();
            endpoint
                .listeners
                .push(tokio::spawn(serve(listener, ready)));
        }
        Some(fresh)
    }

    /// The address pod `uid` holds, if any.
    pub fn address(&self, uid: &str) -> Option<Ipv4Addr> {
        let pods = self.pods.lock().unwrap_or_else(PoisonError::into_inner);
        pods.get(uid).map(|e| e.ip)
    }

    /// Takes pod `uid`'s address and listeners away.
    pub async fn detach(&self, uid: &str) {
        let endpoint = self
            .pods
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(uid);
        if let Some(endpoint) = endpoint
            && let Err(error) = self.interface.remove_address(endpoint.ip).await
        {
            tracing::debug!(%error, pod = uid, "pod address not removed");
        }
    }
}

/// Answers every connection on `listener`: 200 `OK` while `ready` holds true, else 503.
async fn serve(listener: TcpListener, ready: tokio::sync::watch::Receiver<bool>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let ready = *ready.borrow();
        tokio::spawn(answer(stream, ready));
    }
}

/// Reads one request's head and answers it; the connection closes after.
async fn answer(mut stream: TcpStream, ready: bool) {
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 * 1024 {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let (status, body) = if ready {
        ("200 OK", "OK")
    } else {
        ("503 Service Unavailable", "not ready")
    };
    let answer = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(answer.as_bytes()).await;
    let _ = stream.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tcp_ports_of_every_container_without_udp() {
        let pod = serde_json::json!({"spec": {"containers": [
            {"name": "a", "ports": [{"containerPort": 8776}, {"containerPort": 53, "protocol": "UDP"}]},
            {"name": "b", "ports": [{"containerPort": 9000, "protocol": "TCP"}, {"containerPort": 8776}]},
            {"name": "c"}
        ]}});
        assert_eq!(tcp_ports(&pod), vec![8776, 9000]);
    }
}
