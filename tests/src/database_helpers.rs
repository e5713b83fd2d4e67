//! Helpers of the Database step and release-upgrade tests: the MariaDB cluster fixture, a
//! ready-to-reconcile environment (store, credentials, MariaDB), the mariadb-operator objects
//! the step creates, Job outcome rules of the simulated Job controller, the Cinder status
//! fields the upgrade walks, the events on a Cinder, and the overlap check over the simulator's
//! Job run record.

use crate::fixtures::{Credentials, create_cluster_store, create_credentials};
use crate::test_cluster::HasControllers;
use crate::test_env::NS;
use crate::waiting::eventually;
use cinder_operator::crd::{Cinder, CinderStatus};
use cinder_sim::controllers::JobRun;
use cinder_sim::controllers::config::{JobRule, PodOutcome};
use k8s_openapi::api::events::v1::Event;
use kube::api::{ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::{Api, Client};
use std::time::Duration;

/// A mariadb-operator kind (`MariaDB`, `Database`, `User`, `Grant`).
pub fn mariadb_kind(kind: &str) -> ApiResource {
    let plural = match kind {
        "MariaDB" => "mariadbs",
        "Database" => "databases",
        "User" => "users",
        _ => "grants",
    };
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("k8s.mariadb.com", "v1alpha1", kind),
        plural,
    )
}

/// Creates the MariaDB cluster `name` in [`NS`] (the simulator makes it Ready).
pub async fn create_mariadb(client: &Client, name: &str) -> anyhow::Result<()> {
    let ar = mariadb_kind("MariaDB");
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), NS, &ar);
    let mut obj = DynamicObject::new(name, &ar).data(serde_json::json!({"spec": {"replicas": 1}}));
    obj.metadata.namespace = Some(NS.to_string());
    match api.create(&PostParams::default(), &obj).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// The store, the credential Secrets and the MariaDB `mariadb` the fixture Cinder uses.
pub async fn database_environment(client: &Client, tag: &str) -> anyhow::Result<Credentials> {
    let creds = Credentials::fresh(tag);
    create_cluster_store(client).await?;
    create_credentials(client, &creds).await?;
    create_mariadb(client, "mariadb").await?;
    Ok(creds)
}

/// The mariadb-operator object `kind`/`name` in [`NS`], if present.
pub async fn mariadb_object(client: &Client, kind: &str, name: &str) -> Option<DynamicObject> {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), NS, &mariadb_kind(kind));
    api.get_opt(name).await.ok().flatten()
}

/// Waits until the User `name` carries `maxUserConnections == cap`.
pub async fn wait_user_cap(client: &Client, name: &str, cap: i64) -> anyhow::Result<()> {
    let seen = eventually(
        &format!("User {name} with maxUserConnections {cap}"),
        || async {
            let u = mariadb_object(client, "User", name).await?;
            (u.data.pointer("/spec/maxUserConnections")?.as_i64()? == cap).then_some(())
        },
    )
    .await;
    if seen.is_err() {
        let u = mariadb_object(client, "User", name).await;
        anyhow::bail!(
            "User {name} never had maxUserConnections {cap}; it is {:?}",
            u.map(|u| u.data)
        );
    }
    Ok(())
}

/// Adds a Job rule to the simulated Job controller: Jobs whose name ends with `suffix` end with
/// `outcome` after `delay`.
pub fn job_rule(
    cluster: &impl HasControllers,
    suffix: &str,
    outcome: PodOutcome,
    delay: Duration,
) -> anyhow::Result<()> {
    let pattern = regex::Regex::new(&format!("{}$", regex::escape(suffix)))?;
    let controllers = cluster
        .controllers()
        .ok_or_else(|| anyhow::anyhow!("the simulated controllers are off"))?;
    controllers.update_config(|c| {
        c.jobs
            .rules
            .insert(0, JobRule::new(pattern, outcome).with_delay(delay))
    });
    Ok(())
}

