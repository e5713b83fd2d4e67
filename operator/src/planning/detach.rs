//! The detach planner: a deleted
//! CinderBackend is held by `cinder.openstack.c5c3.io/service-remove`; the VolumeServices step
//! releases it one backend per pass, in name order:
//!
//! 1. delete the volume Deployment and return (a running cinder-volume would re-register);
//! 2. once it is gone and no pod of it exists any more (the Deployment's deletion leaves its
//!    pods terminating for up to their grace period, and a cinder-volume still running there
//!    would report itself back), run `{name}-{backend}-service-remove`, whose exit code is
//!    `cinder-manage service remove`'s own: 0 when the service row is removed and also when no
//!    such service exists (cinder 28 and 29 print "Host not found" and still exit 0), 1 on a
//!    database error, 2 when cinder-manage could not read its configuration or its command line;
//!    only 0 counts as removed;
//! 3. sweep the backend's projection Secrets whole;
//! 4. release the finalizer, emit ServiceRemoved, feed the service_remove metrics once per
//!    (backend, Job UID).
//!
//! A failed Job stops at step 2 and keeps the finalizer (VolumeServicesReady=False /
//! ServiceRemoveJobFailed naming the Job); deleting that Job retries. The Job is keyed on the
//! backend's UID: a Job an earlier CinderBackend of the same name left behind is deleted, never
//! taken for this backend's removal.

use super::job::JobState;
use crate::conditions::{Cond, kind, reason};
use crate::names;
use crate::requeue::REQUEUE_DEPLOYMENT_POLLING;
use std::time::Duration;

/// What the step observed about one backend being deleted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DetachingBackend {
    pub name: String,
    /// True while the backend still carries the service-remove finalizer.
    pub has_finalizer: bool,
    pub deployment_exists: bool,
    /// Pods of the volume Deployment still exist (running or terminating).
    pub pods_exist: bool,
    pub job: JobState,
    /// UID of the service-remove Job, when it exists.
    pub job_uid: Option<String>,
    /// The existing service-remove Job detached an earlier CinderBackend of the same name (its
    /// backend UID differs): it says nothing about this backend and is deleted first.
    pub job_of_earlier_backend: bool,
    /// The backend's projection Secrets that still exist.
    pub secrets: Vec<String>,
}

/// One action of a detach pass.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DetachAction {
    DeleteDeployment {
        name: String,
    },
    /// Delete the service-remove Job an earlier backend of the same name left behind.
    DeleteEarlierJob {
        name: String,
    },
    /// Create the Job running `cinder-manage service remove cinder-volume {host}`.
    CreateServiceRemoveJob {
        name: String,
        host: String,
    },
    DeleteSecrets {
        names: Vec<String>,
    },
    ReleaseFinalizer {
        backend: String,
    },
    /// Emit the ServiceRemoved event on the Cinder.
    EmitServiceRemoved {
        backend: String,
    },
    /// Feed `cinder_operator_service_remove_*` once for this (backend, Job UID).
    RecordServiceRemove {
        backend: String,
        job_uid: String,
        succeeded: bool,
    },
}

/// The plan of one pass.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DetachPlan {
    /// The backend this pass works on.
    pub backend: String,
    pub actions: Vec<DetachAction>,
    /// Set when the detach is stuck (the failed Job): VolumeServicesReady=False.
    pub condition: Option<Cond>,
    pub requeue: Duration,
}

