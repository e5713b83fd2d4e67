//! The release upgrade phase machine: validates a
//! `spec.openStackRelease` bump against `status.installedRelease`, then walks Expanding →
//! Migrating → RollingUpdate → Contracting, promoting installedRelease after contract.
//!
//! [`decide`] says which path the Database step takes this pass; [`phase_step`] advances an
//! upgrade in progress from the state of the phase's Job; [`rollout_converged`] is the
//! Deployment step's RollingUpdate → Contracting flip.

use super::job::JobState;
use super::release::Release;
use crate::conditions::{Cond, kind, reason};
use crate::crd::UpgradePhase;
use crate::names;
use crate::requeue::{REQUEUE_NEXT_PASS, REQUEUE_UPGRADE_WAIT};
use std::time::Duration;

/// The path the Database step takes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ReleaseDecision {
    /// No upgrade: run / keep the steady-state `{name}-db-sync` and promote on success (also a
    /// fresh install, where nothing is installed yet).
    Steady,
    /// Start an upgrade: set targetRelease and phase Expanding.
    Start { target: String },
    /// Keep walking the upgrade in progress.
    Continue { target: String, phase: UpgradePhase },
    /// The spec returned to the installed release: clear targetRelease and upgradePhase.
    Abort,
    /// Refused: DatabaseReady=False with this condition; nothing advances.
    Refused(Cond),
}

fn refuse(reason: &'static str, message: String) -> ReleaseDecision {
    ReleaseDecision::Refused(Cond::false_(kind::DATABASE_READY, reason, message))
}

/// Decides the path from the spec and the status release fields.
pub(crate) fn decide(
    spec_release: &str,
    installed: Option<&str>,
    target: Option<&str>,
    phase: Option<UpgradePhase>,
) -> ReleaseDecision {
    let Some(spec) = Release::parse(spec_release) else {
        return refuse(
            reason::VERSION_PARSE_ERROR,
            format!("spec.openStackRelease {spec_release:?} is not YYYY.1 or YYYY.2"),
        );
    };
    let Some(installed_str) = installed else {
        return ReleaseDecision::Steady;
    };
    let Some(inst) = Release::parse(installed_str) else {
        return refuse(
            reason::VERSION_PARSE_ERROR,
            format!("status.installedRelease {installed_str:?} is not YYYY.1 or YYYY.2"),
        );
    };
    if let (Some(phase), Some(target_str)) = (phase, target) {
        if spec == inst {
            return ReleaseDecision::Abort;
        }
        if Release::parse(target_str) == Some(spec) {
            return ReleaseDecision::Continue {
                target: target_str.to_string(),
                phase,
            };
        }
        return refuse(
            reason::UPGRADE_TARGET_CHANGED,
            format!(
                "upgrade to {target_str} is in phase {}; spec now asks for {spec}",
                phase.as_str()
            ),
        );
    }
    if spec == inst {
        ReleaseDecision::Steady
    } else if spec < inst {
        refuse(
            reason::DOWNGRADE_NOT_SUPPORTED,
            format!("cannot downgrade from {inst} to {spec}"),
        )
    } else if spec == inst.next() {
        ReleaseDecision::Start {
            target: spec.to_string(),
        }
    } else {
        refuse(
            reason::UPGRADE_PATH_INVALID,
            format!("{inst} can only upgrade to {}, not {spec}", inst.next()),
        )
    }
}

/// What one pass does for an upgrade in progress.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PhaseStep {
    /// The phase after this pass (`None`: the upgrade is done).
    pub phase: Option<UpgradePhase>,
    /// The Job this phase needs (created when absent), if any.
    pub job: Option<String>,
    /// Promote installedRelease to the target and clear targetRelease.
    pub promote: bool,
    pub condition: Cond,
    /// `None` means continue the pass.
    pub requeue: Option<Duration>,
}

fn phase_job(cinder: &str, phase: UpgradePhase) -> Option<String> {
    match phase {
        UpgradePhase::Expanding => Some(names::db_expand_job(cinder)),
        UpgradePhase::Migrating => Some(names::db_migrate_job(cinder)),
        UpgradePhase::RollingUpdate => None,
        UpgradePhase::Contracting => Some(names::db_contract_job(cinder)),
    }
}

/// Advances `phase` from the state of its Job (ignored for RollingUpdate, which the Deployment
/// The RollingUpdate phase: no Job; the workload steps after Database poll their own rollouts.
fn rolling_update(target: &str) -> PhaseStep {
    PhaseStep {
        phase: Some(UpgradePhase::RollingUpdate),
        job: None,
        promote: false,
        condition: Cond::false_(
            kind::DATABASE_READY,
            reason::UPGRADE_ROLLING_UPDATE,
            format!("workloads rolling onto {target}"),
        ),
        requeue: None,
    }
}

