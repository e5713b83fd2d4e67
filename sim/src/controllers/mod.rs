//! Simulated cluster controllers and third-party CRD fixtures (filled by the sim-controllers work).
//!
//! The controllers are ordinary API clients of the embedded cluster (kube-rs over HTTP), like
//! the real controllers they stand in for.

/// Which simulated controllers run, and how fast.
#[derive(Clone, Debug, Default)]
pub struct ControllersConfig {}

/// Running controllers; dropping the handle stops them.
#[derive(Debug, Default)]
pub struct ControllersHandle {}

/// Installs the third-party CRD fixtures (external-secrets, mariadb-operator, Gateway API, VPA).
pub async fn install_fixtures(_client: kube::Client) -> Result<(), kube::Error> {
    Ok(())
}

/// Starts the simulated controllers against the cluster `client` talks to.
pub fn spawn(_client: kube::Client, _config: ControllersConfig) -> ControllersHandle {
    ControllersHandle {}
}