/// Plans this pass for the first backend (in name order) that still holds the finalizer.
pub fn plan_detach(cinder: &str, detaching: &[DetachingBackend]) -> Option<DetachPlan> {
    let b = detaching
        .iter()
        .filter(|b| b.has_finalizer)
        .min_by(|a, b| a.name.cmp(&b.name))?;
    let job_name = names::service_remove_job(cinder, &b.name);
    let mut actions = Vec::new();
    let mut condition = None;
    if b.deployment_exists {
        actions.push(DetachAction::DeleteDeployment {
            name: names::volume_deployment(cinder, &b.name),
        });
    } else if b.pods_exist && b.job == JobState::Absent {
        // The process may still run: nothing to write; the next poll looks again.
    } else if b.job_of_earlier_backend {
        actions.push(DetachAction::DeleteEarlierJob { name: job_name });
    } else {
        let removed = match b.job {
            JobState::Absent => {
                actions.push(DetachAction::CreateServiceRemoveJob {
                    name: job_name,
                    host: names::volume_service_host(cinder, &b.name),
                });
                false
            }
            JobState::Running => false,
            JobState::Succeeded => true,
            JobState::Failed { exit_code } => {
                if let Some(uid) = &b.job_uid {
                    actions.push(DetachAction::RecordServiceRemove {
                        backend: b.name.clone(),
                        job_uid: uid.clone(),
                        succeeded: false,
                    });
                }
                condition = Some(Cond::false_(
                    kind::VOLUME_SERVICES_READY,
                    reason::SERVICE_REMOVE_JOB_FAILED,
                    format!(
                        "Job {job_name} failed{}; delete it to retry the removal",
                        exit_code
                            .map(|c| format!(" with exit code {c}"))
                            .unwrap_or_default()
                    ),
                ));
                false
            }
        };
        if removed {
            if !b.secrets.is_empty() {
                let mut names = b.secrets.clone();
                names.sort();
                actions.push(DetachAction::DeleteSecrets { names });
            }
            actions.push(DetachAction::ReleaseFinalizer {
                backend: b.name.clone(),
            });
            actions.push(DetachAction::EmitServiceRemoved {
                backend: b.name.clone(),
            });
            if let Some(uid) = &b.job_uid {
                actions.push(DetachAction::RecordServiceRemove {
                    backend: b.name.clone(),
                    job_uid: uid.clone(),
                    succeeded: true,
                });
            }
        }
    }
    Some(DetachPlan {
        backend: b.name.clone(),
        actions,
        condition,
        requeue: REQUEUE_DEPLOYMENT_POLLING,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(name: &str, deployment: bool, job: JobState) -> DetachingBackend {
        DetachingBackend {
            name: name.into(),
            has_finalizer: true,
            deployment_exists: deployment,
            pods_exist: false,
            job,
            job_uid: (job != JobState::Absent).then(|| format!("uid-{name}")),
            job_of_earlier_backend: false,
            secrets: vec![format!("c-backend-{name}-2"), format!("c-backend-{name}-1")],
        }
    }

    #[test]
    fn the_removal_waits_until_no_pod_of_the_deployment_is_left() {
        let mut terminating = b("alpha", false, JobState::Absent);
        terminating.pods_exist = true;
        let plan = plan_detach("c", std::slice::from_ref(&terminating)).unwrap();
        assert_eq!(
            plan.actions,
            [],
            "a service remove while cinder-volume may still run"
        );
        assert_eq!(plan.requeue, Duration::from_secs(10));
        terminating.pods_exist = false;
        let plan = plan_detach("c", &[terminating]).unwrap();
        assert!(matches!(
            plan.actions.as_slice(),
            [DetachAction::CreateServiceRemoveJob { .. }]
        ));
        // A Job already started is followed whatever pods exist (it was started once none did).
        let mut running = b("alpha", false, JobState::Running);
        running.pods_exist = true;
        assert_eq!(plan_detach("c", &[running]).unwrap().actions, []);
    }

    #[test]
    fn one_backend_per_pass_in_name_order_deployment_first() {
        let plan = plan_detach(
            "c",
            &[
                b("zeta", true, JobState::Absent),
                b("alpha", true, JobState::Absent),
            ],
        )
        .unwrap();
        assert_eq!(plan.backend, "alpha");
        assert_eq!(
            plan.actions,
            [DetachAction::DeleteDeployment {
                name: "c-volume-alpha".into()
            }]
        );
        assert_eq!(plan.requeue, Duration::from_secs(10));
    }

    #[test]
    fn job_runs_once_the_deployment_is_gone() {
        let plan = plan_detach("c", &[b("a", false, JobState::Absent)]).unwrap();
        assert_eq!(
            plan.actions,
            [DetachAction::CreateServiceRemoveJob {
                name: "c-a-service-remove".into(),
                host: "c@a".into()
            }]
        );
        let plan = plan_detach("c", &[b("a", false, JobState::Running)]).unwrap();
        assert!(plan.actions.is_empty() && plan.condition.is_none());
    }

    /// The actions the plan for Cinder `c` detaching backend `a` starts with, when the
    /// service-remove Job of that name was left by an earlier backend `a`.
    fn with_earlier_job(deployment: bool, job: JobState) -> Vec<DetachAction> {
        let reused = DetachingBackend {
            job_of_earlier_backend: true,
            ..b("a", deployment, job)
        };
        plan_detach("c", &[reused]).unwrap().actions
    }

    #[test]
    fn a_job_of_an_earlier_backend_of_the_same_name_is_deleted_not_believed() {
        for job in [JobState::Succeeded, JobState::Running] {
            assert_eq!(
                with_earlier_job(false, job),
                [DetachAction::DeleteEarlierJob {
                    name: "c-a-service-remove".into()
                }]
            );
        }
        // The Deployment still goes first.
        assert_eq!(
            with_earlier_job(true, JobState::Succeeded),
            [DetachAction::DeleteDeployment {
                name: "c-volume-a".into()
            }]
        );
    }

    #[test]
    fn success_sweeps_and_releases() {
        let plan = plan_detach("c", &[b("a", false, JobState::Succeeded)]).unwrap();
        assert_eq!(
            plan.actions,
            [
                DetachAction::DeleteSecrets {
                    names: vec!["c-backend-a-1".into(), "c-backend-a-2".into()]
                },
                DetachAction::ReleaseFinalizer {
                    backend: "a".into()
                },
                DetachAction::EmitServiceRemoved {
                    backend: "a".into()
                },
                DetachAction::RecordServiceRemove {
                    backend: "a".into(),
                    job_uid: "uid-a".into(),
                    succeeded: true
                },
            ]
        );
    }

    #[test]
    fn a_failed_job_keeps_the_finalizer_and_names_the_job() {
        // 1: a database error; 2: cinder-manage read no configuration (it removed nothing).
        for code in [1, 2] {
            let plan = plan_detach(
                "c",
                &[b(
                    "a",
                    false,
                    JobState::Failed {
                        exit_code: Some(code),
                    },
                )],
            )
            .unwrap();
            assert!(
                !plan.actions.iter().any(|a| matches!(
                    a,
                    DetachAction::ReleaseFinalizer { .. } | DetachAction::DeleteSecrets { .. }
                )),
                "exit {code}"
            );
            let c = plan.condition.unwrap();
            assert_eq!(
                (c.type_, c.status, c.reason),
                ("VolumeServicesReady", false, "ServiceRemoveJobFailed")
            );
            assert!(c.message.contains("c-a-service-remove"));
            assert!(c.message.contains(&format!("exit code {code}")));
        }
    }

    #[test]
    fn nothing_to_do_without_finalizers() {
        let mut done = b("a", false, JobState::Succeeded);
        done.has_finalizer = false;
        assert_eq!(plan_detach("c", &[done]), None);
        assert_eq!(plan_detach("c", &[]), None);
    }
}
