//! The API semantics on top of the store: create (generateName, namespaces must exist), get,
//! list (selectors, pagination), update (optimistic concurrency, status subresource, generation),
//! patch (merge, JSON, strategic, server-side apply), delete (finalizers, propagation policy),
//! deletecollection, and the per-kind rules (CRD registration, schema validation and defaults,
//! Namespace phase, Secret stringData, Service clusterIP).

mod api_services;
mod builtin_rules;
mod defaults;
pub mod disruption;
mod event_views;
pub mod graceful;
pub(crate) mod kinds;
pub mod managed_fields;
pub mod meta;
pub(crate) mod pod_admission;
pub mod service_ips;
pub mod target;
pub mod validation;

pub use target::Target;

use crate::error::ApiError;
use crate::patch::{self, PatchType};
use crate::registry::{Registry, ResourceInfo};
use crate::store::selectors::{FieldSelector, LabelSelector};
use crate::store::{ObjKey, Store, Txn};
use serde_json::{Value, json};

/// Options of a write request.
#[derive(Clone, Debug, Default)]
pub struct WriteOptions {
    pub field_manager: Option<String>,
    pub force: bool,
    pub dry_run: bool,
    pub user_agent: String,
    /// `fieldValidation`: Strict refuses unknown fields of custom resources; Ignore / Warn (and
    /// none) prune them.
    pub field_validation: Option<String>,
}

impl WriteOptions {
    fn strict(&self) -> bool {
        self.field_validation.as_deref() == Some("Strict")
    }

    /// The manager name recorded for an Update operation (fieldManager, else the user agent's
    /// program name, as the real server does).
    fn manager(&self) -> String {
        manager_name(self.field_manager.as_deref(), &self.user_agent)
    }
}

/// The manager a write records: `field_manager` when given, else the program name of
/// `user_agent` (its part before the first `/`), else `unknown`, as the real server names it.
pub(crate) fn manager_name(field_manager: Option<&str>, user_agent: &str) -> String {
    if let Some(m) = field_manager.filter(|m| !m.is_empty()) {
        return m.to_string();
    }
    let ua = user_agent.split('/').next().unwrap_or_default().trim();
    if ua.is_empty() {
        "unknown".to_string()
    } else {
        ua.chars().take(128).collect()
    }
}

/// Options of a delete request.
#[derive(Clone, Debug, Default)]
pub struct DeleteOptions {
    /// Background (default), Foreground or Orphan.
    pub propagation: Option<String>,
    pub precondition_uid: Option<String>,
    pub precondition_rv: Option<String>,
    pub dry_run: bool,
    /// `gracePeriodSeconds` (pods: see [`graceful`]); None = the object's own.
    pub grace_period: Option<i64>,
}

/// A list request.
#[derive(Clone, Debug, Default)]
pub struct ListOptions {
    pub labels: LabelSelector,
    pub fields: FieldSelector,
    pub limit: Option<usize>,
    pub continue_token: Option<String>,
}

/// The outcome of a delete: the object, and whether it is gone (false: finalizers pending).
#[derive(Clone, Debug)]
pub struct Deleted {
    pub object: Value,
    pub gone: bool,
    /// A pod left Terminating for its grace period (answered 200, as a real server does).
    pub graceful: bool,
}

/// Namespaces that exist from the start and cannot be deleted (as on a real server).
pub const PROTECTED_NAMESPACES: &[&str] = &["default", "kube-system", "kube-public"];

/// The API semantics engine (cheap to clone).
#[derive(Clone, Debug)]
pub struct Engine {
    pub store: Store,
    pub registry: Registry,
    /// The range new Services' ClusterIPs come from.
    pub service_cidr: service_ips::ServiceCidr,
}

/// Sets apiVersion and kind as the client asked for them.
pub fn present(info: &ResourceInfo, version: &str, mut obj: Value) -> Value {
    if let Some(m) = obj.as_object_mut() {
        m.insert("apiVersion".into(), json!(info.api_version(version)));
        m.insert("kind".into(), json!(info.kind));
    }
    obj
}

