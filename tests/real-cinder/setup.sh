#!/usr/bin/env bash
# Prepares the roots of real Cinder that the real-Cinder tests run: one Python virtual environment per
# supported release, in a cache outside the clone, plus the Debian MariaDB and RabbitMQ servers and
# Ceph (monitor, OSD, manager, and the rados/rbd Python bindings the RBD drivers import).
#
#   tests/real-cinder/setup.sh            # both releases
#   tests/real-cinder/setup.sh 2026.2     # one release
#
# Each release's root is <CINDER_ROOTS>/<release> (default /var/tmp/cinder-roots) and holds that
# release's cinder with uwsgi and PyMySQL, every library pinned by the release's upper constraints
# from openstack/requirements (kept beside this script as data). A root is complete when its
# .prepared stamp holds the hash of what built it (constraints, requirements, this script, the
# interpreter's version); a second run with the stamp in place only checks it. A root that failed
# half-way has no stamp and is rebuilt from scratch.
#
# The Debian packages are installed when absent, with the system services kept stopped (and Ceph's
# systemd targets disabled): the tests start their own servers with throwaway data directories.
# Each root then sees Debian's rados and rbd extension modules (python3-rados, python3-rbd, built
# against the installed librados and librbd): a .pth file in the root's site-packages names a
# directory holding links to those two modules only, so nothing else of
# /usr/lib/python3/dist-packages shadows the root's pinned libraries. That step runs on every run,
# a prepared root included.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
roots="${CINDER_ROOTS:-/var/tmp/cinder-roots}"
python="${CINDER_PYTHON:-python3}"
# uwsgi is not in the upper constraints (OpenStack does not pin it); this is the version tested.
uwsgi_pin="uwsgi==2.0.31"

cinder_version() { # the cinder release of an OpenStack release
  case "$1" in
    2026.1) echo 28.0.0 ;;
    2026.2) echo 29.0.0 ;;
    *) echo "setup.sh: unknown release '$1' (supported: 2026.1 2026.2)" >&2; return 2 ;;
  esac
}

prepare_root() { # prepare_root RELEASE
  local rel="$1" ver constraints root stamp want started
  ver="$(cinder_version "$rel")"
  constraints="$here/upper-constraints-$rel.txt"
  [ -f "$constraints" ] || { echo "setup.sh: $constraints is missing" >&2; return 2; }
  root="$roots/$rel"
  stamp="$root/.prepared"
  # The gcs extra: cinder.opts (all of cinder's options, what oslo-config-generator and the
  # validator load) imports the GCS backup driver, whose client cinder 29 makes optional.
  local cinder_req="cinder[gcs]==$ver"
  want="$( { cat "$constraints"; echo "$cinder_req $uwsgi_pin PyMySQL"; cat "$0";
             "$python" -c 'import sys; print(sys.version)'; } | sha256sum | cut -d' ' -f1)"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$root/bin/cinder-manage" ]; then
    echo "== real Cinder $rel (cinder $ver): prepared at $root"
    return 0
  fi
  echo "== real Cinder $rel (cinder $ver): building $root"
  started=$SECONDS
  rm -rf "$root"
  mkdir -p "$roots"
  "$python" -m venv "$root"
  "$root/bin/python" -m pip install --quiet --upgrade "pip<26" wheel
  # PyMySQL is in the constraints, so it gets the release's pin; uwsgi compiles from its sdist.
  "$root/bin/python" -m pip install --quiet -c "$constraints" "$cinder_req" PyMySQL "$uwsgi_pin"
  "$root/bin/python" - "$rel" <<'EOF'
import sys
from importlib.metadata import version
rel = sys.argv[1]
major = {"2026.1": "17", "2026.2": "18"}[rel]
got = version("oslo.messaging")
if got.split(".")[0] != major:
    sys.exit(f"setup.sh: {rel} got oslo.messaging {got}, expected {major}.x")
