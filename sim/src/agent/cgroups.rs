//! Memory cgroups of the process runtime, as a kubelet makes them: one cgroup per agent
//! instance (`cinder-<id>`, under the agent's own memory cgroup), one per pod (`pod<uid>`) and
//! one per container start (`<container>-<restart>`), on cgroup v2 where the memory controller
//! is on the unified hierarchy and on v1's `memory` hierarchy otherwise. A container's
//! `resources.limits.memory` is its cgroup's limit (`memory.max`, `memory.limit_in_bytes`);
//! when the kernel's OOM killer ends a process there, its cgroup's `oom_kill` count says so and
//! the container's termination reason is `OOMKilled`. Every cgroup is removed when its
//! container, pod or instance goes; an instance whose process died without cleaning up is
//! removed by the next agent that starts beside it.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// Which cgroup interface the memory controller is reached through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    /// The unified hierarchy: `memory.max`, `memory.events`.
    V2,
    /// The v1 `memory` hierarchy: `memory.limit_in_bytes`, `memory.oom_control`.
    V1,
}

/// Where the memory controller is, given `/proc/self/cgroup` and the mounts (`/proc/self/mountinfo`
/// as (mount point, filesystem type, super options) triples): the directory of this process's
/// own cgroup and the interface. Pure, so it is tested on both layouts.
pub fn locate(
    proc_cgroup: &str,
    mounts: &[(String, String, String)],
) -> Option<(PathBuf, Version)> {
    let own = |wanted: &dyn Fn(&str, &str) -> bool| {
        proc_cgroup.lines().find_map(|line| {
            let mut parts = line.splitn(3, ':');
            let (id, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            wanted(id, controllers).then(|| path.to_owned())
        })
    };
    // v2: a cgroup2 mount whose root offers the memory controller.
    for (point, fstype, _) in mounts {
        if fstype != "cgroup2" {
            continue;
        }
        let controllers = std::fs::read_to_string(Path::new(point).join("cgroup.controllers"))
            .unwrap_or_default();
        if controllers.split_whitespace().any(|c| c == "memory")
            && let Some(path) = own(&|id, c| id == "0" && c.is_empty())
        {
            return Some((join(point, &path), Version::V2));
        }
    }
    let (point, _, _) = mounts.iter().find(|(_, fstype, options)| {
        fstype == "cgroup" && options.split(',').any(|o| o == "memory")
    })?;
    let path = own(&|_, c| c.split(',').any(|c| c == "memory"))?;
    Some((join(point, &path), Version::V1))
}

fn join(point: &str, path: &str) -> PathBuf {
    Path::new(point).join(path.trim_start_matches('/'))
}

/// The cgroup mounts of this process, from `/proc/self/mountinfo`.
fn mounts() -> Vec<(String, String, String)> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let point = left.split_whitespace().nth(4)?;
            let mut right = right.split_whitespace();
            let fstype = right.next()?;
            let options = right.nth(1).unwrap_or_default();
            fstype
                .starts_with("cgroup")
                .then(|| (point.to_owned(), fstype.to_owned(), options.to_owned()))
        })
        .collect()
}

/// The agent instance's cgroup (`cinder-<id>`).
#[derive(Clone, Debug)]
pub struct Cgroups {
    pub root: PathBuf,
    pub version: Version,
}

impl Cgroups {
    /// Makes the instance's cgroup under this process's own memory cgroup; the reason when
    /// there is no memory controller or it cannot be written.
    pub fn create(id: &str) -> Result<Cgroups, String> {
        let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        let (parent, version) = locate(&own, &mounts())
            .ok_or_else(|| "no cgroup hierarchy with the memory controller".to_owned())?;
        sweep_dead_instances(&parent);
        let root = parent.join(format!("cinder-{id}"));
        if version == Version::V2 {
            // The children of the agent's cgroup need the memory controller; v2 lets a cgroup
            // that holds processes delegate it only where it is delegated already (a unit
            // with Delegate=yes) or at the root.
            let control = parent.join("cgroup.subtree_control");
            let enabled = std::fs::read_to_string(&control).unwrap_or_default();
            if !enabled.split_whitespace().any(|c| c == "memory") {
                std::fs::write(&control, "+memory").map_err(|e| {
                    format!(
                        "enabling the memory controller in {}: {e}",
                        control.display()
                    )
                })?;
            }
        }
        std::fs::create_dir(&root).map_err(|e| format!("cgroup {}: {e}", root.display()))?;
        if version == Version::V2 {
            let _ = std::fs::write(root.join("cgroup.subtree_control"), "+memory");
        }
        Ok(Cgroups { root, version })
    }

    /// The pod's cgroup directory.
    pub fn pod_dir(&self, uid: &str) -> PathBuf {
        self.root.join(format!("pod{uid}"))
    }

