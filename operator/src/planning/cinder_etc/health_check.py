"""Whether a Cinder RPC service is up, as Cinder itself records it.

The readiness probe of the scheduler, volume and backup containers runs

    python3 /etc/cinder/health_check.py BINARY [the service's own config arguments]

BINARY is cinder-scheduler, cinder-volume or cinder-backup. The script reads the
service's configuration as the service does (oslo.config: the same config files
and directories, and the OS_<GROUP>__<OPTION> environment, which carries the
DSN), works out the service's host(s) as Cinder does (``[DEFAULT] host``; for
cinder-volume ``<backend_host or host>@<backend>`` of each enabled backend) and
reads their rows of the ``services`` table, as ``cinder-manage service list``
does. It exits 0 when every row is enabled and its heartbeat (``updated_at``)
is at most ``service_down_time`` old (Cinder's own ``Service.is_up``), else 1.
A cinder-volume whose driver failed to initialise sends no heartbeat (its
manager reports it is not working), so it turns down here as it does in
``service list``. One line on stdout says what was found; the kubelet puts it
in the pod's Unhealthy event, where the operator reads it.

It imports oslo.config and PyMySQL only (not cinder), opens one connection and
closes it: about 0.15 s of CPU per run.
"""

import datetime
import socket
import sys
import urllib.parse

from oslo_config import cfg
import pymysql


def configuration(binary, args):
    conf = cfg.ConfigOpts()
    conf.register_opts([
        cfg.StrOpt('host', default=socket.gethostname()),
        cfg.IntOpt('service_down_time', default=60),
        cfg.ListOpt('enabled_backends', default=[]),
    ])
    conf.register_opt(cfg.StrOpt('connection', secret=True), group='database')
    conf(args, project='cinder', prog=binary, use_env=True)
    return conf


def hosts(conf, binary):
    if binary != 'cinder-volume' or not conf.enabled_backends:
        return [conf.host]
    out = []
    for backend in conf.enabled_backends:
        conf.register_opt(cfg.StrOpt('backend_host'), group=backend)
        out.append('%s@%s' % (conf[backend].backend_host or conf.host, backend))
    return out


def connect(dsn):
    url = urllib.parse.urlsplit(dsn)
    if not url.scheme.startswith('mysql'):
        raise ValueError('[database] connection is not a MySQL URL')
    query = urllib.parse.parse_qs(url.query)
    password = urllib.parse.unquote(url.password or '')
    SECRETS.extend(p for p in (password, url.password) if p)
    return pymysql.connect(
        host=url.hostname or 'localhost',
        port=url.port or 3306,
        user=urllib.parse.unquote(url.username or ''),
        password=password,
        database=url.path.lstrip('/'),
        charset=query.get('charset', ['utf8'])[0],
        connect_timeout=5,
        read_timeout=5,
    )


# The database password once read, so that no printed error carries it.
SECRETS = []


def redacted(text):
    for secret in SECRETS:
        text = text.replace(secret, '***')
    return text


def verdict(binary, host, row, down_time, now):
    """What one services row says: (healthy, text)."""
    name = '%s on %s' % (binary, host)
    if row is None:
        return False, '%s is not registered in the services table' % name
    disabled, reason, frozen, updated_at = row
    if disabled:
        return False, '%s is disabled (%s)' % (name, reason or 'no reason given')
    if updated_at is None:
        return False, '%s is down: no heartbeat recorded' % name
    age = int((now - updated_at).total_seconds())
    if age > down_time:
        return False, ('%s is down: last heartbeat %s UTC, %d s ago '
                       '(service_down_time %d s)'
                       % (name, updated_at.isoformat(sep=' '), age, down_time))
    return True, '%s is up (heartbeat %d s ago%s)' % (
        name, age, ', frozen' if frozen else '')


def main(argv):
    if len(argv) < 2:
        print('usage: health_check.py BINARY [config arguments]')
        return 2
    binary = argv[1]
    try:
        conf = configuration(binary, argv[2:])
        wanted = hosts(conf, binary)
        if not conf.database.connection:
            print('%s: no [database] connection is configured' % binary)
            return 1
        db = connect(conf.database.connection)
        try:
            with db.cursor() as cursor:
                rows = {}
                for host in wanted:
                    cursor.execute(
                        'SELECT disabled, disabled_reason, frozen, updated_at '
                        'FROM services WHERE deleted = 0 AND `binary` = %s '
                        'AND host = %s ORDER BY id DESC LIMIT 1',
                        (binary, host))
                    rows[host] = cursor.fetchone()
        finally:
            db.close()
    except Exception as e:  # any failure to read the row is a failed check
        text = '%s: cannot read the services table: %s: %s' % (
            binary, type(e).__name__, e)
        print(redacted(text))
        return 1
    now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    results = [verdict(binary, h, rows[h], conf.service_down_time, now)
               for h in wanted]
    print('; '.join(text for _, text in results))
    return 0 if all(ok for ok, _ in results) else 1


if __name__ == '__main__':
    sys.exit(main(sys.argv))
