//! The host interface one service proxy holds its ClusterIPs on: a `dummy` link (a `bridge`
//! without ports where the kernel has no dummy driver: it holds local addresses the same way),
//! created with iproute2's `ip`, up, and marked with the creating process in its alias
//! (`cinder-sim pid N`). [`HostInterface::claim`] picks a free block of the pool
//! (`10.97.0.0/20` ... `10.111.240.0/20`, 240 blocks) by creating the interface that names it
//! (`cinder-svcK` for block K): the kernel refuses a second interface of one name, so two
//! processes never claim one block, and a block whose interface was left by a process that is
//! gone is taken back. Dropping the interface deletes it, and with it every address on it.

use std::net::Ipv4Addr;
use std::process::Command;

use crate::objects::service_ips::ServiceCidr;

/// What an `ip` command reported when it failed, or why it could not run.
#[derive(Debug, thiserror::Error)]
pub enum NetError {
    #[error("`ip {args}` failed: {stderr}")]
    Command { args: String, stderr: String },
    #[error("`ip` could not be run (iproute2 is needed, and root): {0}")]
    Spawn(#[from] std::io::Error),
    #[error("no free block for ClusterIPs: interfaces cinder-svc16 to cinder-svc255 all exist")]
    PoolExhausted,
}

/// The interface name prefix of claimed blocks.
pub const POOL_PREFIX: &str = "cinder-svc";
/// Blocks below this one lie in the simulated clusters' default range (10.96.0.0/16).
const FIRST_BLOCK: u32 = 16;
const BLOCKS: u32 = 256;

/// The ClusterIP range of pool block `k` (`10.96.0.0/12` cut into /20s).
pub fn block_range(k: u32) -> ServiceCidr {
    let base = u32::from(Ipv4Addr::new(10, 96, 0, 0)) + (k << 12);
    // Every block is a valid /20 network: this cannot fail for k < 256.
    ServiceCidr::new(Ipv4Addr::from(base), 20).unwrap_or_default()
}

/// Runs `ip ARGS`; its stderr on failure.
fn ip(args: &[&str]) -> Result<String, NetError> {
    let output = Command::new("ip").args(args).output()?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(NetError::Command {
            args: args.join(" "),
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_string(),
        })
    }
}

fn exists_error(error: &NetError) -> bool {
    matches!(error, NetError::Command { stderr, .. } if stderr.contains("File exists"))
}

/// A host interface this process created; deleted when dropped.
#[derive(Debug)]
pub struct HostInterface {
    name: String,
    kind: &'static str,
    range: Option<ServiceCidr>,
    deleted: bool,
}

impl HostInterface {
    /// Creates the interface `name` (a dummy, else a bridge without ports), up. Fails when
    /// one of that name exists.
    pub fn create(name: &str) -> Result<HostInterface, NetError> {
        let kind = match ip(&["link", "add", name, "type", "dummy"]) {
            Ok(_) => "dummy",
            Err(NetError::Command { stderr, .. }) if stderr.contains("Unknown device type") => {
                ip(&["link", "add", name, "type", "bridge"])?;
                "bridge"
            }
            Err(error) => return Err(error),
        };
        let interface = HostInterface {
            name: name.to_string(),
            kind,
            range: None,
            deleted: false,
        };
        let alias = format!("cinder-sim pid {}", std::process::id());
        ip(&["link", "set", "dev", name, "alias", &alias])?;
        ip(&["link", "set", "dev", name, "up"])?;
        Ok(interface)
    }

    /// Claims a free block of the pool: its interface and its range. The search starts at a
    /// block derived from the process id, so parallel processes rarely try the same ones.
    pub fn claim() -> Result<HostInterface, NetError> {
        let usable = BLOCKS - FIRST_BLOCK;
        let start = std::process::id() % usable;
        for step in 0..usable {
            let k = FIRST_BLOCK + (start + step) % usable;
            let name = format!("{POOL_PREFIX}{k}");
            let created = match HostInterface::create(&name) {
                Err(error) if exists_error(&error) && left_by_dead_process(&name) => {
                    // Its creator is gone: take it back.
                    if ip(&["link", "del", &name]).is_err() {
                        continue;
                    }
                    HostInterface::create(&name)
                }
                other => other,
            };
            match created {
                Ok(mut interface) => {
                    interface.range = Some(block_range(k));
                    return Ok(interface);
                }
                Err(error) if exists_error(&error) => continue,
                Err(error) => return Err(error),
            }
        }
        Err(NetError::PoolExhausted)
    }

    /// The interface name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `dummy`, or `bridge` where the kernel has no dummy driver.
    pub fn kind(&self) -> &'static str {
        self.kind
    }

    /// The pool block this interface claims (None for one made by [`HostInterface::create`]).
    pub fn range(&self) -> Option<ServiceCidr> {
        self.range
    }

    /// Adds `ip/32`; an address already there is fine.
    pub async fn add_address(&self, address: Ipv4Addr) -> Result<(), NetError> {
        let cidr = format!("{address}/32");
        match ip_async(&["addr", "add", &cidr, "dev", &self.name]).await {
            Err(error) if exists_error(&error) => Ok(()),
            other => other,
        }
    }

    /// Removes `ip/32`.
    pub async fn remove_address(&self, address: Ipv4Addr) -> Result<(), NetError> {
        let cidr = format!("{address}/32");
        ip_async(&["addr", "del", &cidr, "dev", &self.name]).await
    }

    /// Deletes the interface (and every address on it).
    pub fn delete(mut self) -> Result<(), NetError> {
        self.deleted = true;
        ip(&["link", "del", &self.name]).map(|_| ())
    }
}

impl Drop for HostInterface {
    fn drop(&mut self) {
        if !self.deleted
            && let Err(error) = ip(&["link", "del", &self.name])
        {
            tracing::warn!(%error, interface = %self.name, "service proxy interface not deleted");
        }
    }
}

async fn ip_async(args: &[&str]) -> Result<(), NetError> {
    let output = tokio::process::Command::new("ip")
        .args(args)
        .output()
        .await?;
    if output.status.success() {
        Ok(())
    } else {
        Err(NetError::Command {
            args: args.join(" "),
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_string(),
        })
    }
}

/// Whether the interface `name` carries the alias of a process that no longer runs.
fn left_by_dead_process(name: &str) -> bool {
    let Ok(shown) = ip(&["-o", "link", "show", "dev", name]) else {
        return false;
    };
    let Some(pid) = shown
        .split("alias cinder-sim pid ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|pid| pid.parse::<u32>().ok())
    else {
        return false;
    };
    pid != std::process::id() && !std::path::Path::new(&format!("/proc/{pid}")).exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_distinct_slash_20s_outside_the_default_range() {
        assert_eq!(block_range(16).to_string(), "10.97.0.0/20");
        assert_eq!(block_range(17).to_string(), "10.97.16.0/20");
        assert_eq!(block_range(255).to_string(), "10.111.240.0/20");
        let default = crate::objects::service_ips::DEFAULT_SERVICE_CIDR;
        for k in FIRST_BLOCK..BLOCKS {
            let range = block_range(k);
            assert!(!default.allocatable(Ipv4Addr::from(u32::from(range.network()) + 1)));
        }
        assert!(format!("{POOL_PREFIX}{}", BLOCKS - 1).len() <= 15);
    }
}