    /// Makes the cgroup of one container start with `limit` bytes of memory (None: no limit).
    pub fn container(
        &self,
        uid: &str,
        name: &str,
        attempt: u32,
        limit: Option<u64>,
    ) -> Result<ContainerCgroup, String> {
        let pod = self.pod_dir(uid);
        let made = |dir: &Path| match std::fs::create_dir(dir) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
            Err(e) => Err(format!("cgroup {}: {e}", dir.display())),
        };
        made(&pod)?;
        if self.version == Version::V2 {
            let _ = std::fs::write(pod.join("cgroup.subtree_control"), "+memory");
        }
        let dir = pod.join(format!("{name}-{attempt}"));
        made(&dir)?;
        if let Some(limit) = limit {
            let file = match self.version {
                Version::V2 => "memory.max",
                Version::V1 => "memory.limit_in_bytes",
            };
            std::fs::write(dir.join(file), limit.to_string())
                .map_err(|e| format!("memory limit {limit} on {}: {e}", dir.display()))?;
            if self.version == Version::V2 {
                // No swap beyond the limit, as the kubelet's default.
                let _ = std::fs::write(dir.join("memory.swap.max"), "0");
            }
        }
        Ok(ContainerCgroup {
            dir,
            version: self.version,
        })
    }

    /// Removes the pod's cgroups (its containers' first); the processes in them must be gone.
    pub fn remove_pod(&self, uid: &str) {
        remove_tree(&self.pod_dir(uid));
    }

    /// Removes the instance's cgroup and everything under it.
    pub fn remove(&self) {
        remove_tree(&self.root);
    }
}

/// Removes the cgroups of instances whose owner record is gone (the network sweep removed it,
/// as their process died without cleaning up) and that hold no process.
fn sweep_dead_instances(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.filter_map(Result::ok) {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(id) = name.strip_prefix("cinder-") else {
            continue;
        };
        let owned = Path::new(super::sandbox::OWNERS).join(id).exists();
        if !owned && !holds_processes(&entry.path()) {
            remove_tree(&entry.path());
        }
    }
}

/// Whether any cgroup under `dir` (itself included) has a process.
fn holds_processes(dir: &Path) -> bool {
    let own = std::fs::read_to_string(dir.join("cgroup.procs"))
        .map(|p| !p.trim().is_empty())
        .unwrap_or(false);
    own || std::fs::read_dir(dir).is_ok_and(|entries| {
        entries
            .filter_map(Result::ok)
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .any(|e| holds_processes(&e.path()))
    })
}

/// One container start's cgroup.
#[derive(Clone, Debug)]
pub struct ContainerCgroup {
    pub dir: PathBuf,
    version: Version,
}

impl ContainerCgroup {
    /// The file a process writes `0` to in order to join (opened before the fork).
    pub fn procs(&self) -> PathBuf {
        self.dir.join("cgroup.procs")
    }

    /// How many processes the kernel's OOM killer ended in this cgroup.
    pub fn oom_kills(&self) -> u64 {
        let file = match self.version {
            Version::V2 => "memory.events",
            Version::V1 => "memory.oom_control",
        };
        let text = std::fs::read_to_string(self.dir.join(file)).unwrap_or_default();
        oom_kill_count(&text)
    }

    /// Removes the cgroup (waiting briefly for its last processes to be reaped).
    pub fn remove(&self) {
        remove_tree(&self.dir);
    }
}

/// The `oom_kill N` line of `memory.events` (v2) or `memory.oom_control` (v1).
pub fn oom_kill_count(text: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix("oom_kill ")?.trim().parse().ok())
        .unwrap_or(0)
}

/// Removes `dir` and the cgroups under it, deepest first; a cgroup whose processes are still
/// exiting is tried again for up to a second.
fn remove_tree(dir: &Path) {
    if !dir.exists() {
        return;
    }
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.filter_map(Result::ok) {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                remove_tree(&entry.path());
            }
        }
    }
    for _ in 0..50 {
        if std::fs::remove_dir(dir).is_ok() || !dir.exists() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    tracing::debug!(cgroup = %dir.display(), "process node: cgroup not removed");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oom_kills_are_read_from_either_interface() {
        assert_eq!(
            oom_kill_count("oom_kill_disable 0\nunder_oom 0\noom_kill 2\n"),
            2
        );
        assert_eq!(
            oom_kill_count("low 0\nhigh 0\nmax 4\noom 1\noom_kill 1\noom_group_kill 0\n"),
            1
        );
        assert_eq!(oom_kill_count("oom_kill_disable 0\n"), 0);
    }

    #[test]
    fn v1_memory_hierarchy_is_found_beside_an_empty_unified_one() {
        let own = "9:name=systemd:/\n4:memory:/jobs/abc\n1:cpu:/\n0::/\n";
        let mounts = vec![
            (
                "/sys/fs/cgroup/memory".to_owned(),
                "cgroup".to_owned(),
                "rw,memory".to_owned(),
            ),
            (
                "/nonexistent-unified".to_owned(),
                "cgroup2".to_owned(),
                "rw".to_owned(),
            ),
        ];
        assert_eq!(
            locate(own, &mounts),
            Some((PathBuf::from("/sys/fs/cgroup/memory/jobs/abc"), Version::V1))
        );
        assert_eq!(locate("0::/\n", &mounts[1..]), None);
    }

    #[test]
    fn unified_hierarchy_with_the_memory_controller_comes_first() {
        let root = tempfile::tempdir().unwrap();
        std::fs::write(
            root.path().join("cgroup.controllers"),
            "cpu io memory pids\n",
        )
        .unwrap();
        let point = root.path().to_str().unwrap().to_owned();
        let mounts = vec![
            (
                "/sys/fs/cgroup/memory".to_owned(),
                "cgroup".to_owned(),
                "rw,memory".to_owned(),
            ),
            (point.clone(), "cgroup2".to_owned(), "rw".to_owned()),
        ];
        let own = "4:memory:/jobs/abc\n0::/user.slice/agent.scope\n";
        assert_eq!(
            locate(own, &mounts),
            Some((root.path().join("user.slice/agent.scope"), Version::V2))
        );
    }
}
