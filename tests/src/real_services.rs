//! Real servers for the real-Cinder tests: a MariaDB server (`mariadbd` of the Debian package
//! that tests/real-cinder/setup.sh installs) with a throwaway data directory, on a free loopback
//! port, root reachable only through the unix socket in that directory. It is stopped by its own
//! pid when dropped (SIGTERM, SIGKILL after 20 s) and its directory removed: nothing is left.

use anyhow::{Context, bail};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running MariaDB server of the test's own.
pub struct MariaDb {
    child: Option<Child>,
    /// The TCP port on 127.0.0.1.
    pub port: u16,
    socket: PathBuf,
    dir: tempfile::TempDir,
}

/// A port nothing listens on at the moment (bound on 127.0.0.1, then released).
pub fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// `s` as a single-quoted SQL string literal.
pub fn sql_quote(s: &str) -> String {
    format!("'{}'", s.replace('\\', "\\\\").replace('\'', "''"))
}

impl MariaDb {
    /// Whether the Debian package is installed.
    pub fn available() -> bool {
        Path::new("/usr/sbin/mariadbd").is_file()
            && Path::new("/usr/bin/mariadb-install-db").is_file()
    }

    /// Initialises a data directory and starts `mariadbd` on it; returns once it answers.
    pub fn start() -> anyhow::Result<MariaDb> {
        let dir = tempfile::Builder::new()
            .prefix("cinder-mariadb-")
            .tempdir()?;
        let data = dir.path().join("data");
        let socket = dir.path().join("mysqld.sock");
        let out = Command::new("/usr/bin/mariadb-install-db")
            .arg("--no-defaults")
            .arg(format!("--datadir={}", data.display()))
            .args([
                "--user=root",
                "--auth-root-authentication-method=socket",
                "--skip-test-db",
            ])
            .output()
            .context("running mariadb-install-db")?;
        if !out.status.success() {
            bail!(
                "mariadb-install-db: {}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let port = free_port()?;
        let child = Command::new("/usr/sbin/mariadbd")
            .arg("--no-defaults")
            .arg(format!("--datadir={}", data.display()))
            .arg(format!("--socket={}", socket.display()))
            .arg(format!(
                "--pid-file={}",
                dir.path().join("mysqld.pid").display()
            ))
            .arg(format!(
                "--log-error={}",
                dir.path().join("error.log").display()
            ))
            .arg(format!("--port={port}"))
            .args(["--bind-address=127.0.0.1", "--user=root", "--skip-log-bin"])
            .args(["--innodb-buffer-pool-size=64M", "--max-connections=500"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("starting mariadbd")?;
        let mut db = MariaDb {
            child: Some(child),
            port,
            socket,
            dir,
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if db.sql("SELECT 1").is_ok() {
                return Ok(db);
            }
            if let Some(c) = db.child.as_mut()
                && let Some(status) = c.try_wait()?
            {
                bail!("mariadbd exited at start ({status}): {}", db.error_log());
            }
            if Instant::now() > deadline {
                bail!("mariadbd did not answer within 60 s: {}", db.error_log());
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The server's error log.
    pub fn error_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("error.log")).unwrap_or_default()
    }

    /// Runs `statement` as root through the socket; its tab-separated rows.
    pub fn sql(&self, statement: &str) -> anyhow::Result<String> {
        let out = Command::new("/usr/bin/mariadb")
            .arg("--no-defaults")
            .arg(format!("--socket={}", self.socket.display()))
            .args(["-u", "root", "-N", "-B", "-e", statement])
            .output()
            .context("running mariadb")?;
        if !out.status.success() {
            bail!(
                "{statement}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// `CREATE DATABASE`, and a user of it with `MAX_USER_CONNECTIONS cap` granted all on it, as
    /// the mariadb-operator's Database, User and Grant do.
    pub fn create_database(
        &self,
        database: &str,
        user: &str,
        password: &str,
        cap: u32,
    ) -> anyhow::Result<()> {
        self.sql(&format!(
            "CREATE DATABASE `{database}`; \
             CREATE USER {u}@'%' IDENTIFIED BY {p} WITH MAX_USER_CONNECTIONS {cap}; \
             GRANT ALL PRIVILEGES ON `{database}`.* TO {u}@'%';",
            u = sql_quote(user),
            p = sql_quote(password),
        ))
        .map(drop)
    }

    fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let _ = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

impl Drop for MariaDb {
    fn drop(&mut self) {
        self.stop();
    }
}
