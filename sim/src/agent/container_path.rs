//! The container a request on the node's port names: `/{prefix}/{namespace}/{pod}/{container}`,
//! as the kubelet's `containerLogs` and `exec` paths name it.

/// The container of `target` under `prefix` (`/exec/`, `/containerLogs/`) and the query after
/// its `?`: `(namespace, pod, container, query)`, or None when a part is missing, empty, extra
/// or climbs (`..`).
pub fn parse<'a>(target: &'a str, prefix: &str) -> Option<(&'a str, &'a str, &'a str, &'a str)> {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let mut parts = path.strip_prefix(prefix)?.split('/');
    let (namespace, pod, container) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some()
        || [namespace, pod, container]
            .iter()
            .any(|p| p.is_empty() || p.contains(".."))
    {
        return None;
    }
    Some((namespace, pod, container, query))
}
