//! The usual fixtures: the namespace and the CRDs, the store, the credential Secrets, a Cinder,
//! backends, and reads of the Secrets the operator writes.

use crate::test_env::NS;
use crate::waiting::eventually;
use cinder_operator::crd::{Cinder, CinderBackend, CinderBackupBackend};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};

/// Creates the namespace `name` (an existing one is fine).
pub async fn create_namespace(client: &Client, name: &str) -> anyhow::Result<()> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            ..Default::default()
        },
        ..Default::default()
    };
    match namespaces.create(&PostParams::default(), &ns).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Installs the three CRDs and waits until the API serves them.
pub async fn install_crds(client: &Client) -> anyhow::Result<()> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in cinder_operator::crd::crds() {
        match crds.create(&PostParams::default(), &crd).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => return Err(e.into()),
        }
    }
    let cinders: Api<Cinder> = Api::all(client.clone());
    let backends: Api<CinderBackend> = Api::all(client.clone());
    let backups: Api<CinderBackupBackend> = Api::all(client.clone());
    eventually("the CRDs are served", || {
        let (c, b, bb) = (cinders.clone(), backends.clone(), backups.clone());
        async move {
            let ok = c.list(&ListParams::default()).await.is_ok()
                && b.list(&ListParams::default()).await.is_ok()
                && bb.list(&ListParams::default()).await.is_ok();
            ok.then_some(())
        }
    })
    .await
}

/// Values of the credential Secrets a fixture Cinder uses (unique per call, so a test can
/// grep for them).
#[derive(Clone, Debug)]
pub struct Credentials {
    pub db_password: String,
    pub service_password: String,
    pub rabbit_password: String,
}

impl Credentials {
    pub fn fresh(tag: &str) -> Self {
        let id = format!("{tag}{}", std::process::id());
        Credentials {
            db_password: format!("dbpw-{id}-Zq8xW"),
            service_password: format!("svcpw-{id}-Kp3vR"),
            rabbit_password: format!("mqpw-{id}-Tj5nY"),
        }
    }
    /// Every value a test must never see outside a Secret.
    pub fn values(&self) -> Vec<String> {
        vec![
            self.db_password.clone(),
            self.service_password.clone(),
            self.rabbit_password.clone(),
        ]
    }
}

/// Creates or replaces Secret `name` in [`NS`] with string `data`.
pub async fn put_secret(client: &Client, name: &str, data: &[(&str, &str)]) -> anyhow::Result<()> {
    let api: Api<Secret> = Api::namespaced(client.clone(), NS);
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(NS.to_string()),
            ..Default::default()
        },
        data: Some(
            data.iter()
                .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
                .collect(),
        ),
        ..Default::default()
    };
    let patch = serde_json::json!({ "data": secret.data });
    match api.get_opt(name).await? {
        None => {
            api.create(&PostParams::default(), &secret).await?;
        }
        Some(_) => {
            api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
        }
    }
    Ok(())
}

/// The ClusterSecretStore `openbao-cluster-store` (the simulated external-secrets validates it).
pub async fn create_cluster_store(client: &Client) -> anyhow::Result<()> {
    create_store(client, "ClusterSecretStore", None, "openbao-cluster-store").await
}

/// A SecretStore / ClusterSecretStore named `name`.
pub async fn create_store(
    client: &Client,
    kind: &str,
    namespace: Option<&str>,
    name: &str,
) -> anyhow::Result<()> {
    let (plural, ar_kind) = match kind {
        "ClusterSecretStore" => ("clustersecretstores", "ClusterSecretStore"),
        _ => ("secretstores", "SecretStore"),
    };
    let ar = kube::api::ApiResource::from_gvk_with_plural(
        &kube::core::GroupVersionKind::gvk("external-secrets.io", "v1", ar_kind),
        plural,
    );
    let api: Api<DynamicObject> = match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    };
    let mut obj = DynamicObject::new(name, &ar).data(serde_json::json!({
        "spec": {"provider": {"vault": {"server": "http://openbao:8200", "path": "secret", "auth": {}}}}
    }));
    obj.metadata.namespace = namespace.map(str::to_string);
    api.create(&PostParams::default(), &obj).await?;
    Ok(())
}

/// The credential Secrets `cinder-db`, `cinder-keystone`, `cinder-rabbit` with `creds`.
pub async fn create_credentials(client: &Client, creds: &Credentials) -> anyhow::Result<()> {
    put_secret(
        client,
        "cinder-db",
        &[("username", "cinder"), ("password", &creds.db_password)],
    )
    .await?;
    put_secret(
        client,
        "cinder-keystone",
        &[("password", &creds.service_password)],
    )
    .await?;
    put_secret(
        client,
        "cinder-rabbit",
        &[
            ("username", "cinder"),
            ("password", &creds.rabbit_password),
            ("host", "rabbitmq.cinder-e2e.svc"),
        ],
    )
    .await
}

