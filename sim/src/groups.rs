//! API group names the simulator refers to by constant.

/// The core API group's name (empty).
pub const CORE: &str = "";
