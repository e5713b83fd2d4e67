//! Bearer tokens: the cluster administrator's (written into the simulator's kubeconfig) and the
//! ServiceAccount tokens the TokenRequest API issues. A ServiceAccount token is valid until it
//! expires and only while its ServiceAccount exists with the uid it was issued for, as a bound
//! token is on a real cluster.

use super::user::UserInfo;
use crate::store::Store;
use chrono::{DateTime, Utc};
use rand::Rng;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The audience of tokens meant for the API server itself.
pub const API_AUDIENCE: &str = "https://kubernetes.default.svc.cluster.local";

/// Lifetime of a token whose request names none, and the shortest one granted (seconds).
pub const DEFAULT_EXPIRATION: i64 = 3600;
pub const MIN_EXPIRATION: i64 = 600;

/// One issued ServiceAccount token.
#[derive(Clone, Debug)]
struct Issued {
    namespace: String,
    name: String,
    uid: String,
    audiences: Vec<String>,
    expires: DateTime<Utc>,
}

/// A token that passed review.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reviewed {
    pub user: UserInfo,
    /// The audiences the token is valid for among those asked.
    pub audiences: Vec<String>,
}

/// The tokens the simulator accepts.
#[derive(Clone, Debug)]
pub struct Tokens {
    admin: String,
    issued: Arc<Mutex<HashMap<String, Issued>>>,
}

impl Default for Tokens {
    fn default() -> Self {
        Tokens::new()
    }
}

fn random_token(prefix: &str) -> String {
    let bytes: [u8; 24] = rand::rng().random();
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("{prefix}.{hex}")
}

impl Tokens {
    /// A fresh set with a random administrator token.
    pub fn new() -> Tokens {
        Tokens {
            admin: random_token("sim-admin"),
            issued: Arc::default(),
        }
    }

    /// The administrator's token (the simulator's kubeconfig carries it).
    pub fn admin_token(&self) -> &str {
        &self.admin
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Issued>> {
        self.issued.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Issues a token for the ServiceAccount `namespace/name` (uid `uid`); answers the token and
    /// when it expires. Expired tokens are forgotten here.
    pub fn issue(
        &self,
        namespace: &str,
        name: &str,
        uid: &str,
        audiences: Vec<String>,
        expiration_seconds: i64,
    ) -> (String, DateTime<Utc>) {
        let now = Utc::now();
        let expires = now + chrono::Duration::seconds(expiration_seconds.max(MIN_EXPIRATION));
        let token = random_token("sim-sa");
        let mut issued = self.lock();
        issued.retain(|_, t| t.expires > now);
        issued.insert(
            token.clone(),
            Issued {
                namespace: namespace.into(),
                name: name.into(),
                uid: uid.into(),
                audiences,
                expires,
            },
        );
        (token, expires)
    }

    /// Who `token` authenticates, for `audiences` (empty: the API server's own). None for an
    /// unknown or expired token, one whose ServiceAccount is gone or recreated, or one meant
    /// for other audiences.
    pub fn review(&self, token: &str, audiences: &[String], store: &Store) -> Option<Reviewed> {
        if token == self.admin {
            return Some(Reviewed {
                user: UserInfo::admin(),
                audiences: audiences.to_vec(),
            });
        }
        let issued = self.lock().get(token).cloned()?;
        if issued.expires <= Utc::now() {
            return None;
        }
        let wanted: Vec<String> = if audiences.is_empty() {
            vec![API_AUDIENCE.to_string()]
        } else {
            audiences.to_vec()
        };
        let common: Vec<String> = wanted
            .into_iter()
            .filter(|a| issued.audiences.contains(a))
            .collect();
        if common.is_empty() {
            return None;
        }
        let account = store.get("", "serviceaccounts", &issued.namespace, &issued.name)?;
        let uid = account
            .pointer("/metadata/uid")
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default();
        (uid == issued.uid).then(|| Reviewed {
            user: UserInfo::service_account(&issued.namespace, &issued.name, uid),
            audiences: common,
        })
    }
}
