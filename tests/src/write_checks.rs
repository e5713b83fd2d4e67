//! Mutual exclusion from the simulator's write record (`ClusterConfig::record_writes`): every
//! write to a group of guarded objects (a backend's volume service: its volume Deployment and
//! its service-remove Job) must come from a known writer that held the guarding Lease (the
//! backend's device Lease) when the server received the request and still held it when the
//! server answered; the writes of one writer during one tenure of the Lease form a change window,
//! no other holder may show in the Lease during a window, and the windows of two writers never
//! overlap. Status-subresource writes by other clients (the simulated controllers reporting
//! status) are not changes of the service; any other write by an unknown client is a violation.
//!
//! Time is the store's resourceVersion: each write is bracketed by the Lease reads before and
//! after it, each consistent with a resourceVersion, so a write happened inside
//! `[before.resource_version, after.resource_version]`. Every read of every recorded write is an
//! observation of the Lease at its resourceVersion; a change of holder that no recorded read saw
//! (acquired and lost again between two reads) is not detected.

use cinder_sim::WriteRecord;
use std::fmt;

/// A client of the cluster, known by its user agent, holding Leases under `identity`.
#[derive(Clone, Debug)]
pub struct Writer {
    pub user_agent: String,
    pub identity: String,
}

/// The objects one Lease guards.
#[derive(Clone, Debug)]
pub struct Guard {
    pub lease_namespace: String,
    pub lease_name: String,
    /// (group, resource, namespace, name) of each guarded object.
    pub objects: Vec<(String, String, String, String)>,
}

impl Guard {
    fn covers(&self, w: &WriteRecord) -> bool {
        self.objects.iter().any(|(g, r, ns, n)| {
            w.group == *g && w.resource == *r && w.namespace == *ns && w.name == *n
        })
    }

    fn holder_before<'a>(&self, w: &'a WriteRecord) -> Option<&'a str> {
        w.before.holder(&self.lease_namespace, &self.lease_name)
    }

    fn holder_after<'a>(&self, w: &'a WriteRecord) -> Option<&'a str> {
        w.after.holder(&self.lease_namespace, &self.lease_name)
    }
}

/// The writes of one writer during one tenure of the Lease.
#[derive(Clone, Debug, PartialEq)]
pub struct ChangeWindow {
    /// The writer's identity.
    pub writer: String,
    /// resourceVersion before its first write.
    pub from: u64,
    /// resourceVersion after its last write.
    pub to: u64,
    /// "verb resource/name -> status" of each write.
    pub writes: Vec<String>,
}

impl fmt::Display for ChangeWindow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} rv {}..{}: {}",
            self.writer,
            self.from,
            self.to,
            self.writes.join(", ")
        )
    }
}

/// What the check found for one guard.
#[derive(Clone, Debug, Default)]
pub struct ExclusionReport {
    /// The guarded writes checked (all answers, accepted or not).
    pub writes: usize,
    pub windows: Vec<ChangeWindow>,
    pub violations: Vec<String>,
}

fn describe(w: &WriteRecord) -> String {
    let sub = if w.subresource.is_empty() {
        String::new()
    } else {
        format!("/{}", w.subresource)
    };
    format!("{} {}{sub}/{} -> {}", w.verb, w.resource, w.name, w.status)
}

