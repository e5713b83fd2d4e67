//! Projecting a satellite into files: the cinder.conf section of a CinderBackend (or the backup
//! settings of a CinderBackupBackend), the NFS shares file, the Ceph config and keyring. Also the
//! credential check the Backends / BackupBackend steps and the satellite controllers share.

use super::credentials::{self, Missing};
use crate::crd::{BackendType, BackupCompression, NfsSpec, RbdSpec};
use kube::Client;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Label telling which projection a Secret is: `volume` or `backup`.
pub const PROJECTION_LABEL: &str = "cinder.openstack.c5c3.io/projection";
/// [`PROJECTION_LABEL`] value of a volume backend's Secrets.
pub const PROJECTION_VOLUME: &str = "volume";
/// [`PROJECTION_LABEL`] value of the backup target's Secrets.
pub const PROJECTION_BACKUP: &str = "backup";
/// The key of the cephx key in the RBD key Secret unless `keySecretRef.key` says otherwise.
pub const DEFAULT_RBD_KEY: &str = "key";

/// The cephx key (never logged; `Debug` hides it).
#[derive(Clone, PartialEq, Eq)]
pub struct CephKey(String);

impl std::fmt::Debug for CephKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CephKey(..)")
    }
}

/// The credentials a satellite needs: none for NFS, the key for RBD.
pub async fn credentials_for(
    client: &Client,
    namespace: &str,
    backend_type: BackendType,
    rbd: Option<&RbdSpec>,
) -> Result<Result<Option<CephKey>, String>, kube::Error> {
    match (backend_type, rbd) {
        (BackendType::Nfs, _) => Ok(Ok(None)),
        (BackendType::Rbd, None) => Ok(Err("spec.rbd is missing".to_string())),
        (BackendType::Rbd, Some(r)) => {
            let key = r.key_secret_ref.key.as_deref().unwrap_or(DEFAULT_RBD_KEY);
            match credentials::read(client, namespace, &r.key_secret_ref.name, &[key], &[]).await? {
                Ok(v) => Ok(Ok(v.get(key).map(|k| CephKey(k.to_string())))),
                Err(m @ Missing::Secret(_)) | Err(m @ Missing::Keys(..)) => {
                    Ok(Err(format!("spec.rbd.keySecretRef: {m}")))
                }
            }
        }
    }
}

fn nfs_share(n: &NfsSpec) -> String {
    format!("{}:{}\n", n.server, n.path)
}

fn ceph_files(files: &mut BTreeMap<String, Vec<u8>>, r: &RbdSpec, key: Option<&CephKey>) {
    let mut conf = String::from("[global]\n");
    let _ = writeln!(conf, "mon_host = {}", r.monitors.join(","));
    files.insert(format!("{}.conf", r.cluster_name), conf.into_bytes());
    if let Some(k) = key {
        let keyring = format!("[client.{}]\n\tkey = {}\n", r.user, k.0);
        files.insert(
            format!("{}.client.{}.keyring", r.cluster_name, r.user),
            keyring.into_bytes(),
        );
    }
}

fn extra(section: &mut String, options: &BTreeMap<String, String>) {
    for (k, v) in options {
        let _ = writeln!(section, "{k} = {v}");
    }
}