/// step ends through [`rollout_converged`]).
pub(crate) fn phase_step(
    cinder: &str,
    target: &str,
    phase: UpgradePhase,
    job: JobState,
) -> PhaseStep {
    let job_name = phase_job(cinder, phase);
    let (in_progress, failed) = match phase {
        UpgradePhase::Expanding => (reason::EXPAND_IN_PROGRESS, reason::EXPAND_FAILED),
        UpgradePhase::Migrating => (reason::MIGRATE_IN_PROGRESS, reason::MIGRATE_FAILED),
        UpgradePhase::Contracting => (reason::CONTRACT_IN_PROGRESS, reason::CONTRACT_FAILED),
        UpgradePhase::RollingUpdate => return rolling_update(target),
    };
    let name = job_name.clone().unwrap_or_default();
    match job {
        JobState::Absent | JobState::Running => PhaseStep {
            phase: Some(phase),
            job: job_name,
            promote: false,
            condition: Cond::false_(
                kind::DATABASE_READY,
                in_progress,
                format!("{name} running for {target}"),
            ),
            requeue: Some(REQUEUE_UPGRADE_WAIT),
        },
        JobState::Failed { exit_code } => PhaseStep {
            phase: Some(phase),
            job: job_name,
            promote: false,
            condition: Cond::false_(
                kind::DATABASE_READY,
                failed,
                match exit_code {
                    Some(c) => format!("Job {name} failed with exit code {c}; delete it to retry"),
                    None => format!("Job {name} failed; delete it to retry"),
                },
            ),
            requeue: Some(REQUEUE_UPGRADE_WAIT),
        },
        JobState::Succeeded => match phase {
            UpgradePhase::Expanding => PhaseStep {
                phase: Some(UpgradePhase::Migrating),
                job: phase_job(cinder, UpgradePhase::Migrating),
                promote: false,
                condition: Cond::false_(
                    kind::DATABASE_READY,
                    reason::MIGRATE_IN_PROGRESS,
                    format!("upgrade check for {target}"),
                ),
                requeue: Some(REQUEUE_NEXT_PASS),
            },
            UpgradePhase::Migrating => rolling_update(target),
            _ => PhaseStep {
                phase: None,
                job: None,
                promote: true,
                condition: Cond::true_(
                    kind::DATABASE_READY,
                    reason::DATABASE_SYNCED,
                    format!("upgraded to {target}"),
                ),
                requeue: None,
            },
        },
    }
}

/// The steady-state `{name}-db-sync` Job: in progress, failed, or done (promote
/// installedRelease to `spec_release`).
pub(crate) fn db_sync_step(cinder: &str, spec_release: &str, job: JobState) -> PhaseStep {
    let name = names::db_sync_job(cinder);
    let (condition, requeue, promote) = match job {
        JobState::Absent | JobState::Running => (
            Cond::false_(
                kind::DATABASE_READY,
                reason::DB_SYNC_IN_PROGRESS,
                format!("{name} running"),
            ),
            Some(crate::requeue::REQUEUE_DATABASE_WAIT),
            false,
        ),
        JobState::Failed { exit_code } => (
            Cond::false_(
                kind::DATABASE_READY,
                reason::DB_SYNC_FAILED,
                match exit_code {
                    Some(c) => format!("Job {name} failed with exit code {c}; delete it to retry"),
                    None => format!("Job {name} failed; delete it to retry"),
                },
            ),
            Some(crate::requeue::REQUEUE_DATABASE_WAIT),
            false,
        ),
        JobState::Succeeded => (
            Cond::true_(
                kind::DATABASE_READY,
                reason::DATABASE_SYNCED,
                format!("schema at {spec_release}"),
            ),
            None,
            true,
        ),
    };
    PhaseStep {
        phase: None,
        job: Some(name),
        promote,
        condition,
        requeue,
    }
}

/// The Deployment step's flip: in RollingUpdate, once every workload converged, move to
/// Contracting and requeue on the next pass.
pub(crate) fn rollout_converged(
    phase: Option<UpgradePhase>,
    converged: bool,
) -> Option<(UpgradePhase, Duration)> {
    (phase == Some(UpgradePhase::RollingUpdate) && converged)
        .then_some((UpgradePhase::Contracting, REQUEUE_NEXT_PASS))
}

#[cfg(test)]
mod tests {
    use super::*;
    use UpgradePhase::*;

