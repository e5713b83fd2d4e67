//! Real Cinder for the tests: the roots `tests/real-cinder/setup.sh` prepares (one virtual
//! environment per supported release under `$CINDER_ROOTS`, default `/var/tmp/cinder-roots`),
//! found or refused, and the commands the real-Cinder tests run inside them: Cinder's own
//! executables, `oslo-config-validator` with the option data of the release, and the probes of
//! `tests/real-cinder/probe.py`.
//!
//! A test that needs the roots skips with a line naming the setup command when they are not
//! prepared, unless `CI` is set: then it fails.

/// The namespace of the samples of `run --embedded --real-cinder` (tests/real-cinder/samples).
pub const SAMPLES_NS: &str = "openstack";

use anyhow::{Context, bail};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The supported releases and the cinder each runs.
pub const RELEASES: [(&str, &str); 2] = [("2026.1", "28.0.0"), ("2026.2", "29.0.0")];

/// The command that prepares the roots.
pub const SETUP_COMMAND: &str = "tests/real-cinder/setup.sh";

/// The option namespaces of cinder's own config generator (`tools/config/cinder-config-generator.conf`):
/// what a cinder.conf may set.
pub const CINDER_NAMESPACES: [&str; 18] = [
    "castellan.config",
    "cinder",
    "keystonemiddleware.auth_token",
    "osprofiler",
    "oslo.config",
    "oslo.concurrency",
    "oslo.db",
    "oslo.log",
    "oslo.messaging",
    "oslo.middleware",
    "oslo.policy",
    "oslo.privsep",
    "oslo.reports",
    "oslo.service.periodic_task",
    "oslo.service.service",
    "oslo.service.sslutils",
    "oslo.service.wsgi",
    "oslo.versionedobjects",
];

/// One prepared root.
#[derive(Clone, Debug)]
pub struct Root {
    pub release: &'static str,
    pub cinder: &'static str,
    pub dir: PathBuf,
}

/// Where the roots live.
pub fn roots_dir() -> PathBuf {
    std::env::var_os("CINDER_ROOTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/tmp/cinder-roots"))
}

/// The repository's `tests/real-cinder/` directory.
pub fn real_cinder_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("real-cinder")
}

/// Every release's root, when all are prepared. Otherwise `None` after a line saying `test` is
/// skipped, or a panic when `CI` is set.
pub fn prepared_roots(test: &str) -> Option<Vec<Root>> {
    let mut roots = Vec::new();
    let mut missing = Vec::new();
    for (release, cinder) in RELEASES {
        let dir = roots_dir().join(release);
        if dir.join(".prepared").is_file() && dir.join("bin/cinder-manage").is_file() {
            roots.push(Root {
                release,
                cinder,
                dir,
            });
        } else {
            missing.push(dir.display().to_string());
        }
    }
    if missing.is_empty() {
        return Some(roots);
    }
    let why = format!(
        "real Cinder is not prepared at {}: run {SETUP_COMMAND}",
        missing.join(", ")
    );
    if std::env::var_os("CI").is_some() {
        panic!("{test}: {why}");
    }
    eprintln!("skipping {test}: {why}");
    None
}

impl Root {
    /// An executable of the root.
    pub fn bin(&self, name: &str) -> PathBuf {
        self.dir.join("bin").join(name)
    }

    /// `PATH` with the root's executables first, as in the image.
    pub fn path_env(&self) -> String {
        format!(
            "{}:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
            self.dir.join("bin").display()
        )
    }

    /// `program` (resolved in the root's `bin/`, or on the root's `PATH`) with a clean
    /// environment: the root's `PATH`, `HOME` = `home`, no inherited `OS_*` variable.
    pub fn command(&self, program: &str, home: &Path) -> Command {
        let resolved = self.bin(program);
        let mut c = Command::new(if resolved.is_file() {
            resolved
        } else {
            PathBuf::from(program)
        });
        c.env_clear()
            .env("PATH", self.path_env())
            .env("HOME", home)
            .env("LANG", "C.UTF-8")
            .env("PYTHONWARNINGS", "ignore")
            .current_dir(home);
        c
    }

