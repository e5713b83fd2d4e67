//! The mariadb-operator fixture against a real server ([`MariaDbConfig::real`]): what each
//! Database, User and Grant means in SQL (pure, [`statements`]), and applying it to the
//! [`MariaDbServer`]. A Database is `CREATE DATABASE`, a User `CREATE USER … WITH
//! MAX_USER_CONNECTIONS <cap>` with the password of its Secret (set again on every pass, so a
//! changed password or cap takes effect), a Grant `GRANT`; deleting one drops what it made. The
//! MariaDB cluster itself is the server, exposed as the Service `<name>` on port 3306, the host
//! the operator's DSN names. Error texts are the server's, with any password cut out.
//!
//! [`MariaDbConfig::real`]: super::config::MariaDbConfig::real

use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::{Api, DynamicObject};
use serde_json::Value;

use super::kinds::{self, Kind};
use crate::real_servers::mariadb::{quote_identifier, quote_string};
use crate::real_servers::{MariaDbServer, expose};

/// The port of a MariaDB cluster's Service.
pub const MARIADB_PORT: u16 = 3306;

/// What a Database, User or Grant asks of the server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SqlObject {
    Database {
        name: String,
        character_set: Option<String>,
        collate: Option<String>,
    },
    User {
        name: String,
        host: String,
        max_user_connections: i64,
        password_secret: Option<(String, String)>,
    },
    Grant {
        privileges: Vec<String>,
        database: String,
        table: String,
        username: String,
        host: String,
        grant_option: bool,
    },
}

fn text(spec: &Value, key: &str) -> Option<String> {
    spec.get(key).and_then(Value::as_str).map(str::to_owned)
}

/// Reads the spec of a `kind` object named `name`; `Err` says what is wrong with it.
pub fn parse(kind: Kind, name: &str, spec: &Value) -> Result<SqlObject, String> {
    let host = text(spec, "host").unwrap_or_else(|| "%".to_owned());
    match kind.kind {
        "Database" => Ok(SqlObject::Database {
            name: text(spec, "name").unwrap_or_else(|| name.to_owned()),
            character_set: text(spec, "characterSet"),
            collate: text(spec, "collate"),
        }),
        "User" => Ok(SqlObject::User {
            name: text(spec, "name").unwrap_or_else(|| name.to_owned()),
            host,
            // mariadb-operator's default.
            max_user_connections: spec
                .get("maxUserConnections")
                .and_then(Value::as_i64)
                .unwrap_or(10),
            password_secret: spec.get("passwordSecretKeyRef").and_then(|r| {
                Some((
                    text(r, "name")?,
                    text(r, "key").unwrap_or_else(|| "password".into()),
                ))
            }),
        }),
        "Grant" => {
            let privileges: Vec<String> = spec
                .get("privileges")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect();
            if privileges.is_empty() {
                return Err("spec.privileges is empty".to_owned());
            }
            if let Some(bad) = privileges.iter().find(|p| {
                !p.chars()
                    .all(|c| c.is_ascii_alphabetic() || c == ' ' || c == '_')
            }) {
                return Err(format!("spec.privileges: {bad:?} is not a privilege"));
            }
            Ok(SqlObject::Grant {
                privileges,
                database: text(spec, "database").unwrap_or_else(|| "*".to_owned()),
                table: text(spec, "table").unwrap_or_else(|| "*".to_owned()),
                username: text(spec, "username")
                    .ok_or_else(|| "spec.username is missing".to_owned())?,
                host,
                grant_option: spec
                    .get("grantOption")
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
            })
        }
        other => Err(format!("{other} is not a SQL object")),
    }
}

fn on(database: &str, table: &str) -> String {
    let part = |p: &str| {
        if p == "*" {
            "*".to_owned()
        } else {
            quote_identifier(p)
        }
    };
    format!("{}.{}", part(database), part(table))
}

