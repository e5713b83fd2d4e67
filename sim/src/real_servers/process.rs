//! What both real servers share: a free loopback port, and a child process stopped by its own
//! pid (SIGTERM, SIGKILL after a grace period), never by name.

use std::process::Child;
use std::time::{Duration, Instant};

/// A port nothing listens on at the moment (bound on 127.0.0.1, then released), drawn at random
/// from below the kernel's ephemeral range. A port from port 0 would be an ephemeral one, which
/// any outgoing connection of a parallel test may take before the server binds it.
pub fn free_port() -> std::io::Result<u16> {
    free_port_on(std::net::Ipv4Addr::LOCALHOST.into())
}

/// A port nothing listens on at the moment on `address`, as [`free_port`] picks it.
pub fn free_port_on(address: std::net::IpAddr) -> std::io::Result<u16> {
    use rand::Rng;
    let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    let (low, high) = (10_000u16, ephemeral_low.max(10_001));
    let mut rng = rand::rng();
    let mut last = None;
    for _ in 0..256 {
        let port = rng.random_range(low..high);
        match std::net::TcpListener::bind((address, port)) {
            Ok(_) => return Ok(port),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("no free port below the ephemeral range")))
}

/// Sends SIGTERM to `child`, waits up to `grace` for it to exit, then SIGKILLs and reaps it.
pub fn stop(child: &mut Child, grace: Duration) {
    if let Ok(Some(_)) = child.try_wait() {
        return;
    }
    if let Ok(pid) = i32::try_from(child.id()) {
        // SAFETY: kill(2) on the pid of our own unreaped child: the pid cannot have been reused.
        unsafe {
            libc::kill(pid, libc::SIGTERM);
        }
    }
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    let _ = child.wait();
}
