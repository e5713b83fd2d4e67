//! What a pod needs before its containers can start, checked as the kubelet does: every
//! `env[].valueFrom.secretKeyRef` / `configMapKeyRef` and `envFrom` source (unless
//! `optional: true`) must resolve in the pod's namespace, or the container waits in
//! CreateContainerConfigError; every `secret`, `configMap` and `projected` volume (and a named
//! ServiceAccount, whose token is mounted) must exist, or the pod stays in ContainerCreating
//! with a FailedMount event. Missing image pull secrets only warn, as on a real node. Messages
//! name objects and keys, never values.

use std::collections::BTreeSet;

use serde_json::Value;

/// What the kubelet sees of one Secret or ConfigMap: its keys.
pub type Keys = BTreeSet<String>;

/// Lookups in the pod's namespace.
pub trait Namespace {
    /// The keys of Secret `name`, None when it does not exist.
    fn secret(&self, name: &str) -> Option<Keys>;
    /// The keys of ConfigMap `name` (data and binaryData), None when it does not exist.
    fn config_map(&self, name: &str) -> Option<Keys>;
    /// Whether ServiceAccount `name` exists.
    fn service_account(&self, name: &str) -> bool;
}

/// Why a pod cannot start yet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Blocker {
    /// A container's environment cannot be built: CreateContainerConfigError.
    Config {
        /// The container that waits.
        container: String,
        /// e.g. `secret "db" not found`, `couldn't find key password in Secret ns/db`.
        message: String,
    },
    /// A volume cannot be mounted: ContainerCreating plus a FailedMount event.
    Mount {
        /// The event message, e.g. `MountVolume.SetUp failed for volume "certs" : secret "tls" not found`.
        message: String,
    },
}

/// The kubelet's check of `pod` against its namespace: the first blocker, if any, and the
/// warnings (missing image pull secrets).
pub fn check(pod: &Value, ns: &impl Namespace) -> (Option<Blocker>, Vec<String>) {
    let namespace = pod
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let warnings: Vec<String> = array(pod, "/spec/imagePullSecrets")
        .iter()
        .filter_map(|s| s["name"].as_str())
        .filter(|name| ns.secret(name).is_none())
        .map(|name| {
            format!(
                "Unable to retrieve some image pull secrets ({name}); attempting to pull the image may not succeed."
            )
        })
        .collect();
    if let Some(message) = volumes_blocker(pod, ns) {
        return (Some(Blocker::Mount { message }), warnings);
    }
    let containers = array(pod, "/spec/initContainers")
        .iter()
        .chain(array(pod, "/spec/containers"));
    for container in containers {
        if let Some(message) = env_blocker(container, namespace, ns) {
            return (
                Some(Blocker::Config {
                    container: container["name"].as_str().unwrap_or_default().to_owned(),
                    message,
                }),
                warnings,
            );
        }
    }
    (None, warnings)
}

fn array<'a>(v: &'a Value, pointer: &str) -> &'a [Value] {
    v.pointer(pointer)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

fn optional(source: &Value) -> bool {
    source.get("optional") == Some(&Value::Bool(true))
}

#[derive(Clone, Copy)]
enum Source {
    Secret,
    ConfigMap,
}

impl Source {
    fn lookup(self, ns: &impl Namespace, name: &str) -> Option<Keys> {
        match self {
            Source::Secret => ns.secret(name),
            Source::ConfigMap => ns.config_map(name),
        }
    }

    fn missing(self, name: &str) -> String {
        match self {
            Source::Secret => format!("secret \"{name}\" not found"),
            Source::ConfigMap => format!("configmap \"{name}\" not found"),
        }
    }

    fn kind(self) -> &'static str {
        match self {
            Source::Secret => "Secret",
            Source::ConfigMap => "ConfigMap",
        }
    }
}

/// A reference to key `key` of `source` `name`, or to the whole object when `key` is None.
fn resolve(
    ns: &impl Namespace,
    namespace: &str,
    source: Source,
    reference: &Value,
    name_field: &str,
    key: Option<&str>,
) -> Option<String> {
    if optional(reference) {
        return None;
    }
    let name = reference[name_field].as_str().unwrap_or_default();
    let Some(keys) = source.lookup(ns, name) else {
        return Some(source.missing(name));
    };
    let key = key?;
    (!keys.contains(key)).then(|| {
        format!(
            "couldn't find key {key} in {} {namespace}/{name}",
            source.kind()
        )
    })
}

fn env_blocker(container: &Value, namespace: &str, ns: &impl Namespace) -> Option<String> {
    for env in array(container, "/env") {
        let from = env.get("valueFrom");
        if let Some(r) = from.and_then(|f| f.get("secretKeyRef"))
            && let Some(m) = resolve(ns, namespace, Source::Secret, r, "name", r["key"].as_str())
        {
            return Some(m);
        }
        if let Some(r) = from.and_then(|f| f.get("configMapKeyRef"))
            && let Some(m) = resolve(
                ns,
                namespace,
                Source::ConfigMap,
                r,
                "name",
                r["key"].as_str(),
            )
        {
            return Some(m);
        }
    }
    for from in array(container, "/envFrom") {
        if let Some(r) = from.get("secretRef")
            && let Some(m) = resolve(ns, namespace, Source::Secret, r, "name", None)
        {
            return Some(m);
        }
        if let Some(r) = from.get("configMapRef")
            && let Some(m) = resolve(ns, namespace, Source::ConfigMap, r, "name", None)
        {
            return Some(m);
        }
    }
    None
}