fn check_type(t: &Target, body: &Value) -> Result<(), ApiError> {
    if !body.is_object() {
        return Err(ApiError::bad_request("the body must be a JSON object"));
    }
    if let Some(kind) = body.get("kind")
        && kind.as_str() != Some(t.info.kind.as_str())
    {
        return Err(ApiError::bad_request(format!(
            "the kind of the provided object ({}) does not match the resource {} (expected {})",
            kind, t.info.resource, t.info.kind
        )));
    }
    if let Some(av) = body.get("apiVersion") {
        let group = av
            .as_str()
            .map(|s| s.rsplit_once('/').map(|(g, _)| g).unwrap_or(""));
        if group != Some(t.info.group.as_str()) {
            return Err(ApiError::bad_request(format!(
                "the apiVersion of the provided object ({av}) does not belong to group {:?}",
                t.info.group
            )));
        }
    }
    Ok(())
}

fn rv_of(obj: &Value) -> Option<&str> {
    meta::meta_str(obj, "resourceVersion").filter(|s| !s.is_empty())
}

impl Engine {
    /// An engine over a fresh store with the built-in kinds and the default namespaces.
    pub fn new(history: usize) -> Engine {
        Engine::with_service_cidr(history, service_ips::DEFAULT_SERVICE_CIDR)
    }

    /// An engine as [`Engine::new`] makes it whose Services get ClusterIPs from `service_cidr`.
    pub fn with_service_cidr(history: usize, service_cidr: service_ips::ServiceCidr) -> Engine {
        let engine = Engine {
            store: Store::new(history),
            registry: Registry::with_builtins(),
            service_cidr,
        };
        engine.store.transact(|txn| {
            for ns in PROTECTED_NAMESPACES {
                let obj = json!({
                    "apiVersion": "v1", "kind": "Namespace",
                    "metadata": {"name": ns, "uid": uuid::Uuid::new_v4().to_string(),
                                 "creationTimestamp": meta::now(), "labels": {"kubernetes.io/metadata.name": ns}},
                    "spec": {"finalizers": ["kubernetes"]},
                    "status": {"phase": "Active"}
                });
                txn.put(ObjKey::new("", "namespaces", "", ns), obj);
            }
            api_services::put_local(txn, &engine.registry);
        });
        engine
    }

    /// GET one object.
    pub fn get(&self, t: &Target) -> Result<Value, ApiError> {
        let obj = self
            .store
            .get(&t.info.group, &t.info.resource, &t.namespace, &t.name)
            .ok_or_else(|| ApiError::not_found(&t.info.group, &t.info.resource, &t.name))?;
        Ok(present(&t.info, &t.version, obj))
    }

    /// LIST objects: `(items, resourceVersion, continue token, remaining)`.
    pub fn list(
        &self,
        t: &Target,
        opts: &ListOptions,
    ) -> Result<(Vec<Value>, u64, Option<String>, usize), ApiError> {
        let ns = if t.namespace.is_empty() {
            None
        } else {
            Some(t.namespace.as_str())
        };
        let (token_rv, offset) = match &opts.continue_token {
            Some(tok) if !tok.is_empty() => {
                let (r, o) = tok
                    .split_once(':')
                    .ok_or_else(|| ApiError::bad_request("invalid continue token"))?;
                let r: u64 = r
                    .parse()
                    .map_err(|_| ApiError::bad_request("invalid continue token"))?;
                let o: usize = o
                    .parse()
                    .map_err(|_| ApiError::bad_request("invalid continue token"))?;
                (Some(r), o)
            }
            _ => (None, 0),
        };
        let selection = self.store.select(
            &t.info.group,
            &t.info.resource,
            ns,
            |o| opts.labels.matches(o) && opts.fields.matches(o),
            offset,
            opts.limit.filter(|l| *l > 0),
        );
        let rv = token_rv.unwrap_or(selection.rv);
        let total = selection.total;
        let page: Vec<Value> = selection
            .items
            .into_iter()
            .map(|o| present(&t.info, &t.version, o))
            .collect();
        let next = offset + page.len();
        if next < total {
            Ok((page, rv, Some(format!("{rv}:{next}")), total - next))
        } else {
            Ok((page, rv, None, 0))
        }
    }

