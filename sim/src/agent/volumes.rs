//! A pod's volumes made real in its directory on the host: ConfigMap and Secret (`items`,
//! `defaultMode`/`mode`, `optional`), emptyDir, projected (serviceAccountToken through the
//! TokenRequest API, configMap, secret, downwardAPI), downwardAPI, hostPath (with its `type`
//! check) and persistentVolumeClaim (a directory per claim that outlives the pod). Everything is
//! read through the Kubernetes API. A volume that cannot be made is the kubelet's
//! `MountVolume.SetUp failed for volume ...` message. Then each container's volumeMounts
//! (`subPath`, `readOnly`) become [`Mount`]s.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, ServiceAccount};
use kube::Client;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

use super::env::{PodFacts, field_ref, resource_field_ref};
use super::sandbox::Mount;

/// Files of one volume: relative path → (content, mode).
type Files = BTreeMap<PathBuf, (Vec<u8>, u32)>;

/// Why a volume could not be made: the FailedMount event's message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountError(pub String);

fn setup_failed(volume: &str, why: impl std::fmt::Display) -> MountError {
    MountError(format!(
        "MountVolume.SetUp failed for volume \"{volume}\" : {why}"
    ))
}

/// The data of a ConfigMap (data and binaryData) or None when it does not exist.
pub async fn config_map_data(
    client: &Client,
    namespace: &str,
    name: &str,
) -> Result<Option<BTreeMap<String, Vec<u8>>>, String> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let Some(map) = api.get_opt(name).await.map_err(|e| e.to_string())? else {
        return Ok(None);
    };
    let mut out: BTreeMap<String, Vec<u8>> = map
        .data
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, v.into_bytes()))
        .collect();
    for (k, v) in map.binary_data.unwrap_or_default() {
        out.insert(k, v.0);
    }
    Ok(Some(out))
}

/// The data of a Secret (decoded) or None when it does not exist.
pub async fn secret_data(
    client: &Client,
    namespace: &str,
    name: &str,
) -> Result<Option<BTreeMap<String, Vec<u8>>>, String> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let Some(secret) = api.get_opt(name).await.map_err(|e| e.to_string())? else {
        return Ok(None);
    };
    let mut out: BTreeMap<String, Vec<u8>> = secret
        .data
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, v.0))
        .collect();
    for (k, v) in secret.string_data.unwrap_or_default() {
        out.insert(k, v.into_bytes());
    }
    Ok(Some(out))
}

fn mode_of(value: &Value, fallback: u32) -> u32 {
    value
        .as_u64()
        .and_then(|m| u32::try_from(m).ok())
        .map_or(fallback, |m| m & 0o7777)
}

/// The files a ConfigMap or Secret source projects: every key, or only `items` (each with its
/// path and mode); a missing item key is an error unless the source is optional.
pub fn keyed_files(
    data: &BTreeMap<String, Vec<u8>>,
    source: &Value,
    default_mode: u32,
    kind: &str,
) -> Result<Files, String> {
    let mut files = Files::new();
    match source.get("items").and_then(Value::as_array) {
        None => {
            for (key, value) in data {
                files.insert(PathBuf::from(key), (value.clone(), default_mode));
            }
        }
        Some(items) => {
            for item in items {
                let key = item["key"].as_str().unwrap_or_default();
                let path = item["path"].as_str().unwrap_or(key);
                match data.get(key) {
                    Some(value) => {
                        files.insert(
                            PathBuf::from(path),
                            (value.clone(), mode_of(&item["mode"], default_mode)),
                        );
                    }
                    None if source["optional"] == true => {}
                    None => {
                        return Err(match kind {
                            "configmap" => {
                                format!("configmap references non-existent config key: {key}")
                            }
                            _ => format!("references non-existent secret key: {key}"),
                        });
                    }
                }
            }
        }
    }
    Ok(files)
}

fn safe_relative(path: &Path) -> bool {
    !path.as_os_str().is_empty()
        && path
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)))
}

/// Writes `files` under `dir`; with the pod's `fsGroup` they belong to that group, as the
/// kubelet makes them.
fn write_files(dir: &Path, files: &Files, fs_group: Option<u32>) -> Result<(), String> {
    for (path, (content, mode)) in files {
        if !safe_relative(path) {
            return Err(format!("invalid path {}", path.display()));
        }
        let target = dir.join(path);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
        }
        std::fs::write(&target, content).map_err(|e| e.to_string())?;
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(*mode))
            .map_err(|e| e.to_string())?;
        if let Some(group) = fs_group {
            std::os::unix::fs::chown(&target, None, Some(group)).map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}

