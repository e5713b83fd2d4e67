//! Two operator processes (two OperatorContexts with their own clients, user agents, identities
//! and actor threads, in one process; no leader election) reconcile the same Cinder with two NFS
//! backends on two NFS servers (two devices) through the 2025.2 -> 2026.1 upgrade and the detach
//! of one backend, to completion (finalizer released, ServiceRemoved) and until the promoted
//! release rolled the remaining volume service; once after the upgrade, once with the backend
//! deleted during the upgrade's first phase (its service-remove Job then competes with the phase
//! Jobs for the database). The simulator's records then show:
//! - no two Jobs of the Cinder's database (db-sync, expand, migrate, contract, service-remove)
//!   running at once (the Job run record);
//! - no two concurrent changes to one backend's volume service (the write record): every write
//!   to `{cinder}-volume-{backend}` and `{cinder}-{backend}-service-remove` came from the
//!   operator holding that backend's device Lease when the write was received and when it was
//!   answered, and the change windows of the two operators never overlap ([`check_exclusion`]);
//! - the detach order across both operators: the detached Deployment's last accepted write is
//!   its delete, before the service-remove Job was created.

use cinder_e2e::database_helpers::*;
use cinder_e2e::deploy_helpers::client_with_user_agent;
use cinder_e2e::workload_helpers::*;
use cinder_e2e::write_checks::{Guard, Writer, check_exclusion};
use cinder_e2e::*;
use cinder_operator::crd::{CinderBackend, UpgradePhase};
use cinder_operator::names::INSTALLED_RELEASE_ANNOTATION;
use cinder_sim::controllers::PodOutcome;
use std::time::Duration;

const FIRST_AGENT: &str = "cinder-operator-first/0";
const SECOND_AGENT: &str = "cinder-operator-second/0";
const CINDER: &str = "pair";
/// (backend, NFS server): two backends on two devices.
const BACKENDS: [(&str, &str); 2] = [("nfs1", "nfs.example"), ("nfs2", "nfs2.example")];
/// The backend the test detaches.
const DETACHED: &str = "nfs2";

async fn create_nfs_backend_on(
    client: &kube::Client,
    name: &str,
    server: &str,
) -> anyhow::Result<()> {
    create_raw::<CinderBackend>(
        client,
        serde_json::json!({
            "apiVersion": "cinder.openstack.c5c3.io/v1alpha1",
            "kind": "CinderBackend",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"cinderRef": {"name": CINDER}, "type": "NFS", "nfs": {"server": server, "path": "/exports/cinder"}}
        }),
    )
    .await?;
    Ok(())
}

