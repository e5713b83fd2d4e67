//! What both real servers share: a free loopback port, and a child process stopped by its own
//! pid (SIGTERM, SIGKILL after a grace period), never by name.

use std::process::Child;
use std::time::{Duration, Instant};

/// A port nothing listens on at the moment (bound on 127.0.0.1, then released).
pub fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
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
