#!/usr/bin/env bash
# Builds the control plane's multicall binary (kube-apiserver, kube-controller-manager,
# kube-scheduler, etcd, start) into a cache outside the clone, keyed on the module's go.mod, go.sum,
# Go sources, this script (its flags) and the Go version; skips the build when that key's binary
# is already there.
# Prints the binary's path on its last line. Usage: tests/control-plane/build.sh
# CINDER_CONTROL_PLANE_CACHE overrides the cache directory (default /var/tmp/cinder-control-plane).
set -euo pipefail
src="$(cd "$(dirname "$0")" && pwd)"
cache="${CINDER_CONTROL_PLANE_CACHE:-/var/tmp/cinder-control-plane}"
k8s_version=v1.37.2

# The machine image installs Go in /usr/local/go; a shell without it on PATH still finds it.
command -v go >/dev/null 2>&1 || PATH="$PATH:/usr/local/go/bin"
command -v go >/dev/null 2>&1 || { echo "build.sh: no go command on PATH (Go >= 1.26 is needed)" >&2; exit 1; }
# go.mod says go 1.26.0 and the machine's Go is newer: the local toolchain builds it, nothing is fetched.
export GOTOOLCHAIN=local
export GOMODCACHE="$cache/gomodcache" GOCACHE="$cache/gocache"
export GOFLAGS="-mod=readonly -buildvcs=false" CGO_ENABLED=0

key="$( { go version; cat "$src/build.sh" "$src/go.mod" "$src/go.sum" "$src"/*.go; } | sha256sum | cut -c1-16)"
out="$cache/bin/$key/cinder-control-plane"
link="$cache/cinder-control-plane"
if [ -x "$out" ]; then
  echo "build.sh: cached ($key)" >&2
else
  mkdir -p "$cache/bin/$key"
  ldflags="-s -w"
  ldflags+=" -X k8s.io/component-base/version.gitVersion=$k8s_version"
  ldflags+=" -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37"
  ldflags+=" -X k8s.io/component-base/version.gitTreeState=clean"
  start=$(date +%s)
  (cd "$src" && go build -trimpath -ldflags "$ldflags" -o "$out.tmp.$$" .)
  mv "$out.tmp.$$" "$out"
  echo "build.sh: built $key in $(( $(date +%s) - start )) s, $(du -m "$out" | cut -f1) MiB" >&2
  # Binaries of other keys (other branches) stay for reuse, the three newest of them.
  ls -dt "$cache"/bin/*/ | tail -n +5 | xargs -r rm -rf
fi
ln -sfn "$out" "$link.tmp.$$" && mv -T "$link.tmp.$$" "$link"
echo "$link"
