//! A real Keystone of the embedded cluster's own: keystone of the venv
//! `tests/real-cinder/keystone-setup.sh` prepares (`$CINDER_ROOTS/keystone`), its database on a
//! given real [`MariaDbServer`], its configuration, fernet and credential key repositories in a
//! throwaway directory, its public WSGI application served by uwsgi on a free loopback port.
//! Started, it holds what `keystone-manage bootstrap` makes (user `admin` with a random password,
//! project `admin`, roles `admin`/`member`/`reader`, region and identity endpoints) and the
//! service user of [`KeystoneOptions`] with roles `admin` and `service` on its project.
//! Catalog entries of other services are added by [`KeystoneServer::register_service`].
//!
//! Passwords never reach a command line: the bootstrap password and the ones the admin script
//! sets travel in the environment, the database password in the configuration file of the
//! directory (mode 0700). Dropping the server stops uwsgi by its own pid (SIGTERM to the
//! master, which ends its workers; SIGKILL to the process group it leads after 20 s) and
//! removes the directory.

use std::io::{Read as _, Write as _};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::mariadb::{MariaDbServer, quote_string};
use super::process::free_port;

/// How long a starting uwsgi may take to answer `GET /v3` (the first request loads keystone).
const START_TIMEOUT: Duration = Duration::from_secs(120);
/// The database, and its user, Keystone keeps its state in on the given server.
const DB_NAME: &str = "keystone";
const DB_USER: &str = "keystone";
/// The setup script that prepares the venv (relative to the repository).
pub const KEYSTONE_SETUP: &str = "tests/real-cinder/keystone-setup.sh";

/// Who Keystone holds beside its admin, and where the identity endpoints point.
#[derive(Clone, Debug)]
pub struct KeystoneOptions {
    /// The region of every endpoint.
    pub region: String,
    /// The project of the service user (domain Default).
    pub service_project: String,
    /// The service user's name (domain Default).
    pub service_user: String,
    /// The service user's password.
    pub service_password: String,
    /// The identity endpoint's URL of interface `internal`, the one services reach Keystone at
    /// (`None`: the loopback URL, as `public` and `admin`).
    pub internal_url: Option<String>,
}

impl Default for KeystoneOptions {
    fn default() -> Self {
        KeystoneOptions {
            region: "RegionOne".to_owned(),
            service_project: "service".to_owned(),
            service_user: "cinder".to_owned(),
            service_password: String::new(),
            internal_url: None,
        }
    }
}

/// A running Keystone.
pub struct KeystoneServer {
    child: Option<Child>,
    port: u16,
    admin_password: String,
    root: PathBuf,
    dir: tempfile::TempDir,
}

impl std::fmt::Debug for KeystoneServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeystoneServer")
            .field("pid", &self.pid())
            .field("port", &self.port)
            .finish()
    }
}

/// The Keystone venv: `$CINDER_ROOTS/keystone` (default `/var/tmp/cinder-roots/keystone`).
pub fn keystone_root() -> PathBuf {
    std::env::var_os("CINDER_ROOTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/tmp/cinder-roots"))
        .join("keystone")
}

/// The admin operations, run by the venv's Python with keystoneauth1: find-or-create, so a
/// second run changes nothing but the password and URLs given. Passwords come from the
/// environment.
const ADMIN_SCRIPT: &str = r#"
import os, sys
from keystoneauth1 import session
from keystoneauth1.identity import v3

base = os.environ["KS_URL"]
auth = v3.Password(auth_url=base, username="admin", password=os.environ["KS_ADMIN_PASSWORD"],
                   project_name="admin", user_domain_id="default", project_domain_id="default")
s = session.Session(auth=auth)

def find(path, key, **query):
    found = s.get(base + path, params=query).json()[key]
    return found[0] if found else None

def ensure(path, key, body, **query):
    found = find(path, key, **query)
    if found:
        return found
    return s.post(base + path, json={key[:-1]: body}).json()[key[:-1]]

