//! A real RabbitMQ broker of the embedded cluster's own: `rabbitmq-server` of the Debian package
//! (`tests/real-cinder/setup.sh` installs it) with its own node name, Mnesia and log directories,
//! config and plugin files in a throwaway directory (also its `HOME`, so the Erlang cookie is its
//! own), the AMQP port and the distribution port free loopback ports, and an `epmd` of its own on
//! a third port (`ERL_EPMD_PORT`), so no machine-wide epmd is started or shared. Dropping it runs
//! `rabbitmqctl stop`, then stops the server's process group (which it leads) and the epmd by
//! their own ids, and removes the directory.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::process::{free_port, stop};

const SERVER: &str = "/usr/lib/rabbitmq/bin/rabbitmq-server";
const CTL: &str = "/usr/lib/rabbitmq/bin/rabbitmqctl";
const EPMD: &str = "/usr/bin/epmd";
/// How long a starting broker may take to answer (about 25 s on a busy 2-core machine).
const START_TIMEOUT: Duration = Duration::from_secs(180);

/// A running RabbitMQ broker.
pub struct RabbitMqServer {
    server: Option<Child>,
    epmd: Option<Child>,
    port: u16,
    epmd_port: u16,
    node: String,
    dir: tempfile::TempDir,
}

impl std::fmt::Debug for RabbitMqServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RabbitMqServer")
            .field("pid", &self.server.as_ref().map(Child::id))
            .field("port", &self.port)
            .field("node", &self.node)
            .finish()
    }
}

impl RabbitMqServer {
    /// Whether the Debian package's server, its ctl and epmd are installed.
    pub fn available() -> bool {
        [SERVER, CTL, EPMD].iter().all(|p| Path::new(p).is_file())
    }

    fn env(&self, c: &mut Command) {
        let d = self.dir.path();
        c.env_clear()
            .env(
                "PATH",
                "/usr/lib/rabbitmq/bin:/usr/bin:/bin:/usr/sbin:/sbin",
            )
            .env("HOME", d)
            .env("LANG", "C.UTF-8")
            .env("ERL_EPMD_PORT", self.epmd_port.to_string())
            .env("ERL_EPMD_ADDRESS", "127.0.0.1")
            .env("RABBITMQ_NODENAME", &self.node)
            .env("RABBITMQ_MNESIA_BASE", d.join("mnesia"))
            .env("RABBITMQ_LOG_BASE", d.join("log"))
            .env("RABBITMQ_CONFIG_FILE", d.join("rabbitmq"))
            .env("RABBITMQ_ADVANCED_CONFIG_FILE", d.join("advanced.config"))
            .env("RABBITMQ_CONF_ENV_FILE", d.join("rabbitmq-env.conf"))
            .env("RABBITMQ_ENABLED_PLUGINS_FILE", d.join("enabled_plugins"))
            .env("RABBITMQ_PID_FILE", d.join("rabbitmq.pid"));
    }

