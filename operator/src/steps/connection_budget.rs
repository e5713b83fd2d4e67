//! The connection cap held against what the steps really run: for each topology, the objects
//! the workload steps write (the API, scheduler, volume and backup Deployments, with their
//! rollout strategies, and the API's HPA) give the worst case, every Deployment at the peak of a
//! rollout at once plus one database Job, and the cap the Database step computes must cover it.

use super::backup_service::backup_deployment;
use super::deployment::api_deployment;
use super::hpa::desired_hpa;
use super::scheduler::scheduler_deployment;
use super::volume_services::volume_workload;
use crate::crd::cinder::AutoscalingSpec;
use crate::crd::{Cinder, CinderSpec};
use crate::kube_ext::reader::ClusterStores;
use crate::names;
use crate::pipeline::{Artefacts, ProjectedBackend, StepContext};
use crate::planning::connection_cap::{PAIR, connection_cap, rollout_peak, volume_deployments};
use crate::planning::process_model::{
    ApiWorkers, SINGLE_WRITER_MAX_OVERFLOW, SINGLE_WRITER_POOL_SIZE,
};
use crate::workloads::desired_deployment;
use k8s_openapi::api::apps::v1::Deployment;
use std::collections::BTreeMap;
use std::sync::Arc;

/// A Cinder's topology: its spec, its projected volume backends (the bool: being deleted),
/// the backends whose volume Deployment runs while they are not projected (waiting for their
/// key), and whether a backup target is projected.
struct Topology {
    what: &'static str,
    spec: CinderSpec,
    projected: Vec<(&'static str, bool)>,
    held: Vec<&'static str>,
    backup: bool,
}

fn backend(name: &str, deleting: bool) -> ProjectedBackend {
    ProjectedBackend {
        name: name.to_string(),
        secret_name: format!("c-backend-{name}-0123"),
        deleting,
        ..Default::default()
    }
}

/// The Deployments that run for `t`, as the steps write them.
fn deployments(t: &Topology) -> Vec<Deployment> {
    let mut cinder: Cinder = crate::test_fixtures::cinder();
    cinder.spec = t.spec.clone();
    let artefacts = Artefacts {
        config_map_name: Some("c-config-1".into()),
        backends: t.projected.iter().map(|(n, d)| backend(n, *d)).collect(),
        ..Default::default()
    };
    let mut ctx = StepContext::new(Arc::new(cinder.clone()), None, ClusterStores::default());
    ctx.artefacts = artefacts.clone();
    let mut out = vec![
        api_deployment(&cinder, "c-config-1".into(), &artefacts),
        scheduler_deployment(&cinder, "c-config-1".into(), &artefacts, Some("2026.1")),
    ];
    // A backend being deleted keeps its Deployment until the detach deletes it; a held one
    // keeps the Deployment written while it was projected.
    let running = t
        .projected
        .iter()
        .map(|(n, _)| *n)
        .chain(t.held.iter().copied());
    for name in running {
        let w = volume_workload("c", &backend(name, false), None, "c-config-1", &ctx);
        out.push(desired_deployment(&cinder, &w.spec));
    }
    if t.backup {
        let target = backend("target", false);
        out.push(backup_deployment(
            &cinder,
            &target,
            &BTreeMap::new(),
            "c-config-1".into(),
            &artefacts,
            Some("2026.1"),
        ));
    }
    out
}

/// Connections one pod of `d` holds.
fn per_pod(d: &Deployment, spec: &CinderSpec) -> i64 {
    if d.metadata.name.as_deref() == Some(&names::api_deployment("c")) {
        let w = ApiWorkers::of(spec);
        w.processes * (w.pool_size() + w.max_overflow())
    } else {
        SINGLE_WRITER_POOL_SIZE + SINGLE_WRITER_MAX_OVERFLOW
    }
}

/// Every Deployment at its rollout peak at once (the API at its HPA's ceiling when one owns
/// the count) plus one database Job.
fn worst_case(t: &Topology, objects: &[Deployment]) -> i64 {
    let mut cinder = crate::test_fixtures::cinder();
    cinder.spec = t.spec.clone();
    let hpa_max = t
        .spec
        .autoscaling
        .as_ref()
        .map(|a| desired_hpa(&cinder, a).spec.max_replicas);
    let pods: i64 = objects
        .iter()
        .map(|d| {
            let replicas = d.spec.replicas.or(hpa_max).unwrap_or(1);
            rollout_peak(replicas, d.spec.strategy.as_ref()) * per_pod(d, &t.spec)
        })
        .sum();
    pods + PAIR
}

/// The cap the Database step computes for `t`, from the projected backends and the running
/// volume Deployments' backend labels.
fn cap(t: &Topology, objects: &[Deployment]) -> i64 {
    let running: Vec<String> = objects
        .iter()
        .filter_map(|d| {
            d.metadata
                .labels
                .as_ref()?
                .get(names::LABEL_BACKEND)
                .cloned()
        })
        .collect();
    let count = volume_deployments(
        t.projected.iter().map(|(n, _)| *n),
        running.iter().map(String::as_str),
    );
    connection_cap(&t.spec, count)
}

#[test]
fn the_cap_covers_the_worst_case_of_every_topology() {
    let default = crate::test_fixtures::cinder().spec;
    let mut hpa = default.clone();
    hpa.autoscaling = Some(AutoscalingSpec {
        min_replicas: 2,
        max_replicas: 10,
        target_cpu_utilization: 80,
    });
    let mut threaded = default.clone();
    threaded.api.uwsgi.processes = 4;
    threaded.api.uwsgi.threads = 3;
    threaded.scheduler.replicas = 2;
    let topologies = [
        Topology {
            what: "default",
            spec: default.clone(),
            projected: vec![],
            held: vec![],
            backup: false,
        },
        Topology {
            what: "a backend, one being deleted, one waiting for its key, a backup target",
            spec: default.clone(),
            projected: vec![("a", false), ("b", true)],
            held: vec!["c"],
            backup: true,
        },
        Topology {
            what: "HPA up to 10",
            spec: hpa,
            projected: vec![("a", false)],
            held: vec![],
            backup: false,
        },
        Topology {
            what: "4 processes x 3 threads, 2 schedulers, a backend, a backup target",
            spec: threaded,
            projected: vec![("a", false)],
            held: vec![],
            backup: true,
        },
    ];
    for t in &topologies {
        let objects = deployments(t);
        let (worst, cap) = (worst_case(t, &objects), cap(t, &objects));
        assert!(
            cap >= worst,
            "{}: cap {cap} below the worst case {worst}",
            t.what
        );
        // The formula budgets exactly what runs (it always keeps the backup service's pair).
        let unused = if t.backup { 0 } else { PAIR };
        assert_eq!(cap - worst, unused, "{}", t.what);
    }
}
