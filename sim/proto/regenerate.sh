#!/usr/bin/env bash
# Regenerates the protobuf descriptor sets of the simulator:
# - kubernetes.fds (request bodies are decoded with it) from the Kubernetes .proto files as the
#   kube-rs k8s-pb project ships them (k8s-pb-codegen/protos: upstream files with `k8s.io/`
#   import prefixes removed);
# - openapiv2.fds (the protobuf form of /openapi/v2) from openapiv2/OpenAPIv2.proto of
#   github.com/google/gnostic-models.
# Usage: sim/proto/regenerate.sh PATH/TO/k8s-pb-codegen/protos PATH/TO/gnostic-models
# (needs protoc)
set -euo pipefail
protos="${1:?usage: regenerate.sh PATH/TO/k8s-pb-codegen/protos PATH/TO/gnostic-models}"
gnostic="${2:?usage: regenerate.sh PATH/TO/k8s-pb-codegen/protos PATH/TO/gnostic-models}"
here="$(cd "$(dirname "$0")" && pwd)"
out="$here/kubernetes.fds"
cd "$protos"
protoc -I . --include_imports -o "$out" \
  api/core/v1/generated.proto api/apps/v1/generated.proto api/batch/v1/generated.proto \
  api/policy/v1/generated.proto api/autoscaling/v2/generated.proto \
  api/networking/v1/generated.proto api/coordination/v1/generated.proto \
  api/events/v1/generated.proto api/rbac/v1/generated.proto 2>/dev/null
(cd "$gnostic/openapiv2" && protoc -I . --include_imports -o "$here/openapiv2.fds" OpenAPIv2.proto)
echo "wrote $out and $here/openapiv2.fds"
