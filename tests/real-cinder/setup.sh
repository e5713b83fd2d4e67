#!/usr/bin/env bash
# Prepares the roots of real Cinder that the real-Cinder tests run: one Python virtual environment per
# supported release, in a cache outside the clone, plus the Debian MariaDB and RabbitMQ servers.
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
# The Debian packages are installed when absent, with the system services kept stopped: the tests
# start their own servers with throwaway data directories.
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

install_debs() { # mariadb-server and rabbitmq-server, system services left stopped
  local missing=()
  command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ] || missing+=(mariadb-server)
  [ -x /usr/lib/rabbitmq/bin/rabbitmq-server ] || command -v rabbitmq-server >/dev/null 2>&1 || missing+=(rabbitmq-server)
  if [ "${#missing[@]}" = 0 ]; then
    echo "== Debian packages: mariadb-server and rabbitmq-server present"
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
  return 0
}

releases=("$@")
[ "${#releases[@]}" -gt 0 ] || releases=(2026.1 2026.2)
total=$SECONDS
for rel in "${releases[@]}"; do prepare_root "$rel"; done
if [ "${CINDER_SKIP_DEBS:-0}" != 1 ]; then install_debs; fi
echo "== real Cinder roots ready in $((SECONDS - total)) s"
[ "${CINDER_SKIP_KEYSTONE:-0}" = 1 ] || "$here/keystone-setup.sh"