    /// POST a new object.
    pub fn create(&self, t: &Target, body: Value, opts: &WriteOptions) -> Result<Value, ApiError> {
        check_type(t, &body)?;
        let obj = self.prepare_create(t, body)?;
        self.store
            .transact(|txn| self.insert(txn, t, obj, opts, true))
    }

    fn prepare_create(&self, t: &Target, mut body: Value) -> Result<Value, ApiError> {
        let namespaced = t.info.namespaced;
        let meta = meta::meta_mut(&mut body)?;
        if namespaced {
            match meta.get("namespace").and_then(Value::as_str) {
                Some(ns) if !ns.is_empty() && ns != t.namespace => {
                    return Err(ApiError::bad_request(
                        "the namespace of the provided object does not match the namespace sent on the request",
                    ));
                }
                _ => {
                    meta.insert("namespace".into(), json!(t.namespace));
                }
            }
        } else {
            meta.remove("namespace");
        }
        let name = meta
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if name.is_empty() {
            let generate = meta
                .get("generateName")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            if generate.is_empty() {
                return Err(ApiError::invalid(
                    &t.info.group,
                    &t.info.kind,
                    "",
                    vec![crate::error::Cause::new(
                        "FieldValueRequired",
                        "metadata.name",
                        "Required value: name or generateName is required",
                    )],
                ));
            }
            meta.insert(
                "name".into(),
                json!(validation::generated_name(
                    &generate,
                    &meta::random_suffix()
                )),
            );
        }
        meta.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
        meta.insert("creationTimestamp".into(), json!(meta::now()));
        if t.info.tracks_generation() {
            meta.insert("generation".into(), json!(1));
        } else {
            meta.remove("generation");
        }
        for k in [
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "resourceVersion",
            "selfLink",
        ] {
            meta.remove(k);
        }
        if t.info.has_status
            && let Some(m) = body.as_object_mut()
        {
            // a built-in kind's status is a struct: a new object reads back `status: {}`
            if t.info.crd.is_none() {
                m.insert("status".into(), json!({}));
            } else {
                m.remove("status");
            }
        }
        Ok(present(&t.info, &t.version, body))
    }

