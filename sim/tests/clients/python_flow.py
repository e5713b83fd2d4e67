"""The Python `kubernetes` client against the embedded cluster (KUBECONFIG points at it):
create, read, patch, watch and delete objects; exits non-zero with a message on any mismatch."""

import sys
import threading
import time

from kubernetes import client, config, watch


def check(cond, what):
    if not cond:
        print(f"FAILED: {what}", file=sys.stderr)
        sys.exit(1)


config.load_kube_config()
core = client.CoreV1Api()
apps = client.AppsV1Api()

core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="py")))
cm = client.V1ConfigMap(metadata=client.V1ObjectMeta(name="settings", labels={"app": "py"}),
                        data={"color": "blue"})
created = core.create_namespaced_config_map("py", cm)
check(created.metadata.uid, "created ConfigMap has a uid")
patched = core.patch_namespaced_config_map("settings", "py", {"data": {"color": "red"}})
check(patched.data["color"] == "red", "merge patch applied")
listed = core.list_namespaced_config_map("py", label_selector="app=py")
check([i.metadata.name for i in listed.items] == ["settings"], "label-selected list")

dep = client.V1Deployment(
    metadata=client.V1ObjectMeta(name="web"),
    spec=client.V1DeploymentSpec(
        selector=client.V1LabelSelector(match_labels={"app": "web"}),
        template=client.V1PodTemplateSpec(
            metadata=client.V1ObjectMeta(labels={"app": "web"}),
            spec=client.V1PodSpec(containers=[client.V1Container(name="web", image="nginx:1.27")]))))
made = apps.create_namespaced_deployment("py", dep)
check(made.status is not None, "a new Deployment has a status")
check(made.spec.revision_history_limit == 10, "Deployment defaults applied")

try:
    core.create_namespaced_config_map("py", client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name="bad", labels={"k": "v" * 100})))
    check(False, "a 100-character label value is refused")
except client.ApiException as e:
    check(e.status == 422 and "must be no more than 63 characters" in e.body, f"422 for a long label: {e.body}")

seen = []


def later():
    time.sleep(1)
    core.patch_namespaced_config_map("settings", "py", {"data": {"color": "green"}})


threading.Thread(target=later).start()
w = watch.Watch()
for event in w.stream(core.list_namespaced_config_map, "py", timeout_seconds=30):
    seen.append((event["type"], event["object"].data.get("color")))
    if ("MODIFIED", "green") in seen:
        w.stop()
check(("ADDED", "red") in seen and ("MODIFIED", "green") in seen, f"watch events {seen}")

core.delete_namespaced_config_map("settings", "py")
try:
    core.read_namespaced_config_map("settings", "py")
    check(False, "deleted ConfigMap is gone")
except client.ApiException as e:
    check(e.status == 404, "404 after delete")
print("python client flow passed")
