//! Pod sandboxes made of Linux namespaces: the cluster instance's bridge and subnet, one network
//! namespace per pod (a veth pair to the bridge, the pod's IP, the bridge as default gateway),
//! and the launch of a container process into its memory cgroup and its pod's network namespace with a private mount
//! namespace and UTS namespace (the pod's hostname): a tmpfs root holding the host's top-level directories (bound, or overlaid when a
//! volume or working directory must be created under one), the volumes at their mountPaths,
//! the pod's /etc/hosts, /etc/hostname and /etc/resolv.conf, then chroot, working directory, a
//! PID namespace whose PID 1 is the command (with its own /proc; a keeper outside relays its
//! end), user and group. Mounts live only in the container's mount namespace, so they vanish with its
//! processes; the host objects made here are the bridge, veths and network namespaces, removed
//! by [`Network::remove_blocking`] and [`PodNetwork::remove_blocking`] (the cgroups are
//! [`super::cgroups`]'s).

use std::ffi::CString;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use rand::Rng;

/// Runs `ip` with `args`; the error is its stderr.
pub(crate) async fn ip(args: &[&str]) -> Result<(), String> {
    let out = tokio::process::Command::new("ip")
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .map_err(|e| format!("ip {}: {e}", args.join(" ")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

fn ip_blocking(args: &[&str]) {
    let _ = std::process::Command::new("ip")
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status();
}

/// The instance's bridge: `cnb<id>` with 10.200.X.1/24, X chosen at random among the subnets
/// no interface of the host uses.
#[derive(Clone, Debug)]
pub struct Network {
    /// Six hex digits naming every host object of this instance.
    pub id: String,
    pub bridge: String,
    /// The third octet of 10.200.X.0/24.
    pub subnet: u8,
}

impl Network {
    pub fn gateway(&self) -> Ipv4Addr {
        Ipv4Addr::new(10, 200, self.subnet, 1)
    }

    pub fn pod_ip(&self, host: u8) -> Ipv4Addr {
        Ipv4Addr::new(10, 200, self.subnet, host)
    }

    /// Creates the bridge on a free subnet; fails (with the reason) without root. Instances
    /// whose process died without cleaning up (killed) are removed first.
    pub async fn create() -> Result<Network, String> {
        sweep_dead_instances();
        let id = format!("{:06x}", rand::rng().random::<u32>() & 0xff_ffff);
        let _ = std::fs::create_dir_all(OWNERS);
        let _ = std::fs::write(Path::new(OWNERS).join(&id), std::process::id().to_string());
        let bridge = format!("cnb{id}");
        ip(&["link", "add", &bridge, "type", "bridge"]).await?;
        for _ in 0..64 {
            let subnet: u8 = rand::rng().random();
            if subnet_in_use(subnet).await {
                continue;
            }
            let network = Network {
                id: id.clone(),
                bridge: bridge.clone(),
                subnet,
            };
            let address = format!("{}/24", network.gateway());
            if let Err(error) = ip(&["addr", "add", &address, "dev", &bridge]).await {
                network.remove_blocking();
                return Err(error);
            }
            // Another instance may have taken the same subnet at the same moment.
            if subnet_users(subnet).await > 1 {
                let _ = ip(&["addr", "del", &address, "dev", &bridge]).await;
                continue;
            }
            if let Err(error) = ip(&["link", "set", &bridge, "up"]).await {
                network.remove_blocking();
                return Err(error);
            }
            return Ok(network);
        }
        ip_blocking(&["link", "del", &bridge]);
        Err("no free /24 in 10.200.0.0/16".to_owned())
    }

    /// The name of the network namespace of the pod with address `host`.
    pub fn netns_name(&self, host: u8) -> String {
        format!("cinder-{}-{host}", self.id)
    }

    /// Removes the bridge (synchronous, so it also runs from Drop).
    pub fn remove_blocking(&self) {
        ip_blocking(&["link", "del", &self.bridge]);
        let _ = std::fs::remove_file(Path::new(OWNERS).join(&self.id));
    }

    /// Kills what runs in this instance's pod namespaces and removes them with their veths.
    pub fn remove_pods_blocking(&self) {
        for netns in self.leftover_netns() {
            let path = Path::new("/run/netns").join(&netns);
            empty_namespace_blocking(&path);
            let host: u8 = netns
                .rsplit('-')
                .next()
                .and_then(|h| h.parse().ok())
                .unwrap_or(0);
            PodNetwork {
                netns: netns.clone(),
                host_veth: format!("cnv{}{host:02x}", self.id),
                ip: self.pod_ip(host),
            }
            .remove_blocking();
        }
    }

    /// Every network namespace name of this instance present on the host.
    pub fn leftover_netns(&self) -> Vec<String> {
        let prefix = format!("cinder-{}-", self.id);
        std::fs::read_dir("/run/netns")
            .map(|dir| {
                dir.filter_map(Result::ok)
                    .filter_map(|e| e.file_name().into_string().ok())
                    .filter(|n| n.starts_with(&prefix))
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// Where each instance records the process that owns it (`<id>` holding the pid).
pub(crate) const OWNERS: &str = "/run/cinder-agent";

/// Removes the host objects of instances whose owning process is gone.
fn sweep_dead_instances() {
    let Ok(dir) = std::fs::read_dir(OWNERS) else {
        return;
    };
    for entry in dir.filter_map(Result::ok) {
        let Ok(id) = entry.file_name().into_string() else {
            continue;
        };
        let pid = std::fs::read_to_string(entry.path()).unwrap_or_default();
        let alive = pid
            .trim()
            .parse::<u32>()
            .is_ok_and(|pid| Path::new(&format!("/proc/{pid}")).exists());
        if alive || id.len() != 6 || !id.chars().all(|c| c.is_ascii_hexdigit()) {
            continue;
        }
        let dead = Network {
            bridge: format!("cnb{id}"),
            id,
            subnet: 0,
        };
        dead.remove_pods_blocking();
        dead.remove_blocking();
    }
}

async fn addresses() -> String {
    tokio::process::Command::new("ip")
        .args(["-o", "-4", "addr", "show"])
        .output()
        .await
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default()
}

async fn subnet_users(subnet: u8) -> usize {
    let prefix = format!(" 10.200.{subnet}.");
    addresses().await.matches(&prefix).count()
}

async fn subnet_in_use(subnet: u8) -> bool {
    subnet_users(subnet).await > 0
}

/// One pod's network namespace and veth pair.
#[derive(Clone, Debug)]
pub struct PodNetwork {
    pub netns: String,
    pub host_veth: String,
    pub ip: Ipv4Addr,
}

impl PodNetwork {
    /// Creates the namespace, the veth pair (pod side `eth0` with the pod's address, host side
    /// on the bridge), loopback up and the default route via the bridge.
    pub async fn create(network: &Network, host: u8) -> Result<PodNetwork, String> {
        let netns = network.netns_name(host);
        let host_veth = format!("cnv{}{host:02x}", network.id);
        let peer = format!("cnp{}{host:02x}", network.id);
        let ip_address = network.pod_ip(host);
        let pod = PodNetwork {
            netns: netns.clone(),
            host_veth: host_veth.clone(),
            ip: ip_address,
        };
        // Leftovers of an earlier pod with this address would make the first step fail.
        pod.remove_blocking();
        let address = format!("{ip_address}/24");
        let gateway = network.gateway().to_string();
        let steps: Vec<Vec<&str>> = vec![
            vec!["netns", "add", &netns],
            vec![
                "link", "add", &host_veth, "type", "veth", "peer", "name", &peer,
            ],
            vec!["link", "set", &host_veth, "master", &network.bridge, "up"],
            vec!["link", "set", &peer, "netns", &netns],
            vec!["-n", &netns, "link", "set", &peer, "name", "eth0"],
            vec!["-n", &netns, "addr", "add", &address, "dev", "eth0"],
            vec!["-n", &netns, "link", "set", "eth0", "up"],
            vec!["-n", &netns, "link", "set", "lo", "up"],
            vec!["-n", &netns, "route", "add", "default", "via", &gateway],
        ];
        for step in steps {
            if let Err(error) = ip(&step).await {
                pod.remove_blocking();
                return Err(error);
            }
        }
        Ok(pod)
    }

    /// Removes the veth pair and the namespace (synchronous, so it also runs from Drop).
    pub fn remove_blocking(&self) {
        ip_blocking(&["link", "del", &self.host_veth]);
        ip_blocking(&["netns", "del", &self.netns]);
    }

    /// The namespace file a process joins.
    pub fn path(&self) -> PathBuf {
        Path::new("/run/netns").join(&self.netns)
    }
}

/// The inode of a namespace file (`/run/netns/x`, `/proc/PID/ns/net`).
pub fn ns_inode(path: &Path) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| m.ino())
}

/// Sends SIGKILL to every process whose network namespace is `netns` (processes a container
/// left behind in its pod, whatever their process group).
pub fn kill_namespace_processes(netns: &Path) -> usize {
    let Some(inode) = ns_inode(netns) else {
        return 0;
    };
    let mut killed = 0;
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for entry in dir.filter_map(Result::ok) {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<i32>().ok())
            else {
                continue;
            };
            if ns_inode(&entry.path().join("ns/net")) == Some(inode) {
                // SAFETY: kill has no memory-safety preconditions.
                unsafe { libc::kill(pid, libc::SIGKILL) };
                killed += 1;
            }
        }
    }
    killed
}

/// How long [`empty_namespace_blocking`] waits for the processes of a network namespace to end.
const NAMESPACE_EXIT_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Kills every process of the network namespace `netns` and waits (blocking, at most
/// [`NAMESPACE_EXIT_WAIT`]) until none is left, as a kubelet stops a sandbox's containers
/// before its network goes: a process closes its sockets only once it exits (after its memory
/// is released, which takes a large one under load a while), and a FIN sent after the pod's
/// veth is gone never reaches the peer, which keeps the connection open (the service proxy's
/// upstream to a database, for one).
pub fn empty_namespace_blocking(netns: &Path) {
    let since = std::time::Instant::now();
    while kill_namespace_processes(netns) > 0 && since.elapsed() < NAMESPACE_EXIT_WAIT {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// One mount of a container: `source` (a host path) at `target` (a path inside the container).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mount {
    pub source: PathBuf,
    pub target: PathBuf,
    pub read_only: bool,
}

/// Everything a container process is started with.
#[derive(Debug)]
pub struct Launch {
    /// The program as a path inside the container, then its arguments; `arg0` is the name
    /// the container's command gave it.
    pub program: PathBuf,
    pub arg0: String,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub working_dir: PathBuf,
    /// The pod's hostname (the container gets its own UTS namespace).
    pub hostname: String,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    /// Supplementary groups (the pod's fsGroup and supplementalGroups).
    pub groups: Vec<u32>,
    pub mounts: Vec<Mount>,
    /// Empty directories (private to the container's mount namespace) for its root and for
    /// the overlays' upper layers.
    pub root_dir: PathBuf,
    pub scratch_dir: PathBuf,
    /// The container's /tmp (a host directory).
    pub tmp_dir: PathBuf,
    pub log: std::fs::File,
    /// The container's `cgroup.procs` (opened for writing), which the process joins first.
    pub cgroup: Option<std::fs::File>,
}

/// One step the child runs between fork and exec.
#[derive(Debug)]
enum Op {
    Mount {
        source: Option<CString>,
        target: CString,
        fstype: Option<CString>,
        flags: libc::c_ulong,
        data: Option<CString>,
    },
    Mkdir(CString),
    Touch(CString),
    Symlink {
        target: CString,
        link: CString,
    },
    Chroot(CString),
    Chdir(CString),
}

fn cstring(path: &Path) -> Result<CString, String> {
    use std::os::unix::ffi::OsStrExt;
    CString::new(path.as_os_str().as_bytes()).map_err(|_| format!("path {path:?} has a NUL byte"))
}

/// The host's top-level directories that must be overlaid (a path the container needs under
/// them does not exist on the host), given the paths the container needs.
pub fn overlaid(needed: &[PathBuf], exists: impl Fn(&Path) -> bool) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for path in needed {
        let mut parts = path.components().skip(1);
        let Some(top) = parts.next().and_then(|c| c.as_os_str().to_str()) else {
            continue;
        };
        if matches!(top, "proc" | "sys" | "dev" | "tmp") || out.iter().any(|t| t == top) {
            continue;
        }
        if exists(&Path::new("/").join(top)) && !exists(path) {
            out.push(top.to_owned());
        }
    }
    out
}

/// The ops that build the container's root: pure over the listing of the host's `/`.
fn root_ops(
    launch: &Launch,
    top_level: &[(String, Option<PathBuf>)],
    overlay: &[String],
) -> Result<Vec<Op>, String> {
    let root = &launch.root_dir;
    let mut ops = vec![Op::Mount {
        source: Some(CString::new("tmpfs").unwrap_or_default()),
        target: cstring(root)?,
        fstype: Some(CString::new("tmpfs").unwrap_or_default()),
        flags: 0,
        data: Some(CString::new("mode=755").unwrap_or_default()),
    }];
    ops.push(Op::Mount {
        source: Some(CString::new("tmpfs").unwrap_or_default()),
        target: cstring(&launch.scratch_dir)?,
        fstype: Some(CString::new("tmpfs").unwrap_or_default()),
        flags: 0,
        data: Some(CString::new("mode=700").unwrap_or_default()),
    });
    let bind = |source: &Path, target: &Path, flags: libc::c_ulong| -> Result<Op, String> {
        Ok(Op::Mount {
            source: Some(cstring(source)?),
            target: cstring(target)?,
            fstype: None,
            flags: libc::MS_BIND | flags,
            data: None,
        })
    };
    for (name, link) in top_level {
        let inside = root.join(name);
        if let Some(link) = link {
            ops.push(Op::Symlink {
                target: cstring(link)?,
                link: cstring(&inside)?,
            });
            continue;
        }
        ops.push(Op::Mkdir(cstring(&inside)?));
        let host = Path::new("/").join(name);
        if name == "tmp" {
            ops.push(bind(&launch.tmp_dir, &inside, 0)?);
        } else if name == "dev" {
            dev_ops(&mut ops, &inside)?;
        } else if overlay.contains(name) {
            let upper = launch.scratch_dir.join(format!("{name}.upper"));
            let work = launch.scratch_dir.join(format!("{name}.work"));
            ops.push(Op::Mkdir(cstring(&upper)?));
            ops.push(Op::Mkdir(cstring(&work)?));
            let data = format!(
                "lowerdir={},upperdir={},workdir={}",
                host.display(),
                upper.display(),
                work.display()
            );
            ops.push(Op::Mount {
                source: Some(CString::new("overlay").unwrap_or_default()),
                target: cstring(&inside)?,
                fstype: Some(CString::new("overlay").unwrap_or_default()),
                flags: 0,
                data: Some(CString::new(data).map_err(|_| "NUL in overlay options".to_owned())?),
            });
        } else {
            ops.push(bind(&host, &inside, libc::MS_REC)?);
        }
    }
    for mount in &launch.mounts {
        let inside = root.join(mount.target.strip_prefix("/").unwrap_or(&mount.target));
        // Parents first (each created inside the tmpfs root or an overlay).
        let mut parents: Vec<PathBuf> = inside
            .ancestors()
            .skip(1)
            .take_while(|p| *p != root.as_path())
            .map(Path::to_path_buf)
            .collect();
        parents.reverse();
        for parent in parents {
            ops.push(Op::Mkdir(cstring(&parent)?));
        }
        if mount.source.is_dir() {
            ops.push(Op::Mkdir(cstring(&inside)?));
        } else {
            ops.push(Op::Touch(cstring(&inside)?));
        }
        ops.push(bind(&mount.source, &inside, libc::MS_REC)?);
        if mount.read_only {
            ops.push(bind(
                &mount.source,
                &inside,
                libc::MS_REMOUNT | libc::MS_RDONLY | libc::MS_REC,
            )?);
        }
    }
    let working = root.join(
        launch
            .working_dir
            .strip_prefix("/")
            .unwrap_or(&launch.working_dir),
    );
    let mut parents: Vec<PathBuf> = working
        .ancestors()
        .take_while(|p| *p != root.as_path())
        .map(Path::to_path_buf)
        .collect();
    parents.reverse();
    for dir in parents {
        ops.push(Op::Mkdir(cstring(&dir)?));
    }
    ops.push(Op::Chroot(cstring(root)?));
    ops.push(Op::Chdir(cstring(&launch.working_dir)?));
    Ok(ops)
}

/// A fresh /dev (tmpfs) with the host's harmless device nodes bound in, `pts`, a private
/// `shm` and the `fd`/`stdin`/`stdout`/`stderr` links, so files created under /dev (such as the
/// termination message) stay in the container.
fn dev_ops(ops: &mut Vec<Op>, dev: &Path) -> Result<(), String> {
    let tmpfs = || CString::new("tmpfs").unwrap_or_default();
    ops.push(Op::Mount {
        source: Some(tmpfs()),
        target: cstring(dev)?,
        fstype: Some(tmpfs()),
        flags: libc::MS_NOSUID,
        data: Some(CString::new("mode=755").unwrap_or_default()),
    });
    for node in ["null", "zero", "full", "random", "urandom", "tty"] {
        let host = Path::new("/dev").join(node);
        if !host.exists() {
            continue;
        }
        ops.push(Op::Touch(cstring(&dev.join(node))?));
        ops.push(Op::Mount {
            source: Some(cstring(&host)?),
            target: cstring(&dev.join(node))?,
            fstype: None,
            flags: libc::MS_BIND,
            data: None,
        });
    }
    ops.push(Op::Mkdir(cstring(&dev.join("pts"))?));
    ops.push(Op::Mount {
        source: Some(CString::new("/dev/pts").unwrap_or_default()),
        target: cstring(&dev.join("pts"))?,
        fstype: None,
        flags: libc::MS_BIND | libc::MS_REC,
        data: None,
    });
    ops.push(Op::Mkdir(cstring(&dev.join("shm"))?));
    ops.push(Op::Mount {
        source: Some(tmpfs()),
        target: cstring(&dev.join("shm"))?,
        fstype: Some(tmpfs()),
        flags: libc::MS_NOSUID | libc::MS_NODEV,
        data: Some(CString::new("mode=1777").unwrap_or_default()),
    });
    for (link, target) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        ops.push(Op::Symlink {
            target: CString::new(target).unwrap_or_default(),
            link: cstring(&dev.join(link))?,
        });
    }
    Ok(())
}

/// The host's `/` as (name, symlink target) pairs.
fn host_top_level() -> Vec<(String, Option<PathBuf>)> {
    let mut out = Vec::new();
    if let Ok(dir) = std::fs::read_dir("/") {
        for entry in dir.filter_map(Result::ok) {
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            if name == "lost+found" {
                continue;
            }
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_symlink() {
                out.push((name, std::fs::read_link(entry.path()).ok()));
            } else if kind.is_dir() {
                out.push((name, None));
            }
        }
    }
    out.sort();
    out
}

fn run_ops(ops: &[Op]) -> std::io::Result<()> {
    use std::io::Error;
    let ptr = |c: &Option<CString>| c.as_ref().map_or(std::ptr::null(), |c| c.as_ptr());
    for op in ops {
        // SAFETY: every pointer is a NUL-terminated string owned by `ops`, alive for the call;
        // these are plain system calls, safe between fork and exec.
        let rc = unsafe {
            match op {
                Op::Mount {
                    source,
                    target,
                    fstype,
                    flags,
                    data,
                } => libc::mount(
                    ptr(source),
                    target.as_ptr(),
                    ptr(fstype),
                    *flags,
                    ptr(data).cast(),
                ),
                Op::Mkdir(path) => {
                    let rc = libc::mkdir(path.as_ptr(), 0o755);
                    if rc != 0 && *libc::__errno_location() == libc::EEXIST {
                        0
                    } else {
                        rc
                    }
                }
                Op::Touch(path) => {
                    let fd = libc::open(
                        path.as_ptr(),
                        libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC,
                        0o644,
                    );
                    if fd >= 0 {
                        libc::close(fd);
                        0
                    } else {
                        -1
                    }
                }
                Op::Symlink { target, link } => libc::symlink(target.as_ptr(), link.as_ptr()),
                Op::Chroot(path) => libc::chroot(path.as_ptr()),
                Op::Chdir(path) => libc::chdir(path.as_ptr()),
            }
        };
        if rc != 0 {
            return Err(Error::last_os_error());
        }
    }
    Ok(())
}

/// The names along `path`, `..` kept as a name (the root and `.` dropped).
fn named_parts(path: &Path) -> Vec<std::ffi::OsString> {
    use std::path::Component;
    path.components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_owned()),
            Component::ParentDir => Some("..".into()),
            _ => None,
        })
        .collect()
}