/// The statements that make `object` exist (`password` for a User), and those that undo it.
pub fn statements(object: &SqlObject, password: Option<&str>) -> (String, String) {
    match object {
        SqlObject::Database {
            name,
            character_set,
            collate,
        } => {
            let mut create = format!("CREATE DATABASE IF NOT EXISTS {}", quote_identifier(name));
            if let Some(c) = character_set {
                create.push_str(&format!(" CHARACTER SET {}", quote_string(c)));
            }
            if let Some(c) = collate {
                create.push_str(&format!(" COLLATE {}", quote_string(c)));
            }
            create.push(';');
            (
                create,
                format!("DROP DATABASE IF EXISTS {};", quote_identifier(name)),
            )
        }
        SqlObject::User {
            name,
            host,
            max_user_connections,
            ..
        } => {
            let account = format!("{}@{}", quote_string(name), quote_string(host));
            let identified = password
                .map(|p| format!(" IDENTIFIED BY {}", quote_string(p)))
                .unwrap_or_default();
            let cap = format!(" WITH MAX_USER_CONNECTIONS {max_user_connections}");
            (
                format!(
                    "CREATE USER IF NOT EXISTS {account}{identified}{cap}; \
                     ALTER USER {account}{identified}{cap};"
                ),
                format!("DROP USER IF EXISTS {account};"),
            )
        }
        SqlObject::Grant {
            privileges,
            database,
            table,
            username,
            host,
            grant_option,
        } => {
            let account = format!("{}@{}", quote_string(username), quote_string(host));
            let privileges = privileges.join(", ");
            let target = on(database, table);
            let option = if *grant_option {
                " WITH GRANT OPTION"
            } else {
                ""
            };
            (
                format!("GRANT {privileges} ON {target} TO {account}{option};"),
                format!("REVOKE {privileges} ON {target} FROM {account};"),
            )
        }
    }
}

/// `message` with every occurrence of `secret` replaced.
fn redact(message: &str, secret: Option<&str>) -> String {
    match secret.filter(|s| !s.is_empty()) {
        Some(s) => message.replace(s, "<redacted>"),
        None => message.to_owned(),
    }
}

/// The password a User's `passwordSecretKeyRef` names.
async fn password(
    client: &kube::Client,
    namespace: &str,
    object: &SqlObject,
) -> Result<Option<String>, String> {
    let SqlObject::User {
        password_secret: Some((secret, key)),
        ..
    } = object
    else {
        return Ok(None);
    };
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let found = api
        .get_opt(secret)
        .await
        .map_err(|e| format!("reading Secret {namespace}/{secret}: {e}"))?
        .ok_or_else(|| format!("Secret {namespace}/{secret} not found"))?;
    let bytes = found
        .data
        .as_ref()
        .and_then(|d| d.get(key))
        .ok_or_else(|| format!("Secret {namespace}/{secret} has no key {key}"))?;
    String::from_utf8(bytes.0.clone())
        .map(Some)
        .map_err(|_| format!("Secret {namespace}/{secret} key {key} is not UTF-8"))
}

/// Makes `object` (of `kind`) exist on `server`, a User with `user_cap` in place of its spec's
/// cap when given: `Err` is the message of its Ready=False.
pub async fn apply(
    server: &MariaDbServer,
    client: &kube::Client,
    kind: Kind,
    object: &DynamicObject,
    user_cap: Option<i64>,
) -> Result<(), String> {
    let namespace = object.namespace().unwrap_or_default();
    let spec = object.data.get("spec").cloned().unwrap_or(Value::Null);
    let mut sql = parse(kind, &object.name_any(), &spec)?;
    if let (
        SqlObject::User {
            max_user_connections,
            ..
        },
        Some(cap),
    ) = (&mut sql, user_cap)
    {
        *max_user_connections = cap;
    }
    let password = password(client, &namespace, &sql).await?;
    let (create, _) = statements(&sql, password.as_deref());
    server
        .sql(&create)
        .await
        .map(drop)
        .map_err(|e| redact(&e, password.as_deref()))
}