/// The status of Cinder `name` (default when absent).
pub async fn cinder_status(client: &Client, name: &str) -> CinderStatus {
    let api: Api<Cinder> = Api::namespaced(client.clone(), NS);
    api.get_opt(name)
        .await
        .ok()
        .flatten()
        .and_then(|c| c.status)
        .unwrap_or_default()
}

/// Waits until the status of Cinder `name` satisfies `pred`; returns it.
pub async fn wait_status(
    client: &Client,
    name: &str,
    what: &str,
    pred: impl Fn(&CinderStatus) -> bool,
) -> anyhow::Result<CinderStatus> {
    let result = eventually(what, || async {
        let s = cinder_status(client, name).await;
        pred(&s).then_some(s)
    })
    .await;
    if result.is_err() {
        let s = cinder_status(client, name).await;
        anyhow::bail!(
            "timed out waiting for {what}: installed {:?}, target {:?}, phase {:?}, conditions {:#?}",
            s.installed_release,
            s.target_release,
            s.upgrade_phase,
            s.conditions
                .iter()
                .map(|c| format!("{}={}/{}: {}", c.type_, c.status, c.reason, c.message))
                .collect::<Vec<_>>()
        );
    }
    result
}

/// Sets spec.openStackRelease and the image tag of Cinder `name` in one patch.
pub async fn set_release(client: &Client, name: &str, release: &str) -> anyhow::Result<()> {
    let api: Api<Cinder> = Api::namespaced(client.clone(), NS);
    let patch =
        serde_json::json!({"spec": {"openStackRelease": release, "image": {"tag": release}}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

/// The events.k8s.io/v1 Events in [`NS`] with `reason` regarding the Cinder `name`.
pub async fn cinder_events(client: &Client, name: &str, reason: &str) -> Vec<Event> {
    let api: Api<Event> = Api::namespaced(client.clone(), NS);
    api.list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .collect()
}

/// The runs of the database Jobs of Cinder `cinder` (db-sync, expand, migrate, contract,
/// service-remove) in the simulator's run record.
pub fn database_job_runs(cluster: &impl HasControllers, cinder: &str) -> Vec<JobRun> {
    let names =
        ["db-sync", "db-expand", "db-migrate", "db-contract"].map(|s| format!("{cinder}-{s}"));
    cluster
        .controllers()
        .map(|c| c.job_runs())
        .unwrap_or_default()
        .into_iter()
        .filter(|r| r.namespace == NS)
        .filter(|r| {
            names.contains(&r.name)
                || (r.name.starts_with(&format!("{cinder}-"))
                    && r.name.ends_with("-service-remove"))
        })
        .collect()
}

/// Pairs of runs in `runs` that overlapped in time.
pub fn overlapping(runs: &[JobRun]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (i, a) in runs.iter().enumerate() {
        for b in &runs[i + 1..] {
            if a.overlaps(b) {
                out.push((
                    format!("{} ({})", a.name, a.uid),
                    format!("{} ({})", b.name, b.uid),
                ));
            }
        }
    }
    out
}

/// Asserts that each Job named in `expected` ran and that no two of `runs` overlapped in time.
pub fn assert_serial_runs(runs: &[JobRun], expected: &[&str]) {
    for name in expected {
        assert!(runs.iter().any(|r| r.name == *name), "{name} in {runs:?}");
    }
    let overlaps = overlapping(runs);
    assert!(overlaps.is_empty(), "overlapping runs: {overlaps:?}");
}

/// Rules that make the schema Jobs (db-sync, expand, migrate, contract) succeed after 700 ms.
pub fn quick_schema_jobs(cluster: &impl HasControllers) -> anyhow::Result<()> {
    for suffix in ["-db-sync", "-db-expand", "-db-migrate", "-db-contract"] {
        job_rule(
            cluster,
            suffix,
            PodOutcome::success(),
            Duration::from_millis(700),
        )?;
    }
    Ok(())
}
