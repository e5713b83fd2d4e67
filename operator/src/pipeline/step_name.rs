//! The seventeen named steps of the pipeline, declared once in [`steps!`]: each row gives the
//! step's `sub_reconciler` label, the condition it reports through and whether it is in the
//! twelve-step lane or the five-member parallel group. The enum, [`LANE`], [`GROUP`], the labels,
//! the conditions and [`SUB_CONDITIONS`] all follow from that one table; the product step
//! table (`steps/table.rs`) gives each name its function in an exhaustive `match`, so a row
//! without a step does not compile.

use crate::conditions::kind;

/// Declares the step names from one row per step, in pipeline order.
macro_rules! steps {
    (
        lane { $($lane:ident => $lane_condition:expr,)+ }
        group { $($group:ident => $group_condition:expr,)+ }
    ) => {
        /// The steps of the pipeline, by their `sub_reconciler` label.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum StepName {
            $($lane,)+
            $($group,)+
        }

        /// The sequential lane, in order.
        pub const LANE: [StepName; [$(stringify!($lane)),+].len()] = [$(StepName::$lane),+];

        /// The parallel group.
        pub const GROUP: [StepName; [$(stringify!($group)),+].len()] = [$(StepName::$group),+];

        impl StepName {
            /// The step's `sub_reconciler` label (its name).
            pub fn as_str(self) -> &'static str {
                match self {
                    $(StepName::$lane => stringify!($lane),)+
                    $(StepName::$group => stringify!($group),)+
                }
            }

            /// The condition the step reports through.
            pub fn condition_type(self) -> &'static str {
                match self {
                    $(StepName::$lane => $lane_condition,)+
                    $(StepName::$group => $group_condition,)+
                }
            }
        }

        /// Every step's condition in pipeline order, with repeats (steps that share one).
        const STEP_CONDITIONS: [&str; LANE.len() + GROUP.len()] =
            [$($lane_condition,)+ $($group_condition,)+];
    };
}

steps! {
    lane {
        Secrets => kind::SECRETS_READY,
        DBConnectionSecret => kind::SECRETS_READY,
        TransportURLSecret => kind::SECRETS_READY,
        Backends => kind::BACKENDS_READY,
        BackupBackend => kind::BACKUP_BACKEND_READY,
        Config => kind::SECRETS_READY,
        Database => kind::DATABASE_READY,
        Scheduler => kind::SCHEDULER_READY,
        VolumeServices => kind::VOLUME_SERVICES_READY,
        BackupService => kind::BACKUP_SERVICE_READY,
        Deployment => kind::DEPLOYMENT_READY,
        DBPurge => kind::DB_PURGE_READY,
    }
    group {
        HTTPRoute => kind::HTTP_ROUTE_READY,
        HealthCheck => kind::CINDER_API_READY,
        HPA => kind::HPA_READY,
        VPA => kind::VPA_READY,
        NetworkPolicy => kind::NETWORK_POLICY_READY,
    }
}

/// How many distinct conditions the steps report through.
const fn distinct_conditions() -> usize {
    let mut n = 0;
    let mut i = 0;
    while i < STEP_CONDITIONS.len() {
        if first_of_its_condition(i) {
            n += 1;
        }
        i += 1;
    }
    n
}

/// Whether step `i` is the first (in pipeline order) to report its condition.
const fn first_of_its_condition(i: usize) -> bool {
    let mut j = 0;
    while j < i {
        if const_str_eq(STEP_CONDITIONS[j], STEP_CONDITIONS[i]) {
            return false;
        }
        j += 1;
    }
    true
}

const fn const_str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// The sub-conditions the aggregate Ready stands on: each step's condition, once, in pipeline
/// order (`ExtraConfigHealthy` is not a step's and stays outside the aggregate).
pub const SUB_CONDITIONS: [&str; distinct_conditions()] = {
    let mut out = [""; distinct_conditions()];
    let (mut i, mut n) = (0, 0);
    while i < STEP_CONDITIONS.len() {
        if first_of_its_condition(i) {
            out[n] = STEP_CONDITIONS[i];
            n += 1;
        }
        i += 1;
    }
    out
};

impl StepName {
    /// The step of that label.
    pub fn parse(s: &str) -> Option<StepName> {
        LANE.iter()
            .chain(GROUP.iter())
            .copied()
            .find(|n| n.as_str() == s)
    }

    /// True for the members of the parallel group.
    pub fn in_group(self) -> bool {
        GROUP.contains(&self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn twelve_in_the_lane_five_in_the_group_fourteen_conditions() {
        assert_eq!((LANE.len(), GROUP.len(), SUB_CONDITIONS.len()), (12, 5, 14));
        assert_eq!(StepName::Database.as_str(), "Database");
        assert_eq!(
            StepName::HealthCheck.condition_type(),
            kind::CINDER_API_READY
        );
        assert_eq!(StepName::parse("DBPurge"), Some(StepName::DBPurge));
        assert_eq!(StepName::parse("Purge"), None);
        assert!(StepName::VPA.in_group() && !StepName::DBPurge.in_group());
        assert_eq!(
            &SUB_CONDITIONS[..3],
            [
                kind::SECRETS_READY,
                kind::BACKENDS_READY,
                kind::BACKUP_BACKEND_READY
            ]
        );
        assert!(!SUB_CONDITIONS.contains(&kind::EXTRA_CONFIG_HEALTHY));
    }
}
