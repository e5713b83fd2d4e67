//! A real single-node Ceph cluster of the embedded cluster's own: the Debian packages' `ceph-mon`,
//! `ceph-osd` and `ceph-mgr` (`tests/real-cinder/setup.sh` installs them) on a throwaway
//! directory. One monitor on a free port, one OSD on `memstore` (its objects in memory, no block
//! device), one manager (it serves `ceph df`, which Cinder's RBD driver reads for the pool's
//! capacity). cephx is on; pools of size 1; the pools `volumes` and `backups`, both
//! `rbd pool init`-ed; the users `client.cinder` (profile rbd on `volumes`) and
//! `client.cinder-backup` (profile rbd on `backups`), both with one key ([`CephServer::key`]).
//!
//! Every daemon binds the host's primary address ([`host_address`], the source address of the
//! default route), not loopback: a pod is a network namespace of its own (its loopback is its
//! own) whose default route leads through its node's bridge to the host, where that address is
//! local. Clients reach the monitor at [`CephServer::monitor`] and then the OSD and manager at
//! the addresses the maps advertise, the same one. Only msgr2 is bound: a `mon_host` entry
//! `IP:PORT` on a port other than 6789 is tried as msgr2 first, so the plain `host:port` form
//! the CinderBackend's `spec.rbd.monitors` documents connects without a failed v1 attempt.
//!
//! The monitor logs each authentication with the entity's name
//! ([`CephServer::authentications`]): what shows that a service's driver reached the cluster.
//!
//! Dropping the server stops the daemons by their own pids (SIGTERM, SIGKILL after 10 s) and
//! removes the directory.

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::process::stop;

const MON: &str = "/usr/bin/ceph-mon";
const OSD: &str = "/usr/bin/ceph-osd";
const MGR: &str = "/usr/bin/ceph-mgr";
const CEPH: &str = "/usr/bin/ceph";
const RBD: &str = "/usr/bin/rbd";
const AUTHTOOL: &str = "/usr/bin/ceph-authtool";
const MONMAPTOOL: &str = "/usr/bin/monmaptool";
/// How long the cluster may take to serve the pools (the manager's first report included).
const START_TIMEOUT: Duration = Duration::from_secs(90);
/// The users' pools.
pub const VOLUMES_POOL: &str = "volumes";
pub const BACKUPS_POOL: &str = "backups";
/// The user of the volume pool and the user of the backup pool.
pub const VOLUME_USER: &str = "cinder";
pub const BACKUP_USER: &str = "cinder-backup";
/// The OSD's capacity as `ceph df` reports it (memstore's limit; memory is used only for what
/// is written).
const OSD_BYTES: u64 = 8 << 30;

/// A running single-node Ceph cluster.
pub struct CephServer {
    /// The daemons in start order (name, process); stopped in reverse.
    children: Vec<(String, Child)>,
    address: Ipv4Addr,
    mon_port: u16,
    fsid: String,
    key: String,
    dir: tempfile::TempDir,
}

impl std::fmt::Debug for CephServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CephServer")
            .field("monitor", &self.monitor())
            .field("fsid", &self.fsid)
            .field("pids", &self.pids())
            .finish()
    }
}

/// The host's primary IPv4 address: the source address of its route to the default gateway.
pub fn host_address() -> Result<Ipv4Addr, String> {
    let routes = ip_output(&["-4", "-o", "route", "show", "default"])?;
    let gateway = routes
        .split_whitespace()
        .skip_while(|w| *w != "via")
        .nth(1)
        .ok_or_else(|| format!("no default route with a gateway: {:?}", routes.trim()))?
        .to_owned();
    let route = ip_output(&["-4", "-o", "route", "get", &gateway])?;
    let src = route
        .split_whitespace()
        .skip_while(|w| *w != "src")
        .nth(1)
        .ok_or_else(|| format!("no source address towards {gateway}: {:?}", route.trim()))?;
    src.parse()
        .map_err(|e| format!("the source address {src:?} towards {gateway}: {e}"))
}

fn ip_output(args: &[&str]) -> Result<String, String> {
    let out = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("running ip {}: {e}", args.join(" ")))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Runs `c`; its stdout, or `what` with its status and stderr.
