//! The NetworkPolicy member of the parallel group (NetworkPolicyReady): with
//! `spec.networkPolicy` set, the policy derived by [`crate::planning::network_policy`] (ingress
//! as given, egress derived from the lane's artefacts) is applied server-side as `{name}`,
//! selecting the Cinder's pods; unset, an existing policy is deleted (NetworkPolicyNotRequired).
//! An empty ingress list is refused fail-closed: nothing is applied (a policy already there is
//! left as it was), the condition is False with reason `EmptyIngress` and the step returns an
//! error. API errors propagate.

use super::StepEnv;
use super::children::child_meta;
use super::http_route::FIELD_MANAGER;
use crate::conditions::{Cond, kind, reason};
use crate::names;
use crate::pipeline::{Step, StepContext, StepReport};
use crate::planning::network_policy::{NetworkPolicyError, derive_network_policy};
use futures::FutureExt;
use futures::future::BoxFuture;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::{Api, Client};

/// Reason of the refusal of an empty ingress list (added to the seed vocabulary).
pub const EMPTY_INGRESS: &str = "EmptyIngress";
/// Reason while the broker port is not known yet (added).
pub const BROKER_PORT_UNKNOWN: &str = "BrokerPortUnknown";

fn api_error(e: &kube::Error) -> Cond {
    Cond::false_(
        kind::NETWORK_POLICY_READY,
        reason::RECONCILE_ERROR,
        format!("kubernetes API error: {e}"),
    )
}

async fn run(client: Client, ctx: StepContext) -> StepReport {
    let ns = ctx.namespace().to_string();
    let name = ctx.name().to_string();
    let np_name = names::network_policy(&name);
    let api: Api<NetworkPolicy> = Api::namespaced(client, &ns);
    let mut backends = ctx.artefacts.backends.clone();
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
            return match api.delete(&np_name, &DeleteParams::default()).await {
                Ok(_) => ctx.proceed(Cond::true_(
                    kind::NETWORK_POLICY_READY,
                    reason::NETWORK_POLICY_NOT_REQUIRED,
                    format!("spec.networkPolicy is unset; NetworkPolicy {np_name} deleted"),
                )),
                Err(kube::Error::Api(s)) if s.code == 404 => ctx.proceed(Cond::true_(
                    kind::NETWORK_POLICY_READY,
                    reason::NETWORK_POLICY_NOT_REQUIRED,
                    "spec.networkPolicy is unset",
                )),
                Err(e) => {
                    let msg = format!("deleting NetworkPolicy {np_name}: {e}");
                    ctx.fail(api_error(&e), msg)
                }
            };
        }
        Err(e) => {
            let why = match e {
                NetworkPolicyError::EmptyIngress => EMPTY_INGRESS,
                NetworkPolicyError::BrokerPortUnknown => BROKER_PORT_UNKNOWN,
            };
            let msg = e.to_string();
            return ctx.fail(
                Cond::false_(kind::NETWORK_POLICY_READY, why, msg.clone()),
                msg,
            );
        }
    };
    let policy = NetworkPolicy {
        metadata: child_meta(&ctx.cinder, &np_name, &[]),
        spec: Some(spec),
    };
    match api
        .patch(
            &np_name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&policy),
        )
        .await
    {
        Ok(_) => ctx.proceed(Cond::true_(
            kind::NETWORK_POLICY_READY,
            reason::NETWORK_POLICY_READY,
            format!("NetworkPolicy {np_name} applied"),
        )),
        Err(e) => {
            let msg = format!("applying NetworkPolicy {np_name}: {e}");
            ctx.fail(api_error(&e), msg)
        }
    }
}

/// The NetworkPolicy member.
pub struct NetworkPolicyStep {
    env: StepEnv,
}

impl NetworkPolicyStep {
    pub fn new(env: StepEnv) -> Self {
        NetworkPolicyStep { env }
    }
}

impl Step for NetworkPolicyStep {
    fn name(&self) -> &'static str {
        "NetworkPolicy"
    }
    fn condition_type(&self) -> &'static str {
        kind::NETWORK_POLICY_READY
    }
    fn run(&self, ctx: StepContext) -> BoxFuture<'static, StepReport> {
        run(ctx.children(&self.env.client), ctx).boxed()
    }
}
