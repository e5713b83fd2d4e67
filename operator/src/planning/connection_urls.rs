//! The pymysql DSN and the rabbit:// transport URL, built from credential Secret values, and
//! their digests. The values only ever go into the derived Secrets (`{name}-db-connection`,
//! `{name}-transport-url`); annotations carry the digests.

use super::digest::Sensitive;

/// Default MariaDB port.
pub(crate) const DEFAULT_DB_PORT: u16 = 3306;
/// The port of the database server given `spec.database.port`: the port when it is one
/// (1-65535), else [`DEFAULT_DB_PORT`]. The DSN connects to it and the NetworkPolicy's egress
/// opens it.
pub(crate) fn database_port(port: Option<i32>) -> u16 {
    port.and_then(|p| u16::try_from(p).ok())
        .filter(|p| *p > 0)
        .unwrap_or(DEFAULT_DB_PORT)
}

/// Default AMQP port.
pub(crate) const DEFAULT_AMQP_PORT: u16 = 5672;
/// The key of the DSN in `{name}-db-connection`.
pub(crate) const DB_CONNECTION_KEY: &str = "connection";
/// The key of the URL in `{name}-transport-url`.
pub(crate) const TRANSPORT_URL_KEY: &str = "transport_url";

/// Percent-encodes everything but RFC 3986 unreserved characters.
pub(crate) fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A required credential field was empty or carried a control character.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("credential field {field} is {problem}")]
pub struct CredentialError {
    pub field: &'static str,
    pub problem: &'static str,
}

fn check(field: &'static str, value: &str, required: bool) -> Result<(), CredentialError> {
    if required && value.is_empty() {
        return Err(CredentialError {
            field,
            problem: "empty",
        });
    }
    if value.chars().any(char::is_control) {
        return Err(CredentialError {
            field,
            problem: "carrying a control character",
        });
    }
    Ok(())
}

/// The parts of the database connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DbEndpoint {
    pub host: String,
    pub port: u16,
    pub database: String,
}

/// `{scheme}://user:password@host:port/{path}`, the user name and password percent-encoded;
/// user name, password and host are required.
fn login_url(
    scheme: &str,
    username: &str,
    password: &str,
    host: &str,
    port: u16,
    path: &str,
) -> Result<Sensitive, CredentialError> {
    check("username", username, true)?;
    check("password", password, true)?;
    check("host", host, true)?;
    Ok(Sensitive::new(format!(
        "{scheme}://{}:{}@{host}:{port}/{path}",
        percent_encode(username),
        percent_encode(password),
    )))
}

/// `mysql+pymysql://user:password@host:port/database?charset=utf8`.
pub fn pymysql_dsn(
    endpoint: &DbEndpoint,
    username: &str,
    password: &str,
) -> Result<Sensitive, CredentialError> {
    let database = format!("{}?charset=utf8", percent_encode(&endpoint.database));
    let dsn = login_url(
        "mysql+pymysql",
        username,
        password,
        &endpoint.host,
        endpoint.port,
        &database,
    )?;
    check("database", &endpoint.database, true)?;
    Ok(dsn)
}

/// The parts of the broker connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerEndpoint {
    pub host: String,
    pub port: u16,
    /// The virtual host; empty means the broker default `/`.
    pub vhost: String,
}

impl BrokerEndpoint {
    /// From the Secret's optional `port` and `vhost` values (5672 and `/` when absent).
    pub fn parse(
        host: &str,
        port: Option<&str>,
        vhost: Option<&str>,
    ) -> Result<Self, CredentialError> {
        check("host", host, true)?;
        let port = match port.map(str::trim).filter(|p| !p.is_empty()) {
            None => DEFAULT_AMQP_PORT,
            Some(p) => match p.parse::<u16>() {
                Ok(n) if n > 0 => n,
                _ => {
                    return Err(CredentialError {
                        field: "port",
                        problem: "not a port number",
                    });
                }
            },
        };
        let vhost = vhost.unwrap_or_default();
        check("vhost", vhost, false)?;
        Ok(BrokerEndpoint {
            host: host.to_string(),
            port,
            vhost: vhost.to_string(),
        })
    }
}

/// `rabbit://user:password@host:port/vhost` (the default vhost `/` renders as an empty path).
///
/// oslo.messaging's rabbit driver (17.x and 18.x) decodes this URL and re-encodes it for kombu
/// with `quote()`, which leaves `/` as it is, and the vhost not at all: a user name or password
/// with `/` then splits the broker's address (kombu fails on a port such as `a`), and `?` or `#`
/// in the vhost cut it short. Those are refused here, as a credential error, rather than
/// delivered as a URL that no Cinder service can use.
pub fn rabbit_transport_url(
    endpoint: &BrokerEndpoint,
    username: &str,
    password: &str,
) -> Result<Sensitive, CredentialError> {
    for (field, value) in [("username", username), ("password", password)] {
        if value.contains('/') {
            return Err(CredentialError {
                field,
                problem: "carrying a '/', which oslo.messaging's rabbit driver passes to kombu unencoded",
            });
        }
    }
    if endpoint.vhost.contains(['?', '#']) {
        return Err(CredentialError {
            field: "vhost",
            problem: "carrying a '?' or '#', which oslo.messaging's rabbit driver passes to kombu unencoded",
        });
    }
    let vhost = if endpoint.vhost == "/" {
        String::new()
    } else {
        percent_encode(&endpoint.vhost)
    };
    login_url(
        "rabbit",
        username,
        password,
        &endpoint.host,
        endpoint.port,
        &vhost,
    )
}