what = sys.argv[1]
if what == "user":
    project_name, user_name, roles = sys.argv[2], sys.argv[3], sys.argv[4:]
    password = os.environ["KS_USER_PASSWORD"]
    project = ensure("/projects", "projects", {"name": project_name, "domain_id": "default"},
                     name=project_name, domain_id="default")
    user = find("/users", "users", name=user_name, domain_id="default")
    if user:
        s.patch(base + "/users/" + user["id"], json={"user": {"password": password}})
    else:
        user = s.post(base + "/users", json={"user": {
            "name": user_name, "domain_id": "default", "password": password,
            "default_project_id": project["id"]}}).json()["user"]
    for name in roles:
        role = ensure("/roles", "roles", {"name": name}, name=name)
        s.put(base + "/projects/%s/users/%s/roles/%s" % (project["id"], user["id"], role["id"]))
elif what == "service":
    service_type, name, region, url = sys.argv[2:6]
    service = ensure("/services", "services", {"type": service_type, "name": name},
                     type=service_type)
    for interface in ("public", "internal", "admin"):
        endpoint = find("/endpoints", "endpoints", service_id=service["id"],
                        interface=interface, region_id=region)
        if endpoint:
            s.patch(base + "/endpoints/" + endpoint["id"], json={"endpoint": {"url": url}})
        else:
            s.post(base + "/endpoints", json={"endpoint": {
                "service_id": service["id"], "interface": interface, "region_id": region,
                "url": url}})
else:
    sys.exit("unknown operation " + what)
"#;

impl KeystoneServer {
    /// Whether the Keystone venv is prepared ([`KEYSTONE_SETUP`]).
    pub fn available() -> bool {
        let root = keystone_root();
        root.join(".prepared").is_file()
            && ["keystone-manage", "uwsgi", "python", "openstack"]
                .iter()
                .all(|b| root.join("bin").join(b).is_file())
    }

    /// Creates Keystone's database and user on `db`, writes the configuration and key
    /// repositories, runs `keystone-manage db_sync`, `fernet_setup`, `credential_setup` and
    /// `bootstrap`, starts uwsgi and, once `GET /v3` answers, creates the service user of
    /// `opts`. Blocking (about half a minute on 2 cores).
    pub fn start(db: &MariaDbServer, opts: &KeystoneOptions) -> Result<KeystoneServer, String> {
        if !Self::available() {
            return Err(format!(
                "the Keystone venv {} is not prepared: run {KEYSTONE_SETUP}",
                keystone_root().display()
            ));
        }
        let dir = tempfile::Builder::new()
            .prefix("cinder-sim-keystone-")
            .tempdir()
            .map_err(|e| format!("a directory for Keystone: {e}"))?;
        let db_password = uuid::Uuid::new_v4().simple().to_string();
        db.sql_blocking(&format!(
            "CREATE DATABASE IF NOT EXISTS `{DB_NAME}`;\n\
             CREATE OR REPLACE USER '{DB_USER}'@'%' IDENTIFIED BY {pw};\n\
             GRANT ALL PRIVILEGES ON `{DB_NAME}`.* TO '{DB_USER}'@'%';",
            pw = quote_string(&db_password)
        ))
        .map_err(|e| format!("Keystone's database on MariaDB: {e}"))?;

        let port = free_port().map_err(|e| format!("a port for Keystone: {e}"))?;
        let d = dir.path();
        let conf = format!(
            "[DEFAULT]\n\
             log_file = {log}\n\
             [database]\n\
             connection = mysql+pymysql://{DB_USER}:{db_password}@127.0.0.1:{db_port}/{DB_NAME}?charset=utf8\n\
             [token]\n\
             provider = fernet\n\
             [fernet_tokens]\n\
             key_repository = {d}/fernet-keys\n\
             [fernet_receipts]\n\
             key_repository = {d}/fernet-keys\n\
             [credential]\n\
             key_repository = {d}/credential-keys\n",
            log = d.join("keystone.log").display(),
            db_port = db.port(),
            d = d.display(),
        );
        std::fs::write(d.join("keystone.conf"), conf)
            .map_err(|e| format!("writing keystone.conf: {e}"))?;
        let mut server = KeystoneServer {
            child: None,
            port,
            admin_password: uuid::Uuid::new_v4().simple().to_string(),
            root: keystone_root(),
            dir,
        };
        let url = server.url();
        let internal = opts.internal_url.clone().unwrap_or_else(|| url.clone());
        server.manage(&["db_sync"], &[])?;
        server.manage(
            &[
                "fernet_setup",
                "--keystone-user",
                "root",
                "--keystone-group",
                "root",
            ],
            &[],
        )?;
        server.manage(
            &[
                "credential_setup",
                "--keystone-user",
                "root",
                "--keystone-group",
                "root",
            ],
            &[],
        )?;
        server.manage(
            &[
                "bootstrap",
                "--bootstrap-username",
                "admin",
                "--bootstrap-project-name",
                "admin",
                "--bootstrap-role-name",
                "admin",
                "--bootstrap-service-name",
                "keystone",
                "--bootstrap-region-id",
                &opts.region,
                "--bootstrap-admin-url",
                &url,
                "--bootstrap-public-url",
                &url,
                "--bootstrap-internal-url",
                &internal,
            ],
            &[("OS_BOOTSTRAP_PASSWORD", &server.admin_password.clone())],
        )?;
        server.spawn()?;
        server.admin(
            &[
                "user",
                &opts.service_project,
                &opts.service_user,
                "admin",
                "service",
            ],
            Some(&opts.service_password),
        )?;
        Ok(server)
    }