    fn refused_reason(d: ReleaseDecision) -> &'static str {
        match d {
            ReleaseDecision::Refused(c) => c.reason,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn steady_and_fresh_install() {
        assert_eq!(decide("2026.1", None, None, None), ReleaseDecision::Steady);
        assert_eq!(
            decide("2026.1", Some("2026.1"), None, None),
            ReleaseDecision::Steady
        );
    }

    #[test]
    fn sequential_bumps_start_an_upgrade() {
        assert_eq!(
            decide("2026.2", Some("2026.1"), None, None),
            ReleaseDecision::Start {
                target: "2026.2".into()
            }
        );
        assert_eq!(
            decide("2027.1", Some("2026.2"), None, None),
            ReleaseDecision::Start {
                target: "2027.1".into()
            }
        );
    }

    #[test]
    fn refusals() {
        let cases = [
            ("2026.3", Some("2026.1"), None, None, "VersionParseError"),
            ("2026.2", Some("garbage"), None, None, "VersionParseError"),
            (
                "2025.2",
                Some("2026.1"),
                None,
                None,
                "DowngradeNotSupported",
            ),
            ("2027.1", Some("2026.1"), None, None, "UpgradePathInvalid"),
            ("2028.1", Some("2026.2"), None, None, "UpgradePathInvalid"),
            (
                "2027.1",
                Some("2026.1"),
                Some("2026.2"),
                Some(Migrating),
                "UpgradeTargetChanged",
            ),
        ];
        for (spec, installed, target, phase, reason) in cases {
            assert_eq!(
                refused_reason(decide(spec, installed, target, phase)),
                reason,
                "{spec} over {installed:?} (target {target:?}, {phase:?})"
            );
        }
    }

    #[test]
    fn in_progress_continues_or_aborts() {
        assert_eq!(
            decide("2026.2", Some("2026.1"), Some("2026.2"), Some(Expanding)),
            ReleaseDecision::Continue {
                target: "2026.2".into(),
                phase: Expanding
            }
        );
        assert_eq!(
            decide(
                "2026.1",
                Some("2026.1"),
                Some("2026.2"),
                Some(RollingUpdate)
            ),
            ReleaseDecision::Abort
        );
    }

    #[test]
    fn phases_walk_in_order_and_promote_after_contract() {
        let s = phase_step("c", "2026.2", Expanding, JobState::Absent);
        assert_eq!(
            (s.phase, s.job.as_deref(), s.condition.reason),
            (Some(Expanding), Some("c-db-expand"), "ExpandInProgress")
        );
        assert_eq!(s.requeue, Some(Duration::from_secs(30)));
        let s = phase_step("c", "2026.2", Expanding, JobState::Succeeded);
        assert_eq!(
            (s.phase, s.job.as_deref()),
            (Some(Migrating), Some("c-db-migrate"))
        );
        let s = phase_step("c", "2026.2", Migrating, JobState::Running);
        assert_eq!(s.condition.reason, "MigrateInProgress");
        let s = phase_step("c", "2026.2", Migrating, JobState::Succeeded);
        assert_eq!(
            (s.phase, s.condition.reason, s.requeue),
            (Some(RollingUpdate), "UpgradeRollingUpdate", None)
        );
        let s = phase_step("c", "2026.2", RollingUpdate, JobState::Absent);
        assert_eq!((s.phase, s.promote), (Some(RollingUpdate), false));
        assert_eq!(rollout_converged(Some(RollingUpdate), false), None);
        assert_eq!(
            rollout_converged(Some(RollingUpdate), true),
            Some((Contracting, Duration::from_secs(1)))
        );
        assert_eq!(rollout_converged(Some(Migrating), true), None);
        let s = phase_step("c", "2026.2", Contracting, JobState::Running);
        assert_eq!(
            (s.job.as_deref(), s.condition.reason, s.promote),
            (Some("c-db-contract"), "ContractInProgress", false)
        );
        let s = phase_step("c", "2026.2", Contracting, JobState::Succeeded);
        assert_eq!(
            (s.phase, s.promote, s.condition.status, s.condition.reason),
            (None, true, true, "DatabaseSynced")
        );
    }

    #[test]
    fn steady_db_sync() {
        let s = db_sync_step("c", "2026.1", JobState::Running);
        assert_eq!(
            (s.job.as_deref(), s.condition.reason, s.requeue),
            (
                Some("c-db-sync"),
                "DBSyncInProgress",
                Some(Duration::from_secs(30))
            )
        );
        assert_eq!(
            db_sync_step("c", "2026.1", JobState::Failed { exit_code: None })
                .condition
                .reason,
            "DBSyncFailed"
        );
        let s = db_sync_step("c", "2026.1", JobState::Succeeded);
        assert!(s.promote && s.condition.status && s.requeue.is_none());
    }

    #[test]
    fn failures_name_the_phase() {
        for (phase, reason) in [
            (Expanding, "ExpandFailed"),
            (Migrating, "MigrateFailed"),
            (Contracting, "ContractFailed"),
        ] {
            let s = phase_step(
                "c",
                "2026.2",
                phase,
                JobState::Failed { exit_code: Some(3) },
            );
            assert_eq!(
                (s.phase, s.condition.reason, s.promote),
                (Some(phase), reason, false)
            );
            assert!(s.condition.message.contains("exit code 3"));
        }
    }
}
