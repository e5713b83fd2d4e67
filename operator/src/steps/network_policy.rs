//! The NetworkPolicy member of the parallel group (NetworkPolicyReady): with
//! `spec.networkPolicy` set, the policy derived by [`crate::planning::network_policy`] (ingress
//! as given, egress derived from the lane's artefacts) is applied server-side as `{name}`,
//! selecting the Cinder's pods; unset, an existing policy is deleted (NetworkPolicyNotRequired).
//! An empty ingress list is refused fail-closed: nothing is applied (a policy already there is
//! left as it was), the condition is False with reason `EmptyIngress` and the step returns an
//! error. The same holds while the broker port is not resolved yet (reason
//! `BrokerPortUnknown`). API errors propagate.

use crate::children::child_meta;
use crate::children::{NotRequired, remove_unwanted};
use crate::conditions::{Cond, kind, reason};
use crate::context::OperatorContext;
use crate::crd::Cinder;
use crate::kube_ext::apply;
use crate::names;
use crate::pipeline::{Artefacts, Doing, StepContext, StepResult};
use crate::planning::network_policy::{NetworkPolicyError, derive_network_policy};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::Api;
use std::sync::Arc;

/// The NetworkPolicy while `spec.networkPolicy` is unset.
const UNWANTED: NotRequired = NotRequired::new(
    "NetworkPolicy",
    kind::NETWORK_POLICY_READY,
    reason::NETWORK_POLICY_NOT_REQUIRED,
    "spec.networkPolicy",
);

/// The NetworkPolicy `cinder` asks for (`Ok(None)`: none), its egress covering the projected
/// volume backends, the held ones (their running volume services keep reaching their storage)
/// and the backup target of `artefacts`.
fn desired_policy(
    cinder: &Cinder,
    artefacts: &Artefacts,
) -> Result<Option<NetworkPolicy>, NetworkPolicyError> {
    let name = cinder.metadata.name.as_deref().unwrap_or_default();
    let mut backends = artefacts.backends.clone();
    backends.extend(artefacts.held_backends.iter().cloned());
    backends.extend(artefacts.backup_backend.clone());
    let derived = derive_network_policy(name, &cinder.spec, artefacts.broker_port, &backends)?;
    Ok(derived.map(|spec| NetworkPolicy {
        metadata: child_meta(cinder, &names::network_policy(name), &[]),
        spec: Some(spec),
    }))
}

/// The NetworkPolicyReady reason of a policy that cannot be derived.
fn refusal_reason(e: &NetworkPolicyError) -> &'static str {
    match e {
        NetworkPolicyError::EmptyIngress => reason::EMPTY_INGRESS,
        NetworkPolicyError::BrokerPortUnknown => reason::BROKER_PORT_UNKNOWN,
    }
}