/// The files of volume backend `name`: `{name}.conf` (its cinder.conf section) plus
/// `nfs_shares` or the Ceph config and keyring.
pub fn volume_backend_files(
    name: &str,
    backend_type: BackendType,
    nfs: Option<&NfsSpec>,
    rbd: Option<&RbdSpec>,
    key: Option<&CephKey>,
    options: &BTreeMap<String, String>,
) -> BTreeMap<String, Vec<u8>> {
    let mut files = BTreeMap::new();
    let mut section = format!("[{name}]\nvolume_backend_name = {name}\n");
    match backend_type {
        BackendType::Nfs => {
            section.push_str("volume_driver = cinder.volume.drivers.nfs.NfsDriver\n");
            let _ = writeln!(
                section,
                "nfs_shares_config = /etc/cinder/backends/{name}/nfs_shares"
            );
            if let Some(n) = nfs {
                if !n.mount_options.is_empty() {
                    let _ = writeln!(section, "nfs_mount_options = {}", n.mount_options.join(","));
                }
                files.insert("nfs_shares".to_string(), nfs_share(n).into_bytes());
            }
        }
        BackendType::Rbd => {
            section.push_str("volume_driver = cinder.volume.drivers.rbd.RBDDriver\n");
            if let Some(r) = rbd {
                let _ = writeln!(section, "rbd_pool = {}", r.pool);
                let _ = writeln!(section, "rbd_user = {}", r.user);
                let _ = writeln!(section, "rbd_cluster_name = {}", r.cluster_name);
                let _ = writeln!(section, "rbd_ceph_conf = /etc/ceph/{}.conf", r.cluster_name);
                if let Some(u) = &r.secret_uuid {
                    let _ = writeln!(section, "rbd_secret_uuid = {u}");
                }
                ceph_files(&mut files, r, key);
            }
        }
    }
    extra(&mut section, options);
    files.insert(format!("{name}.conf"), section.into_bytes());
    files
}

/// The files of the backup target: `backup.conf` (the [DEFAULT] backup settings) plus the Ceph
/// config and keyring for RBD.
#[allow(clippy::too_many_arguments)]
pub fn backup_backend_files(
    backend_type: BackendType,
    nfs: Option<&NfsSpec>,
    rbd: Option<&RbdSpec>,
    key: Option<&CephKey>,
    file_size: Option<i64>,
    compression: Option<BackupCompression>,
    options: &BTreeMap<String, String>,
) -> BTreeMap<String, Vec<u8>> {
    let mut files = BTreeMap::new();
    let mut section = String::from("[DEFAULT]\n");
    match backend_type {
        BackendType::Nfs => {
            section.push_str("backup_driver = cinder.backup.drivers.nfs.NFSBackupDriver\n");
            if let Some(n) = nfs {
                let _ = writeln!(section, "backup_share = {}:{}", n.server, n.path);
                if !n.mount_options.is_empty() {
                    let _ = writeln!(
                        section,
                        "backup_mount_options = {}",
                        n.mount_options.join(",")
                    );
                }
            }
            if let Some(s) = file_size {
                let _ = writeln!(section, "backup_file_size = {s}");
            }
        }
        BackendType::Rbd => {
            section.push_str("backup_driver = cinder.backup.drivers.ceph.CephBackupDriver\n");
            if let Some(r) = rbd {
                let _ = writeln!(
                    section,
                    "backup_ceph_conf = /etc/ceph/{}.conf",
                    r.cluster_name
                );
                let _ = writeln!(section, "backup_ceph_user = {}", r.user);
                let _ = writeln!(section, "backup_ceph_pool = {}", r.pool);
                ceph_files(&mut files, r, key);
            }
            if let Some(s) = file_size {
                let _ = writeln!(section, "backup_ceph_chunk_size = {s}");
            }
        }
    }
    if let Some(c) = compression {
        let _ = writeln!(section, "backup_compression_algorithm = {}", c.as_str());
    }
    extra(&mut section, options);
    files.insert("backup.conf".to_string(), section.into_bytes());
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rbd_projection_carries_the_keyring_and_changes_with_the_key() {
        let rbd: RbdSpec = serde_json::from_value(serde_json::json!({
            "pool": "volumes", "user": "cinder", "monitors": ["10.0.0.1"], "keySecretRef": {"name": "k"}
        }))
        .unwrap();
        let a = volume_backend_files(
            "ceph1",
            BackendType::Rbd,
            None,
            Some(&rbd),
            Some(&CephKey("k1".into())),
            &BTreeMap::new(),
        );
        let b = volume_backend_files(
            "ceph1",
            BackendType::Rbd,
            None,
            Some(&rbd),
            Some(&CephKey("k2".into())),
            &BTreeMap::new(),
        );
        assert!(a.contains_key("ceph.client.cinder.keyring"));
        assert!(String::from_utf8_lossy(&a["ceph1.conf"]).contains("rbd_pool = volumes"));
        assert_ne!(a, b);
        assert_eq!(format!("{:?}", CephKey("secret".into())), "CephKey(..)");
    }
}
