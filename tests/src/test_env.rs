//! What every test shares: the namespace it works in and how long a wait may take.

use std::time::Duration;

/// The namespace every test works in.
pub const NS: &str = "cinder-e2e";
/// How long an "eventually" condition may take on a loaded 2-core machine.
pub const EVENTUALLY: Duration = Duration::from_secs(60);
