#!/usr/bin/env bash
# Regenerates kubernetes.fds, the protobuf descriptor set the simulator decodes request bodies
# with, from the Kubernetes .proto files as the kube-rs k8s-pb project ships them
# (k8s-pb-codegen/protos: upstream files with `k8s.io/` import prefixes removed).
# Usage: sim/proto/regenerate.sh PATH/TO/k8s-pb/k8s-pb-codegen/protos   (needs protoc)
set -euo pipefail
protos="${1:?usage: regenerate.sh PATH/TO/k8s-pb-codegen/protos}"
out="$(cd "$(dirname "$0")" && pwd)/kubernetes.fds"
cd "$protos"
protoc -I . --include_imports -o "$out" \
  api/core/v1/generated.proto api/apps/v1/generated.proto api/batch/v1/generated.proto \
  api/policy/v1/generated.proto api/autoscaling/v2/generated.proto \
  api/networking/v1/generated.proto api/coordination/v1/generated.proto \
  api/events/v1/generated.proto api/rbac/v1/generated.proto 2>/dev/null
echo "wrote $out"
