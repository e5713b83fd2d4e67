//! The upgrade 2026.1 -> 2026.2 on real parts (the set-up of `real_cinder_convergence`): the
//! samples converge at 2026.1, then `spec.openStackRelease` and the image tag move to 2026.2 in
//! one edit, and what the objects went through is recorded every 250 ms. Shown:
//!
//! - expand ran cinder 29's `db sync`: the schema is at 29's alembic head;
//! - migrate ran the real `cinder-status upgrade check`: the UpgradeCheckCompleted /
//!   UpgradeCheckWarnings event carries the exit code the migrate pod's termination message
//!   gave (not "unavailable");
//! - the phases came in the seed's order, Expanding, Migrating, RollingUpdate, Contracting, each
//!   phase's Job succeeded before the next phase, and the workloads rolled onto 2026.2 in the
//!   seed's order (scheduler, volume, backup, then the API), each after the one before had
//!   rolled;
//! - installedRelease stayed 2026.1 until the contract Job (`online_data_migrations`) succeeded,
//!   and the scheduler, volume and backup rolled once more after the promotion (their
//!   installed-release annotation);
//! - every service re-registered under 29: `cinder-manage service list` shows each with the RPC
//!   and object versions cinder 29 reports, heartbeating after the upgrade started;
//! - the Cinder is Ready at 2026.2;
//! - the Cinder user's connections on the server (sampled every second) stay within its cap,
//!   and the server refused no connection attempt (its `Aborted_connects`, which a login over
//!   the cap, MySQL error 1226, counts) and no pod logs a 1226.

use cinder_e2e::real_cinder::Root;
use cinder_e2e::real_cinder_cluster::{
    CINDER, RealCinderCluster, RealCinderOptions, SAMPLES_NS, peak, real_cinder_roots,
};
use cinder_operator::crd::Cinder;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, ListParams, Patch, PatchParams};
use std::time::Duration;

const CONVERGENCE: Duration = Duration::from_secs(20 * 60);