/// A volume source with optional `items` (each naming a `key`).
fn items_blocker(
    ns: &impl Namespace,
    namespace: &str,
    source: Source,
    reference: &Value,
    name_field: &str,
) -> Option<String> {
    if let Some(missing) = resolve(ns, namespace, source, reference, name_field, None) {
        return Some(missing);
    }
    array(reference, "/items")
        .iter()
        .filter_map(|item| item["key"].as_str())
        .find_map(|key| resolve(ns, namespace, source, reference, name_field, Some(key)))
}

fn volumes_blocker(pod: &Value, ns: &impl Namespace) -> Option<String> {
    let namespace = pod
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let account = pod
        .pointer("/spec/serviceAccountName")
        .and_then(Value::as_str)
        .unwrap_or("default");
    // Every namespace of a real cluster has its "default" ServiceAccount.
    if account != "default" && !ns.service_account(account) {
        return Some(format!(
            "MountVolume.SetUp failed for volume \"kube-api-access\" : serviceaccount \"{account}\" not found"
        ));
    }
    for volume in array(pod, "/spec/volumes") {
        let name = volume["name"].as_str().unwrap_or_default();
        let mut problems = Vec::new();
        if let Some(secret) = volume.get("secret") {
            problems.extend(items_blocker(
                ns,
                namespace,
                Source::Secret,
                secret,
                "secretName",
            ));
        }
        if let Some(map) = volume.get("configMap") {
            problems.extend(items_blocker(ns, namespace, Source::ConfigMap, map, "name"));
        }
        for source in array(volume, "/projected/sources") {
            if let Some(secret) = source.get("secret") {
                problems.extend(items_blocker(ns, namespace, Source::Secret, secret, "name"));
            }
            if let Some(map) = source.get("configMap") {
                problems.extend(items_blocker(ns, namespace, Source::ConfigMap, map, "name"));
            }
        }
        if let Some(problem) = problems.into_iter().next() {
            return Some(format!(
                "MountVolume.SetUp failed for volume \"{name}\" : {problem}"
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::collections::BTreeMap;

    #[derive(Default)]
    struct Fake {
        secrets: BTreeMap<String, Keys>,
        maps: BTreeMap<String, Keys>,
        accounts: BTreeSet<String>,
    }

    impl Namespace for Fake {
        fn secret(&self, name: &str) -> Option<Keys> {
            self.secrets.get(name).cloned()
        }
        fn config_map(&self, name: &str) -> Option<Keys> {
            self.maps.get(name).cloned()
        }
        fn service_account(&self, name: &str) -> bool {
            self.accounts.contains(name)
        }
    }

    fn keys(list: &[&str]) -> Keys {
        list.iter().map(|k| k.to_string()).collect()
    }

    fn pod(spec: Value) -> Value {
        json!({"metadata": {"name": "p", "namespace": "ns"}, "spec": spec})
    }

    #[test]
    fn secret_key_refs_block_until_the_key_exists() {
        let p = pod(json!({"containers": [{"name": "api", "env": [
            {"name": "PW", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}},
            {"name": "OPT", "valueFrom": {"secretKeyRef": {"name": "absent", "key": "k", "optional": true}}}
        ]}]}));
        let mut ns = Fake::default();
        let blocked = |ns: &Fake| check(&p, ns).0;
        assert_eq!(
            blocked(&ns),
            Some(Blocker::Config {
                container: "api".into(),
                message: "secret \"db\" not found".into()
            })
        );
        ns.secrets.insert("db".into(), keys(&["user"]));
        assert_eq!(
            blocked(&ns),
            Some(Blocker::Config {
                container: "api".into(),
                message: "couldn't find key password in Secret ns/db".into()
            })
        );
        ns.secrets.insert("db".into(), keys(&["user", "password"]));
        assert_eq!(blocked(&ns), None);
    }

    #[test]
    fn env_from_and_config_map_refs() {
        let p = pod(json!({"containers": [{"name": "c",
            "env": [{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "conf", "key": "a"}}}],
            "envFrom": [{"secretRef": {"name": "bulk"}}]}]}));
        let mut ns = Fake::default();
        ns.maps.insert("conf".into(), keys(&["a"]));
        let (blocker, _) = check(&p, &ns);
        assert!(
            matches!(blocker, Some(Blocker::Config { message, .. }) if message == "secret \"bulk\" not found")
        );
        ns.secrets.insert("bulk".into(), keys(&[]));
        assert_eq!(check(&p, &ns).0, None);
    }

    #[test]
    fn volumes_service_accounts_and_pull_secrets() {
        let p = pod(json!({
        "serviceAccountName": "cinder",
        "imagePullSecrets": [{"name": "registry"}],
        "containers": [{"name": "c"}],
        "volumes": [
            {"name": "conf", "projected": {"sources": [{"configMap": {"name": "etc", "items": [{"key": "cinder.conf", "path": "cinder.conf"}]}}]}},
            {"name": "certs", "secret": {"secretName": "tls"}}
        ]}));
        let mut ns = Fake::default();
        let mount = |ns: &Fake| match check(&p, ns).0 {
            Some(Blocker::Mount { message }) => message,
            other => panic!("{other:?}"),
        };
        assert!(mount(&ns).contains("serviceaccount \"cinder\" not found"));
        ns.accounts.insert("cinder".into());
        assert_eq!(
            mount(&ns),
            "MountVolume.SetUp failed for volume \"conf\" : configmap \"etc\" not found"
        );
        ns.maps.insert("etc".into(), keys(&["other"]));
        assert!(mount(&ns).contains("couldn't find key cinder.conf in ConfigMap ns/etc"));
        ns.maps.insert("etc".into(), keys(&["cinder.conf"]));
        assert!(mount(&ns).contains("secret \"tls\" not found"));
        ns.secrets.insert("tls".into(), keys(&["tls.crt"]));
        let (blocker, warnings) = check(&p, &ns);
        assert_eq!(blocker, None);
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].contains("(registry)"));
    }
}