    /// The venv's `bin/<name>`.
    fn bin(&self, name: &str) -> PathBuf {
        self.root.join("bin").join(name)
    }

    /// A command of the venv with the configuration in its environment and a home of the
    /// directory's own.
    fn command(&self, name: &str) -> Command {
        let mut c = Command::new(self.bin(name));
        c.env("OS_KEYSTONE_CONFIG_FILES", self.config_path())
            .env("HOME", self.dir.path())
            .env("LANG", "C.UTF-8")
            .stdin(Stdio::null());
        c
    }

    fn config_path(&self) -> PathBuf {
        self.dir.path().join("keystone.conf")
    }

    /// `keystone-manage --config-file keystone.conf ARGS` with `env`; `Err` with its output.
    fn manage(&self, args: &[&str], env: &[(&str, &str)]) -> Result<(), String> {
        let mut c = self.command("keystone-manage");
        c.arg("--config-file").arg(self.config_path()).args(args);
        for (k, v) in env {
            c.env(k, v);
        }
        let what = format!(
            "keystone-manage {}",
            args.first().copied().unwrap_or_default()
        );
        let out = c.output().map_err(|e| format!("running {what}: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "{what}: {}: {}{}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim(),
                self.log_tail()
            ));
        }
        Ok(())
    }

    /// Starts uwsgi serving keystone's public application; returns once `GET /v3` answers 200.
    fn spawn(&mut self) -> Result<(), String> {
        let log = self.dir.path().join("uwsgi.log");
        let mut c = self.command("uwsgi");
        // A plain --http-socket answers HTTP/1.1 without `Connection: close` and closes the
        // connection only once the application's response is closed; a client reusing it
        // meanwhile (keystoneauth's pool) gets a reset. The header makes clients open a
        // connection per request; keep-alive would hold a worker per idle client connection.
        c.arg("--http-socket")
            .arg(format!("127.0.0.1:{}", self.port))
            .arg("--virtualenv")
            .arg(&self.root)
            .args(["--module", "keystone.wsgi.api:application"])
            .args(["--master", "--die-on-term", "--need-app", "--no-orphans"])
            .args(["--processes", "2", "--threads", "1"])
            .args(["--buffer-size", "65535"])
            .args(["--add-header", "Connection: close"])
            .arg("--logto")
            .arg(&log)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0);
        self.child = Some(c.spawn().map_err(|e| format!("starting uwsgi: {e}"))?);
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if http_status(self.port, "/v3") == Some(200) {
                return Ok(());
            }
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                self.child = None;
                return Err(format!(
                    "uwsgi exited at start ({status}): {}",
                    self.uwsgi_log_tail()
                ));
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "Keystone did not answer GET /v3 within {} s: {}",
                    START_TIMEOUT.as_secs(),
                    self.uwsgi_log_tail()
                ));
            }
            std::thread::sleep(Duration::from_millis(300));
        }
    }

    /// Runs the admin script's operation `args` as the admin (with `password` as the password
    /// it sets, when it sets one).
    fn admin(&self, args: &[&str], password: Option<&str>) -> Result<(), String> {
        let mut c = self.command("python");
        c.arg("-c")
            .arg(ADMIN_SCRIPT)
            .args(args)
            .env("KS_URL", self.url())
            .env("KS_ADMIN_PASSWORD", &self.admin_password);
        if let Some(p) = password {
            c.env("KS_USER_PASSWORD", p);
        }
        let what = format!(
            "Keystone admin {}",
            args.first().copied().unwrap_or_default()
        );
        let out = c.output().map_err(|e| format!("running {what}: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "{what}: {}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(())
    }

    /// Adds (or points at `url`) the catalog entry of service `service_type` named `name`: its
    /// public, internal and admin endpoints in `region`. Blocking.
    pub fn register_service(
        &self,
        service_type: &str,
        name: &str,
        region: &str,
        url: &str,
    ) -> Result<(), String> {
        self.admin(&["service", service_type, name, region, url], None)
    }

    /// The TCP port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The identity API's URL from the host: `http://127.0.0.1:<port>/v3`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/v3", self.port)
    }

    /// The uwsgi master's pid (it leads the process group of its workers).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The password of user `admin` (project `admin`, domain Default).
    pub fn admin_password(&self) -> &str {
        &self.admin_password
    }

    /// The venv's `openstack` client with a home of the directory's own and no `OS_*` of the
    /// caller's environment; the caller adds its `OS_*` variables.
    pub fn openstack(&self) -> Command {
        let mut c = Command::new(self.bin("openstack"));
        for (k, _) in std::env::vars_os() {
            if k.to_string_lossy().starts_with("OS_") {
                c.env_remove(k);
            }
        }
        c.env("HOME", self.dir.path())
            .env("LANG", "C.UTF-8")
            .stdin(Stdio::null());
        c
    }

    /// The path of the `openstack` client.
    pub fn openstack_path(&self) -> PathBuf {
        self.bin("openstack")
    }

    /// The last lines of keystone's log.
    pub fn log_tail(&self) -> String {
        tail(&self.dir.path().join("keystone.log"))
    }

    fn uwsgi_log_tail(&self) -> String {
        tail(&self.dir.path().join("uwsgi.log"))
    }
}