/// A Cinder spec (JSON) using the fixture Secrets; `extra` is merged into `spec`.
pub fn cinder_json(name: &str, extra: serde_json::Value) -> serde_json::Value {
    let mut spec = serde_json::json!({
        "openStackRelease": "2026.1",
        "image": {"repository": "registry.example/cinder", "tag": "2026.1"},
        "database": {"clusterRef": {"name": "mariadb"}, "secretRef": {"name": "cinder-db"}},
        "messaging": {"secretRef": {"name": "cinder-rabbit"}},
        "serviceUser": {"secretRef": {"name": "cinder-keystone"}},
        "keystoneEndpoint": "http://keystone.cinder-e2e.svc:5000"
    });
    if let (Some(s), Some(e)) = (spec.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            s.insert(k.clone(), v.clone());
        }
    }
    serde_json::json!({
        "apiVersion": "cinder.openstack.c5c3.io/v1alpha1",
        "kind": "Cinder",
        "metadata": {"name": name, "namespace": NS},
        "spec": spec
    })
}

/// Creates a Cinder from [`cinder_json`].
pub async fn create_cinder(
    client: &Client,
    name: &str,
    extra: serde_json::Value,
) -> Result<Cinder, kube::Error> {
    let api: Api<Cinder> = Api::namespaced(client.clone(), NS);
    let cinder: Cinder =
        serde_json::from_value(cinder_json(name, extra)).map_err(kube::Error::SerdeError)?;
    api.create(&PostParams::default(), &cinder).await
}

/// Creates an object of kind `K` from raw JSON (so invalid specs reach the API server).
pub async fn create_raw<K>(client: &Client, body: serde_json::Value) -> Result<K, kube::Error>
where
    K: kube::Resource<Scope = kube::core::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + serde::Serialize,
{
    let ar = kube::api::ApiResource::erase::<K>(&());
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), NS, &ar);
    let obj: DynamicObject = serde_json::from_value(body).map_err(kube::Error::SerdeError)?;
    let created = api.create(&PostParams::default(), &obj).await?;
    let v = serde_json::to_value(created).map_err(kube::Error::SerdeError)?;
    serde_json::from_value(v).map_err(kube::Error::SerdeError)
}

/// An RBD CinderBackend `name` of Cinder `parent` whose key is in Secret `key_secret`.
pub async fn create_rbd_backend(
    client: &Client,
    name: &str,
    parent: &str,
    key_secret: &str,
) -> Result<CinderBackend, kube::Error> {
    create_raw(
        client,
        serde_json::json!({
            "apiVersion": "cinder.openstack.c5c3.io/v1alpha1",
            "kind": "CinderBackend",
            "metadata": {"name": name, "namespace": NS},
            "spec": {
                "cinderRef": {"name": parent},
                "type": "RBD",
                "rbd": {"pool": "volumes", "user": "cinder", "monitors": ["10.0.0.1:6789"], "keySecretRef": {"name": key_secret}}
            }
        }),
    )
    .await
}

/// An NFS CinderBackend `name` of Cinder `parent`.
pub async fn create_nfs_backend(
    client: &Client,
    name: &str,
    parent: &str,
) -> Result<CinderBackend, kube::Error> {
    create_raw(
        client,
        serde_json::json!({
            "apiVersion": "cinder.openstack.c5c3.io/v1alpha1",
            "kind": "CinderBackend",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"cinderRef": {"name": parent}, "type": "NFS", "nfs": {"server": "nfs.example", "path": "/exports/cinder"}}
        }),
    )
    .await
}

/// The names of Secrets in [`NS`] matching `selector`, sorted.
pub async fn secret_names(client: &Client, selector: &str) -> Vec<String> {
    let api: Api<Secret> = Api::namespaced(client.clone(), NS);
    let mut names: Vec<String> = api
        .list(&ListParams::default().labels(selector))
        .await
        .map(|l| {
            l.items
                .into_iter()
                .filter_map(|s| s.metadata.name)
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// The value of `key` in Secret `name`, if present.
pub async fn secret_value(client: &Client, name: &str, key: &str) -> Option<String> {
    let api: Api<Secret> = Api::namespaced(client.clone(), NS);
    let s = api.get_opt(name).await.ok().flatten()?;
    let v = s.data?.get(key)?.0.clone();
    String::from_utf8(v).ok()
}

/// sha256 hex of `value`.
pub fn sha256_hex(value: &str) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(value.as_bytes()))
}
