//! The DBPurge step: projects the `{name}-db-purge` CronJob (`cinder-manage db purge
//! <retentionDays>`, ConcurrencyPolicy Forbid, activeDeadlineSeconds 3600 on the Job template,
//! schedule and suspend from `spec.dbPurge`) on every pass, and reports DBPurgeReady from the
//! newest terminal Job the CronJob spawned (the Jobs carrying the Cinder's common labels and the
//! db-purge component): DBPurgeScheduled, DBPurgeJobFailed with a Warning event, or
//! DBPurgeSuspended. While another database Job (schema or service-remove) is active the
//! CronJob is written suspended, whatever `spec.dbPurge.suspend` says, so a purge stays inside
//! the connection cap's one-Job headroom; the database Jobs suspend it themselves before they
//! start ([`super::database::jobs::fence_purge`]), and the next pass after they finished writes
//! it back. The db_purge metrics pair and the event happen once per Job UID.

use super::database::jobs::{active_database_jobs, observe};
use crate::children::{child_meta, list_children};
use crate::conditions::event_reason;
use crate::context::OperatorContext;
use crate::crd::Cinder;
use crate::kube_ext::reader::ClusterStores;
use crate::kube_ext::{create_if_absent, replace_unless_changed};
use crate::metrics::{JobKind, JobResult};
use crate::names::{self, Component};
use crate::pipeline::{Doing, Outcome, StepContext, StepResult};
use crate::planning::config::ENV_DB_CONNECTION;
use crate::planning::connection_urls::DB_CONNECTION_KEY;
use crate::planning::db_purge::{EffectiveDbPurge, db_purge_condition, effective_db_purge};
use crate::planning::job::{JobState, JobSummary};
use crate::requeue::REQUEUE_DEPLOYMENT_POLLING;
use crate::workloads::job_marker::CountedJob;
use crate::workloads::{
    JobReporting, SPEC_HASH_ANNOTATION, config_mount, env_from_secret, hash_of, spec_hash,
};
use k8s_openapi::api::batch::v1::{CronJob, CronJobSpec, Job, JobSpec, JobTemplateSpec};
use k8s_openapi::api::core::v1::Container;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::{Api, Client};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// The desired CronJob of `cinder` mounting `config_map`, with its spec-hash annotation.
pub(crate) fn desired_cron_job(
    cinder: &Cinder,
    effective: &EffectiveDbPurge,
    config_map: &str,
) -> CronJob {
    let name = cinder.metadata.name.clone().unwrap_or_default();
    let labels = names::component_labels(&name, Component::DbPurge);
    let container = Container {
        name: "db-purge".to_string(),
        image: Some(cinder.spec.image.reference()),
        command: Some(effective.command.clone()),
        env: Some(vec![env_from_secret(
            ENV_DB_CONNECTION,
            &names::db_connection_secret(&name),
            DB_CONNECTION_KEY,
        )]),
        volume_mounts: Some(vec![config_mount()]),
        ..Default::default()
    };
    let spec = CronJobSpec {
        schedule: effective.schedule.clone(),
        suspend: Some(effective.suspend),
        concurrency_policy: Some(effective.concurrency_policy.to_string()),
        job_template: JobTemplateSpec {
            metadata: Some(ObjectMeta {
                labels: Some(labels.clone()),
                ..Default::default()
            }),
            spec: Some(JobSpec {
                active_deadline_seconds: Some(effective.active_deadline_seconds),
                backoff_limit: Some(0),
                template: crate::workloads::config_job_pod(labels, container, config_map),
                ..Default::default()
            }),
        },
        ..Default::default()
    };
    let mut metadata = child_meta(
        cinder,
        &names::db_purge_cronjob(&name),
        &[(names::LABEL_COMPONENT, Component::DbPurge.as_str())],
    );
    metadata.annotations = Some([(SPEC_HASH_ANNOTATION.to_string(), hash_of(&spec))].into());
    CronJob {
        metadata,
        spec,
        ..Default::default()
    }
}

async fn ensure_cron_job(
    client: &Client,
    reads: &ClusterStores,
    desired: &CronJob,
) -> Result<(), kube::Error> {
    let ns = desired.metadata.namespace.clone().unwrap_or_default();
    let name = desired.metadata.name.clone().unwrap_or_default();
    let api: Api<CronJob> = Api::namespaced(client.clone(), &ns);
    match reads.get_opt(&api, &name).await? {
        None => create_if_absent(&api, desired).await.map(|_| ()),
        // A database Job suspends the CronJob without the hash: its `suspend` is compared too.
        Some(existing)
            if spec_hash(&existing.metadata) == spec_hash(&desired.metadata)
                && existing.spec.suspend == desired.spec.suspend =>
        {
            Ok(())
        }
        Some(existing) => {
            let mut replacement = desired.clone();
            replacement.metadata.resource_version = existing.metadata.resource_version;
            // Keep what the CronJob controller recorded.
            replacement.status = existing.status;
            replace_unless_changed(&api, &name, &replacement)
                .await
                .map(|_| ())
        }
    }
}