/// What a pod's volumes became: name → host path.
pub type Made = BTreeMap<String, PathBuf>;

/// Makes every volume of `pod` under `dir` (`dir/<name>`); claims under `claims`.
pub async fn make(
    client: &Client,
    pod: &Value,
    dir: &Path,
    claims: &Path,
    facts: &PodFacts,
) -> Result<Made, MountError> {
    let namespace = pod["metadata"]["namespace"].as_str().unwrap_or_default();
    let mut made = Made::new();
    let volumes = pod
        .pointer("/spec/volumes")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for volume in &volumes {
        let name = volume["name"].as_str().unwrap_or_default();
        let path = dir.join(name);
        let fail = |why: String| setup_failed(name, why);
        if let Some(host) = volume.get("hostPath") {
            made.insert(name.to_owned(), host_path(host).map_err(fail)?);
            continue;
        }
        if let Some(claim) = volume.get("persistentVolumeClaim") {
            let claim_name = claim["claimName"].as_str().unwrap_or_default();
            let claim_dir = claims.join(namespace).join(claim_name);
            std::fs::create_dir_all(&claim_dir).map_err(|e| fail(e.to_string()))?;
            made.insert(name.to_owned(), claim_dir);
            continue;
        }
        let files = if volume.get("emptyDir").is_some() {
            Some(Files::new())
        } else if let Some(source) = volume.get("configMap") {
            let map = source["name"].as_str().unwrap_or_default();
            let mode = mode_of(&source["defaultMode"], 0o644);
            match config_map_data(client, namespace, map)
                .await
                .map_err(&fail)?
            {
                Some(data) => Some(keyed_files(&data, source, mode, "configmap").map_err(&fail)?),
                None if source["optional"] == true => Some(Files::new()),
                None => return Err(fail(format!("configmap \"{map}\" not found"))),
            }
        } else if let Some(source) = volume.get("secret") {
            let secret = source["secretName"].as_str().unwrap_or_default();
            let mode = mode_of(&source["defaultMode"], 0o644);
            match secret_data(client, namespace, secret)
                .await
                .map_err(&fail)?
            {
                Some(data) => Some(keyed_files(&data, source, mode, "secret").map_err(&fail)?),
                None if source["optional"] == true => Some(Files::new()),
                None => return Err(fail(format!("secret \"{secret}\" not found"))),
            }
        } else if let Some(source) = volume.get("downwardAPI") {
            let mode = mode_of(&source["defaultMode"], 0o644);
            Some(downward_files(pod, source, mode, facts).map_err(&fail)?)
        } else if let Some(source) = volume.get("projected") {
            Some(projected(client, pod, source, facts).await.map_err(&fail)?)
        } else {
            return Err(fail(
                "the process runtime does not support this volume type".to_owned(),
            ));
        };
        if let Some(files) = files {
            std::fs::create_dir_all(&path).map_err(|e| fail(e.to_string()))?;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o777))
                .map_err(|e| fail(e.to_string()))?;
            let fs_group = pod
                .pointer("/spec/securityContext/fsGroup")
                .and_then(Value::as_u64)
                .and_then(|g| u32::try_from(g).ok());
            write_files(&path, &files, fs_group).map_err(&fail)?;
            made.insert(name.to_owned(), path);
        }
    }
    Ok(made)
}

fn host_path(source: &Value) -> Result<PathBuf, String> {
    let path = PathBuf::from(source["path"].as_str().unwrap_or_default());
    if !path.is_absolute() {
        return Err(format!("hostPath {} is not absolute", path.display()));
    }
    let kind = source["type"].as_str().unwrap_or_default();
    let meta = std::fs::metadata(&path);
    let check = |ok: bool, what: &str| {
        if ok {
            Ok(())
        } else {
            Err(format!(
                "hostPath type check failed: {} is not a {what}",
                path.display()
            ))
        }
    };
    match kind {
        "DirectoryOrCreate" => {
            std::fs::create_dir_all(&path).map_err(|e| e.to_string())?;
        }
        "FileOrCreate" if meta.is_err() => {
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
            }
            std::fs::write(&path, b"").map_err(|e| e.to_string())?;
        }
        "Directory" => check(meta.as_ref().is_ok_and(|m| m.is_dir()), "directory")?,
        "File" => check(meta.as_ref().is_ok_and(|m| m.is_file()), "file")?,
        "Socket" | "CharDevice" | "BlockDevice" => check(meta.is_ok(), kind)?,
        _ => {}
    }
    Ok(path)
}