/// Undoes what `object` made on `server` (nothing to undo is not an error).
pub async fn remove(
    server: &MariaDbServer,
    kind: Kind,
    object: &DynamicObject,
) -> Result<(), String> {
    let spec = object.data.get("spec").cloned().unwrap_or(Value::Null);
    let Ok(sql) = parse(kind, &object.name_any(), &spec) else {
        // Never applied: nothing to undo.
        return Ok(());
    };
    let (_, drop_sql) = statements(&sql, None);
    match server.sql(&drop_sql).await {
        Ok(_) => Ok(()),
        // A grant whose user or privileges are gone already.
        Err(e)
            if kind == kinds::GRANT
                && (e.contains("1141") || e.contains("1147") || e.contains("1269")) =>
        {
            Ok(())
        }
        Err(e) => Err(e),
    }
}

/// The real server's side of a MariaDB cluster: it answers, and the Service `<name>` (port
/// 3306) of the cluster's namespace leads to it. `Err` is the message of its Ready=False.
pub async fn serve_cluster(
    server: &MariaDbServer,
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> Result<(), String> {
    server.sql("SELECT 1").await.map(drop)?;
    expose(client, namespace, name, MARIADB_PORT, server.port())
        .await
        .map_err(|e| format!("the Service {namespace}/{name}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_kind_is_its_sql() {
        let db = parse(
            kinds::DATABASE,
            "c",
            &json!({"name": "cinder", "characterSet": "utf8mb4", "collate": "utf8mb4_general_ci"}),
        )
        .unwrap();
        assert_eq!(
            statements(&db, None),
            (
                "CREATE DATABASE IF NOT EXISTS `cinder` CHARACTER SET 'utf8mb4' COLLATE 'utf8mb4_general_ci';".into(),
                "DROP DATABASE IF EXISTS `cinder`;".into()
            )
        );
        let user = parse(
            kinds::USER,
            "c",
            &json!({"name": "cinder", "host": "%", "maxUserConnections": 22,
                    "passwordSecretKeyRef": {"name": "db", "key": "password"}}),
        )
        .unwrap();
        let (create, drop) = statements(&user, Some("p'w"));
        assert_eq!(
            create,
            "CREATE USER IF NOT EXISTS 'cinder'@'%' IDENTIFIED BY 'p''w' WITH MAX_USER_CONNECTIONS 22; \
             ALTER USER 'cinder'@'%' IDENTIFIED BY 'p''w' WITH MAX_USER_CONNECTIONS 22;"
        );
        assert_eq!(drop, "DROP USER IF EXISTS 'cinder'@'%';");
        let grant = parse(
            kinds::GRANT,
            "c",
            &json!({"privileges": ["ALL PRIVILEGES"], "database": "cinder", "table": "*",
                    "username": "cinder", "host": "%", "grantOption": false}),
        )
        .unwrap();
        assert_eq!(
            statements(&grant, None),
            (
                "GRANT ALL PRIVILEGES ON `cinder`.* TO 'cinder'@'%';".into(),
                "REVOKE ALL PRIVILEGES ON `cinder`.* FROM 'cinder'@'%';".into()
            )
        );
    }

    #[test]
    fn bad_specs_are_refused_and_secrets_redacted() {
        assert!(
            parse(
                kinds::GRANT,
                "g",
                &json!({"privileges": ["ALL; DROP"], "username": "u"})
            )
            .is_err()
        );
        assert!(parse(kinds::GRANT, "g", &json!({"privileges": ["SELECT"]})).is_err());
        assert!(parse(kinds::GRANT, "g", &json!({"username": "u"})).is_err());
        assert_eq!(redact("bad 's3cr3t'", Some("s3cr3t")), "bad '<redacted>'");
    }
}