import cinder.opts  # every option of cinder importable, as the config tools need
print(f"   cinder {version('cinder')}, oslo.messaging {got}, oslo.config {version('oslo.config')}, "
      f"SQLAlchemy {version('SQLAlchemy')}, PyMySQL {version('PyMySQL')}, uwsgi {version('uwsgi')}")
EOF
  [ -f "$root/etc/cinder/api-paste.ini" ] || { echo "setup.sh: $root/etc/cinder/api-paste.ini missing" >&2; return 1; }
  echo "$want" > "$stamp"
  echo "   built in $((SECONDS - started)) s, $(du -sh "$root" | cut -f1)"
}

# The Debian Ceph packages the tests' clusters and the roots' RBD drivers use.
ceph_debs=(ceph-mon ceph-osd ceph-mgr ceph-common python3-rados python3-rbd)

install_debs() { # mariadb-server, rabbitmq-server and Ceph, system services left stopped
  local missing=() deb
  command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ] || missing+=(mariadb-server)
  [ -x /usr/lib/rabbitmq/bin/rabbitmq-server ] || command -v rabbitmq-server >/dev/null 2>&1 || missing+=(rabbitmq-server)
  for deb in "${ceph_debs[@]}"; do
    dpkg-query -W -f='${Status}' "$deb" 2>/dev/null | grep -q 'install ok installed' || missing+=("$deb")
  done
  if [ "${#missing[@]}" = 0 ]; then
    echo "== Debian packages: mariadb-server, rabbitmq-server and Ceph present"
    return 0
  fi
  echo "== Debian packages: installing ${missing[*]} (services not started)"
  # policy-rc.d answering 101 keeps the packages' maintainer scripts from starting the services.
  local policy=/usr/sbin/policy-rc.d own_policy=0
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' > "$policy"; chmod +x "$policy"; own_policy=1
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
    || { [ "$own_policy" = 1 ] && rm -f "$policy"; return 1; }
  [ "$own_policy" = 1 ] && rm -f "$policy"
  # The packages enable Ceph's targets for the next boot; the tests' clusters are their own.
  if command -v systemctl >/dev/null 2>&1; then
    systemctl disable ceph.target ceph-mon.target ceph-osd.target ceph-mgr.target >/dev/null 2>&1 || true
  fi
  return 0
}

link_ceph_bindings() { # link_ceph_bindings RELEASE: Debian's rados and rbd importable in the root
  local rel="$1" root site dir mod suffix
  root="$roots/$rel"
  suffix="$("$root/bin/python" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')"
  dir="$root/debian-ceph"
  mkdir -p "$dir"
  for mod in rados rbd; do
    if [ ! -e "/usr/lib/python3/dist-packages/$mod$suffix" ]; then
      echo "setup.sh: /usr/lib/python3/dist-packages/$mod$suffix is missing (python3-$mod for $rel's interpreter)" >&2
      return 1
    fi
    ln -sfn "/usr/lib/python3/dist-packages/$mod$suffix" "$dir/$mod$suffix"
  done
  site="$("$root/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  echo "$dir" > "$site/debian-ceph.pth"
  "$root/bin/python" -c 'import rados, rbd; print("   rados", rados.Rados().version(), "and rbd importable")'
}

releases=("$@")
[ "${#releases[@]}" -gt 0 ] || releases=(2026.1 2026.2)
total=$SECONDS
for rel in "${releases[@]}"; do prepare_root "$rel"; done
if [ "${CINDER_SKIP_DEBS:-0}" != 1 ]; then install_debs; fi
for rel in "${releases[@]}"; do
  echo "== real Cinder $rel: Debian's rados and rbd"
  link_ceph_bindings "$rel"
done
echo "== real Cinder roots ready in $((SECONDS - total)) s"
[ "${CINDER_SKIP_KEYSTONE:-0}" = 1 ] || "$here/keystone-setup.sh"
