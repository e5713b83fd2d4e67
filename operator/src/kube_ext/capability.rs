//! Optional-API capability probes: whether a CRD-backed kind (Gateway API HTTPRoute, the VPA) is
//! served, asked through discovery (`GET /apis/{group}/{version}`) on every pass, so installing
//! or removing the CRD is noticed without a restart. A 404 means "not installed"; any other
//! failure is a probe error the caller reports (CapabilityProbeFailed), never a crash.

use crate::conditions::{Cond, reason};
use crate::kube_ext::ApiErrorExt;
use kube::api::DynamicObject;
use kube::{Api, Client};

/// A kind whose presence is probed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OptionalKind {
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    pub plural: &'static str,
}

/// gateway.networking.k8s.io/v1 HTTPRoute.
pub const HTTP_ROUTE: OptionalKind = OptionalKind {
    group: "gateway.networking.k8s.io",
    version: "v1",
    kind: "HTTPRoute",
    plural: "httproutes",
};

/// autoscaling.k8s.io/v1 VerticalPodAutoscaler.
pub const VERTICAL_POD_AUTOSCALER: OptionalKind = OptionalKind {
    group: "autoscaling.k8s.io",
    version: "v1",
    kind: "VerticalPodAutoscaler",
    plural: "verticalpodautoscalers",
};

impl OptionalKind {
    /// `group/version`.
    pub(crate) fn api_version(&self) -> String {
        format!("{}/{}", self.group, self.version)
    }

    /// The dynamic API resource of the kind.
    pub fn api_resource(&self) -> kube::api::ApiResource {
        kube::api::ApiResource::from_gvk_with_plural(
            &kube::core::GroupVersionKind::gvk(self.group, self.version, self.kind),
            self.plural,
        )
    }

    /// Its objects in `namespace`.
    pub fn namespaced(&self, client: &Client, namespace: &str) -> Api<DynamicObject> {
        Api::namespaced_with(client.clone(), namespace, &self.api_resource())
    }
}

/// The probe itself failed (the API server answered something other than the group list or a
/// 404): the caller cannot tell whether the kind is there.
#[derive(Debug, thiserror::Error)]
#[error("discovery of {api_version} failed: {source}")]
pub(crate) struct ProbeError {
    pub api_version: String,
    #[source]
    pub source: kube::Error,
}

impl ProbeError {
    /// The condition `condition` reports while the probe fails (CapabilityProbeFailed, False).
    pub(crate) fn condition(&self, condition: &'static str) -> Cond {
        Cond::false_(condition, reason::CAPABILITY_PROBE_FAILED, self.to_string())
    }
}

/// True when discovery lists `kind` under its group/version; false when the group/version is
/// not served (404) or served without that resource.
pub(crate) async fn is_served(client: &Client, kind: OptionalKind) -> Result<bool, ProbeError> {
    match client.list_api_group_resources(&kind.api_version()).await {
        Ok(list) => Ok(list.resources.iter().any(|r| r.name == kind.plural)),
        Err(e) if e.is_not_found() => Ok(false),
        Err(source) => Err(ProbeError {
            api_version: kind.api_version(),
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_versions_and_resources() {
        assert_eq!(HTTP_ROUTE.api_version(), "gateway.networking.k8s.io/v1");
        assert_eq!(
            VERTICAL_POD_AUTOSCALER.api_version(),
            "autoscaling.k8s.io/v1"
        );
        let ar = VERTICAL_POD_AUTOSCALER.api_resource();
        assert_eq!(ar.plural, "verticalpodautoscalers");
        assert_eq!(ar.kind, "VerticalPodAutoscaler");
    }
}