fn run(mut c: Command, what: &str) -> Result<String, String> {
    let out = c
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("running {what}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "{what}: {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// A new cephx key.
fn gen_key() -> Result<String, String> {
    let mut c = Command::new(AUTHTOOL);
    c.arg("--gen-print-key");
    Ok(run(c, "ceph-authtool --gen-print-key")?.trim().to_owned())
}

/// One keyring entry: `name`'s key and caps (service, grant).
fn keyring_entry(name: &str, key: &str, caps: &[(&str, &str)]) -> String {
    let mut s = format!("[{name}]\n\tkey = {key}\n");
    for (service, grant) in caps {
        s.push_str(&format!("\tcaps {service} = \"{grant}\"\n"));
    }
    s
}

/// The keyring entry of `client.<user>` with RBD's profile on `pool`.
fn rbd_user_entry(user: &str, key: &str, pool: &str) -> String {
    let on_pool = format!("profile rbd pool={pool}");
    keyring_entry(
        &format!("client.{user}"),
        key,
        &[("mon", "profile rbd"), ("osd", &on_pool), ("mgr", &on_pool)],
    )
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("writing {}: {e}", path.display()))
}

impl CephServer {
    /// Whether the Debian packages' daemons and tools are installed.
    pub fn available() -> bool {
        [MON, OSD, MGR, CEPH, RBD, AUTHTOOL, MONMAPTOOL]
            .iter()
            .all(|p| Path::new(p).is_file())
    }

    /// Creates and starts the cluster; returns once both pools are initialised and `ceph df`
    /// lists them. Blocking; takes some 15 s.
    pub fn start() -> Result<CephServer, String> {
        if !Self::available() {
            return Err(format!(
                "{MON}, {OSD} or {MGR} is not installed: run tests/real-cinder/setup.sh"
            ));
        }
        let address = host_address().map_err(|e| format!("the address for Ceph: {e}"))?;
        let mon_port = super::process::free_port_on(IpAddr::V4(address))
            .map_err(|e| format!("a port for the Ceph monitor on {address}: {e}"))?;
        let dir = tempfile::Builder::new()
            .prefix("cinder-sim-ceph-")
            .tempdir()
            .map_err(|e| format!("a directory for Ceph: {e}"))?;
        for sub in ["mon", "osd/0", "mgr/x", "run", "log"] {
            std::fs::create_dir_all(dir.path().join(sub))
                .map_err(|e| format!("a directory for Ceph: {e}"))?;
        }
        let mut server = CephServer {
            children: Vec::new(),
            address,
            mon_port,
            fsid: uuid::Uuid::new_v4().to_string(),
            key: gen_key()?,
            dir,
        };
        server.create()?;
        server.wait_served()?;
        Ok(server)
    }

    /// Writes the configuration and keyrings, makes the monitor and the OSD and starts the
    /// three daemons, creates and initialises the pools. On an error the daemons started so
    /// far stop when the server is dropped.
    fn create(&mut self) -> Result<(), String> {
        let d = self.dir.path().to_owned();
        write(&self.conf(), &self.config_text())?;
        let (admin, osd, mgr) = (gen_key()?, gen_key()?, gen_key()?);
        let admin_entry = keyring_entry(
            "client.admin",
            &admin,
            &[
                ("mon", "allow *"),
                ("osd", "allow *"),
                ("mgr", "allow *"),
                ("mds", "allow *"),
            ],
        );
        let osd_entry = keyring_entry(
            "osd.0",
            &osd,
            &[
                ("mon", "allow profile osd"),
                ("mgr", "allow profile osd"),
                ("osd", "allow *"),
            ],
        );
        let mgr_entry = keyring_entry(
            "mgr.x",
            &mgr,
            &[
                ("mon", "allow profile mgr"),
                ("osd", "allow *"),
                ("mds", "allow *"),
            ],
        );
        // Every entity is in the monitor's initial keyring: `ceph-mon --mkfs` puts each with its
        // caps in the auth database, so no user is added over the network.
        let mon_keyring = [
            keyring_entry("mon.", &gen_key()?, &[("mon", "allow *")]),
            admin_entry.clone(),
            osd_entry.clone(),
            mgr_entry.clone(),
            rbd_user_entry(VOLUME_USER, &self.key, VOLUMES_POOL),
            rbd_user_entry(BACKUP_USER, &self.key, BACKUPS_POOL),
        ]
        .concat();
        let mon_keyring_path = d.join("mon.keyring");
        write(&mon_keyring_path, &mon_keyring)?;
        write(&d.join("client.admin.keyring"), &admin_entry)?;
        write(&d.join("osd/0/keyring"), &osd_entry)?;
        write(&d.join("mgr/x/keyring"), &mgr_entry)?;

        let monmap = d.join("monmap");
        let mut c = Command::new(MONMAPTOOL);
        c.args(["--create", "--addv", "a"])
            .arg(format!("[v2:{}:{}]", self.address, self.mon_port))
            .args(["--fsid", &self.fsid])
            .arg(&monmap);
        run(c, "monmaptool --create")?;
        let mut c = self.daemon_command(MON, "a");
        c.arg("--mkfs")
            .arg("--monmap")
            .arg(&monmap)
            .arg("--keyring")
            .arg(&mon_keyring_path);
        run(c, "ceph-mon --mkfs")?;
        let osd_uuid = uuid::Uuid::new_v4().to_string();
        let mut c = self.daemon_command(OSD, "0");
        c.args(["--mkfs", "--no-mon-config", "--osd-uuid", &osd_uuid]);
        run(c, "ceph-osd --mkfs")?;

        self.spawn("mon.a", MON, "a")?;
        // Registers the OSD under id 0 (the monitor answers once it has formed its quorum).
        self.ceph(&["osd", "new", &osd_uuid, "0"])?;
        self.spawn("osd.0", OSD, "0")?;
        self.spawn("mgr.x", MGR, "x")?;
        for pool in [VOLUMES_POOL, BACKUPS_POOL] {
            self.ceph(&["osd", "pool", "create", pool, "8", "8"])?;
        }
        // Marks each pool as RBD's and writes its RBD metadata: waits for the OSD to serve the
        // pool's placement groups.
        for pool in [VOLUMES_POOL, BACKUPS_POOL] {
            let mut c = Command::new(RBD);
            c.arg("--conf")
                .arg(self.conf())
                .args(["pool", "init", pool]);
            run(c, &format!("rbd pool init {pool}"))?;
        }
        Ok(())
    }

    /// Waits until `ceph df` lists both pools (the manager reports them) while every daemon
    /// runs.
    fn wait_served(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            self.check_running()?;
            let listed = self
                .ceph(&["df", "--format", "json"])
                .ok()
                .and_then(|out| serde_json::from_str::<serde_json::Value>(&out).ok())
                .is_some_and(|df| {
                    let pools: Vec<&str> = df["pools"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|p| p["name"].as_str())
                        .collect();
                    pools.contains(&VOLUMES_POOL) && pools.contains(&BACKUPS_POOL)
                });
            if listed {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "ceph df did not list the pools within {} s; mgr.x log: {}",
                    START_TIMEOUT.as_secs(),
                    tail(&self.log("mgr.x"), 20)
                ));
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// `Err` naming the first daemon that exited, with its output.
    fn check_running(&mut self) -> Result<(), String> {
        for (name, child) in &mut self.children {
            if let Ok(Some(status)) = child.try_wait() {
                let out = std::fs::read_to_string(self.dir.path().join(format!("log/{name}.out")))
                    .unwrap_or_default();
                let log = std::fs::read_to_string(self.dir.path().join(format!("log/{name}.log")))
                    .unwrap_or_default();
                return Err(format!(
                    "{name} exited ({status}): {}\n{}",
                    out.trim(),
                    tail(&log, 20)
                ));
            }
        }
        Ok(())
    }

    fn config_text(&self) -> String {
        let d = self.dir.path().display();
        let (ip, port) = (self.address, self.mon_port);
        format!(
            "[global]\n\
             fsid = {fsid}\n\
             mon_host = {ip}:{port}\n\
             public_addr = {ip}\n\
             ms_bind_msgr1 = false\n\
             ms_bind_msgr2 = true\n\
             auth_cluster_required = cephx\n\
             auth_service_required = cephx\n\
             auth_client_required = cephx\n\
             auth_allow_insecure_global_id_reclaim = false\n\
             osd_pool_default_size = 1\n\
             osd_pool_default_min_size = 1\n\
             mon_allow_pool_size_one = true\n\
             mon_warn_on_pool_no_redundancy = false\n\
             mon_data_avail_warn = 1\n\
             osd_crush_chooseleaf_type = 0\n\
             osd_objectstore = memstore\n\
             memstore_device_bytes = {OSD_BYTES}\n\
             run_dir = {d}/run\n\
             admin_socket = {d}/run/$name.asok\n\
             log_file = {d}/log/$name.log\n\
             mon_data = {d}/mon/$id\n\
             osd_data = {d}/osd/$id\n\
             mgr_data = {d}/mgr/$id\n\
             [mon]\n\
             keyring = $mon_data/keyring\n\
             debug_auth = 10\n\
             [osd]\n\
             keyring = $osd_data/keyring\n\
             [mgr]\n\
             keyring = $mgr_data/keyring\n\
             [client]\n\
             keyring = {d}/client.admin.keyring\n\
             client_mount_timeout = 30\n\
             rados_mon_op_timeout = 60\n\
             rados_osd_op_timeout = 60\n",
            fsid = self.fsid,
        )
    }

    fn daemon_command(&self, program: &str, id: &str) -> Command {
        let mut c = Command::new(program);
        c.arg("--conf").arg(self.conf()).args(["--id", id]);
        c
    }

    /// Starts a daemon in the foreground, its stdout and stderr in `log/<name>.out`.
    fn spawn(&mut self, name: &str, program: &str, id: &str) -> Result<(), String> {
        let out_path = self.dir.path().join(format!("log/{name}.out"));
        let out = std::fs::File::create(&out_path)
            .map_err(|e| format!("creating {}: {e}", out_path.display()))?;
        let err = out
            .try_clone()
            .map_err(|e| format!("creating {}: {e}", out_path.display()))?;
        let child = self
            .daemon_command(program, id)
            .arg("--foreground")
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("starting {program}: {e}"))?;
        self.children.push((name.to_owned(), child));
        Ok(())
    }

    /// The administrator's configuration (client.admin's keyring).
    pub fn conf(&self) -> PathBuf {
        self.dir.path().join("ceph.conf")
    }

    /// `ceph ARGS` as client.admin: its stdout, or its error.
    pub fn ceph(&self, args: &[&str]) -> Result<String, String> {
        let mut c = Command::new(CEPH);
        c.arg("--conf")
            .arg(self.conf())
            .args(["--connect-timeout", "30"])
            .args(args);
        run(c, &format!("ceph {}", args.join(" ")))
    }

    /// Writes a configuration that holds only what the operator renders for a client (the
    /// monitor and `client.<user>`'s keyring with the key); its path.
    pub fn client_conf(&self, user: &str) -> Result<PathBuf, String> {
        let keyring = self.dir.path().join(format!("client.{user}.keyring"));
        write(
            &keyring,
            &keyring_entry(&format!("client.{user}"), &self.key, &[]),
        )?;
        let conf = self.dir.path().join(format!("client.{user}.conf"));
        write(
            &conf,
            &format!(
                "[global]\nmon_host = {}\nkeyring = {}\nclient_mount_timeout = 30\n\
                 rados_osd_op_timeout = 60\nrados_mon_op_timeout = 60\n",
                self.monitor(),
                keyring.display()
            ),
        )?;
        Ok(conf)
    }

    /// `rbd ARGS` as `client.<user>` through [`CephServer::client_conf`]: its stdout, or its
    /// error.
    pub fn rbd_as(&self, user: &str, args: &[&str]) -> Result<String, String> {
        let mut c = Command::new(RBD);
        c.arg("--conf")
            .arg(self.client_conf(user)?)
            .args(["--id", user])
            .args(args);
        run(c, &format!("rbd --id {user} {}", args.join(" ")))
    }

    /// The monitor's address as a CinderBackend's `spec.rbd.monitors` entry: `IP:PORT`.
    pub fn monitor(&self) -> String {
        format!("{}:{}", self.address, self.mon_port)
    }

    /// The address every daemon binds.
    pub fn address(&self) -> Ipv4Addr {
        self.address
    }

    /// The cluster's fsid.
    pub fn fsid(&self) -> &str {
        &self.fsid
    }

    /// The cephx key of both `client.cinder` and `client.cinder-backup`.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The daemons' pids (monitor, OSD, manager).
    pub fn pids(&self) -> Vec<u32> {
        self.children.iter().map(|(_, c)| c.id()).collect()
    }

    /// How many times `entity` (`client.cinder`) authenticated with the monitor: its log's
    /// cephx lines (the monitor logs authentication at `debug_auth = 10`).
    pub fn authentications(&self, entity: &str) -> usize {
        let line_end = format!("get_auth_session_key for {entity}");
        self.log("mon.a")
            .lines()
            .filter(|l| l.ends_with(&line_end))
            .count()
    }

    /// A daemon's log (`mon.a`, `osd.0`, `mgr.x`).
    pub fn log(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.path().join(format!("log/{name}.log"))).unwrap_or_default()
    }
}

/// The last `n` lines of `text`.
fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

impl Drop for CephServer {
    fn drop(&mut self) {
        while let Some((_, mut child)) = self.children.pop() {
            stop(&mut child, Duration::from_secs(10));
        }
    }
}
