//! Impersonation, as a real API server does it (`kubectl --as`, `--as-group`, `--as-uid`): the
//! `Impersonate-User`, `Impersonate-Group`, `Impersonate-Uid` and `Impersonate-Extra-<key>`
//! headers make the request act as another user, once the authenticated requester may
//! `impersonate` each of them (users, groups, serviceaccounts in their namespace for
//! `system:serviceaccount:<ns>:<name>`, uids and userextras/<key> in authentication.k8s.io).
//! The acting user gets the groups asked for (a ServiceAccount without them its fixed groups)
//! plus `system:authenticated`.

use super::rbac::{Attributes, ResourceAttributes};
use super::user::UserInfo;
use super::user::{AUTHENTICATED, UNAUTHENTICATED};

/// What a request's impersonation headers ask for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Impersonation {
    pub user: Option<String>,
    pub groups: Vec<String>,
    pub uid: Option<String>,
    /// `Impersonate-Extra-<key>` headers: (key, value).
    pub extras: Vec<(String, String)>,
}

const EXTRA_PREFIX: &str = "impersonate-extra-";

impl Impersonation {
    /// Reads the impersonation headers out of `(name, value)` pairs (names in any case).
    pub fn from_headers<'a>(headers: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        let mut out = Impersonation::default();
        for (name, value) in headers {
            let name = name.to_ascii_lowercase();
            match name.as_str() {
                "impersonate-user" => out.user = Some(value.to_owned()),
                "impersonate-group" => out.groups.push(value.to_owned()),
                "impersonate-uid" => out.uid = Some(value.to_owned()),
                _ => {
                    if let Some(key) = name.strip_prefix(EXTRA_PREFIX) {
                        out.extras.push((key.to_owned(), value.to_owned()));
                    }
                }
            }
        }
        out
    }

    /// Whether the request asks to impersonate anything.
    pub fn requested(&self) -> bool {
        self.user.is_some()
            || !self.groups.is_empty()
            || self.uid.is_some()
            || !self.extras.is_empty()
    }

    /// The permissions the requester needs, one per thing impersonated; Err when groups, a
    /// uid or extras are asked for without a user.
    pub fn needed(&self) -> Result<Vec<Attributes>, String> {
        let Some(user) = &self.user else {
            return Err(
                "impersonating groups, a uid or extra fields requires impersonating a user (Impersonate-User)"
                    .into(),
            );
        };
        let attrs = |group: &str, resource: &str, namespace: &str, name: &str| {
            Attributes::Resource(ResourceAttributes {
                verb: "impersonate".into(),
                group: group.into(),
                resource: resource.into(),
                subresource: String::new(),
                namespace: namespace.into(),
                name: name.into(),
            })
        };
        let mut needed = vec![match service_account(user) {
            Some((namespace, name)) => attrs("", "serviceaccounts", namespace, name),
            None => attrs("", "users", "", user),
        }];
        needed.extend(self.groups.iter().map(|g| attrs("", "groups", "", g)));
        if let Some(uid) = &self.uid {
            needed.push(attrs("authentication.k8s.io", "uids", "", uid));
        }
        for (key, value) in &self.extras {
            let mut extra = attrs("authentication.k8s.io", "userextras", "", value);
            if let Attributes::Resource(r) = &mut extra {
                r.subresource = key.clone();
            }
            needed.push(extra);
        }
        Ok(needed)
    }

    /// The user the request acts as (call after [`Impersonation::needed`] was granted).
    pub fn acting_user(&self) -> UserInfo {
        let name = self.user.clone().unwrap_or_default();
        let mut groups = self.groups.clone();
        if groups.is_empty()
            && let Some((namespace, _)) = service_account(&name)
        {
            groups = vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{namespace}"),
            ];
        }
        let implied = if name == "system:anonymous" {
            UNAUTHENTICATED
        } else {
            AUTHENTICATED
        };
        if !groups.iter().any(|g| g == implied) {
            groups.push(implied.into());
        }
        UserInfo {
            name,
            uid: self.uid.clone().unwrap_or_default(),
            groups,
        }
    }
}

/// (namespace, name) of a `system:serviceaccount:<ns>:<name>` user name.
fn service_account(user: &str) -> Option<(&str, &str)> {
    let rest = user.strip_prefix("system:serviceaccount:")?;
    let (namespace, name) = rest.split_once(':')?;
    (!namespace.is_empty() && !name.is_empty()).then_some((namespace, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resource(a: &Attributes) -> (&str, &str, &str, &str) {
        match a {
            Attributes::Resource(r) => (&r.group, &r.resource, &r.namespace, &r.name),
            Attributes::NonResource { .. } => panic!("not a resource"),
        }
    }

    #[test]
    fn headers_are_read_in_any_case() {
        let i = Impersonation::from_headers([
            ("Impersonate-User", "jane"),
            ("impersonate-group", "dev"),
            ("IMPERSONATE-GROUP", "ops"),
            ("Impersonate-Extra-Scopes", "view"),
            ("Accept", "json"),
        ]);
        assert_eq!(i.user.as_deref(), Some("jane"));
        assert_eq!(i.groups, ["dev", "ops"]);
        assert_eq!(i.extras, [("scopes".to_string(), "view".to_string())]);
        assert!(i.requested());
        assert!(!Impersonation::default().requested());
    }

    #[test]
    fn a_service_account_is_checked_in_its_namespace_and_gets_its_groups() {
        let i =
            Impersonation::from_headers([("Impersonate-User", "system:serviceaccount:team:app")]);
        let needed = i.needed().unwrap();
        assert_eq!(resource(&needed[0]), ("", "serviceaccounts", "team", "app"));
        let user = i.acting_user();
        assert_eq!(user.name, "system:serviceaccount:team:app");
        assert_eq!(
            user.groups,
            [
                "system:serviceaccounts",
                "system:serviceaccounts:team",
                "system:authenticated"
            ]
        );
    }

    #[test]
    fn users_groups_and_uids_each_need_the_verb() {
        let i = Impersonation::from_headers([
            ("Impersonate-User", "jane"),
            ("Impersonate-Group", "dev"),
            ("Impersonate-Uid", "1234"),
        ]);
        let needed: Vec<_> = i
            .needed()
            .unwrap()
            .iter()
            .map(|a| {
                let (g, r, _, n) = resource(a);
                (g.to_string(), r.to_string(), n.to_string())
            })
            .collect();
        assert_eq!(needed[0], ("".into(), "users".into(), "jane".into()));
        assert_eq!(needed[1], ("".into(), "groups".into(), "dev".into()));
        assert_eq!(
            needed[2],
            ("authentication.k8s.io".into(), "uids".into(), "1234".into())
        );
        assert_eq!(i.acting_user().groups, ["dev", "system:authenticated"]);
        let groups_only = Impersonation::from_headers([("Impersonate-Group", "dev")]);
        assert!(groups_only.needed().is_err());
    }
}