    /// Stores a prepared new object (namespace must exist; name must be free).
    fn insert(
        &self,
        txn: &mut Txn<'_>,
        t: &Target,
        mut obj: Value,
        opts: &WriteOptions,
        record: bool,
    ) -> Result<Value, ApiError> {
        let name = meta::meta_str(&obj, "name").unwrap_or_default().to_string();
        // The writer owns what it sent and what defaulting filled in, not what the server's
        // strategy sets at creation (status, allocated IPs, generated selectors).
        let credited = match (&t.info.crd, record) {
            (None, true) => {
                let mut credited = obj.clone();
                if t.info.has_status
                    && let Some(m) = credited.as_object_mut()
                {
                    m.remove("status");
                }
                kinds::defaulted(&t.info, None, &mut credited)?;
                Some(credited)
            }
            _ => None,
        };
        kinds::on_write(
            &self.registry,
            t,
            None,
            &mut obj,
            txn,
            &self.service_cidr,
            opts.strict(),
        )?;
        validation::validate_meta(&obj, &t.info.kind, &t.info.group, t.name_rule())?;
        if t.info.namespaced {
            let ns_key = ObjKey::new("", "namespaces", "", &t.namespace);
            match txn.get(&ns_key) {
                None => return Err(ApiError::not_found("", "namespaces", &t.namespace)),
                Some(ns) if ns.pointer("/metadata/deletionTimestamp").is_some() => {
                    return Err(ApiError::forbidden(
                        &t.info.group,
                        &t.info.resource,
                        &name,
                        &format!(
                            "unable to create new content in namespace {} because it is being terminated",
                            t.namespace
                        ),
                    ));
                }
                Some(_) => {}
            }
        }
        let key = ObjKey::new(&t.info.group, &t.info.resource, &t.namespace, &name);
        if txn.get(&key).is_some() {
            return Err(ApiError::already_exists(
                &t.info.group,
                &t.info.resource,
                &name,
            ));
        }
        if record {
            let mut recorded = credited.unwrap_or_else(|| obj.clone());
            managed_fields::record_update(
                None,
                &mut recorded,
                &opts.manager(),
                &t.api_version(),
                "",
                &meta::now(),
            );
            match recorded.pointer("/metadata/managedFields") {
                Some(entries) => obj["metadata"]["managedFields"] = entries.clone(),
                None => {
                    if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
                        m.remove("managedFields");
                    }
                }
            }
        }
        managed_fields::encode_as_server(&mut obj, t.info.crd.is_some());
        if opts.dry_run {
            return Ok(obj);
        }
        let stored = txn.put(key, obj);
        kinds::after_write(&self.registry, txn, t, &stored)?;
        Ok(present(&t.info, &t.version, stored))
    }

    /// PUT: replace an object (or its status).
    pub fn update(&self, t: &Target, body: Value, opts: &WriteOptions) -> Result<Value, ApiError> {
        check_type(t, &body)?;
        if let Some(name) = meta::meta_str(&body, "name").filter(|n| !n.is_empty() && *n != t.name)
        {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({name}) does not match the name on the URL ({})",
                t.name
            )));
        }
        if let Some(ns) = meta::meta_str(&body, "namespace")
            .filter(|n| !n.is_empty() && t.info.namespaced && *n != t.namespace)
        {
            return Err(ApiError::bad_request(format!(
                "the namespace of the object ({ns}) does not match the namespace on the URL ({})",
                t.namespace
            )));
        }
        self.store.transact(|txn| {
            let old = txn
                .get(&t.key())
                .cloned()
                .ok_or_else(|| ApiError::not_found(&t.info.group, &t.info.resource, &t.name))?;
            if let Some(rv) = rv_of(&body)
                && Some(rv) != rv_of(&old) {
                    return Err(ApiError::conflict(
                        &t.info.group,
                        &t.info.resource,
                        &t.name,
                        "the object has been modified; please apply your changes to the latest version and try again",
                    ));
                }
            self.commit_update(txn, t, &old, body, opts, true)
        })
    }

    /// Writes `new` over `old` with the server's rules; removes the object when a deletion
    /// waits for no more finalizers.
    fn commit_update(
        &self,
        txn: &mut Txn<'_>,
        t: &Target,
        old: &Value,
        mut new: Value,
        opts: &WriteOptions,
        record: bool,
    ) -> Result<Value, ApiError> {
        if !new.is_object() {
            return Err(ApiError::bad_request("the object must be a JSON object"));
        }
        let status_write = t.subresource == "status";
        if status_write {
            let mut merged = old.clone();
            if let Some(m) = merged.as_object_mut() {
                match new.get("status") {
                    Some(s) if !s.is_null() => {
                        m.insert("status".into(), s.clone());
                    }
                    _ => {
                        m.remove("status");
                    }
                }
            }
            // a Deployment's status strategy keeps its spec and labels, not its annotations
            // (kube-controller-manager writes the revision annotation with the status)
            if (t.info.group.as_str(), t.info.resource.as_str()) == ("apps", "deployments") {
                match new.pointer("/metadata/annotations") {
                    Some(a) => merged["metadata"]["annotations"] = a.clone(),
                    None => {
                        if let Some(m) = merged.get_mut("metadata").and_then(Value::as_object_mut) {
                            m.remove("annotations");
                        }
                    }
                }
            }
            // keep the managedFields an apply computed
            if !record && let Some(mf) = new.pointer("/metadata/managedFields") {
                merged["metadata"]["managedFields"] = mf.clone();
            }
            new = merged;
        } else {
            let old_meta = old.get("metadata").cloned().unwrap_or(json!({}));
            let meta = meta::meta_mut(&mut new)?;
            for k in [
                "uid",
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "generation",
                "namespace",
                "name",
            ] {
                match old_meta.get(k) {
                    Some(v) => {
                        meta.insert(k.into(), v.clone());
                    }
                    None => {
                        meta.remove(k);
                    }
                }
            }
            if !meta.contains_key("managedFields")
                && let Some(mf) = old_meta.get("managedFields")
            {
                meta.insert("managedFields".into(), mf.clone());
            }
            if t.info.has_status
                && let Some(m) = new.as_object_mut()
            {
                match old.get("status") {
                    Some(s) => {
                        m.insert("status".into(), s.clone());
                    }
                    None => {
                        m.remove("status");
                    }
                }
            }
        }
        new = present(&t.info, &t.version, new);
        kinds::on_write(
            &self.registry,
            t,
            Some(old),
            &mut new,
            txn,
            &self.service_cidr,
            opts.strict(),
        )?;
        validation::validate_meta(&new, &t.info.kind, &t.info.group, t.name_rule())?;
        let old_gen = old
            .pointer("/metadata/generation")
            .and_then(Value::as_i64)
            .unwrap_or(1);
        if t.info.tracks_generation() && meta::spec_changed(old, &new) {
            new["metadata"]["generation"] = json!(old_gen + 1);
        }
        if record {
            managed_fields::record_update(
                Some(old),
                &mut new,
                &opts.manager(),
                &t.api_version(),
                &t.subresource,
                &meta::now(),
            );
        }
        managed_fields::encode_as_server(&mut new, t.info.crd.is_some());
        let key = t.key();
        if old.pointer("/metadata/deletionTimestamp").is_some()
            && meta::finalizers(&new).is_empty()
            && !t.info.is(crate::groups::CORE, "namespaces")
        {
            if opts.dry_run {
                return Ok(new);
            }
            txn.put(key.clone(), new);
            let gone = txn.remove(&key).unwrap_or(Value::Null);
            kinds::after_delete(&self.registry, txn, t, &gone);
            return Ok(present(&t.info, &t.version, gone));
        }
        if meta::comparable(old) == meta::comparable(&new) {
            return Ok(present(&t.info, &t.version, old.clone()));
        }
        if opts.dry_run {
            return Ok(new);
        }
        let stored = txn.put(key, new);
        kinds::after_write(&self.registry, txn, t, &stored)?;
        Ok(present(&t.info, &t.version, stored))
    }

    /// PATCH an object (or its status) with one of the four patch types.
    pub fn patch(
        &self,
        t: &Target,
        ptype: PatchType,
        body: &[u8],
        opts: &WriteOptions,
    ) -> Result<Value, ApiError> {
        self.store.transact(|txn| {
            let old = txn.get(&t.key()).cloned();
            if ptype == PatchType::Apply {
                return self.apply(txn, t, old, body, opts);
            }
            let old = old.ok_or_else(|| ApiError::not_found(&t.info.group, &t.info.resource, &t.name))?;
            let patched = patch::apply_patch(ptype, &old, body, t.info.crd.is_some())?;
            if let Some(rv) = rv_of(&patched)
                && Some(rv) != rv_of(&old) {
                    return Err(ApiError::conflict(
                        &t.info.group,
                        &t.info.resource,
                        &t.name,
                        "the object has been modified; please apply your changes to the latest version and try again",
                    ));
                }
            if let Some(name) = meta::meta_str(&patched, "name")
                && name != t.name {
                    return Err(ApiError::bad_request("metadata.name cannot be changed by a patch"));
                }
            self.commit_update(txn, t, &old, patched, opts, true)
        })
    }

    fn apply(
        &self,
        txn: &mut Txn<'_>,
        t: &Target,
        old: Option<Value>,
        body: &[u8],
        opts: &WriteOptions,
    ) -> Result<Value, ApiError> {
        let manager = opts
            .field_manager
            .clone()
            .filter(|m| !m.is_empty())
            .ok_or_else(|| {
                ApiError::bad_request(
                    "PATCH, application/apply-patch+yaml requires fieldManager parameter",
                )
            })?;
        let mut applied = patch::parse_yaml_or_json(body)?;
        check_type(t, &applied)?;
        if applied.get("apiVersion").is_none() || applied.get("kind").is_none() {
            return Err(ApiError::bad_request(
                "apiVersion and kind must be set in an apply configuration",
            ));
        }
        if let Some(name) = meta::meta_str(&applied, "name").filter(|n| *n != t.name) {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({name}) does not match the name on the URL ({})",
                t.name
            )));
        }
        if let (Some(rv), Some(old)) = (rv_of(&applied), old.as_ref())
            && Some(rv) != rv_of(old)
        {
            return Err(ApiError::conflict(
                &t.info.group,
                &t.info.resource,
                &t.name,
                "the object has been modified; please apply your changes to the latest version and try again",
            ));
        }
        if let Some(m) = applied.get_mut("metadata").and_then(Value::as_object_mut) {
            m.remove("resourceVersion");
            m.remove("managedFields");
        }
        if t.subresource == "status" {
            applied = json!({"status": applied.get("status").cloned().unwrap_or(json!({}))});
        } else if t.info.has_status
            && let Some(m) = applied.as_object_mut()
        {
            m.remove("status");
        }
        let now = meta::now();
        let sub = t.subresource.as_str();
        match old {
            None => {
                if !t.subresource.is_empty() {
                    return Err(ApiError::not_found(
                        &t.info.group,
                        &t.info.resource,
                        &t.name,
                    ));
                }
                let merged = managed_fields::apply(
                    None,
                    &applied,
                    &manager,
                    opts.force,
                    &t.api_version(),
                    sub,
                    &now,
                )
                .map_err(ApiError::apply_conflict)?;
                let mut obj = merged;
                obj["metadata"]["name"] = json!(t.name);
                let obj = self.prepare_create(t, obj)?;
                self.insert(txn, t, obj, opts, false)
            }
            Some(old) => {
                let merged = managed_fields::apply(
                    Some(&old),
                    &applied,
                    &manager,
                    opts.force,
                    &t.api_version(),
                    sub,
                    &now,
                )
                .map_err(ApiError::apply_conflict)?;
                self.commit_update(txn, t, &old, merged, opts, false)
            }
        }
    }

    /// DELETE one object.
    pub fn delete(&self, t: &Target, opts: &DeleteOptions) -> Result<Deleted, ApiError> {
        if t.info.is(crate::groups::CORE, "namespaces")
            && PROTECTED_NAMESPACES.contains(&t.name.as_str())
        {
            return Err(ApiError::forbidden(
                "",
                "namespaces",
                &t.name,
                "this namespace may not be deleted",
            ));
        }
        let out = self.store.transact(|txn| {
            let old = txn
                .get(&t.key())
                .cloned()
                .ok_or_else(|| ApiError::not_found(&t.info.group, &t.info.resource, &t.name))?;
            if let Some(uid) = &opts.precondition_uid {
                let actual = meta::meta_str(&old, "uid").unwrap_or_default();
                if uid != actual {
                    return Err(ApiError::conflict(
                        &t.info.group,
                        &t.info.resource,
                        &t.name,
                        &format!("Precondition failed: UID in precondition: {uid}, UID in object meta: {actual}"),
                    ));
                }
            }
            if let Some(rv) = &opts.precondition_rv
                && Some(rv.as_str()) != rv_of(&old) {
                    return Err(ApiError::conflict(
                        &t.info.group,
                        &t.info.resource,
                        &t.name,
                        "Precondition failed: the object has been modified",
                    ));
                }
            if opts.dry_run {
                return Ok(Deleted { object: present(&t.info, &t.version, old), gone: true, graceful: false });
            }
            Ok(self.delete_in(txn, t, &old, opts.propagation.as_deref(), opts.grace_period))
        })?;
        Ok(out)
    }

    /// Deletes inside a transaction: finalizers (and Foreground / Orphan propagation) leave the
    /// object with a deletionTimestamp, and so does a pod's grace period (`grace`: the
    /// request's `gracePeriodSeconds`); otherwise it goes at once.
    pub(crate) fn delete_in(
        &self,
        txn: &mut Txn<'_>,
        t: &Target,
        old: &Value,
        propagation: Option<&str>,
        grace: Option<i64>,
    ) -> Deleted {
        let key = ObjKey::new(
            &t.info.group,
            &t.info.resource,
            &t.namespace,
            meta::meta_str(old, "name").unwrap_or_default(),
        );
        let mut fins = meta::finalizers(old);
        let deleting = old.pointer("/metadata/deletionTimestamp").is_some();
        let extra = match propagation {
            Some("Foreground") => Some("foregroundDeletion"),
            Some("Orphan") => Some("orphan"),
            _ => None,
        };
        if let Some(f) = extra
            && !fins.iter().any(|x| x == f)
        {
            fins.push(f.to_string());
        }
        let is_namespace = t.info.is(crate::groups::CORE, "namespaces");
        let grace = if t.info.is(crate::groups::CORE, "pods") {
            graceful::grace_seconds(old, grace)
        } else {
            0
        };
        if grace > 0 {
            let started = graceful::begin(old, grace, chrono::Utc::now());
            if started.is_none() && meta::finalizers(old) == fins {
                return Deleted {
                    object: present(&t.info, &t.version, old.clone()),
                    gone: false,
                    graceful: true,
                };
            }
            let mut new = started.unwrap_or_else(|| old.clone());
            meta::set_finalizers(&mut new, &fins);
            let stored = txn.put(key, new);
            return Deleted {
                object: present(&t.info, &t.version, stored),
                gone: false,
                graceful: true,
            };
        }
        if fins.is_empty() && !is_namespace {
            let gone = txn.remove(&key).unwrap_or(Value::Null);
            kinds::after_delete(&self.registry, txn, t, &gone);
            return Deleted {
                object: present(&t.info, &t.version, gone),
                gone: true,
                graceful: false,
            };
        }
        if deleting && meta::finalizers(old) == fins {
            // a pod's kubelet ends the grace period early: the pod waits for its finalizers only
            if t.info.is(crate::groups::CORE, "pods")
                && old
                    .pointer("/metadata/deletionGracePeriodSeconds")
                    .and_then(Value::as_i64)
                    .is_some_and(|g| g > 0)
            {
                let mut new = old.clone();
                new["metadata"]["deletionGracePeriodSeconds"] = json!(0);
                let stored = txn.put(key, new);
                return Deleted {
                    object: present(&t.info, &t.version, stored),
                    gone: false,
                    graceful: false,
                };
            }
            return Deleted {
                object: present(&t.info, &t.version, old.clone()),
                gone: false,
                graceful: false,
            };
        }
        let mut new = old.clone();
        meta::set_finalizers(&mut new, &fins);
        if !deleting {
            new["metadata"]["deletionTimestamp"] = json!(meta::now());
            new["metadata"]["deletionGracePeriodSeconds"] = json!(0);
        }
        if is_namespace {
            new["status"] = json!({"phase": "Terminating"});
        }
        let stored = txn.put(key, new);
        Deleted {
            object: present(&t.info, &t.version, stored),
            gone: false,
            graceful: false,
        }
    }

    /// DELETE a collection: every matching object, as single deletes.
    pub fn delete_collection(
        &self,
        t: &Target,
        list: &ListOptions,
        opts: &DeleteOptions,
    ) -> Result<Vec<Value>, ApiError> {
        let ns = if t.namespace.is_empty() {
            None
        } else {
            Some(t.namespace.clone())
        };
        let out = self.store.transact(|txn| {
            let items: Vec<(ObjKey, Value)> = txn
                .list(&t.info.group, &t.info.resource, ns.as_deref())
                .filter(|(_, obj)| list.labels.matches(obj) && list.fields.matches(obj))
                .map(|(key, obj)| (key.clone(), obj.clone()))
                .collect();
            let mut out = Vec::new();
            for (key, obj) in items {
                if opts.dry_run {
                    out.push(present(&t.info, &t.version, obj));
                    continue;
                }
                let one = Target {
                    namespace: key.namespace.clone(),
                    name: key.name.clone(),
                    ..t.clone()
                };
                out.push(
                    self.delete_in(
                        txn,
                        &one,
                        &obj,
                        opts.propagation.as_deref(),
                        opts.grace_period,
                    )
                    .object,
                );
            }
            out
        });
        Ok(out)
    }
}