/// Checks the writes to `guard`'s objects in `record` against `writers` (see the module docs).
pub fn check_exclusion(
    record: &[WriteRecord],
    guard: &Guard,
    writers: &[Writer],
) -> ExclusionReport {
    let mut report = ExclusionReport::default();
    // Every read of the Lease: (resourceVersion, holder then).
    let mut observed: Vec<(u64, Option<&str>)> = record
        .iter()
        .flat_map(|w| {
            [
                (w.before.resource_version, guard.holder_before(w)),
                (w.after.resource_version, guard.holder_after(w)),
            ]
        })
        .collect();
    observed.sort_by_key(|(rv, _)| *rv);
    let other_holder = |from: u64, to: u64, identity: &str| {
        observed
            .iter()
            .filter(|(rv, _)| *rv >= from && *rv <= to)
            .find(|(_, h)| *h != Some(identity))
            .map(|(rv, h)| (*rv, h.map(str::to_string)))
    };

    let mut guarded: Vec<&WriteRecord> = record.iter().filter(|w| guard.covers(w)).collect();
    guarded.sort_by_key(|w| (w.before.resource_version, w.after.resource_version));
    let mut windows: Vec<ChangeWindow> = Vec::new();
    for w in guarded {
        let Some(writer) = writers.iter().find(|x| x.user_agent == w.user_agent) else {
            if w.subresource != "status" {
                report.violations.push(format!(
                    "{} by an unknown client (user agent {:?})",
                    describe(w),
                    w.user_agent
                ));
            }
            continue;
        };
        report.writes += 1;
        let id = writer.identity.as_str();
        let (before, after) = (guard.holder_before(w), guard.holder_after(w));
        if before != Some(id) || after != Some(id) {
            report.violations.push(format!(
                "{} by {id} while {} was held by {before:?} (received) and {after:?} (answered)",
                describe(w),
                guard.lease_name
            ));
        }
        let (from, to) = (w.before.resource_version, w.after.resource_version);
        match windows.last_mut() {
            Some(last) if last.writer == id && other_holder(last.to, from, id).is_none() => {
                last.to = last.to.max(to);
                last.writes.push(describe(w));
            }
            _ => windows.push(ChangeWindow {
                writer: id.to_string(),
                from,
                to,
                writes: vec![describe(w)],
            }),
        }
    }
    for w in &windows {
        if let Some((rv, holder)) = other_holder(w.from, w.to, &w.writer) {
            report.violations.push(format!(
                "{} was held by {holder:?} at rv {rv}, inside the change window {w}",
                guard.lease_name
            ));
        }
    }
    for (i, a) in windows.iter().enumerate() {
        for b in &windows[i + 1..] {
            if a.writer != b.writer && a.from < b.to && b.from < a.to {
                report
                    .violations
                    .push(format!("overlapping change windows: {a} and {b}"));
            }
        }
    }
    report.windows = windows;
    report
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{DateTime, Duration, Utc};
    use cinder_sim::{LeaseSnapshot, LeaseState};

    const LEASE: &str = "dev-lease";

    fn guard() -> Guard {
        Guard {
            lease_namespace: "ns".into(),
            lease_name: LEASE.into(),
            objects: vec![
                (
                    "apps".into(),
                    "deployments".into(),
                    "ns".into(),
                    "c-volume-b".into(),
                ),
                (
                    "batch".into(),
                    "jobs".into(),
                    "ns".into(),
                    "c-b-service-remove".into(),
                ),
            ],
        }
    }

    fn writers() -> Vec<Writer> {
        ["a", "b"]
            .map(|n| Writer {
                user_agent: format!("op-{n}"),
                identity: n.to_string(),
            })
            .to_vec()
    }

    fn t0() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
            .unwrap()
            .with_timezone(&Utc)
    }

    /// The Lease at `rv`: held by `holder` (renewed at t0 for 15 s), read at t0 + `at` seconds.
    fn snap(rv: u64, holder: Option<&str>, at: i64) -> LeaseSnapshot {
        LeaseSnapshot {
            resource_version: rv,
            time: t0() + Duration::seconds(at),
            leases: vec![LeaseState {
                namespace: "ns".into(),
                name: LEASE.into(),
                holder: holder.map(str::to_string),
                acquire_time: Some(t0()),
                renew_time: Some(t0()),
                duration_seconds: Some(15),
            }],
        }
    }

    struct W<'a> {
        agent: &'a str,
        verb: &'a str,
        resource: &'a str,
        name: &'a str,
        sub: &'a str,
        rv: (u64, u64),
        holder: (Option<&'a str>, Option<&'a str>),
        at: i64,
    }

    fn w(x: W<'_>) -> WriteRecord {
        WriteRecord {
            verb: x.verb.into(),
            group: match x.resource {
                "deployments" => "apps",
                "jobs" => "batch",
                "leases" => "coordination.k8s.io",
                _ => "",
            }
            .into(),
            resource: x.resource.into(),
            subresource: x.sub.into(),
            namespace: "ns".into(),
            name: x.name.into(),
            user_agent: x.agent.into(),
            status: 200,
            before: snap(x.rv.0, x.holder.0, x.at),
            after: snap(x.rv.1, x.holder.1, x.at),
        }
    }

    fn lease_write(
        agent: &str,
        rv: (u64, u64),
        holder: (Option<&str>, Option<&str>),
    ) -> WriteRecord {
        w(W {
            agent,
            verb: "update",
            resource: "leases",
            name: LEASE,
            sub: "",
            rv,
            holder,
            at: 1,
        })
    }

    fn deploy_write<'a>(
        agent: &'a str,
        verb: &'a str,
        rv: (u64, u64),
        holder: (Option<&'a str>, Option<&'a str>),
    ) -> WriteRecord {
        w(W {
            agent,
            verb,
            resource: "deployments",
            name: "c-volume-b",
            sub: "",
            rv,
            holder,
            at: 1,
        })
    }

    /// a takes the Lease, changes the Deployment twice, releases; b takes it, deletes the
    /// Deployment and creates the Job, releases.
    fn clean() -> Vec<WriteRecord> {
        let (a, b) = (Some("a"), Some("b"));
        let mut job = deploy_write("op-b", "create", (9, 10), (b, b));
        job.resource = "jobs".into();
        job.group = "batch".into();
        job.name = "c-b-service-remove".into();
        vec![
            lease_write("op-a", (1, 2), (None, a)),
            deploy_write("op-a", "create", (2, 3), (a, a)),
            deploy_write("op-a", "update", (3, 4), (a, a)),
            lease_write("op-a", (4, 5), (a, None)),
            lease_write("op-b", (5, 6), (None, b)),
            deploy_write("op-b", "delete", (6, 7), (b, b)),
            // The simulated Deployment controller reports status: not a change of the service.
            w(W {
                agent: "",
                verb: "patch",
                resource: "deployments",
                name: "c-volume-b",
                sub: "status",
                rv: (7, 8),
                holder: (b, b),
                at: 1,
            }),
            job,
            lease_write("op-b", (10, 11), (b, None)),
        ]
    }

    #[test]
    fn writes_under_the_lease_in_two_tenures_pass() {
        let r = check_exclusion(&clean(), &guard(), &writers());
        assert!(r.violations.is_empty(), "{:#?}", r.violations);
        assert_eq!(r.writes, 4);
        let who: Vec<_> = r
            .windows
            .iter()
            .map(|w| (w.writer.as_str(), w.writes.len()))
            .collect();
        assert_eq!(who, [("a", 2), ("b", 2)]);
    }

    #[test]
    fn a_write_by_the_other_writer_is_caught() {
        let mut record = clean();
        // b changes the Deployment while a holds the Lease.
        record.insert(
            2,
            deploy_write("op-b", "update", (2, 3), (Some("a"), Some("a"))),
        );
        let r = check_exclusion(&record, &guard(), &writers());
        assert!(
            r.violations.iter().any(|v| v.contains(
                "update deployments/c-volume-b -> 200 by b while dev-lease was held by Some(\"a\")"
            )),
            "{:#?}",
            r.violations
        );
    }

    #[test]
    fn a_write_without_the_lease_is_caught() {
        let mut record = clean();
        record.push(deploy_write("op-a", "create", (11, 12), (None, None)));
        let r = check_exclusion(&record, &guard(), &writers());
        assert!(
            r.violations
                .iter()
                .any(|v| v.contains("by a while dev-lease was held by None")),
            "{:#?}",
            r.violations
        );
    }

    #[test]
    fn a_write_after_the_lease_expired_is_caught() {
        let mut record = clean();
        // a still writes 20 s after its last renewal (duration 15 s).
        record.insert(
            3,
            w(W {
                agent: "op-a",
                verb: "update",
                resource: "deployments",
                name: "c-volume-b",
                sub: "",
                rv: (4, 4),
                holder: (Some("a"), Some("a")),
                at: 20,
            }),
        );
        let r = check_exclusion(&record, &guard(), &writers());
        assert!(
            r.violations
                .iter()
                .any(|v| v.contains("by a while dev-lease was held by None")),
            "{:#?}",
            r.violations
        );
    }

    #[test]
    fn overlapping_windows_and_a_lease_changing_hands_inside_one_are_caught() {
        let (a, b) = (Some("a"), Some("b"));
        // Each write saw its own writer as holder when received and answered, but b's write was
        // received while a's was in flight (the Lease flipped between reads).
        let record = vec![
            deploy_write("op-a", "update", (10, 20), (a, a)),
            deploy_write("op-b", "update", (15, 25), (b, b)),
        ];
        let r = check_exclusion(&record, &guard(), &writers());
        assert!(
            r.violations
                .iter()
                .any(|v| v.starts_with("overlapping change windows")),
            "{:#?}",
            r.violations
        );
        assert!(
            r.violations
                .iter()
                .any(|v| v.contains("held by Some(\"b\") at rv 15, inside the change window a")),
            "{:#?}",
            r.violations
        );
    }

    #[test]
    fn an_unknown_client_changing_the_service_is_caught() {
        let mut record = clean();
        record.push(deploy_write(
            "kubectl/v1.32",
            "delete",
            (12, 13),
            (None, None),
        ));
        let r = check_exclusion(&record, &guard(), &writers());
        assert_eq!(r.violations.len(), 1, "{:#?}", r.violations);
        assert!(
            r.violations[0].contains("unknown client"),
            "{}",
            r.violations[0]
        );
    }
}