fn summary(job: &Job) -> (JobSummary, Duration) {
    let observed = observe(job);
    let status = job.status.as_ref();
    let created = job
        .metadata
        .creation_timestamp
        .as_ref()
        .map(|t| t.0.as_second())
        .unwrap_or(0);
    let finished = status
        .and_then(|s| s.completion_time.as_ref())
        .map(|t| t.0.as_second())
        .or_else(|| {
            status.and_then(|s| s.conditions.as_ref()).and_then(|cs| {
                cs.iter()
                    .filter(|c| {
                        c.status == "True" && (c.type_ == "Failed" || c.type_ == "Complete")
                    })
                    .filter_map(|c| c.last_transition_time.as_ref().map(|t| t.0.as_second()))
                    .max()
            })
        })
        .filter(|_| observed.state.is_terminal());
    (
        JobSummary {
            name: observed.name,
            uid: observed.uid,
            state: observed.state,
            created,
            finished,
        },
        observed.duration.unwrap_or_default(),
    )
}

/// Runs the step once for one Cinder.
pub(crate) async fn run(op: Arc<OperatorContext>, ctx: &mut StepContext) -> StepResult {
    let reporting = JobReporting::new(&op, ctx, JobKind::DbPurge);
    let children = ctx.children(&op.client);
    let name = ctx.name().to_string();
    let ns = ctx.namespace().to_string();
    let effective = effective_db_purge(&ctx.cinder.spec.db_purge);
    let Some(config_map) = ctx.artefacts.config_map_name.clone() else {
        // The Database step before this one already waits for the config; nothing to report.
        return Ok(Outcome::RequeueAfter(REQUEUE_DEPLOYMENT_POLLING));
    };
    // While another database Job runs, the CronJob stays suspended (the database Jobs suspend
    // it before they start): a purge beside it would pass the connection cap's headroom.
    let others: Vec<String> = active_database_jobs(&children, ctx.children_reads(), &ns, &name)
        .await
        .doing("listing database Jobs")?
        .into_iter()
        .filter(|j| !j.starts_with(&names::db_purge_cronjob(&name)))
        .collect();
    let fenced = EffectiveDbPurge {
        suspend: effective.suspend || !others.is_empty(),
        ..effective.clone()
    };
    let desired = desired_cron_job(&ctx.cinder, &fenced, &config_map);
    ensure_cron_job(&children, ctx.children_reads(), &desired)
        .await
        .doing(format_args!(
            "writing CronJob {}",
            names::db_purge_cronjob(&name)
        ))?;
    let purge = Some(Component::DbPurge);
    let jobs: Vec<Job> = list_children(&children, ctx.children_reads(), &ns, &name, purge)
        .await
        .doing("listing purge Jobs")?;
    let mut durations = HashMap::new();
    let summaries: Vec<JobSummary> = jobs
        .iter()
        .map(|j| {
            let (s, d) = summary(j);
            durations.insert(s.uid.clone(), d);
            s
        })
        .collect();
    for s in summaries
        .iter()
        .filter(|s| s.state.is_terminal() && !s.uid.is_empty())
    {
        let result = if s.state == JobState::Succeeded {
            JobResult::Succeeded
        } else {
            JobResult::Failed
        };
        let duration = durations.get(&s.uid).copied().unwrap_or_default();
        let counted = CountedJob {
            client: &children,
            name: &s.name,
            uid: &s.uid,
        };
        if reporting
            .observe_once(&counted, &s.uid, &ns, &name, result, duration)
            .await
        {
            crate::events::job_finished(
                &reporting.recorder,
                &ctx.cinder,
                &s.name,
                "db-purge",
                result,
                duration,
            )
            .await;
        }
    }
    let condition = db_purge_condition(&effective, &summaries);
    if !condition.status
        && let Some(newest) = crate::planning::db_purge::newest_terminal(&summaries)
        && reporting.first_time(&format!("event/{}", newest.uid)).await
    {
        let note = format!("purge Job {} failed", newest.name);
        let reason = event_reason::DB_PURGE_JOB_FAILED;
        crate::events::warning(&reporting.recorder, &ctx.cinder, reason, "Purge", note).await;
    }
    ctx.proceed(condition)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::cinder::DbPurgeSpec;

    #[test]
    fn cron_job_runs_the_purge_with_forbid_and_the_deadline() {
        let c = crate::test_fixtures::cinder();
        let e = effective_db_purge(&DbPurgeSpec::default());
        let cj = desired_cron_job(&c, &e, "c-config-1");
        assert_eq!(cj.metadata.name.as_deref(), Some("c-db-purge"));
        let spec = cj.spec;
        assert_eq!(spec.schedule, "1 0 * * *");
        assert_eq!(spec.concurrency_policy.as_deref(), Some("Forbid"));
        let job = spec.job_template.spec.unwrap();
        assert_eq!(job.active_deadline_seconds, Some(3600));
        let labels = spec.job_template.metadata.unwrap().labels.unwrap();
        assert_eq!(labels[names::LABEL_COMPONENT], "db-purge");
        let container = &job.template.spec.unwrap().containers[0];
        assert_eq!(
            container.command.as_ref().unwrap().join(" "),
            "cinder-manage db purge 30"
        );
    }
}