/// `path` with the host's symlinks along it resolved (the container's root mirrors the host's
/// directories, so `/var/run/x` is `/run/x` there too); a path made this way has no symlink
/// left that could lead a mkdir or mount made before chroot out of the container's root.
pub fn resolve(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    let mut rest: std::collections::VecDeque<std::ffi::OsString> = named_parts(path).into();
    let mut hops = 0;
    while let Some(part) = rest.pop_front() {
        if part == ".." {
            out.pop();
            continue;
        }
        let candidate = out.join(&part);
        let link = std::fs::symlink_metadata(&candidate)
            .ok()
            .filter(|m| m.file_type().is_symlink())
            .and_then(|_| std::fs::read_link(&candidate).ok());
        match link {
            Some(target) if hops < 40 => {
                hops += 1;
                if target.is_absolute() {
                    out = PathBuf::from("/");
                }
                let mut parts = named_parts(&target);
                parts.extend(rest.drain(..));
                rest = parts.into();
            }
            _ => out = candidate,
        }
    }
    out
}

/// Gives the container a PID namespace of its own, between fork and exec (after its root is
/// built, before the user changes): this process forks; the child, PID 1 inside, goes on to
/// exec the container's command over a `/proc` of the new namespace (so `/proc/1` is the
/// command, as in a container), and dies with its parent; the parent stays outside as the
/// container's keeper, the pid the agent knows ([`keep`]). Both share the session, process
/// group, mount, network and UTS namespaces, cgroup and root.
///
/// # Safety
/// Only between fork and exec: system calls on no shared data.
unsafe fn enter_pid_namespace() -> std::io::Result<()> {
    // SAFETY: system calls only, in the forked child before exec.
    unsafe {
        if libc::unshare(libc::CLONE_NEWPID) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let init = libc::fork();
        if init < 0 {
            return Err(std::io::Error::last_os_error());
        }
        if init > 0 {
            keep(init);
        }
        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0
            || libc::mount(
                c"proc".as_ptr(),
                c"/proc".as_ptr(),
                c"proc".as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                std::ptr::null(),
            ) != 0
        {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }
}

/// The keeper of a container whose PID 1 is `init`: it holds only stdio (so whoever waits for
/// the exec of the container's command sees it when PID 1 execs), ignores the signals a
/// container is stopped with (they reach PID 1 through the process group), and ends as PID 1
/// ended: its exit code, or killed by its signal.
///
/// # Safety
/// Only in the forked child before exec; never returns.
unsafe fn keep(init: libc::pid_t) -> ! {
    // SAFETY: system calls only, on this process's own descriptors and child.
    unsafe {
        libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32);
        for signal in [
            libc::SIGTERM,
            libc::SIGINT,
            libc::SIGHUP,
            libc::SIGQUIT,
            libc::SIGUSR1,
            libc::SIGUSR2,
            libc::SIGPIPE,
        ] {
            libc::signal(signal, libc::SIG_IGN);
        }
        let mut status = 0;
        loop {
            let rc = libc::waitpid(init, &mut status, 0);
            if rc == init {
                break;
            }
            if rc < 0 && *libc::__errno_location() != libc::EINTR {
                libc::_exit(127);
            }
        }
        if libc::WIFSIGNALED(status) {
            let signal = libc::WTERMSIG(status);
            libc::signal(signal, libc::SIG_DFL);
            libc::kill(libc::getpid(), signal);
            libc::_exit(128 + signal);
        }
        libc::_exit(libc::WEXITSTATUS(status))
    }
}

