//! Backend projection (the Backends / BackupBackend steps' pure part): a CinderBackend or the
//! CinderBackupBackend rendered into the data of one content-hashed Secret — the backend's
//! cinder.conf fragment plus, for NFS, the shares file and, for RBD, the Ceph client config and
//! the keyring.
//! The cephx key appears only in that Secret data; names, digests and the artefact summary never
//! carry it. Also the sweep of projection Secrets nothing projects anymore.

use super::ini::{ControlCharacter, IniDoc, has_control};
use super::secret_data::SecretData;
use crate::crd::{
    BackendType, CinderBackendSpec, CinderBackupBackendSpec, NfsSpec, RbdSpec, SatelliteSpec,
};
use crate::names;

/// One backend (or the backup target) projected into a content-hashed Secret.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProjectedBackend {
    /// The CinderBackend / CinderBackupBackend name.
    pub name: String,
    pub backend_type: Option<BackendType>,
    /// The content-hashed projection Secret the workloads mount.
    pub secret_name: String,
    /// sha256 of the projected content (rolls the workloads that mount it).
    pub content_hash: String,
    /// NFS: `server` of the export (for the NetworkPolicy rule).
    pub nfs_server: Option<String>,
    /// RBD: the networks the backend names (for the NetworkPolicy rule).
    pub rbd_networks: Vec<String>,
    /// RBD: the Ceph monitors (for the NetworkPolicy rule of a backend naming no networks).
    pub rbd_monitors: Vec<String>,
    /// True while the CinderBackend is being deleted (detach in progress).
    pub deleting: bool,
}

/// Where a volume backend's Secret is mounted: `/etc/cinder-backends/{backend}`, beside the
/// ConfigMap's read-only `/etc/cinder`, not under it: a container runtime cannot create a mount
/// point inside a read-only mount (runc's mkdir fails with EROFS and the container never starts).
pub(crate) fn backend_mount_dir(backend: &str) -> String {
    format!("/etc/cinder-backends/{backend}")
}
/// Where the backup target's Secret is mounted (outside `/etc/cinder`, as
/// [`backend_mount_dir`]).
pub(crate) const BACKUP_MOUNT_DIR: &str = "/etc/cinder-backup-backend";
/// The cinder.conf fragment key of a volume backend Secret (loaded with `--config-dir`).
pub const BACKEND_CONF_KEY: &str = "backend.conf";
/// The cinder.conf fragment key of the backup Secret.
pub const BACKUP_CONF_KEY: &str = "backup.conf";
/// NFS shares file key.
pub(crate) const NFS_SHARES_KEY: &str = "nfs_shares";
/// The key of the Ceph client config (`rbd_ceph_conf` / `backup_ceph_conf` name it by path). Not
/// `*.conf`: the services load every `*.conf` of the directory they are given with
/// `--config-dir` as their own oslo.config files, and a Ceph `[global]` section is none of
/// theirs.
pub(crate) const CEPH_CONF_KEY: &str = "ceph.cfg";
/// cephx keyring key.
pub(crate) const KEYRING_KEY: &str = "keyring";

/// One projection Secret.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Projection {
    /// The backend name (CinderBackend / CinderBackupBackend name).
    pub backend: String,
    /// `{base}-{hash}`.
    pub secret_name: String,
    pub base_name: String,
    pub content_hash: String,
    /// The Secret data (the only place a key appears).
    pub data: SecretData,
    /// The summary later steps use (no secret values).
    pub summary: ProjectedBackend,
}

/// Why a backend could not be projected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProjectionError {
    #[error("type {0} requires exactly the matching storage block")]
    BlockMismatch(&'static str),
    #[error("the RBD key Secret has no usable key (missing, empty or with a control character)")]
    BadKey,
    #[error(transparent)]
    ControlCharacter(#[from] ControlCharacter),
}

fn storage(spec: &SatelliteSpec) -> Result<Storage<'_>, ProjectionError> {
    match (spec.backend_type, spec.nfs.as_ref(), spec.rbd.as_ref()) {
        (BackendType::Nfs, Some(n), None) => Ok(Storage::Nfs(n)),
        (BackendType::Rbd, None, Some(r)) => Ok(Storage::Rbd(r)),
        (t, _, _) => Err(ProjectionError::BlockMismatch(t.as_str())),
    }
}

