//! The priority a step's device-lock request asks at: the work's own priority on a first wait,
//! and one level above it ([`cinder_lease::devices::retry_priority`]) on the retry after another
//! replica answered DeviceBusy. The step actor remembers the refusal, per Cinder and device, for
//! [`REFUSAL_COUNTS_FOR`]; the retry uses the note up, and a retry refused again is noted again.

use crate::pipeline::StepMemory;
use cinder_lease::Priority;
use std::time::Duration;

/// How long a DeviceBusy answer raises the next request for the same device (well past the
/// jittered one-second retry, and past a pass delayed by the reconcile queue).
pub(crate) const REFUSAL_COUNTS_FOR: Duration = Duration::from_secs(60);

fn key(device: &str) -> String {
    format!("device-busy/{device}")
}

/// The priority to ask for `device` at: `first`, raised when the last request was refused.
pub(crate) async fn priority(memory: &StepMemory, device: &str, first: Priority) -> Priority {
    if memory.take_refused(&key(device)).await {
        cinder_lease::devices::retry_priority(first)
    } else {
        first
    }
}

/// Notes that the request for `device` was answered DeviceBusy.
pub(crate) fn refused(memory: &StepMemory, device: &str) {
    memory.note_refused(&key(device), REFUSAL_COUNTS_FOR);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::OperatorContext;
    use crate::pipeline::StepName;
    use crate::pipeline::step::testing::idle_step_memory;

    #[actix::test]
    async fn a_refused_request_retries_one_level_higher_once() {
        let memory = idle_step_memory::<OperatorContext>(StepName::VolumeServices);
        let device = "nfs:nfs1";
        assert_eq!(
            priority(&memory, device, Priority::Default).await,
            Priority::Default
        );
        refused(&memory, device);
        assert_eq!(
            priority(&memory, "nfs:other", Priority::Default).await,
            Priority::Default
        );
        assert_eq!(
            priority(&memory, device, Priority::Default).await,
            Priority::High
        );
        assert_eq!(
            priority(&memory, device, Priority::Default).await,
            Priority::Default,
            "granted (not refused again): back to the first priority"
        );
        refused(&memory, device);
        assert_eq!(
            priority(&memory, device, Priority::Baseline).await,
            Priority::Default
        );
        // Without a step actor nothing is remembered.
        let none = StepMemory::default();
        refused(&none, device);
        assert_eq!(
            priority(&none, device, Priority::Default).await,
            Priority::Default
        );
    }
}
