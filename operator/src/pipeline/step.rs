//! The contract between the engine and one pipeline step: what a step receives
//! ([`StepContext`]), what it returns ([`StepReport`] with an [`Outcome`]), and the [`Step`]
//! trait real steps implement (async, as trait objects).

use super::artefacts::Artefacts;
use crate::conditions::Cond;
use crate::crd::{Cinder, CinderStatus};
use futures::future::BoxFuture;
use std::sync::Arc;
use std::time::Duration;

/// What a step run ends with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Go on with the next step.
    Continue,
    /// End the lane; reconcile again after this (nominal) delay.
    RequeueAfter(Duration),
    /// End the lane; the message is counted and reported, never containing a secret value.
    Error(String),
}

/// The registered target cluster a pass projects the Cinder's children onto (resolved by the
/// controller's gate ahead of the pass; docs/target-clusters.md).
#[derive(Clone)]
pub struct TargetCluster {
    /// `spec.targetClusterRef.name`.
    pub name: String,
    /// A client of the target, built from its registered kubeconfig.
    pub client: kube::Client,
}

impl std::fmt::Debug for TargetCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The client carries credentials: only the name is shown.
        f.debug_struct("TargetCluster")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// The management cluster (the Cinder, its satellites, credential Secrets, MariaDB objects,
/// events) and the cluster holding the Cinder's children (the same one unless it names a target).
#[derive(Clone)]
pub struct Clusters {
    pub management: kube::Client,
    pub children: kube::Client,
}

/// The inputs of one step run: the CR snapshot, where its children live, the artefacts of
/// earlier steps and the working copy of the status (steps may set `endpoint`,
/// `installedRelease`, `targetRelease`, `upgradePhase`, `volumeServices`; conditions are
/// reported through [`StepReport::conditions`]).
#[derive(Clone, Debug)]
pub struct StepContext {
    pub cinder: Arc<Cinder>,
    /// `Some` when the Cinder names a target cluster: its children (workloads, Services,
    /// derived Secrets, ConfigMaps, Jobs, ...) live there; `None`: on the management cluster.
    pub target: Option<TargetCluster>,
    pub artefacts: Artefacts,
    pub status: CinderStatus,
}

impl StepContext {
    /// The client of the cluster that holds the Cinder's children: the target's, or
    /// `management` (the Cinder, its satellites, credential Secrets and MariaDB objects always
    /// live on the management cluster).
    pub fn children(&self, management: &kube::Client) -> kube::Client {
        match &self.target {
            Some(t) => t.client.clone(),
            None => management.clone(),
        }
    }

    /// Both clusters a step may talk to, for helpers that touch the Cinder and its children.
    pub fn clusters(&self, management: &kube::Client) -> Clusters {
        Clusters {
            management: management.clone(),
            children: self.children(management),
        }
    }

    /// The Cinder's name.
    pub fn name(&self) -> &str {
        self.cinder.metadata.name.as_deref().unwrap_or_default()
    }
    /// The Cinder's namespace.
    pub fn namespace(&self) -> &str {
        self.cinder
            .metadata
            .namespace
            .as_deref()
            .unwrap_or_default()
    }

    /// A report that keeps this context's artefacts and status and ends with `outcome`.
    pub fn report(self, conditions: Vec<Cond>, outcome: Outcome) -> StepReport {
        StepReport {
            conditions,
            artefacts: self.artefacts,
            status: self.status,
            outcome,
        }
    }
    /// One condition, then [`Outcome::Continue`].
    pub fn proceed(self, condition: Cond) -> StepReport {
        self.report(vec![condition], Outcome::Continue)
    }
    /// One condition, then [`Outcome::RequeueAfter`].
    pub fn requeue(self, condition: Cond, after: Duration) -> StepReport {
        self.report(vec![condition], Outcome::RequeueAfter(after))
    }
    /// One condition, then [`Outcome::Error`].
    pub fn fail(self, condition: Cond, error: impl Into<String>) -> StepReport {
        self.report(vec![condition], Outcome::Error(error.into()))
    }
}

/// What one step run returns.
#[derive(Clone, Debug)]
pub struct StepReport {
    /// Conditions to set (stamped by the engine with time and generation).
    pub conditions: Vec<Cond>,
    /// The artefacts, with whatever this step added, for the steps after it.
    pub artefacts: Artefacts,
    /// The working status copy, with whatever fields this step set (conditions ignored).
    pub status: CinderStatus,
    pub outcome: Outcome,
}

/// One pipeline step. Implementations are shared by every Cinder (one actor per step kind) and
/// must be cheap to call concurrently; `run` owns what its future needs (clone a client in).
pub trait Step: Send + Sync + 'static {
    /// The `sub_reconciler` label: one of [`super::table::StepName`] in the product table.
    fn name(&self) -> &'static str;
    /// The condition this step reports through (the `condition_type` label of its errors).
    fn condition_type(&self) -> &'static str;
    /// Runs the step once for one Cinder.
    fn run(&self, ctx: StepContext) -> BoxFuture<'static, StepReport>;
}