    /// Runs `tests/real-cinder/probe.py ARGS` with the root's python and `env`; its JSON answer.
    pub fn probe(
        &self,
        home: &Path,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> anyhow::Result<serde_json::Value> {
        let mut c = self.command("python", home);
        c.arg(real_cinder_dir().join("probe.py")).args(args);
        for (k, v) in env {
            c.env(k, v);
        }
        let out = c.output().context("running probe.py")?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        let last = stdout.lines().last().unwrap_or_default();
        if !out.status.success() {
            bail!(
                "{} probe.py {args:?}: {}\n{}",
                self.release,
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
        }
        serde_json::from_str(last).with_context(|| format!("probe.py {args:?} printed {stdout:?}"))
    }

    /// The machine-readable option data of [`CINDER_NAMESPACES`] (that the root has), written
    /// once by `oslo-config-generator --format yaml` into `dir`.
    pub fn option_data(&self, dir: &Path) -> anyhow::Result<OptionData> {
        let file = dir.join(format!("options-{}.yaml", self.release));
        let mut c = self.command("oslo-config-generator", dir);
        c.args(["--format", "yaml", "--output-file"]).arg(&file);
        for ns in CINDER_NAMESPACES {
            c.args(["--namespace", ns]);
        }
        let out = c.output().context("running oslo-config-generator")?;
        if !out.status.success() {
            bail!(
                "oslo-config-generator of {}: {}\n{}",
                self.release,
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let text = std::fs::read_to_string(&file)?;
        Ok(OptionData {
            file,
            data: serde_norway::from_str(&text).context("parsing the option data")?,
        })
    }

    /// `oslo-config-validator --opt-data DATA --input-file FILE --fatal-warnings`: an unknown
    /// option is an error, a deprecated one a warning made fatal. `Err` carries its log.
    pub fn validate(&self, data: &OptionData, file: &Path, home: &Path) -> Result<(), String> {
        let out: Output = self
            .command("oslo-config-validator", home)
            .arg("--opt-data")
            .arg(&data.file)
            .arg("--input-file")
            .arg(file)
            .arg("--fatal-warnings")
            .output()
            .map_err(|e| format!("running oslo-config-validator: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    }
}

impl Root {
    /// The validator's own check of each of `files` (`probe.py validate`: the option data read
    /// once, each file with `--fatal-warnings`), by file: `Err` carries its log.
    pub fn validate_files(
        &self,
        data: &OptionData,
        files: &[PathBuf],
        home: &Path,
    ) -> anyhow::Result<Vec<(PathBuf, Result<(), String>)>> {
        let mut args = vec!["validate".to_string(), data.file.display().to_string()];
        args.extend(files.iter().map(|f| f.display().to_string()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let answer = self.probe(home, &args, &[])?;
        files
            .iter()
            .map(|f| {
                let r = &answer[f.display().to_string()];
                let rc = r["rc"]
                    .as_i64()
                    .context("no rc in the validator's answer")?;
                let outcome = if rc == 0 {
                    Ok(())
                } else {
                    Err(r["log"].to_string())
                };
                Ok((f.clone(), outcome))
            })
            .collect()
    }
}

/// The option data of one release (`oslo-config-generator --format yaml`).
pub struct OptionData {
    pub file: PathBuf,
    pub data: serde_norway::Value,
}

impl OptionData {
    /// `(group, option)` of every option that is required and has no default.
    pub fn required_without_default(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        let Some(groups) = self.data.get("options").and_then(|o| o.as_mapping()) else {
            return out;
        };
        for (group, g) in groups {
            let group = group.as_str().unwrap_or_default();
            for opt in g
                .get("opts")
                .and_then(|o| o.as_sequence())
                .into_iter()
                .flatten()
            {
                let required = opt.get("required").and_then(|r| r.as_bool()) == Some(true);
                let no_default = opt.get("default").is_none_or(|d| d.is_null());
                if required && no_default {
                    let name = opt
                        .get("dest")
                        .or_else(|| opt.get("name"))
                        .and_then(|n| n.as_str())
                        .unwrap_or_default();
                    out.push((group.to_string(), name.replace('-', "_")));
                }
            }
        }
        out
    }

    /// The data of option `key` (as written in a file) of `group`.
    pub fn option(&self, group: &str, key: &str) -> Option<&serde_norway::Value> {
        self.data
            .get("options")?
            .get(group)?
            .get("opts")?
            .as_sequence()?
            .iter()
            .find(|o| {
                ["name", "dest"].iter().any(|f| {
                    o.get(*f)
                        .and_then(|n| n.as_str())
                        .is_some_and(|n| n.replace('-', "_") == key)
                })
            })
    }

    /// Whether the data knows group `group`.
    pub fn has_group(&self, group: &str) -> bool {
        self.data
            .get("options")
            .and_then(|o| o.get(group))
            .is_some()
    }
}

/// The `[section] key` pairs of an INI file (comments and blank lines skipped).
pub fn ini_keys(text: &str) -> Vec<(String, String)> {
    let mut section = String::new();
    let mut out = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(s) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = s.to_string();
        } else if let Some((k, _)) = line.split_once('=') {
            out.push((section.clone(), k.trim().to_string()));
        }
    }
    out
}
