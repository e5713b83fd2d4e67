#!/usr/bin/env bash
# Prepares the root of the real Keystone that the real-Cinder tests with authentication run (and the
# `openstack` client a user runs against them): one Python virtual environment in the cache outside
# the clone, beside the Cinder roots.
#
#   tests/real-cinder/keystone-setup.sh
#
# setup.sh runs it last (unless CINDER_SKIP_KEYSTONE=1).
#
# The root is <CINDER_ROOTS>/keystone (default /var/tmp/cinder-roots/keystone) and holds the
# keystone of the 2026.2 release with uwsgi, PyMySQL and python-openstackclient, every library
# pinned by the 2026.2 upper constraints kept beside this script. As with setup.sh, the root is
# complete when its .prepared stamp holds the hash of what built it; a second run only checks it,
# and a root without the stamp is rebuilt from scratch.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
roots="${CINDER_ROOTS:-/var/tmp/cinder-roots}"
python="${CINDER_PYTHON:-python3}"
release=2026.2
# keystone is not in the upper constraints (a service is not a library); 30.0.0 is 2026.2's.
keystone_req="keystone==30.0.0"
# uwsgi is not in the upper constraints either; the version setup.sh pins.
uwsgi_pin="uwsgi==2.0.31"

constraints="$here/upper-constraints-$release.txt"
[ -f "$constraints" ] || { echo "keystone-setup.sh: $constraints is missing" >&2; exit 2; }
root="$roots/keystone"
stamp="$root/.prepared"
want="$( { cat "$constraints"; echo "$keystone_req $uwsgi_pin PyMySQL python-openstackclient"; cat "$0";
           "$python" -c 'import sys; print(sys.version)'; } | sha256sum | cut -d' ' -f1)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$root/bin/keystone-manage" ] \
   && [ -x "$root/bin/openstack" ]; then
  echo "== real Keystone ($keystone_req): prepared at $root"
  exit 0
fi
echo "== real Keystone ($keystone_req): building $root"
started=$SECONDS
rm -rf "$root"
mkdir -p "$roots"
"$python" -m venv "$root"
"$root/bin/python" -m pip install --quiet --upgrade "pip<26" wheel
"$root/bin/python" -m pip install --quiet -c "$constraints" \
  "$keystone_req" PyMySQL python-openstackclient "$uwsgi_pin"
"$root/bin/python" - <<'EOF'
import sys
from importlib.metadata import version
from importlib.util import find_spec
import keystone.server.wsgi  # what the WSGI module uwsgi loads builds the application with
if find_spec("keystone.wsgi.api") is None:
    sys.exit("keystone-setup.sh: keystone.wsgi.api, the module uwsgi loads, is missing")
print(f"   keystone {version('keystone')}, python-openstackclient {version('python-openstackclient')}, "
      f"SQLAlchemy {version('SQLAlchemy')}, PyMySQL {version('PyMySQL')}, uwsgi {version('uwsgi')}")
EOF
echo "$want" > "$stamp"
echo "   built in $((SECONDS - started)) s, $(du -sh "$root" | cut -f1)"