/// `value` written so that oslo.config reads it back unchanged from an `OS_<GROUP>__<OPTION>`
/// variable: oslo.config interpolates `$name` and `${name}` in environment values as it does in
/// files, so each literal `$` is doubled. (The DSN and the transport URL need none of this: they
/// percent-encode `$`.)
pub fn oslo_config_literal(value: &str) -> String {
    value.replace('$', "$$")
}

/// The digest of the service-user password (`cinder.c5c3.io/authtoken-hash`).
pub(crate) fn authtoken_hash(password: &str) -> String {
    super::digest::sha256_hex(password.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn db() -> DbEndpoint {
        DbEndpoint {
            host: "mariadb.ns.svc".into(),
            port: 3306,
            database: "cinder".into(),
        }
    }

    #[test]
    fn dsn_encodes_credentials() {
        let dsn = pymysql_dsn(&db(), "cinder", "p@ss:w/rd").unwrap();
        assert_eq!(
            dsn.expose(),
            "mysql+pymysql://cinder:p%40ss%3Aw%2Frd@mariadb.ns.svc:3306/cinder?charset=utf8"
        );
        assert_eq!(dsn.digest().len(), 64);
        assert_ne!(
            dsn.digest(),
            pymysql_dsn(&db(), "cinder", "other").unwrap().digest()
        );
    }

    #[test]
    fn empty_or_control_characters_are_refused_without_echoing_the_value() {
        let err = pymysql_dsn(&db(), "cinder", "").unwrap_err();
        assert_eq!(err.field, "password");
        let err = pymysql_dsn(&db(), "cinder", "sec\nret").unwrap_err();
        assert!(!err.to_string().contains("sec"));
    }

    #[test]
    fn transport_url_with_default_and_named_vhost() {
        let ep = BrokerEndpoint::parse("rabbitmq.ns.svc", None, None).unwrap();
        assert_eq!(ep.port, 5672);
        assert_eq!(
            rabbit_transport_url(&ep, "u", "p").unwrap().expose(),
            "rabbit://u:p@rabbitmq.ns.svc:5672/"
        );
        let ep = BrokerEndpoint::parse("rmq", Some("5671"), Some("cinder")).unwrap();
        assert_eq!(
            rabbit_transport_url(&ep, "u", "p w").unwrap().expose(),
            "rabbit://u:p%20w@rmq:5671/cinder"
        );
        assert!(BrokerEndpoint::parse("rmq", Some("http"), None).is_err());
        assert!(BrokerEndpoint::parse("rmq", Some("0"), None).is_err());
    }

    #[test]
    fn broker_credentials_the_rabbit_driver_cannot_carry_are_refused_without_the_value() {
        let ep = BrokerEndpoint::parse("rmq", None, Some("cinder")).unwrap();
        for (user, password, field) in [("u", "se/cret", "password"), ("u/x", "p", "username")] {
            let err = rabbit_transport_url(&ep, user, password).unwrap_err();
            assert_eq!(err.field, field);
            assert!(!err.to_string().contains("se/cret") && err.to_string().contains("'/'"));
        }
        for vhost in ["a?b", "a#b"] {
            let ep = BrokerEndpoint::parse("rmq", None, Some(vhost)).unwrap();
            assert_eq!(
                rabbit_transport_url(&ep, "u", "p").unwrap_err().field,
                "vhost"
            );
        }
        // What the driver does carry: every other reserved character, and a '/' in the vhost.
        let ep = BrokerEndpoint::parse("rmq", None, Some("a/b")).unwrap();
        assert_eq!(
            rabbit_transport_url(&ep, "c@in:der", "p@ss:w?rd#%")
                .unwrap()
                .expose(),
            "rabbit://c%40in%3Ader:p%40ss%3Aw%3Frd%23%25@rmq:5672/a%2Fb"
        );
    }

    #[test]
    fn dollars_are_doubled_for_oslo_config_and_urls_carry_none() {
        assert_eq!(oslo_config_literal("pa$word"), "pa$$word");
        assert_eq!(oslo_config_literal("$${x}$"), "$$$${x}$$");
        assert_eq!(oslo_config_literal("plain"), "plain");
        let dsn = pymysql_dsn(&db(), "ci$nder", "p$w").unwrap();
        assert!(!dsn.expose().contains('$'), "{}", dsn.expose());
        let ep = BrokerEndpoint::parse("rmq", None, Some("v$h")).unwrap();
        let url = rabbit_transport_url(&ep, "u$", "p$").unwrap();
        assert!(!url.expose().contains('$'), "{}", url.expose());
    }

    #[test]
    fn authtoken_hash_is_a_digest() {
        assert_eq!(
            authtoken_hash("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