/// Runs the step once for one Cinder.
pub(crate) async fn run(op: Arc<OperatorContext>, ctx: &mut StepContext) -> StepResult {
    let np_name = names::network_policy(ctx.name());
    let api: Api<NetworkPolicy> = ctx.children_api(&op.client);
    let policy = match desired_policy(&ctx.cinder, &ctx.artefacts) {
        Ok(Some(policy)) => policy,
        Ok(None) => {
            return remove_unwanted(ctx, &api, &np_name, UNWANTED).await;
        }
        Err(e) => {
            let why = refusal_reason(&e);
            return Err(e.to_string()).with_reason(why);
        }
    };
    apply(&api, &np_name, &policy)
        .await
        .doing(format_args!("applying NetworkPolicy {np_name}"))?;
    ctx.proceed(Cond::true_(
        kind::NETWORK_POLICY_READY,
        reason::NETWORK_POLICY_READY,
        format!("NetworkPolicy {np_name} applied"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::BackendType;
    use crate::pipeline::StepError;
    use crate::planning::backend_projection::ProjectedBackend;
    use k8s_openapi::api::networking::v1::NetworkPolicyEgressRule;
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

    /// The fixture Cinder with one (allow-all) ingress rule.
    fn with_policy() -> Cinder {
        let mut c = crate::test_fixtures::cinder();
        c.spec.network_policy =
            Some(serde_json::from_value(serde_json::json!({"ingress": [{}]})).expect("a policy"));
        c
    }

    fn nfs(name: &str, server: &str) -> ProjectedBackend {
        ProjectedBackend {
            name: name.into(),
            backend_type: Some(BackendType::Nfs),
            nfs_server: Some(server.into()),
            ..Default::default()
        }
    }

    /// The peer CIDRs of an egress rule.
    fn cidrs(rule: &NetworkPolicyEgressRule) -> Vec<String> {
        rule.to
            .iter()
            .flatten()
            .filter_map(|p| p.ip_block.as_ref().map(|b| b.cidr.clone()))
            .collect()
    }

    #[test]
    fn the_policy_is_named_after_the_cinder_and_owned_by_it() {
        let artefacts = Artefacts {
            broker_port: Some(5671),
            ..Default::default()
        };
        let policy = desired_policy(&with_policy(), &artefacts).unwrap().unwrap();
        assert_eq!(policy.metadata.name.as_deref(), Some("c"));
        assert_eq!(policy.metadata.namespace.as_deref(), Some("ns"));
        assert_eq!(policy.metadata.owner_references.unwrap()[0].uid, "u");
        let spec = policy.spec.unwrap();
        assert_eq!(spec.ingress.unwrap().len(), 1);
        let broker = &spec.egress.unwrap()[2];
        assert_eq!(
            broker.ports.as_ref().unwrap()[0].port,
            Some(IntOrString::Int(5671)),
            "the broker port the TransportURLSecret step resolved"
        );
    }

    #[test]
    fn the_egress_reaches_projected_held_and_backup_storage() {
        let artefacts = Artefacts {
            broker_port: Some(5672),
            backends: vec![nfs("a", "10.0.0.1")],
            held_backends: vec![nfs("b", "10.0.0.2")],
            backup_backend: Some(nfs("backup", "10.0.0.3")),
            ..Default::default()
        };
        let policy = desired_policy(&with_policy(), &artefacts).unwrap().unwrap();
        let egress = policy.spec.unwrap().egress.unwrap();
        let nfs_rule = egress
            .iter()
            .find(|r| r.ports.as_ref().unwrap()[0].port == Some(IntOrString::Int(2049)))
            .expect("an NFS rule");
        assert_eq!(
            cidrs(nfs_rule),
            ["10.0.0.1/32", "10.0.0.2/32", "10.0.0.3/32"]
        );
    }

    #[test]
    fn the_database_egress_opens_the_port_the_dsn_uses() {
        let artefacts = Artefacts {
            broker_port: Some(5672),
            ..Default::default()
        };
        // 0 and values beyond u16 fail the schema; an object stored before the schema had its
        // range still reaches the operator.
        for (port, dsn_port) in [
            (None, 3306),
            (Some(3307), 3307),
            (Some(0), 3306),
            (Some(70000), 3306),
        ] {
            let mut c = with_policy();
            c.spec.database.port = port;
            assert_eq!(
                crate::steps::db_connection_secret::database_endpoint(&c)
                    .unwrap()
                    .port,
                dsn_port
            );
            let policy = desired_policy(&c, &artefacts).unwrap().unwrap();
            let database = &policy.spec.unwrap().egress.unwrap()[1];
            assert_eq!(
                database.ports.as_ref().unwrap()[0].port,
                Some(IntOrString::Int(i32::from(dsn_port))),
                "spec.database.port {port:?}"
            );
        }
    }

    #[test]
    fn no_policy_asked_for_means_none() {
        let c = crate::test_fixtures::cinder();
        assert_eq!(desired_policy(&c, &Artefacts::default()), Ok(None));
    }

    #[test]
    fn a_refused_policy_reports_its_own_reason() {
        let mut c = with_policy();
        let no_port = desired_policy(&c, &Artefacts::default()).unwrap_err();
        assert_eq!(no_port, NetworkPolicyError::BrokerPortUnknown);
        assert_eq!(refusal_reason(&no_port), "BrokerPortUnknown");
        c.spec
            .network_policy
            .as_mut()
            .expect("a policy")
            .ingress
            .clear();
        let artefacts = Artefacts {
            broker_port: Some(5672),
            ..Default::default()
        };
        let empty = desired_policy(&c, &artefacts).unwrap_err();
        assert_eq!(empty, NetworkPolicyError::EmptyIngress);
        assert_eq!(refusal_reason(&empty), "EmptyIngress");
        // What the engine writes into NetworkPolicyReady from the step's error.
        let error: StepError = Err::<(), _>(empty.to_string())
            .with_reason(refusal_reason(&empty))
            .unwrap_err();
        assert_eq!(error.reason(), reason::EMPTY_INGRESS);
        assert!(
            error
                .to_string()
                .contains("spec.networkPolicy.ingress is empty"),
            "{error}"
        );
    }
}
