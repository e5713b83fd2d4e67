//! The Cinder's workloads as the workload steps build them (the API, scheduler, volume and
//! backup Deployments; the one-shot Jobs of Database, DBPurge and the detach in VolumeServices):
//! the pod template's annotations, environment and volumes ([`pod`]), the volumes an attached
//! volume backend contributes ([`mod@backend_volumes`]), the Deployment desired, written, converged
//! and deleted ([`deployment`]), why its running pods are not ready ([`readiness`]), the condition a workload step ends with ([`condition`]), the
//! one-shot Jobs' pod template ([`job_pod`]), and the reporting of each terminal Job once
//! ([`job_reporting`], with the counted marker that carries the "once" across processes,
//! [`job_marker`]).

pub mod backend_volumes;
pub mod condition;
pub mod deployment;
pub mod job_marker;
pub mod job_pod;
pub mod job_reporting;
pub mod pod;
pub mod readiness;

pub use backend_volumes::attached_backends;
pub(crate) use backend_volumes::backend_volumes;
pub(crate) use condition::{WorkloadCondition, converge};
pub(crate) use deployment::{
    DEVICE_ANNOTATION, HOST_ANNOTATION, SPEC_HASH_ANNOTATION, WorkloadSpec, converged,
    delete_deployment, desired_deployment, ensure_converged, ensure_deployment, hash_of,
    needs_write, rolled_out, rolled_out_unready, spec_hash, template_image,
};
pub(crate) use job_pod::config_job_pod;
pub(crate) use job_reporting::JobReporting;
pub(crate) use pod::{ENV_HOST, ExtraVolume, config_mount, env_from_secret, workload_env};