    /// Starts epmd and the broker; returns once the broker has booted. Blocking.
    pub fn start() -> Result<RabbitMqServer, String> {
        if !Self::available() {
            return Err(format!(
                "{SERVER} is not installed: run tests/real-cinder/setup.sh"
            ));
        }
        let dir = tempfile::Builder::new()
            .prefix("cinder-sim-rabbitmq-")
            .tempdir()
            .map_err(|e| format!("a directory for RabbitMQ: {e}"))?;
        for sub in ["mnesia", "log"] {
            std::fs::create_dir_all(dir.path().join(sub))
                .map_err(|e| format!("a directory for RabbitMQ: {e}"))?;
        }
        std::fs::write(dir.path().join("enabled_plugins"), "[].\n")
            .map_err(|e| format!("the RabbitMQ plugins file: {e}"))?;
        let port_error = |e: std::io::Error| format!("a port for RabbitMQ: {e}");
        let port = free_port().map_err(port_error)?;
        let dist_port = free_port().map_err(port_error)?;
        let epmd_port = free_port().map_err(port_error)?;
        let tag = dir
            .path()
            .file_name()
            .map(|n| n.to_string_lossy().replace(['.', '-'], ""))
            .unwrap_or_default();
        let mut broker = RabbitMqServer {
            server: None,
            epmd: None,
            port,
            epmd_port,
            node: format!("{tag}@localhost"),
            dir,
        };
        let mut epmd = Command::new(EPMD);
        broker.env(&mut epmd);
        epmd.args(["-address", "127.0.0.1", "-port", &epmd_port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0);
        broker.epmd = Some(epmd.spawn().map_err(|e| format!("starting {EPMD}: {e}"))?);
        let log = std::fs::File::create(broker.dir.path().join("server.log"))
            .map_err(|e| format!("the RabbitMQ log: {e}"))?;
        let log_err = log
            .try_clone()
            .map_err(|e| format!("the RabbitMQ log: {e}"))?;
        let mut server = Command::new(SERVER);
        broker.env(&mut server);
        server
            .env("RABBITMQ_NODE_IP_ADDRESS", "127.0.0.1")
            .env("RABBITMQ_NODE_PORT", port.to_string())
            .env("RABBITMQ_DIST_PORT", dist_port.to_string())
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            .process_group(0);
        broker.server = Some(
            server
                .spawn()
                .map_err(|e| format!("starting {SERVER}: {e}"))?,
        );
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if broker
                .ctl(&["await_startup", "--timeout", "5"], None)
                .is_ok()
            {
                return Ok(broker);
            }
            if let Some(child) = broker.server.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                return Err(format!(
                    "rabbitmq-server exited at start ({status}): {}",
                    broker.log_tail()
                ));
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "rabbitmq-server did not boot within {} s: {}",
                    START_TIMEOUT.as_secs(),
                    broker.log_tail()
                ));
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// The AMQP port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The pid of the server's process group leader.
    pub fn pid(&self) -> Option<u32> {
        self.server.as_ref().map(Child::id)
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    /// `rabbitmqctl -n <node> ARGS` with `stdin` on its standard input; its stdout, or its
    /// error text. Blocking.
    pub fn ctl(&self, args: &[&str], stdin: Option<&str>) -> Result<String, String> {
        use std::io::Write;
        let mut c = Command::new(CTL);
        self.env(&mut c);
        c.args(["-n", &self.node, "--quiet"])
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = c.spawn().map_err(|e| format!("running {CTL}: {e}"))?;
        if let (Some(mut input), Some(text)) = (child.stdin.take(), stdin) {
            input
                .write_all(text.as_bytes())
                .map_err(|e| format!("writing to {CTL}: {e}"))?;
        }
        let out = child
            .wait_with_output()
            .map_err(|e| format!("running {CTL}: {e}"))?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(format!(
                "rabbitmqctl {}: {}{}",
                args.first().copied().unwrap_or_default(),
                String::from_utf8_lossy(&out.stdout).trim(),
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    }

    /// Adds virtual host `vhost` (when absent) and user `user` with `password` (its password
    /// set again when the user exists), with all permissions on `vhost`. The password goes on
    /// rabbitmqctl's stdin, never on a command line. Blocking.
    pub fn add_user(&self, user: &str, password: &str, vhost: &str) -> Result<(), String> {
        let vhosts = self.ctl(&["list_vhosts", "name"], None)?;
        if !vhosts.lines().any(|l| l.trim() == vhost) {
            self.ctl(&["add_vhost", vhost], None)?;
        }
        let users = self.ctl(&["list_users", "--no-table-headers"], None)?;
        let exists = users
            .lines()
            .any(|l| l.split('\t').next().map(str::trim) == Some(user));
        if exists {
            self.ctl(&["change_password", user], Some(password))?;
        } else {
            self.ctl(&["add_user", user], Some(password))?;
        }
        self.ctl(
            &["set_permissions", "-p", vhost, user, ".*", ".*", ".*"],
            None,
        )
        .map(drop)
    }

    /// The directory the broker keeps its state in.
    pub fn dir(&self) -> PathBuf {
        self.dir.path().to_path_buf()
    }
}

impl Drop for RabbitMqServer {
    fn drop(&mut self) {
        if let Some(mut server) = self.server.take() {
            let _ = self.ctl(&["stop"], None);
            // The wrapper script leads the group beam.smp and its helpers run in. The leader is
            // reaped only after the group's last signal, so the group id cannot be reused
            // before.
            if let Ok(group) = i32::try_from(server.id()) {
                // SAFETY: kill(2) on the process group our own unreaped child leads.
                unsafe {
                    libc::kill(-group, libc::SIGTERM);
                }
                let deadline = Instant::now() + Duration::from_secs(15);
                while !exited(group) && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(100));
                }
                // SAFETY: as above; whatever of the group outlived its leader.
                unsafe {
                    libc::kill(-group, libc::SIGKILL);
                }
            }
            let _ = server.kill();
            let _ = server.wait();
        }
        if let Some(mut epmd) = self.epmd.take() {
            stop(&mut epmd, Duration::from_secs(5));
        }
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
