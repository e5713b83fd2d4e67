//! The admin UI in a real browser: an operator on the embedded cluster with a Cinder mid-upgrade
//! (its migrate Job runs for ten minutes) whose database device this replica holds with two
//! waiters queued behind it. Headless Chromium loads each page (`--dump-dom`) and finds the Cinder, its
//! Database step in MigrateInProgress, the waiting transactions with the wait-for graph and its
//! oldest waiter, and the device with its holder and waiters; live refresh has replaced the
//! page's content once the script ran. Every page carries the strict Content-Security-Policy and
//! no Secret value. A screenshot of each page is kept under `<target>/observability/screenshots`
//! (and copied into docs/images when `CINDER_DOCS_SCREENSHOTS=1`).

use cinder_e2e::database_helpers::*;
use cinder_e2e::deploy_helpers::{DeployedOperator, repo_root};
use cinder_e2e::observability_helpers::{Browser, artefact_dir, raw_get, test_telemetry};
use cinder_e2e::*;
use cinder_lease::Priority;
use cinder_operator::crd::UpgradePhase;
use cinder_operator::http::ui::html::CSP;
use cinder_sim::controllers::PodOutcome;
use std::time::Duration;

/// The database device of the Cinder (its database is the default `cinder`): the test holds it.
const DEVICE: &str = "db:cinder-e2e/cinder";

/// (file name, path, what the DOM must contain).
fn pages() -> Vec<(&'static str, &'static str, Vec<&'static str>)> {
    vec![
        (
            "admin-overview",
            "/",
            vec!["cinder-e2e/shown", "href=\"/ui/cinders/cinder-e2e/shown\""],
        ),
        (
            "admin-cinder",
            "/ui/cinders/cinder-e2e/shown",
            vec![
                "data-step=\"Database\"",
                "MigrateInProgress",
                "phase <strong>Migrating</strong>",
                "Pass history",
                DEVICE,
            ],
        ),
        (
            "admin-transactions",
            "/ui/transactions",
            vec![
                "id=\"wait-for\"",
                "Oldest waiter",
                "node txn oldest",
                DEVICE,
            ],
        ),
        (
            "admin-devices",
            "/ui/devices",
            vec![
                DEVICE,
                "this replica",
                "high</strong>: txn",
                "baseline</strong>: txn",
            ],
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pages_show_a_cinder_mid_upgrade_in_a_browser() {
    test_telemetry();
    let Some(browser) = Browser::find().unwrap() else {
        println!("SKIPPED the_pages_show_a_cinder_mid_upgrade_in_a_browser: no chromium on PATH");
        return;
    };
    let op = DeployedOperator::start().await.unwrap();
    job_rule(
        &op.cluster,
        "-db-migrate",
        PodOutcome::success(),
        Duration::from_secs(600),
    )
    .unwrap();
    let creds = database_environment(&op.client, "pages").await.unwrap();
    create_cinder(
        &op.client,
        "shown",
        serde_json::json!({"openStackRelease": "2025.2", "image": {"repository": "registry.example/cinder", "tag": "2025.2"}}),
    )
    .await
    .unwrap();
    wait_cinder_condition(
        &op.client,
        "shown",
        "DatabaseReady",
        "True",
        "DatabaseSynced",
    )
    .await
    .unwrap();
    set_release(&op.client, "shown", "2026.1").await.unwrap();
    wait_status(&op.client, "shown", "phase Migrating", |s| {
        s.upgrade_phase == Some(UpgradePhase::Migrating)
    })
    .await
    .unwrap();
    wait_cinder_condition(
        &op.client,
        "shown",
        "DatabaseReady",
        "False",
        "MigrateInProgress",
    )
    .await
    .unwrap();

    // The Cinder's database device held by this replica, and two requests queued behind it
    // (the operator's own next database action may queue there too).
    let locks = op.ctx.device_locks.clone();
    let held = locks.lock(DEVICE, Priority::Default).await.unwrap();
    let waiters: Vec<_> = [Priority::High, Priority::Baseline]
        .into_iter()
        .map(|p| {
            let locks = locks.clone();
            tokio::spawn(async move {
                let guard = locks.lock(DEVICE, p).await?;
                guard.release().await;
                Ok::<(), cinder_lease::DeviceLockError>(())
            })
        })
        .collect();
    eventually("two waiters on the device", || async {
        let snapshot = locks.inspect().await;
        snapshot
            .devices
            .iter()
            .any(|d| d.device == DEVICE && d.waiters.len() >= 2)
            .then_some(())
    })
    .await
    .unwrap();

    let admin = op.endpoints.admin_addr.to_string();
    let shots = artefact_dir().unwrap().join("screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    let mut secrets = creds.values();
    secrets.retain(|v| v.len() >= 6);
    for (file, path, expected) in pages() {
        // Headers and the absence of secrets, on the page and on its refresh fragment.
        for variant in [path.to_string(), format!("{path}?fragment=main")] {
            let (addr, variant_path) = (admin.clone(), variant.clone());
            let response = tokio::task::spawn_blocking(move || raw_get(&addr, &variant_path))
                .await
                .unwrap()
                .unwrap();
            assert_eq!(response.status, 200, "{variant}: {}", response.body);
            assert_eq!(
                response.header("content-security-policy"),
                Some(CSP),
                "{variant}"
            );
            for v in &secrets {
                assert!(
                    !response.body.contains(v.as_str()),
                    "a Secret value on {variant}"
                );
            }
            assert!(
                !response.body.contains("<script>"),
                "inline script on {variant}"
            );
        }
        let url = format!("http://{admin}{path}");
        let (b_url, budget) = (url.clone(), if path == "/" { 4500 } else { 500 });
        let browser_ref = &browser;
        let dom = tokio::task::block_in_place(|| browser_ref.dump_dom(&b_url, budget)).unwrap();
        for needle in expected {
            assert!(
                dom.contains(needle),
                "{path}: {needle:?} not in the DOM:\n{dom}"
            );
        }
        if path == "/" {
            // The live refresh ran (the script fetched the fragment and said so).
            assert!(dom.contains("live · updated"), "no refresh on /:\n{dom}");
        }
        let png = shots.join(format!("{file}.png"));
        tokio::task::block_in_place(|| browser_ref.screenshot(&url, &png)).unwrap();
        if std::env::var("CINDER_DOCS_SCREENSHOTS").as_deref() == Ok("1") {
            let docs = repo_root().join("docs/images");
            std::fs::create_dir_all(&docs).unwrap();
            std::fs::copy(&png, docs.join(format!("{file}.png"))).unwrap();
        }
    }
    // The assets are the operator's own.
    for (path, kind) in [
        ("/ui/admin.js", "text/javascript"),
        ("/ui/admin.css", "text/css"),
    ] {
        let addr = admin.clone();
        let r = tokio::task::spawn_blocking(move || raw_get(&addr, path))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(r.status, 200);
        assert!(
            r.header("content-type")
                .unwrap_or_default()
                .starts_with(kind)
        );
    }
    let addr = admin.clone();
    let missing =
        tokio::task::spawn_blocking(move || raw_get(&addr, "/ui/cinders/cinder-e2e/nope"))
            .await
            .unwrap()
            .unwrap();
    assert_eq!(missing.status, 404);

    held.release().await;
    for w in waiters {
        let released = tokio::time::timeout(EVENTUALLY, w).await.unwrap().unwrap();
        assert!(released.is_ok(), "a waiter did not get the device");
    }
    op.stop().await.unwrap();
}