enum Storage<'a> {
    Nfs(&'a NfsSpec),
    Rbd(&'a RbdSpec),
}

fn ceph_files(
    dir: &str,
    rbd: &RbdSpec,
    key: Option<&str>,
    data: &mut SecretData,
) -> Result<(), ProjectionError> {
    let key = key
        .map(str::trim)
        .filter(|k| !k.is_empty() && !has_control(k))
        .ok_or(ProjectionError::BadKey)?;
    let mut ceph = IniDoc::new();
    ceph.set("global", "mon_host", rbd.monitors.join(","));
    ceph.set("global", "keyring", format!("{dir}/{KEYRING_KEY}"));
    data.insert(CEPH_CONF_KEY, ceph.render()?);
    let mut keyring = IniDoc::new();
    keyring.set(&format!("client.{}", rbd.user), "key", key);
    data.insert(KEYRING_KEY, keyring.render()?);
    Ok(())
}

fn finish(
    backend: &str,
    base_name: String,
    satellite: &SatelliteSpec,
    data: SecretData,
) -> Projection {
    let content_hash = data.digest();
    let secret_name = names::projection_secret(&base_name, &content_hash);
    let summary = ProjectedBackend {
        secret_name: secret_name.clone(),
        content_hash: content_hash.clone(),
        ..storage_summary(backend, satellite)
    };
    Projection {
        backend: backend.to_string(),
        secret_name,
        base_name,
        content_hash,
        data,
        summary,
    }
}

/// What later steps need of backend `backend` from its storage block alone (the NFS server, the
/// RBD networks and monitors), without a Secret name or content hash.
fn storage_summary(backend: &str, satellite: &SatelliteSpec) -> ProjectedBackend {
    ProjectedBackend {
        name: backend.to_string(),
        backend_type: Some(satellite.backend_type),
        nfs_server: satellite.nfs.as_ref().map(|n| n.server.clone()),
        rbd_networks: satellite
            .rbd
            .as_ref()
            .map(|r| r.networks.clone())
            .unwrap_or_default(),
        rbd_monitors: satellite
            .rbd
            .as_ref()
            .map(|r| r.monitors.clone())
            .unwrap_or_default(),
        ..Default::default()
    }
}

/// What is known of an attached backend that is not projected this pass (from its spec alone,
/// no Secret): enough for the NetworkPolicy to keep the egress its running volume service uses.
pub(crate) fn held_backend(backend: &str, spec: &CinderBackendSpec) -> ProjectedBackend {
    storage_summary(backend, &spec.satellite)
}

/// Projects volume backend `backend` of Cinder `cinder`. `rbd_key` is the cephx key read from
/// `spec.rbd.keySecretRef` (ignored for NFS).
pub fn project_backend(
    cinder: &str,
    backend: &str,
    spec: &CinderBackendSpec,
    rbd_key: Option<&str>,
) -> Result<Projection, ProjectionError> {
    let st = storage(&spec.satellite)?;
    let dir = backend_mount_dir(backend);
    let mut conf = IniDoc::new();
    conf.set("DEFAULT", "enabled_backends", backend);
    conf.set(backend, "volume_backend_name", backend);
    let mut data = SecretData::default();
    match &st {
        Storage::Nfs(n) => {
            conf.set(
                backend,
                "volume_driver",
                "cinder.volume.drivers.nfs.NfsDriver",
            );
            conf.set(
                backend,
                "nfs_shares_config",
                format!("{dir}/{NFS_SHARES_KEY}"),
            );
            conf.set(backend, "nfs_mount_point_base", "/var/lib/cinder/mnt");
            if !n.mount_options.is_empty() {
                conf.set(backend, "nfs_mount_options", n.mount_options.join(","));
            }
            let share = format!("{}:{}", n.server, n.path);
            if has_control(&share) {
                return Err(ControlCharacter {
                    section: backend.into(),
                    what: "NFS share".into(),
                }
                .into());
            }
            data.insert(NFS_SHARES_KEY, format!("{share}\n"));
        }
        Storage::Rbd(r) => {
            conf.set(
                backend,
                "volume_driver",
                "cinder.volume.drivers.rbd.RBDDriver",
            );
            conf.set(backend, "rbd_pool", r.pool.as_str());
            conf.set(backend, "rbd_user", r.user.as_str());
            conf.set(backend, "rbd_cluster_name", r.cluster_name.as_str());
            conf.set(backend, "rbd_ceph_conf", format!("{dir}/{CEPH_CONF_KEY}"));
            if let Some(uuid) = &r.secret_uuid {
                conf.set(backend, "rbd_secret_uuid", uuid.as_str());
            }
            ceph_files(&dir, r, rbd_key, &mut data)?;
        }
    }
    for (k, v) in &spec.extra_options {
        conf.set(backend, k, v.as_str());
    }
    data.insert(BACKEND_CONF_KEY, conf.render()?);
    Ok(finish(
        backend,
        names::backend_secret_base(cinder, backend),
        &spec.satellite,
        data,
    ))
}

/// Projects the backup target `backend` of Cinder `cinder`.
pub fn project_backup_backend(
    cinder: &str,
    backend: &str,
    spec: &CinderBackupBackendSpec,
    rbd_key: Option<&str>,
) -> Result<Projection, ProjectionError> {
    let st = storage(&spec.satellite)?;
    let mut conf = IniDoc::new();
    let mut data = SecretData::default();
    match &st {
        Storage::Nfs(n) => {
            conf.set(
                "DEFAULT",
                "backup_driver",
                "cinder.backup.drivers.nfs.NFSBackupDriver",
            );
            conf.set(
                "DEFAULT",
                "backup_share",
                format!("{}:{}", n.server, n.path),
            );
            conf.set(
                "DEFAULT",
                "backup_mount_point_base",
                "/var/lib/cinder/backup_mount",
            );
            if !n.mount_options.is_empty() {
                conf.set("DEFAULT", "backup_mount_options", n.mount_options.join(","));
            }
            if let Some(size) = spec.file_size {
                conf.set("DEFAULT", "backup_file_size", size.to_string());
            }
        }
        Storage::Rbd(r) => {
            conf.set(
                "DEFAULT",
                "backup_driver",
                "cinder.backup.drivers.ceph.CephBackupDriver",
            );
            conf.set(
                "DEFAULT",
                "backup_ceph_conf",
                format!("{BACKUP_MOUNT_DIR}/{CEPH_CONF_KEY}"),
            );
            conf.set("DEFAULT", "backup_ceph_user", r.user.as_str());
            conf.set("DEFAULT", "backup_ceph_pool", r.pool.as_str());
            if let Some(size) = spec.file_size {
                conf.set("DEFAULT", "backup_ceph_chunk_size", size.to_string());
            }
            ceph_files(BACKUP_MOUNT_DIR, r, rbd_key, &mut data)?;
        }
    }
    if let Some(c) = spec.compression {
        conf.set("DEFAULT", "backup_compression_algorithm", c.as_str());
    }
    for (k, v) in &spec.extra_options {
        conf.set("DEFAULT", k, v.as_str());
    }
    data.insert(BACKUP_CONF_KEY, conf.render()?);
    Ok(finish(
        backend,
        names::backup_backend_secret_base(cinder),
        &spec.satellite,
        data,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nfs() -> CinderBackendSpec {
        serde_norway::from_str(
            "{cinderRef: {name: c1}, type: NFS, nfs: {server: 10.0.0.5, path: /export/cinder, mountOptions: [vers=4.1, hard]}}",
        )
        .unwrap()
    }
    fn rbd() -> CinderBackendSpec {
        serde_norway::from_str(
            "{cinderRef: {name: c1}, type: RBD, rbd: {pool: volumes, user: cinder, monitors: ['10.1.0.1:6789', '10.1.0.2:6789'], \
             networks: [10.1.0.0/24], keySecretRef: {name: ceph-key}, secretUUID: 457eb676-33da-42ec-9a8c-9293d545c337}, \
             extraOptions: {rbd_flatten_volume_from_snapshot: 'true'}}",
        )
        .unwrap()
    }

    #[test]
    fn a_held_backend_keeps_what_its_egress_needs_and_no_secret() {
        let h = held_backend("r", &rbd());
        assert_eq!(h.rbd_networks, ["10.1.0.0/24"]);
        assert_eq!(h.rbd_monitors, ["10.1.0.1:6789", "10.1.0.2:6789"]);
        assert!(h.secret_name.is_empty() && !h.deleting);
        let h = held_backend("n", &nfs());
        assert_eq!(h.nfs_server.as_deref(), Some("10.0.0.5"));
        assert_eq!(h.backend_type, Some(BackendType::Nfs));
    }

    #[test]
    fn nfs_projection_has_shares_and_driver_options() {
        let p = project_backend("c1", "nfs1", &nfs(), None).unwrap();
        assert_eq!(p.data[NFS_SHARES_KEY], "10.0.0.5:/export/cinder\n");
        let conf = &p.data[BACKEND_CONF_KEY];
        assert!(conf.contains("enabled_backends = nfs1"));
        assert!(conf.contains("volume_driver = cinder.volume.drivers.nfs.NfsDriver"));
        assert!(conf.contains("nfs_shares_config = /etc/cinder-backends/nfs1/nfs_shares"));
        assert!(conf.contains("nfs_mount_options = vers=4.1,hard"));
        assert!(p.secret_name.starts_with("c1-backend-nfs1-"));
        assert_eq!(p.summary.nfs_server.as_deref(), Some("10.0.0.5"));
    }

    #[test]
    fn the_only_oslo_config_file_of_a_projection_is_its_fragment() {
        // cinder-volume and cinder-backup load every `*.conf` of their --config-dir.
        let volume = project_backend("c1", "ceph1", &rbd(), Some("AQBk==")).unwrap();
        let backup: CinderBackupBackendSpec = serde_norway::from_str(
            "{cinderRef: {name: c1}, type: RBD, rbd: {pool: backups, user: cinder, \
             monitors: ['10.1.0.1:6789'], keySecretRef: {name: ceph-key}}}",
        )
        .unwrap();
        let backup = project_backup_backend("c1", "b", &backup, Some("AQBk==")).unwrap();
        for (p, fragment) in [(&volume, BACKEND_CONF_KEY), (&backup, BACKUP_CONF_KEY)] {
            let confs: Vec<&str> = p.data.keys().filter(|k| k.ends_with(".conf")).collect();
            assert_eq!(confs, [fragment]);
            assert!(p.data.contains_key(CEPH_CONF_KEY));
        }
        assert!(
            volume.data[BACKEND_CONF_KEY]
                .contains("rbd_ceph_conf = /etc/cinder-backends/ceph1/ceph.cfg")
        );
        assert!(
            backup.data[BACKUP_CONF_KEY]
                .contains("backup_ceph_conf = /etc/cinder-backup-backend/ceph.cfg")
        );
    }

    #[test]
    fn rbd_projection_keeps_the_key_in_the_secret_data_only() {
        let key = "AQBsuperSecretKey==";
        let p = project_backend("c1", "ceph1", &rbd(), Some(key)).unwrap();
        assert_eq!(
            p.data[KEYRING_KEY],
            format!("[client.cinder]\nkey = {key}\n")
        );
        assert!(p.data[CEPH_CONF_KEY].contains("mon_host = 10.1.0.1:6789,10.1.0.2:6789"));
        let conf = &p.data[BACKEND_CONF_KEY];
        assert!(conf.contains("rbd_pool = volumes") && conf.contains("rbd_cluster_name = ceph"));
        assert!(conf.contains("rbd_secret_uuid = 457eb676"));
        assert!(conf.contains("rbd_flatten_volume_from_snapshot = true"));
        assert!(!conf.contains(key) && !p.data[CEPH_CONF_KEY].contains(key));
        assert!(!p.secret_name.contains(key) && !format!("{p:?}").contains(key));
        assert!(!format!("{:?}", p.summary).contains(key));
        assert_eq!(p.summary.rbd_networks, ["10.1.0.0/24"]);
        // A rotated key changes the content-hashed name (rolls the mounting workloads).
        let rotated = project_backend("c1", "ceph1", &rbd(), Some("AQBotherKey==")).unwrap();
        assert_ne!(rotated.secret_name, p.secret_name);
        assert_eq!(rotated.base_name, p.base_name);
    }

    #[test]
    fn rbd_without_a_usable_key_is_refused() {
        for k in [None, Some(""), Some("abc\n[client.admin]")] {
            assert_eq!(
                project_backend("c1", "ceph1", &rbd(), k).unwrap_err(),
                ProjectionError::BadKey
            );
        }
    }

    #[test]
    fn backup_projection_for_nfs_and_rbd() {
        let b: CinderBackupBackendSpec = serde_norway::from_str(
            "{cinderRef: {name: c1}, type: NFS, nfs: {server: nfs.example, path: /backups}, fileSize: 1999634432, compression: zstd}",
        )
        .unwrap();
        let p = project_backup_backend("c1", "bk", &b, None).unwrap();
        let conf = &p.data[BACKUP_CONF_KEY];
        assert!(conf.contains("backup_driver = cinder.backup.drivers.nfs.NFSBackupDriver"));
        assert!(conf.contains("backup_share = nfs.example:/backups"));
        assert!(conf.contains("backup_file_size = 1999634432"));
        assert!(conf.contains("backup_compression_algorithm = zstd"));
        assert!(p.secret_name.starts_with("c1-backup-backend-"));
        let r: CinderBackupBackendSpec = serde_norway::from_str(
            "{cinderRef: {name: c1}, type: RBD, rbd: {pool: backups, user: backup, monitors: [m1], keySecretRef: {name: k}}}",
        )
        .unwrap();
        let p = project_backup_backend("c1", "bk", &r, Some("AQBk==")).unwrap();
        assert!(p.data[BACKUP_CONF_KEY].contains("backup_ceph_pool = backups"));
        assert!(p.data.contains_key(KEYRING_KEY));
    }
}
