#!/usr/bin/env bash
# Builds the operator image without a container daemon: the release binary without the embedded
# cluster (`--no-default-features`), a base of the libraries it links unpacked from Debian's
# packages, and buildah (vfs storage, no RUN steps, so no isolation is needed) to make the image
# of ./Containerfile, saved as an OCI archive:
#
#   $CINDER_IMAGE_DIR/cinder-operator-<version>.oci.tar   (default CINDER_IMAGE_DIR=/var/tmp/cinder-image)
#
# tagged ghcr.io/c5c3/cinder-operator:<version> (the workspace version, as deploy/ names it).
# Push it with `skopeo copy oci-archive:<file> docker://<registry>/<name>:<tag>` or
# `buildah push`. Needs root for buildah's storage; installs buildah from Debian when missing.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$repo/Cargo.toml" | head -n 1)
image="ghcr.io/c5c3/cinder-operator:$version"
out_dir=${CINDER_IMAGE_DIR:-/var/tmp/cinder-image}
archive="$out_dir/cinder-operator-$version.oci.tar"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/var/tmp/cinder-target}

if ! command -v buildah >/dev/null 2>&1; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq buildah >/dev/null
fi
mkdir -p "$out_dir/debs"

echo "== cargo build --release --no-default-features -p cinder-operator"
(cd "$repo" && cargo build --release --locked --no-default-features -p cinder-operator --bin cinder-operator)
binary="$CARGO_TARGET_DIR/release/cinder-operator"

ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
rootfs="$ctx/rootfs"
mkdir -p "$rootfs"

# The base: exactly the packages of the libraries the binary links (glibc's libc, libm and the
# loader; libgcc_s), as the machine's apt sources have them. Downloaded once per version.
(cd "$out_dir/debs" && apt-get download libc6 libgcc-s1 >/dev/null 2>&1 || true)
for pkg in libc6 libgcc-s1; do
  deb=$(ls -t "$out_dir/debs/${pkg}_"*.deb 2>/dev/null | head -n 1)
  [ -n "$deb" ] || { echo "build.sh: no $pkg package could be downloaded" >&2; exit 1; }
  dpkg-deb -x "$deb" "$rootfs"
done
rm -rf "$rootfs/usr/share" "$rootfs/usr/lib/x86_64-linux-gnu/gconv" "$rootfs/etc/ld.so.conf.d" \
  "$rootfs/usr/bin" "$rootfs/usr/sbin" "$rootfs/sbin" "$rootfs/usr/libexec"
# What a process expects to find: its user, a writable /tmp, the CA bundle for TLS to endpoints
# outside the cluster (OTLP, a target cluster's API server).
mkdir -p "$rootfs/etc/ssl/certs" "$rootfs/tmp" "$rootfs/home/nonroot"
chmod 1777 "$rootfs/tmp"
chown 65532:65532 "$rootfs/home/nonroot"
printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$rootfs/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' >"$rootfs/etc/group"
if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
  cp /etc/ssl/certs/ca-certificates.crt "$rootfs/etc/ssl/certs/"
fi
install -m 0755 "$binary" "$ctx/cinder-operator"
cp "$here/Containerfile" "$ctx/Containerfile"

store=(--root "$out_dir/storage" --runroot "$out_dir/run" --storage-driver vfs)
echo "== buildah build $image"
buildah "${store[@]}" build --quiet --layers=false -f "$ctx/Containerfile" -t "$image" \
  --annotation "org.opencontainers.image.version=$version" \
  --annotation "org.opencontainers.image.revision=$(git -C "$repo" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)" \
  "$ctx" >/dev/null
rm -f "$archive"
buildah "${store[@]}" push --quiet "$image" "oci-archive:$archive:$image"
buildah "${store[@]}" rmi "$image" >/dev/null
echo "image $image"
echo "archive $archive ($(du -h "$archive" | cut -f1))"
echo "binary $(du -h "$binary" | cut -f1) (without the embedded cluster)"