/// The objects of `backend`'s volume service and the device Lease that guards them.
fn volume_service_guard(backend: &str, server: &str) -> Guard {
    let device = cinder_lease::devices::nfs_server(server);
    Guard {
        lease_namespace: NS.to_string(),
        lease_name: cinder_lease::lease_name(&device),
        objects: vec![
            (
                "apps".into(),
                "deployments".into(),
                NS.into(),
                format!("{CINDER}-volume-{backend}"),
            ),
            (
                "batch".into(),
                "jobs".into(),
                NS.into(),
                format!("{CINDER}-{backend}-service-remove"),
            ),
        ],
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_operators_upgrade_then_detach_without_concurrent_changes() {
    upgrade_and_detach(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_operators_detach_during_the_upgrade_without_concurrent_changes() {
    upgrade_and_detach(true).await;
}

/// Installs, upgrades and detaches (during the upgrade's first phase when `during_upgrade`,
/// else after it), then checks the records.
async fn upgrade_and_detach(during_upgrade: bool) {
    let mut config = HarnessConfig::default();
    config.cluster.record_writes = true;
    config.operator_user_agent = Some(FIRST_AGENT.to_string());
    config.options.identity = "first-operator".to_string();
    let mut h = Harness::start_with(config).await.unwrap();
    quick_schema_jobs(&h.cluster).unwrap();
    service_remove_rule(&h.cluster, PodOutcome::success(), Duration::from_secs(1)).unwrap();

    let second = SecondOperator::start(
        client_with_user_agent(&h.cluster, SECOND_AGENT)
            .await
            .unwrap(),
        "second-operator",
    )
    .await
    .unwrap();
    let writers = vec![
        Writer {
            user_agent: FIRST_AGENT.to_string(),
            identity: h.ctx.device_locks.identity().as_str().to_string(),
        },
        Writer {
            user_agent: SECOND_AGENT.to_string(),
            identity: second.ctx.device_locks.identity().as_str().to_string(),
        },
    ];
    assert_ne!(writers[0].identity, writers[1].identity);

    // Install 2025.2 with two backends on two NFS servers.
    database_environment(&h.client, "twodetach").await.unwrap();
    create_cinder(
        &h.client,
        CINDER,
        serde_json::json!({"openStackRelease": "2025.2", "image": {"repository": "registry.example/cinder", "tag": "2025.2"}}),
    )
    .await
    .unwrap();
    for (backend, server) in BACKENDS {
        create_nfs_backend_on(&h.client, backend, server)
            .await
            .unwrap();
    }
    wait_status(&h.client, CINDER, "installedRelease 2025.2", |s| {
        s.installed_release.as_deref() == Some("2025.2")
    })
    .await
    .unwrap();
    wait_cinder_condition(
        &h.client,
        CINDER,
        "VolumeServicesReady",
        "True",
        "AllVolumeServicesReady",
    )
    .await
    .unwrap();

    // The upgrade to 2026.1 (rolls the volume services, twice).
    set_release(&h.client, CINDER, "2026.1").await.unwrap();
    if during_upgrade {
        // The detach's service-remove Job competes with the phase Jobs for the database.
        wait_status(&h.client, CINDER, "an upgrade phase", |s| {
            s.upgrade_phase.is_some()
        })
        .await
        .unwrap();
        delete_backend(&h.client, DETACHED).await.unwrap();
    } else {
        wait_status(&h.client, CINDER, "phase RollingUpdate (or later)", |s| {
            matches!(
                s.upgrade_phase,
                Some(UpgradePhase::RollingUpdate | UpgradePhase::Contracting)
            ) || s.installed_release.as_deref() == Some("2026.1")
        })
        .await
        .unwrap();
    }
    wait_status(
        &h.client,
        CINDER,
        "installedRelease 2026.1, no phase",
        |s| {
            s.installed_release.as_deref() == Some("2026.1")
                && s.upgrade_phase.is_none()
                && s.target_release.is_none()
        },
    )
    .await
    .unwrap();
    wait_cinder_condition(
        &h.client,
        CINDER,
        "VolumeServicesReady",
        "True",
        "AllVolumeServicesReady",
    )
    .await
    .unwrap();

    // The detach of nfs2, to completion.
    if !during_upgrade {
        delete_backend(&h.client, DETACHED).await.unwrap();
    }
    wait_backend_gone(&h.client, DETACHED).await.unwrap();
    let events = eventually("a ServiceRemoved event", || async {
        let e = cinder_events(&h.client, CINDER, "ServiceRemoved").await;
        (!e.is_empty()).then_some(e)
    })
    .await
    .unwrap();
    assert_eq!(events.len(), 1, "{events:?}");
    assert!(
        events[0]
            .note
            .as_deref()
            .unwrap_or_default()
            .contains(DETACHED)
    );
    assert!(
        deployment(&h.client, &format!("{CINDER}-volume-{DETACHED}"))
            .await
            .is_none()
    );
    wait_status(&h.client, CINDER, "one volume service left", |s| {
        s.volume_services.len() == 1 && s.volume_services[0].backend == "nfs1"
    })
    .await
    .unwrap();
    // The promoted release rolls the remaining volume service once more; the pipeline settles.
    eventually(
        "the nfs1 volume service carrying installed-release 2026.1",
        || async {
            let a = template_annotations(&h.client, &format!("{CINDER}-volume-nfs1")).await;
            (a.get(INSTALLED_RELEASE_ANNOTATION).map(String::as_str) == Some("2026.1"))
                .then_some(())
        },
    )
    .await
    .unwrap();
    wait_cinder_condition(&h.client, CINDER, "DatabaseReady", "True", "DatabaseSynced")
        .await
        .unwrap();
    wait_cinder_condition(
        &h.client,
        CINDER,
        "VolumeServicesReady",
        "True",
        "AllVolumeServicesReady",
    )
    .await
    .unwrap();

    // Both operators stop; the records are complete.
    second.stop().await.unwrap();
    h.stop_operator().await.unwrap();

    // No two Jobs of the database at once.
    let runs = database_job_runs(&h.cluster, CINDER);
    assert_serial_runs(
        &runs,
        &[
            "pair-db-sync",
            "pair-db-expand",
            "pair-db-migrate",
            "pair-db-contract",
            "pair-nfs2-service-remove",
        ],
    );

    // No two concurrent changes to one backend's volume service.
    let record = h.cluster.writes();
    for (backend, server) in BACKENDS {
        let guard = volume_service_guard(backend, server);
        let report = check_exclusion(&record, &guard, &writers);
        eprintln!(
            "{backend} ({}): {} writes in {} change windows:\n  {}",
            guard.lease_name,
            report.writes,
            report.windows.len(),
            report
                .windows
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("\n  ")
        );
        assert!(
            report.violations.is_empty(),
            "{backend}: {:#?}",
            report.violations
        );
        let writes: Vec<&String> = report.windows.iter().flat_map(|w| &w.writes).collect();
        let has = |prefix: &str| writes.iter().any(|w| w.starts_with(prefix));
        assert!(
            has(&format!(
                "create deployments/{CINDER}-volume-{backend} -> 201"
            )),
            "{backend}: {writes:?}"
        );
        let updates = writes
            .iter()
            .filter(|w| {
                w.starts_with(&format!(
                    "update deployments/{CINDER}-volume-{backend} -> 200"
                ))
            })
            .count();
        if backend == DETACHED {
            assert!(
                has(&format!(
                    "delete deployments/{CINDER}-volume-{backend} -> 200"
                )),
                "{writes:?}"
            );
            assert!(
                has(&format!(
                    "create jobs/{CINDER}-{backend}-service-remove -> 201"
                )),
                "{writes:?}"
            );
        } else {
            // Rolled by the upgrade, then by the promoted installed-release annotation.
            assert!(updates >= 2, "{backend}: {writes:?}");
        }
    }

    // The detach order across both operators: the last accepted write of the detached volume
    // Deployment is its delete, answered before the service-remove Job was created.
    let deployment_name = format!("{CINDER}-volume-{DETACHED}");
    let job_name = format!("{CINDER}-{DETACHED}-service-remove");
    let job_created = record
        .iter()
        .filter(|w| w.succeeded() && w.verb == "create" && w.resource == "jobs")
        .filter(|w| w.name == job_name)
        .map(|w| w.before.resource_version)
        .min()
        .expect("the service-remove Job was created");
    let last = record
        .iter()
        .filter(|w| w.succeeded() && w.resource == "deployments" && w.subresource.is_empty())
        .filter(|w| w.name == deployment_name)
        .max_by_key(|w| w.after.resource_version)
        .expect("writes of the detached Deployment");
    assert_eq!(last.verb, "delete", "{last:?}");
    assert!(
        last.after.resource_version <= job_created,
        "the Deployment was written (rv {}) after the Job was created (rv {job_created})",
        last.after.resource_version
    );
    h.stop().await.unwrap();
}
