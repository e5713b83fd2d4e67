//! The NetworkPolicy member of the parallel group (NetworkPolicyReady): with
//! `spec.networkPolicy` set, the policy derived by [`crate::planning::network_policy`] (ingress
//! as given, egress derived from the lane's artefacts) is applied server-side as `{name}`,
//! selecting the Cinder's pods; unset, an existing policy is deleted (NetworkPolicyNotRequired).
//! An empty ingress list is refused fail-closed: nothing is applied (a policy already there is
//! left as it was), the condition is False with reason `EmptyIngress` and the step returns an
//! error. API errors propagate.

use crate::children::child_meta;
use crate::children::{NotRequired, remove_unwanted};
use crate::conditions::{Cond, kind, reason};
use crate::kube_ext::apply;
use crate::names;
use crate::pipeline::StepEnv;
use crate::pipeline::{Doing, StepContext, StepResult};
use crate::planning::network_policy::{NetworkPolicyError, derive_network_policy};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::Api;

/// Reason of the refusal of an empty ingress list (fail-closed: nothing is applied).
pub const EMPTY_INGRESS: &str = "EmptyIngress";
/// Reason while the broker port is not known yet.
pub const BROKER_PORT_UNKNOWN: &str = "BrokerPortUnknown";

/// The NetworkPolicy while `spec.networkPolicy` is unset.
const UNWANTED: NotRequired = NotRequired::new(
    "NetworkPolicy",
    kind::NETWORK_POLICY_READY,
    reason::NETWORK_POLICY_NOT_REQUIRED,
    "spec.networkPolicy",
);

/// Runs the step once for one Cinder.
pub async fn run(env: StepEnv, ctx: &mut StepContext) -> StepResult {
    let name = ctx.name().to_string();
    let np_name = names::network_policy(&name);
    let api: Api<NetworkPolicy> = ctx.children_api(&env.client);
    let mut backends = ctx.artefacts.backends.clone();
    backends.extend(ctx.artefacts.held_backends.iter().cloned());
    backends.extend(ctx.artefacts.backup_backend.clone());
    let derived = derive_network_policy(
        &name,
        &ctx.cinder.spec,
        ctx.artefacts.broker_port,
        &backends,
    );
    let spec = match derived {
        Ok(Some(spec)) => spec,
        Ok(None) => {
            return remove_unwanted(ctx, &api, &np_name, UNWANTED).await;
        }
        Err(e) => {
            let why = match e {
                NetworkPolicyError::EmptyIngress => EMPTY_INGRESS,
                NetworkPolicyError::BrokerPortUnknown => BROKER_PORT_UNKNOWN,
            };
            return Err(e.to_string()).with_reason(why);
        }
    };
    let policy = NetworkPolicy {
        metadata: child_meta(&ctx.cinder, &np_name, &[]),
        spec: Some(spec),
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