/// The host pid of PID 1 of the container whose keeper is `pid` (the keeper itself when it has
/// no child): what `containerID` names, and the process whose environment and namespaces `exec`
/// uses.
pub fn container_init(pid: u32) -> u32 {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .ok()
        .and_then(|c| c.split_whitespace().next().and_then(|p| p.parse().ok()))
        .unwrap_or(pid)
}

/// Starts the container process in the pod's network namespace `netns` with its own mount,
/// UTS and PID namespaces and session (its process group is its pid).
pub fn spawn(mut launch: Launch, netns: &Path) -> Result<tokio::process::Child, String> {
    for mount in &mut launch.mounts {
        mount.target = resolve(&mount.target);
    }
    launch.working_dir = resolve(&launch.working_dir);
    let top = host_top_level();
    let mut needed: Vec<PathBuf> = launch.mounts.iter().map(|m| m.target.clone()).collect();
    needed.push(launch.working_dir.clone());
    let overlay = overlaid(&needed, Path::exists);
    let ops = root_ops(&launch, &top, &overlay)?;
    let netns_fd: OwnedFd = std::fs::File::open(netns)
        .map_err(|e| format!("open network namespace {}: {e}", netns.display()))?
        .into();
    let raw_fd = netns_fd.as_raw_fd();
    let cgroup_fd = launch.cgroup.as_ref().map_or(-1, AsRawFd::as_raw_fd);
    let (uid, gid) = (launch.uid, launch.gid);
    let groups: Vec<libc::gid_t> = launch.groups.clone();
    let hostname = launch.hostname.clone().into_bytes();
    let mut command = tokio::process::Command::new(&launch.program);
    command
        .arg0(&launch.arg0)
        .args(&launch.args)
        .env_clear()
        .envs(launch.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdin(std::process::Stdio::null())
        .stdout(
            launch
                .log
                .try_clone()
                .map_err(|e| format!("log file: {e}"))?,
        )
        .stderr(launch.log)
        .kill_on_drop(false);
    // SAFETY: the closure makes only system calls (no allocation, no locks) on data prepared
    // before the fork; `netns_fd` stays open until the command is spawned.
    unsafe {
        command.pre_exec(move || {
            // Into the container's cgroup before anything is allocated ("0" is the writer).
            if cgroup_fd >= 0 && libc::write(cgroup_fd, c"0".as_ptr().cast(), 1) != 1 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::setsid() < 0
                || libc::setns(raw_fd, libc::CLONE_NEWNET) != 0
                || libc::unshare(libc::CLONE_NEWNS | libc::CLONE_NEWUTS) != 0
                || libc::sethostname(hostname.as_ptr().cast(), hostname.len()) != 0
                || libc::mount(
                    c"none".as_ptr(),
                    c"/".as_ptr(),
                    std::ptr::null(),
                    libc::MS_REC | libc::MS_PRIVATE,
                    std::ptr::null(),
                ) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            run_ops(&ops)?;
            enter_pid_namespace()?;
            if let Some(gid) = gid.or(uid.map(|_| 0))
                && (libc::setgroups(groups.len(), groups.as_ptr()) != 0 || libc::setgid(gid) != 0)
            {
                return Err(std::io::Error::last_os_error());
            }
            if let Some(uid) = uid
                && libc::setuid(uid) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = command.spawn().map_err(|e| e.to_string());
    drop(netns_fd);
    drop(launch.cgroup);
    child
}

/// Finds `program` as the container would: a path with a slash as given, else the first
/// executable in the container's PATH. `host` maps a path inside the container to the host
/// path that holds it (through the container's mounts).
pub fn find_program(
    program: &str,
    path_var: &str,
    host: impl Fn(&Path) -> PathBuf,
) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |inside: &Path| {
        std::fs::metadata(host(inside))
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        let inside = PathBuf::from(program);
        return executable(&inside).then_some(inside);
    }
    path_var
        .split(':')
        .filter(|d| d.starts_with('/'))
        .map(|d| Path::new(d).join(program))
        .find(|inside| executable(inside))
}

/// The host path holding `inside` (a path in a container with `mounts` over the host
/// filesystem): the source of the longest mount that contains it, else the host path itself.
pub fn host_path(inside: &Path, mounts: &[Mount]) -> PathBuf {
    mounts
        .iter()
        .filter(|m| inside.starts_with(&m.target))
        .max_by_key(|m| m.target.components().count())
        .map_or_else(
            || inside.to_path_buf(),
            |m| {
                let rest = inside.strip_prefix(&m.target).unwrap_or(Path::new(""));
                if rest.as_os_str().is_empty() {
                    m.source.clone()
                } else {
                    m.source.join(rest)
                }
            },
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_top_level_directories_missing_a_needed_path_are_overlaid() {
        let exists = |p: &Path| {
            [
                Path::new("/etc"),
                Path::new("/usr"),
                Path::new("/usr/bin"),
                Path::new("/var"),
            ]
            .contains(&p)
        };
        let needed = vec![
            PathBuf::from("/etc/cinder"),
            PathBuf::from("/etc/cinder/x"),
            PathBuf::from("/usr/bin"),
            PathBuf::from("/config"),
            PathBuf::from("/tmp/x"),
        ];
        assert_eq!(overlaid(&needed, exists), vec!["etc".to_owned()]);
    }

    #[test]
    fn symlinks_on_the_way_are_resolved_like_the_host() {
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink("/usr", dir.path().join("abs")).unwrap();
        std::os::unix::fs::symlink("real", dir.path().join("rel")).unwrap();
        std::fs::create_dir(dir.path().join("real")).unwrap();
        assert_eq!(
            resolve(&dir.path().join("abs/lib/x")),
            PathBuf::from("/usr/lib/x")
        );
        assert_eq!(
            resolve(&dir.path().join("rel/y")),
            dir.path().join("real/y")
        );
        assert_eq!(resolve(Path::new("/a/../b/c")), PathBuf::from("/b/c"));
    }

    #[test]
    fn programs_are_found_through_the_mounts() {
        let mounts = vec![Mount {
            source: PathBuf::from("/state/vol/scripts"),
            target: PathBuf::from("/scripts"),
            read_only: false,
        }];
        assert_eq!(
            host_path(Path::new("/scripts/run.sh"), &mounts),
            PathBuf::from("/state/vol/scripts/run.sh")
        );
        assert_eq!(
            host_path(Path::new("/usr/bin/sh"), &mounts),
            PathBuf::from("/usr/bin/sh")
        );
        assert_eq!(
            find_program("sh", "/nonexistent:/usr/bin:/bin", |p: &Path| p
                .to_path_buf()),
            Some(PathBuf::from("/usr/bin/sh"))
        );
        assert_eq!(
            find_program("no-such-program-here", "/usr/bin", |p: &Path| p
                .to_path_buf()),
            None
        );
        assert_eq!(
            find_program("/usr/bin/sh", "", |p: &Path| p.to_path_buf()),
            Some(PathBuf::from("/usr/bin/sh"))
        );
    }
}