/// The RPC version of each service binary and the object version of `root`'s cinder.
fn versions(root: &Root, home: &std::path::Path) -> (Vec<(&'static str, String)>, String) {
    let code = "from cinder.scheduler import rpcapi as s\n\
                from cinder.volume import rpcapi as v\n\
                from cinder.backup import rpcapi as b\n\
                from cinder.objects import base\n\
                print(s.SchedulerAPI.RPC_API_VERSION)\n\
                print(v.VolumeAPI.RPC_API_VERSION)\n\
                print(b.BackupAPI.RPC_API_VERSION)\n\
                print(base.OBJ_VERSIONS.get_current())\n";
    let out = root
        .command("python", home)
        .args(["-c", code])
        .output()
        .expect("running python");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<String> = text.lines().map(str::to_owned).collect();
    assert_eq!(lines.len(), 4, "{text}");
    (
        vec![
            ("cinder-scheduler", lines[0].clone()),
            ("cinder-volume", lines[1].clone()),
            ("cinder-backup", lines[2].clone()),
        ],
        lines[3].clone(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_upgrade_runs_on_real_cinder() {
    let Some(roots) = real_cinder_roots("the_upgrade_runs_on_real_cinder") else {
        return;
    };
    let (from, to) = (&roots[0], &roots[1]);
    let cluster = RealCinderCluster::start(from, RealCinderOptions::default())
        .await
        .unwrap();
    let first = cluster.wait_ready(CONVERGENCE).await.unwrap();
    eprintln!("{} Ready after {:.1} s", from.release, first.as_secs_f64());
    let before = cluster.cinder().await.unwrap();
    assert_eq!(
        before
            .status
            .as_ref()
            .and_then(|s| s.installed_release.as_deref()),
        Some(from.release)
    );
    assert_eq!(
        cluster.db_version_of(from).await.unwrap(),
        cluster.alembic_head(from).unwrap()
    );
    let rows_before = cluster.service_list_of(from).await.unwrap();
    // The server's clock: the services' heartbeats are written in it.
    let upgrade_started = cluster
        .db
        .sql("SELECT UTC_TIMESTAMP()")
        .await
        .unwrap()
        .trim()
        .to_owned();

    let sampler = cluster.sample_connections(Duration::from_secs(1));
    let recorder = cluster.record_timeline(Duration::from_millis(250));
    let api: Api<Cinder> = Api::namespaced(cluster.client.clone(), SAMPLES_NS);
    api.patch(
        CINDER,
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({
            "spec": {"openStackRelease": to.release, "image": {"tag": to.release}}
        })),
    )
    .await
    .unwrap();
    let to_release = to.release;
    let upgraded = cluster
        .wait_cinder("the upgrade", CONVERGENCE, |c| {
            let Some(s) = c.status.as_ref() else {
                return false;
            };
            s.observed_generation == c.metadata.generation
                && s.installed_release.as_deref() == Some(to_release)
                && s.upgrade_phase.is_none()
                && s.conditions
                    .iter()
                    .any(|c| c.type_ == "Ready" && c.status == "True")
        })
        .await;
    // The second roll of the single writers, after the promotion, then a few more samples.
    tokio::time::sleep(Duration::from_secs(10)).await;
    let timeline = recorder.stop().await;
    let samples = sampler.stop().await;
    eprintln!("timeline of the upgrade:\n{}", timeline.lines());
    let took = upgraded.unwrap();
    eprintln!(
        "{} -> {} Ready after {:.1} s",
        from.release,
        to.release,
        took.as_secs_f64()
    );

    // Expand: cinder 29's db sync brought the schema to 29's head.
    // (28 and 29 share their alembic head: the expand adds no revision between them.)
    let head = cluster.alembic_head(to).unwrap();
    eprintln!(
        "alembic heads: {} {}, {} {head}",
        from.release,
        cluster.alembic_head(from).unwrap(),
        to.release
    );
    assert_eq!(cluster.db_version_of(to).await.unwrap(), head);
    let jobs: Api<Job> = Api::namespaced(cluster.client.clone(), SAMPLES_NS);
    let expand = jobs.get("cinder-db-expand").await.unwrap();
    let container = &expand.spec.unwrap().template.spec.unwrap().containers[0];
    assert!(
        container
            .image
            .as_deref()
            .is_some_and(|i| i.ends_with(&format!(":{}", to.release))),
        "the expand Job runs {}'s image: {:?}",
        to.release,
        container.image
    );
    assert_eq!(
        container.command.clone().unwrap_or_default(),
        ["cinder-manage", "db", "sync"]
    );

    // The phases in order, each after the Job of the one before succeeded.
    let at = |key: &str, value: &str| {
        timeline
            .first(key, value)
            .unwrap_or_else(|| panic!("{key} = {value} never seen:\n{}", timeline.lines()))
    };
    let expanding = at("cinder/phase", "Expanding");
    let expand_done = at("job/cinder-db-expand", "succeeded");
    let migrating = at("cinder/phase", "Migrating");
    let migrate_done = at("job/cinder-db-migrate", "succeeded");
    let rolling = at("cinder/phase", "RollingUpdate");
    let contracting = at("cinder/phase", "Contracting");
    let contract_done = at("job/cinder-db-contract", "succeeded");
    let promoted = at("cinder/installedRelease", to.release);
    assert!(expanding <= expand_done && expand_done <= migrating);
    assert!(migrating <= migrate_done && migrate_done <= rolling);
    assert!(rolling < contracting && contracting <= contract_done);
    assert!(
        contract_done <= promoted,
        "installedRelease promoted at {promoted:?}, before the contract Job succeeded at {contract_done:?}"
    );
    let installed: Vec<&str> = timeline
        .values("cinder/installedRelease")
        .into_iter()
        .map(|(_, v)| v)
        .collect();
    assert_eq!(
        installed,
        [from.release, to.release],
        "installedRelease changed once"
    );

    // The rollout order: each workload's template moves to 2026.2 after the one before rolled.
    let order = [
        "cinder-scheduler",
        "cinder-volume-ceph",
        "cinder-backup",
        "cinder-api",
    ];
    // The first roll starts in the pass that writes the RollingUpdate phase, before that pass's
    // status write: its bound is the migrate Job's success.
    let mut previous_rolled = migrate_done;
    for name in order {
        let moved = at(&format!("deployment/{name}/image"), to.release);
        assert!(
            moved >= previous_rolled && moved >= migrate_done,
            "{name} moved to {} at {moved:?}, before the one before it rolled ({previous_rolled:?}):\n{}",
            to.release,
            timeline.lines()
        );
        previous_rolled = timeline
            .values(&format!("deployment/{name}/rolled"))
            .into_iter()
            .find(|(t, v)| *t > moved && *v == "true")
            .map(|(t, _)| t)
            .unwrap_or_else(|| panic!("{name} never rolled:\n{}", timeline.lines()));
    }
    // One cinder-volume per backend at any time: the Recreate roll starts the new pod once
    // the old one is gone (its process exited).
    let volume_pods: Vec<&str> = timeline
        .changes
        .iter()
        .filter(|(_, k, _)| k.starts_with("pod/cinder-volume-ceph-"))
        .map(|(_, k, _)| k.as_str())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let mut lifetimes: Vec<(Duration, Option<Duration>, &str)> = volume_pods
        .iter()
        .map(|k| {
            let born = timeline.values(k)[0].0;
            (born, timeline.first(k, "gone"), *k)
        })
        .collect();
    lifetimes.sort();
    for pair in lifetimes.windows(2) {
        let ((_, old_gone, old), (born, _, new)) = (pair[0], pair[1]);
        let old_gone = old_gone.unwrap_or_else(|| panic!("{old} never went"));
        assert!(
            born >= old_gone,
            "{new} was created at {born:?}, while {old} still existed (gone at {old_gone:?}): two \
             cinder-volume processes for cinder@ceph at once"
        );
    }

    // The second roll of the single writers: their installed-release annotation after the
    // promotion.
    for name in ["cinder-scheduler", "cinder-volume-ceph", "cinder-backup"] {
        let second = at(&format!("deployment/{name}/installed-release"), to.release);
        assert!(
            second >= contract_done,
            "{name} rolled again before contract"
        );
    }

    // Migrate ran the real upgrade check: the event carries its exit code.
    let events: Api<Event> = Api::namespaced(cluster.client.clone(), SAMPLES_NS);
    let check: Vec<Event> = events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| {
            matches!(
                e.reason.as_deref(),
                Some("UpgradeCheckCompleted" | "UpgradeCheckWarnings")
            )
        })
        .collect();
    assert_eq!(check.len(), 1, "one upgrade-check event: {check:?}");
    let message = check[0].message.clone().unwrap_or_default();
    eprintln!(
        "event {}: {message}",
        check[0].reason.clone().unwrap_or_default()
    );
    assert!(
        ["exit code 0)", "exit code 1)", "exit code 2)"]
            .iter()
            .any(|c| message.contains(c)),
        "the event carries the real exit code: {message}"
    );

    // Every service re-registered under 29.
    let (rpc, objects) = versions(to, cluster.home.path());
    let (rpc_from, objects_from) = versions(from, cluster.home.path());
    eprintln!(
        "cinder 28: {rpc_from:?} objects {objects_from}; cinder 29: {rpc:?} objects {objects}"
    );
    let rows = cluster.service_list_of(to).await.unwrap();
    eprintln!("before: {rows_before:#?}\nafter: {rows:#?}");
    for (binary, version) in &rpc {
        let row = rows
            .iter()
            .find(|r| r.binary == *binary)
            .unwrap_or_else(|| panic!("{binary} in {rows:#?}"));
        assert_eq!(&row.rpc_version, version, "{binary} registered under 29");
        assert_eq!(row.object_version, objects, "{binary} registered under 29");
        assert!(
            row.updated > upgrade_started,
            "{binary} heartbeat {} after the upgrade started at {upgrade_started}",
            row.updated
        );
        assert_eq!(row.state, ":-)", "{binary} up");
    }

    // The connections within the cap, none refused over it.
    let cap = cluster.user_cap().await.unwrap();
    let peak = peak(&samples);
    let refused = cluster.refused_connections().await.unwrap();
    eprintln!(
        "connections of the Cinder user through the upgrade: peak {peak} (sampled every 1 s), \
         cap {cap}, connection attempts refused {refused}"
    );
    assert!(peak > 0 && peak <= cap);
    assert_eq!(refused, 0, "the server refused connection attempts");
    for (name, text) in cluster.pod_logs().await.unwrap() {
        assert!(!text.contains("1226"), "{name} hit the cap:\n{text}");
    }

    cluster.stop().await.unwrap();
}