fn downward_files(
    pod: &Value,
    source: &Value,
    default_mode: u32,
    facts: &PodFacts,
) -> Result<Files, String> {
    let mut files = Files::new();
    for item in source
        .get("items")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice)
    {
        let path = item["path"].as_str().unwrap_or_default();
        let value = if let Some(field) = item.get("fieldRef") {
            field_ref(pod, field["fieldPath"].as_str().unwrap_or_default(), facts)?
        } else if let Some(resource) = item.get("resourceFieldRef") {
            let container = resource["containerName"].as_str().unwrap_or_default();
            let spec = pod
                .pointer("/spec/containers")
                .and_then(Value::as_array)
                .and_then(|cs| cs.iter().find(|c| c["name"] == container))
                .cloned()
                .unwrap_or_else(|| json!({}));
            resource_field_ref(&spec, resource, facts)?
        } else {
            continue;
        };
        files.insert(
            PathBuf::from(path),
            (value.into_bytes(), mode_of(&item["mode"], default_mode)),
        );
    }
    Ok(files)
}

async fn projected(
    client: &Client,
    pod: &Value,
    source: &Value,
    facts: &PodFacts,
) -> Result<Files, String> {
    let namespace = pod["metadata"]["namespace"].as_str().unwrap_or_default();
    let mode = mode_of(&source["defaultMode"], 0o644);
    let mut files = Files::new();
    for part in source
        .get("sources")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice)
    {
        if let Some(s) = part.get("configMap") {
            let name = s["name"].as_str().unwrap_or_default();
            match config_map_data(client, namespace, name).await? {
                Some(data) => files.extend(keyed_files(&data, s, mode, "configmap")?),
                None if s["optional"] == true => {}
                None => return Err(format!("configmap \"{name}\" not found")),
            }
        } else if let Some(s) = part.get("secret") {
            let name = s["name"].as_str().unwrap_or_default();
            match secret_data(client, namespace, name).await? {
                Some(data) => files.extend(keyed_files(&data, s, mode, "secret")?),
                None if s["optional"] == true => {}
                None => return Err(format!("secret \"{name}\" not found")),
            }
        } else if let Some(s) = part.get("downwardAPI") {
            files.extend(downward_files(pod, s, mode, facts)?);
        } else if let Some(s) = part.get("serviceAccountToken") {
            let token = service_account_token(client, pod, s).await?;
            let path = s["path"].as_str().unwrap_or("token");
            files.insert(PathBuf::from(path), (token.into_bytes(), mode));
        }
    }
    Ok(files)
}

/// A token of the pod's ServiceAccount from the TokenRequest API, bound to the pod. A missing
/// `default` ServiceAccount is created first, as a real cluster's ServiceAccount controller
/// keeps one in every namespace.
async fn service_account_token(
    client: &Client,
    pod: &Value,
    source: &Value,
) -> Result<String, String> {
    let namespace = pod["metadata"]["namespace"].as_str().unwrap_or_default();
    let account = pod
        .pointer("/spec/serviceAccountName")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .unwrap_or("default");
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    if account == "default"
        && accounts
            .get_opt(account)
            .await
            .map_err(|e| e.to_string())?
            .is_none()
    {
        let sa: ServiceAccount = serde_json::from_value(json!({"metadata": {"name": "default"}}))
            .map_err(|e| e.to_string())?;
        match accounts.create(&PostParams::default(), &sa).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(error) => return Err(error.to_string()),
        }
    }
    let mut spec = json!({
        "boundObjectRef": {"apiVersion": "v1", "kind": "Pod",
            "name": pod["metadata"]["name"], "uid": pod["metadata"]["uid"]},
    });
    if let Some(seconds) = source["expirationSeconds"].as_i64() {
        spec["expirationSeconds"] = json!(seconds);
    }
    if let Some(audience) = source["audience"].as_str() {
        spec["audiences"] = json!([audience]);
    }
    let request: TokenRequest =
        serde_json::from_value(json!({"spec": spec})).map_err(|e| e.to_string())?;
    let answer = accounts
        .create_token_request(account, &PostParams::default(), &request)
        .await
        .map_err(|e| match e {
            kube::Error::Api(status) if status.code == 404 => {
                format!("serviceaccount \"{account}\" not found")
            }
            other => other.to_string(),
        })?;
    let status: Option<k8s_openapi::api::authentication::v1::TokenRequestStatus> = answer.status;
    match status {
        Some(k8s_openapi::api::authentication::v1::TokenRequestStatus {
            token: Some(token),
            ..
        }) => Ok(token),
        _ => Err("TokenRequest answered without a token".to_owned()),
    }
}

