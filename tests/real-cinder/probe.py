"""What real Cinder makes of the operator's rendered artefacts, asked of the libraries of one
prepared root (run with that root's python by tests/tests/deploy/real_cinder_config.rs).

    probe.py authtoken-options AUTH_TYPE
        the option names (as written in a file) keystoneauth's AUTH_TYPE plugin registers in
        [keystone_authtoken]: oslo-config-validator skips that group, as keystonemiddleware
        registers them only at run time.
    probe.py env CONFIG_FILE...
        reads the OS_DATABASE__CONNECTION, OS_DEFAULT__TRANSPORT_URL and
        OS_KEYSTONE_AUTHTOKEN__PASSWORD of the environment through oslo.config over the config
        files, as the services do, and prints what SQLAlchemy (the DSN), oslo.messaging's rabbit driver and kombu (the
        transport URL) and keystoneauth (the password) get out of them, as JSON.
    probe.py api CONFIG_DIR
        loads the API's paste application the way cinder-api under uWSGI does (cinder.conf and
        api.conf of CONFIG_DIR, api-paste.ini found beside them), asks it for /healthcheck, and
        reads resource_filters.json and the rootwrap config and filters of CONFIG_DIR; prints
        JSON, or the error the real loader raised.
    probe.py validate OPT_DATA FILE...
        oslo-config-validator's own check (oslo_config.validator._validate) of each FILE with
        --fatal-warnings against OPT_DATA (oslo-config-generator --format yaml), the data read
        once rather than once per file as the command does; prints {FILE: {rc, log}} as JSON.
    probe.py alembic-head
        the head revision of the release's schema migrations, as JSON.
Nothing here opens a network connection.
"""

import json
import os
import sys
import warnings

warnings.simplefilter("ignore")


def authtoken_options(auth_type):
    from keystoneauth1 import loading

    names = [o.dest for o in loading.get_plugin_loader(auth_type).get_options()]
    names += [o.dest for o in loading.get_auth_common_conf_options()]
    print(json.dumps(sorted(set(n.replace("-", "_") for n in names))))


def env_values(config_files):
    from keystoneauth1 import loading
    from oslo_config import cfg
    from oslo_db import options as db_options
    from oslo_messaging import transport
    from oslo_messaging._drivers import impl_rabbit
    import kombu
    import oslo_messaging
    import sqlalchemy.engine

    conf = cfg.ConfigOpts()
    db_options.set_defaults(conf)
    conf.register_opts(transport._transport_opts)
    loading.register_auth_conf_options(conf, "keystone_authtoken")
    conf.register_opts(
        [o._to_oslo_opt() for o in loading.get_plugin_loader("password").get_options()],
        group="keystone_authtoken",
    )
    out = {}
    try:
        conf(args=[], project="cinder", default_config_files=config_files)
        dsn = sqlalchemy.engine.make_url(conf.database.connection)
        out["database"] = {
            "username": dsn.username,
            "password": dsn.password,
            "host": dsn.host,
            "port": dsn.port,
            "database": dsn.database,
        }
        url = oslo_messaging.TransportURL.parse(conf, conf.transport_url)
        # The URL the rabbit driver hands kombu (a method that reads nothing of its instance).
        kombu_url = impl_rabbit.Connection._transform_transport_url(None, url, url.hosts[0])
        k = kombu.Connection(kombu_url)
        out["transport"] = {
            "username": k.userid,
            "password": k.password,
            "host": k.hostname,
            "port": k.port,
            "vhost": k.virtual_host,
        }
        out["authtoken_password"] = conf.keystone_authtoken.password
    except Exception as e:  # the error itself is the answer
        out["error"] = f"{type(e).__name__}: {e}"
    print(json.dumps(out))


def api(config_dir):
    from oslo_config import cfg

    import cinder.common.config  # noqa: F401 (registers cinder's options)
    from cinder import objects
    from oslo_service import wsgi

    out = {}
    conf = cfg.CONF
    try:
        objects.register_all()
        conf(
            [
                "--config-file", os.path.join(config_dir, "cinder.conf"),
                "--config-file", os.path.join(config_dir, "api.conf"),
            ],
            project="cinder",
        )
        # cinder.wsgi.wsgi.initialize_application, less the logging setup (logging.ini is
        # named by its absolute path in the pod), the coordinator and the profiler.
        cinder.common.config.set_middleware_defaults()
        from cinder import rpc

        rpc.init(conf)
        app = wsgi.Loader(conf).load_app(name="osapi_volume")
        import webob

        resp = webob.Request.blank("/healthcheck").get_response(app)
        out["healthcheck"] = resp.status_int
    except Exception as e:
        out["error"] = f"{type(e).__name__}: {e}"
    filters = os.path.join(config_dir, "resource_filters.json")
    if os.path.exists(filters):
        from cinder.api import common

        conf.set_override("resource_query_filters_file", filters)
        out["volume_filters"] = common.get_enabled_resource_filters("volume").get("volume")
    rootwrap = os.path.join(config_dir, "rootwrap.conf")
    if os.path.exists(rootwrap):
        import configparser
        from oslo_rootwrap import wrapper

        raw = configparser.RawConfigParser()
        raw.read(rootwrap)
        out["filters_path"] = wrapper.RootwrapConfig(raw).filters_path
        mounted = os.path.join(config_dir, "rootwrap-filters")
        if os.path.isdir(mounted):
            found = wrapper.load_filters([mounted])
            try:
                f = wrapper.match_filter(
                    found,
                    ["mount", "-t", "nfs", "nfs.example:/export", "/x"],
                    exec_dirs=wrapper.RootwrapConfig(raw).exec_dirs,
                )
                out["nfs_mount_filter"] = f.name
            except Exception as e:
                out["nfs_mount_filter_error"] = f"{type(e).__name__}: {e}"
    print(json.dumps(out))


def validate(opt_data, files):
    import logging

    import yaml
    from oslo_config import cfg, validator

    with open(opt_data) as f:
        data = yaml.load(f, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    validator.load_opt_data = lambda conf: data
    records = []

    class Collect(logging.Handler):
        def emit(self, record):
            if record.levelno >= logging.WARNING:
                records.append(f"{record.levelname}: {record.getMessage()}")

    root = logging.getLogger()
    root.addHandler(Collect())
    root.setLevel(logging.INFO)
    out = {}
    for path in files:
        records.clear()
        conf = cfg.ConfigOpts()
        validator._register_cli_opts(conf)
        conf(["--opt-data", opt_data, "--input-file", path, "--fatal-warnings"],
             default_config_files=[])
        rc = validator._validate(conf)
        out[path] = {"rc": rc, "log": list(records)}
    print(json.dumps(out))


def alembic_head():
    from alembic.script import ScriptDirectory
    from cinder.db import migration

    print(json.dumps(ScriptDirectory.from_config(migration._find_alembic_conf()).get_heads()))


def main():
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    if cmd == "authtoken-options" and len(sys.argv) == 3:
        authtoken_options(sys.argv[2])
    elif cmd == "env":
        env_values(sys.argv[2:])
    elif cmd == "validate" and len(sys.argv) >= 4:
        validate(sys.argv[2], sys.argv[3:])
    elif cmd == "alembic-head" and len(sys.argv) == 2:
        alembic_head()
    elif cmd == "api" and len(sys.argv) == 3:
        api(sys.argv[2])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
