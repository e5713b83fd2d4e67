//! The Cinder's deletion: under the
//! `cinder.openstack.c5c3.io/finalizer`, Delete is issued on the Cinder's MariaDB Database, User
//! and Grant (only the objects this Cinder owns, by owner reference UID or ownership label), and
//! the finalizer stays while any of them is still live. Every other child goes by owner-reference
//! garbage collection on the management cluster, or by the ownership label on a target cluster
//! (see [`crate::target_cluster`]).

use crate::crd::Cinder;
use crate::kube_ext::ApiErrorExt;
use crate::kube_ext::delete_if_present;
use crate::kube_ext::ownership::{OWNER_LABEL, owner_value};
use crate::kube_ext::reader::ClusterStores;
use crate::steps::database::provisioning::{SqlKind, sql_object_name};
use kube::api::{DeleteParams, DynamicObject};
use kube::{Api, Client, ResourceExt};

/// Whether `obj` belongs to the Cinder with `uid` and ownership label value `owner`: an owner
/// reference with the Cinder's UID, or the ownership label (children projected without owner
/// references).
pub(crate) fn owned_by(obj: &DynamicObject, uid: Option<&str>, owner: &str) -> bool {
    let by_ref = obj
        .owner_references()
        .iter()
        .any(|o| Some(o.uid.as_str()) == uid);
    let by_label = obj.labels().get(OWNER_LABEL).map(String::as_str) == Some(owner);
    by_ref || by_label
}

/// Issues Delete on the Cinder's Database, User and Grant and returns the ones still live
/// (`Kind/name`, in Database, User, Grant order). A kind whose CRD is not installed counts as
/// gone; an object of the same name that the Cinder does not own is left alone.
pub(crate) async fn delete_database_objects(
    client: &Client,
    reads: &ClusterStores,
    cinder: &Cinder,
) -> Result<Vec<String>, kube::Error> {
    let ns = cinder.namespace().unwrap_or_default();
    let name = sql_object_name(&cinder.name_any());
    let owner = owner_value(&ns, &cinder.name_any());
    let mut live = Vec::new();
    for kind in SqlKind::ALL {
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &kind.resource());
        let found = match reads.get_opt(&api, &name).await {
            Ok(found) => found,
            // The mariadb-operator CRDs are not installed: nothing to clean up.
            Err(e) if e.is_not_found() => None,
            Err(e) => return Err(e),
        };
        let Some(obj) = found else { continue };
        if !owned_by(&obj, cinder.metadata.uid.as_deref(), &owner) {
            continue;
        }
        if obj.metadata.deletion_timestamp.is_none()
            && !delete_if_present(&api, &name, &DeleteParams::background()).await?
        {
            continue;
        }
        live.push(format!("{}/{name}", kind.as_str()));
    }
    Ok(live)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
    use kube::api::ApiResource;

    fn object() -> DynamicObject {
        DynamicObject::new("c1", &ApiResource::erase::<Cinder>(&()))
    }

    #[test]
    fn ownership_by_uid_or_label_only() {
        let mut o = object();
        assert!(!owned_by(&o, Some("u-1"), "ns.c1"));
        o.metadata.owner_references = Some(vec![OwnerReference {
            uid: "other".into(),
            ..Default::default()
        }]);
        assert!(!owned_by(&o, Some("u-1"), "ns.c1"));
        o.metadata.owner_references = Some(vec![OwnerReference {
            uid: "u-1".into(),
            ..Default::default()
        }]);
        assert!(owned_by(&o, Some("u-1"), "ns.c1"));
        let mut o = object();
        o.labels_mut().insert(OWNER_LABEL.into(), "ns.c1".into());
        assert!(owned_by(&o, Some("u-1"), "ns.c1"));
        o.labels_mut().insert(OWNER_LABEL.into(), "ns.c2".into());
        assert!(!owned_by(&o, Some("u-1"), "ns.c1"));
    }
}