/// The mounts of `container`: each volumeMount's volume (or its `subPath`) at its mountPath.
pub fn mounts_of(container: &Value, made: &Made) -> Result<Vec<Mount>, String> {
    let mut mounts = Vec::new();
    for mount in container
        .get("volumeMounts")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice)
    {
        let name = mount["name"].as_str().unwrap_or_default();
        let target = PathBuf::from(mount["mountPath"].as_str().unwrap_or_default());
        if !target.is_absolute() {
            return Err(format!("mountPath {} is not absolute", target.display()));
        }
        let Some(source) = made.get(name) else {
            return Err(format!("unable to find volume \"{name}\""));
        };
        let sub = mount["subPath"].as_str().unwrap_or_default();
        let source = if sub.is_empty() {
            source.clone()
        } else {
            if !safe_relative(Path::new(sub)) {
                return Err(format!("invalid subPath \"{sub}\""));
            }
            let path = source.join(sub);
            if !path.exists() {
                std::fs::create_dir_all(&path).map_err(|e| e.to_string())?;
            }
            path
        };
        mounts.push(Mount {
            source,
            target,
            read_only: mount["readOnly"] == true,
        });
    }
    Ok(mounts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_pick_keys_paths_and_modes() {
        let data: BTreeMap<String, Vec<u8>> = [
            ("a".to_owned(), b"1".to_vec()),
            ("b".to_owned(), b"2".to_vec()),
        ]
        .into();
        let all = keyed_files(&data, &json!({}), 0o600, "secret").unwrap();
        assert_eq!(all.len(), 2);
        assert_eq!(all[Path::new("a")].1, 0o600);
        let some = keyed_files(
            &data,
            &json!({"items": [{"key": "b", "path": "dir/bee", "mode": 0o400}]}),
            0o644,
            "configmap",
        )
        .unwrap();
        assert_eq!(some.keys().collect::<Vec<_>>(), [Path::new("dir/bee")]);
        assert_eq!(some[Path::new("dir/bee")], (b"2".to_vec(), 0o400));
        let error = keyed_files(
            &data,
            &json!({"items": [{"key": "z", "path": "z"}]}),
            0o644,
            "configmap",
        );
        assert_eq!(
            error.unwrap_err(),
            "configmap references non-existent config key: z"
        );
        let optional = keyed_files(
            &data,
            &json!({"optional": true, "items": [{"key": "z", "path": "z"}]}),
            0o644,
            "secret",
        );
        assert!(optional.unwrap().is_empty());
        assert!(!safe_relative(Path::new("../x")));
        assert!(!safe_relative(Path::new("/abs")));
    }

    #[test]
    fn mounts_name_their_volume_and_sub_path() {
        let dir = tempfile::tempdir().unwrap();
        let made: Made = [("cfg".to_owned(), dir.path().to_path_buf())].into();
        std::fs::write(dir.path().join("x.conf"), "x").unwrap();
        let c = json!({"volumeMounts": [
            {"name": "cfg", "mountPath": "/etc/app"},
            {"name": "cfg", "mountPath": "/etc/x.conf", "subPath": "x.conf", "readOnly": true}]});
        let mounts = mounts_of(&c, &made).unwrap();
        assert_eq!(mounts[1].source, dir.path().join("x.conf"));
        assert!(mounts[1].read_only);
        let missing = json!({"volumeMounts": [{"name": "nope", "mountPath": "/x"}]});
        assert_eq!(
            mounts_of(&missing, &made).unwrap_err(),
            "unable to find volume \"nope\""
        );
    }
}
