//! A real MariaDB server of the embedded cluster's own: `mariadbd` of the Debian package
//! (`tests/real-cinder/setup.sh` installs it) on a throwaway data directory and a free loopback
//! port, root reachable only through the unix socket in that directory. Statements run as root
//! through the `mariadb` client with the SQL on stdin (so no password shows in a command line).
//! A test may kill it (SIGKILL by its pid, a crash) and start it again on the same directory and
//! port. Dropping the server stops it by its pid (SIGTERM, SIGKILL after 20 s) and removes the
//! directory.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::process::{free_port, stop};

const MARIADBD: &str = "/usr/sbin/mariadbd";
const INSTALL_DB: &str = "/usr/bin/mariadb-install-db";
const CLIENT: &str = "/usr/bin/mariadb";
/// How long a starting server may take to answer.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// A running MariaDB server.
pub struct MariaDbServer {
    /// The server process: taken by [`MariaDbServer::kill`], put back by
    /// [`MariaDbServer::restart`] (a test's crash and recovery while the embedded cluster shares
    /// the server).
    child: Mutex<Option<Child>>,
    port: u16,
    socket: PathBuf,
    max_connections: u32,
    dir: tempfile::TempDir,
}

impl std::fmt::Debug for MariaDbServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MariaDbServer")
            .field("pid", &self.pid())
            .field("port", &self.port)
            .finish()
    }
}

/// `s` as a single-quoted SQL string literal.
pub fn quote_string(s: &str) -> String {
    format!("'{}'", s.replace('\\', "\\\\").replace('\'', "''"))
}

/// `s` as a backquoted SQL identifier.
pub fn quote_identifier(s: &str) -> String {
    format!("`{}`", s.replace('`', "``"))
}

impl MariaDbServer {
    /// Whether the Debian package's server and client are installed.
    pub fn available() -> bool {
        [MARIADBD, INSTALL_DB, CLIENT]
            .iter()
            .all(|p| Path::new(p).is_file())
    }

    /// Initialises a data directory and starts `mariadbd` on it (at most `max_connections`
    /// connections in all); returns once it answers. Blocking.
    pub fn start(max_connections: u32) -> Result<MariaDbServer, String> {
        if !Self::available() {
            return Err(format!(
                "{MARIADBD} is not installed: run tests/real-cinder/setup.sh"
            ));
        }
        let dir = tempfile::Builder::new()
            .prefix("cinder-sim-mariadb-")
            .tempdir()
            .map_err(|e| format!("a directory for MariaDB: {e}"))?;
        let data = dir.path().join("data");
        let socket = dir.path().join("mysqld.sock");
        // The server's temporary tables in a directory of this instance's own, not the shared
        // /tmp, where another process may clean up beside it.
        let tmp = dir.path().join("tmp");
        std::fs::create_dir(&tmp).map_err(|e| format!("a directory for MariaDB: {e}"))?;
        let out = Command::new(INSTALL_DB)
            .arg("--no-defaults")
            .arg(format!("--datadir={}", data.display()))
            .arg(format!("--tmpdir={}", tmp.display()))
            .args([
                "--user=root",
                "--auth-root-authentication-method=socket",
                "--skip-test-db",
            ])
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("running {INSTALL_DB}: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "{INSTALL_DB}: {}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        let port = free_port().map_err(|e| format!("a port for MariaDB: {e}"))?;
        let server = MariaDbServer {
            child: Mutex::new(None),
            port,
            socket,
            max_connections,
            dir,
        };
        server.spawn()?;
        Ok(server)
    }

    /// Starts `mariadbd` on the data directory and port; returns once it answers. Blocking.
    fn spawn(&self) -> Result<(), String> {
        let dir = self.dir.path();
        let child = Command::new(MARIADBD)
            .arg("--no-defaults")
            .arg(format!("--datadir={}", dir.join("data").display()))
            .arg(format!("--tmpdir={}", dir.join("tmp").display()))
            .arg(format!("--socket={}", self.socket.display()))
            .arg(format!("--pid-file={}", dir.join("mysqld.pid").display()))
            .arg(format!("--log-error={}", dir.join("error.log").display()))
            .arg(format!("--port={}", self.port))
            .args(["--bind-address=127.0.0.1", "--user=root", "--skip-log-bin"])
            .arg("--innodb-buffer-pool-size=64M")
            .arg(format!("--max-connections={}", self.max_connections))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("starting {MARIADBD}: {e}"))?;
        *self.process() = Some(child);
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if self.sql_blocking("SELECT 1").is_ok() {
                return Ok(());
            }
            if let Some(child) = self.process().as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                return Err(format!(
                    "mariadbd exited at start ({status}): {}",
                    self.error_log()
                ));
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "mariadbd did not answer within {} s: {}",
                    START_TIMEOUT.as_secs(),
                    self.error_log()
                ));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn process(&self) -> std::sync::MutexGuard<'_, Option<Child>> {
        self.child
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Kills the server with SIGKILL by its own pid, as a crash, and reaps it; the data
    /// directory stays for [`MariaDbServer::restart`]. Blocking.
    pub fn kill(&self) {
        if let Some(mut child) = self.process().take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again, on the same data directory and port, after
    /// [`MariaDbServer::kill`] (crash recovery runs as after a real crash); returns once it
    /// answers. Nothing when it runs. Blocking.
    pub fn restart(&self) -> Result<(), String> {
        if self.process().is_some() {
            return Ok(());
        }
        self.spawn()
    }

    /// The TCP port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's pid (None while it is killed).
    pub fn pid(&self) -> Option<u32> {
        self.process().as_ref().map(Child::id)
    }

    /// The server's error log.
    pub fn error_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("error.log")).unwrap_or_default()
    }

    fn client(&self) -> Command {
        let mut c = Command::new(CLIENT);
        c.arg("--no-defaults")
            .arg(format!("--socket={}", self.socket.display()))
            .args(["-u", "root", "-N", "-B"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    }

    /// Runs `sql` as root; its tab-separated rows, or the client's error text. Blocking.
    pub fn sql_blocking(&self, sql: &str) -> Result<String, String> {
        use std::io::Write;
        let mut child = self
            .client()
            .spawn()
            .map_err(|e| format!("running {CLIENT}: {e}"))?;
        if let Some(mut stdin) = child.stdin.take() {
            stdin
                .write_all(sql.as_bytes())
                .map_err(|e| format!("writing to {CLIENT}: {e}"))?;
        }
        let out = child
            .wait_with_output()
            .map_err(|e| format!("running {CLIENT}: {e}"))?;
        answer(out)
    }

    /// Runs `sql` as root; its tab-separated rows, or the client's error text.
    pub async fn sql(&self, sql: &str) -> Result<String, String> {
        use tokio::io::AsyncWriteExt;
        let mut child = tokio::process::Command::from(self.client())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("running {CLIENT}: {e}"))?;
        if let Some(mut stdin) = child.stdin.take() {
            stdin
                .write_all(sql.as_bytes())
                .await
                .map_err(|e| format!("writing to {CLIENT}: {e}"))?;
        }
        let out = child
            .wait_with_output()
            .await
            .map_err(|e| format!("running {CLIENT}: {e}"))?;
        answer(out)
    }
}

fn answer(out: std::process::Output) -> Result<String, String> {
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_owned())
    }
}

impl Drop for MariaDbServer {
    fn drop(&mut self) {
        if let Some(mut child) = self.process().take() {
            stop(&mut child, Duration::from_secs(20));
        }
    }
}