/// The last 20 lines of `path` after a newline, or nothing.
fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let from = lines.len().saturating_sub(20);
    if lines.is_empty() {
        String::new()
    } else {
        format!("\n{}", lines[from..].join("\n"))
    }
}

/// The status of `GET <path>` on 127.0.0.1:`port` (HTTP/1.0), or `None` when nothing answers.
pub fn http_status(port: u16, path: &str) -> Option<u16> {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let mut stream = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .ok()?;
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n\r\n").as_bytes())
        .ok()?;
    let mut head = [0u8; 16];
    let mut got = 0;
    while got < head.len() {
        match stream.read(&mut head[got..]) {
            Ok(0) | Err(_) => break,
            Ok(n) => got += n,
        }
    }
    let text = std::str::from_utf8(&head[..got]).ok()?;
    text.split_whitespace().nth(1)?.parse().ok()
}

impl Drop for KeystoneServer {
    fn drop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        // The master leads the group its workers run in. The leader is reaped only after the
        // group's last signal, so the group id cannot be reused before.
        if let Ok(group) = i32::try_from(child.id()) {
            // SAFETY: kill(2) on our own unreaped child: its pid cannot have been reused.
            unsafe {
                libc::kill(group, libc::SIGTERM);
            }
            let deadline = Instant::now() + Duration::from_secs(20);
            while !exited(group) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(100));
            }
            // SAFETY: the process group our own unreaped child leads; whatever of it outlived
            // the master.
            unsafe {
                libc::kill(-group, libc::SIGKILL);
            }
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// Whether our child `pid` has exited, without reaping it.
fn exited(pid: i32) -> bool {
    // SAFETY: waitid(2) with WNOWAIT on our own child only looks at its state.
    unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        let rc = libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        );
        rc != 0 || info.si_pid() != 0
    }
}
