//! Who a request comes from: the user name, uid and groups authentication finds, named as a real
//! API server names them (`system:serviceaccount:<ns>:<name>`, `system:anonymous`, ...).

/// An authenticated (or anonymous) user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserInfo {
    pub name: String,
    pub uid: String,
    pub groups: Vec<String>,
}

/// The group every request with a valid credential belongs to.
pub const AUTHENTICATED: &str = "system:authenticated";
/// The group of requests without a credential.
pub const UNAUTHENTICATED: &str = "system:unauthenticated";
/// The group RBAC allows everything.
pub const MASTERS: &str = "system:masters";
/// The name of the cluster administrator the simulator's kubeconfig authenticates as.
pub const ADMIN: &str = "kubernetes-admin";

impl UserInfo {
    /// A request without a credential.
    pub fn anonymous() -> UserInfo {
        UserInfo {
            name: "system:anonymous".into(),
            uid: String::new(),
            groups: vec![UNAUTHENTICATED.into()],
        }
    }

    /// The cluster administrator (member of system:masters).
    pub fn admin() -> UserInfo {
        UserInfo {
            name: ADMIN.into(),
            uid: String::new(),
            groups: vec![MASTERS.into(), AUTHENTICATED.into()],
        }
    }

    /// The user of a ServiceAccount's token.
    pub fn service_account(namespace: &str, name: &str, uid: &str) -> UserInfo {
        UserInfo {
            name: format!("system:serviceaccount:{namespace}:{name}"),
            uid: uid.into(),
            groups: vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{namespace}"),
                AUTHENTICATED.into(),
            ],
        }
    }
}
