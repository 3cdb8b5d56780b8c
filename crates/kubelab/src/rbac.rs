//! Who a request is, and what that user may do: kube-lab's two users, as
//! a static token file and two ClusterRoleBindings would make them.
//!
//! - No credentials: `lab-admin`, bound to `cluster-admin` (every verb).
//! - `lab-admin` impersonating `lab-viewer` (`Impersonate-User`, what a
//!   kubeconfig user's `as:` sends), or the bearer token `lab-viewer`:
//!   `lab-viewer`, bound to the built-in `view` ClusterRole's verbs —
//!   `get`, `list` and `watch` — on every resource. (kubectl and kube-rs
//!   send no bearer token to a plain-HTTP server; impersonation headers
//!   they do send, so the lab's kubeconfig uses `as:`.)
//! - Any other token: 401 Unauthorized, as an unknown token is; any other
//!   user impersonated: 403, the lab knows no other bindings.
//!
//! A request the user may not make is answered 403 Forbidden with the
//! API server's message; `SelfSubjectAccessReview` (what `kubectl auth
//! can-i` posts) answers whether the user may, from the same rule.

use crate::store::Failure;
use serde_json::{Value, json};

/// The token of the read-only user.
pub const VIEWER_TOKEN: &str = "lab-viewer";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum User {
    Admin,
    Viewer,
}

impl User {
    pub fn name(self) -> &'static str {
        match self {
            User::Admin => "lab-admin",
            User::Viewer => "lab-viewer",
        }
    }

    /// Whether the user may use `verb` (on any resource: the lab's roles
    /// do not tell resources apart).
    pub fn may(self, verb: &str) -> bool {
        match self {
            User::Admin => true,
            User::Viewer => matches!(verb, "get" | "list" | "watch"),
        }
    }
}

/// The user a request's `Authorization` and `Impersonate-User` headers
/// name.
pub fn user_of(authorization: Option<&str>, impersonate: Option<&str>) -> Result<User, Failure> {
    let authenticated = match authorization.map(str::trim) {
        None | Some("") => User::Admin,
        Some(a) => match a.strip_prefix("Bearer ").map(str::trim) {
            Some(VIEWER_TOKEN) => User::Viewer,
            _ => return Err(Failure::new(401, "Unauthorized", "Unauthorized")),
        },
    };
    match (authenticated, impersonate.map(str::trim)) {
        (u, None) => Ok(u),
        (User::Admin, Some("lab-admin")) => Ok(User::Admin),
        (User::Admin, Some("lab-viewer")) => Ok(User::Viewer),
        (u, Some(other)) => Err(Failure::new(
            403,
            "Forbidden",
            format!(
                "users \"{other}\" is forbidden: User \"{}\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope",
                u.name()
            ),
        )),
    }
}

/// The request's verb, as the authorizer names it: a GET of a collection
/// is `list` (`watch` with `watch=true`), of one object `get`.
pub fn verb_of(method: &str, segs: &[&str], watch: bool) -> &'static str {
    match method {
        "GET" if watch => "watch",
        "GET" if target(segs).is_some_and(|t| t.name.is_none()) => "list",
        "GET" => "get",
        "POST" => "create",
        "PUT" => "update",
        "PATCH" => "patch",
        "DELETE" => "delete",
        _ => "get",
    }
}

/// What a resource path names.
struct Target<'a> {
    group: &'a str,
    namespace: Option<&'a str>,
    resource: &'a str,
    name: Option<&'a str>,
    subresource: Option<&'a str>,
}

fn target<'a>(segs: &[&'a str]) -> Option<Target<'a>> {
    let rest = match segs {
        ["api", _v, rest @ ..] => ("", rest),
        ["apis", g, _v, rest @ ..] => (*g, rest),
        _ => return None,
    };
    let (group, rest) = rest;
    let (namespace, rest) = match rest {
        ["namespaces", ns, more @ ..] if !more.is_empty() => (Some(*ns), more),
        other => (None, other),
    };
    match rest {
        [r] => Some(Target {
            group,
            namespace,
            resource: r,
            name: None,
            subresource: None,
        }),
        [r, n] => Some(Target {
            group,
            namespace,
            resource: r,
            name: Some(n),
            subresource: None,
        }),
        [r, n, s, ..] => Some(Target {
            group,
            namespace,
            resource: r,
            name: Some(n),
            subresource: Some(s),
        }),
        _ => None,
    }
}

/// The API server's 403 for `user` using `verb` on the path.
pub fn forbidden(user: User, verb: &str, segs: &[&str]) -> Failure {
    let Some(t) = target(segs) else {
        return Failure::new(
            403,
            "Forbidden",
            format!(
                "forbidden: User \"{}\" cannot {verb} path \"/{}\"",
                user.name(),
                segs.join("/")
            ),
        );
    };
    let resource = match t.subresource {
        Some(s) => format!("{}/{s}", t.resource),
        None => t.resource.to_string(),
    };
    let scope = match t.namespace {
        Some(ns) => format!("in the namespace \"{ns}\""),
        None => "at the cluster scope".into(),
    };
    let what = match t.name {
        Some(n) => format!("{} \"{n}\"", t.resource),
        None => t.resource.to_string(),
    };
    Failure::new(
        403,
        "Forbidden",
        format!(
            "{what} is forbidden: User \"{}\" cannot {verb} resource \"{resource}\" in API group \"{}\" {scope}",
            user.name(),
            t.group
        ),
    )
}

/// The answer to a SelfSubjectAccessReview: the review, with its status.
pub fn review(user: User, body: &Value) -> Result<Value, Failure> {
    let spec = &body["spec"];
    let verb = spec["resourceAttributes"]["verb"]
        .as_str()
        .or_else(|| spec["nonResourceAttributes"]["verb"].as_str())
        .ok_or_else(|| {
            Failure::new(
                422,
                "Invalid",
                "SelfSubjectAccessReview.authorization.k8s.io \"\" is invalid: \
                 spec.resourceAttributes: Invalid value: \"null\": exactly one of \
                 nonResourceAttributes or resourceAttributes must be specified",
            )
        })?;
    let allowed = user.may(verb);
    let mut status = json!({"allowed": allowed});
    if allowed {
        status["reason"] = json!(match user {
            User::Admin =>
                "RBAC: allowed by ClusterRoleBinding \"lab-admin\" of ClusterRole \"cluster-admin\" to User \"lab-admin\"",
            User::Viewer =>
                "RBAC: allowed by ClusterRoleBinding \"lab-viewer\" of ClusterRole \"view\" to User \"lab-viewer\"",
        });
    }
    Ok(json!({
        "kind": "SelfSubjectAccessReview",
        "apiVersion": "authorization.k8s.io/v1",
        "metadata": {"creationTimestamp": null},
        "spec": spec,
        "status": status,
    }))
}

/// A review sent as protobuf (kubectl sends built-in kinds so: the
/// `k8s\0` magic, then a `runtime.Unknown` whose `raw` is the review),
/// read into the JSON shape `review` takes. Only the fields a review's
/// question has are read.
pub fn review_from_protobuf(body: &[u8]) -> Option<Value> {
    let unknown = body.strip_prefix(b"k8s\0")?;
    let raw = field(unknown, 2)?;
    let spec = field(raw, 2)?;
    let text = |m: &[u8], n| field(m, n).map(|b| String::from_utf8_lossy(b).into_owned());
    if let Some(ra) = field(spec, 1) {
        let mut attrs = serde_json::Map::new();
        for (n, key) in [
            (1, "namespace"),
            (2, "verb"),
            (3, "group"),
            (4, "version"),
            (5, "resource"),
            (6, "subresource"),
            (7, "name"),
        ] {
            if let Some(v) = text(ra, n) {
                attrs.insert(key.into(), json!(v));
            }
        }
        return Some(json!({"spec": {"resourceAttributes": attrs}}));
    }
    let nra = field(spec, 2)?;
    Some(json!({"spec": {"nonResourceAttributes": {
        "path": text(nra, 1), "verb": text(nra, 2)}}}))
}

/// The bytes of field `n` (length-delimited) of a protobuf message; the
/// first one where it repeats.
fn field(mut m: &[u8], n: u64) -> Option<&[u8]> {
    while !m.is_empty() {
        let key = varint(&mut m)?;
        let len = match key & 7 {
            0 => {
                varint(&mut m)?;
                continue;
            }
            1 => 8,
            5 => 4,
            2 => usize::try_from(varint(&mut m)?).ok()?,
            _ => return None,
        };
        if m.len() < len {
            return None;
        }
        let (value, rest) = m.split_at(len);
        if key >> 3 == n && key & 7 == 2 {
            return Some(value);
        }
        m = rest;
    }
    None
}

fn varint(m: &mut &[u8]) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let (&b, rest) = m.split_first()?;
        *m = rest;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

/// The authorization group's discovery (it holds only the review).
pub fn resource_list() -> Value {
    json!({"kind": "APIResourceList", "apiVersion": "v1",
        "groupVersion": "authorization.k8s.io/v1",
        "resources": [{"name": "selfsubjectaccessreviews", "singularName": "selfsubjectaccessreview",
            "namespaced": false, "kind": "SelfSubjectAccessReview", "verbs": ["create"]}]})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_viewer_reads_and_is_refused_writes_with_the_servers_words() {
        assert_eq!(user_of(None, None).ok(), Some(User::Admin));
        assert_eq!(user_of(None, Some("lab-viewer")).ok(), Some(User::Viewer));
        let token = Some("Bearer lab-viewer");
        assert_eq!(user_of(token, None).ok(), Some(User::Viewer));
        let code = |r: Result<User, Failure>| r.err().map(|f| f.code);
        assert_eq!(code(user_of(Some("Bearer nope"), None)), Some(401));
        assert_eq!(code(user_of(None, Some("mallory"))), Some(403));
        assert_eq!(code(user_of(token, Some("lab-admin"))), Some(403));
        let node: Vec<&str> = "api/v1/nodes/gpu-01".split('/').collect();
        assert_eq!(verb_of("GET", &node, false), "get");
        assert_eq!(verb_of("GET", &node[..3], false), "list");
        assert_eq!(verb_of("GET", &node[..3], true), "watch");
        assert!(User::Viewer.may("list") && !User::Viewer.may("patch"));
        let f = forbidden(User::Viewer, "patch", &node);
        assert_eq!(f.code, 403);
        assert_eq!(
            f.message,
            "nodes \"gpu-01\" is forbidden: User \"lab-viewer\" cannot patch resource \"nodes\" \
             in API group \"\" at the cluster scope"
        );
        let evict: Vec<&str> = "api/v1/namespaces/ml/pods/p-0/eviction"
            .split('/')
            .collect();
        assert!(forbidden(User::Viewer, "create", &evict).message.ends_with(
            "cannot create resource \"pods/eviction\" in API group \"\" in the namespace \"ml\""
        ),);
        let asked = json!({"spec": {"resourceAttributes": {"verb": "patch", "resource": "nodes"}}});
        assert_eq!(
            review(User::Viewer, &asked)
                .ok()
                .map(|r| r["status"]["allowed"].clone()),
            Some(json!(false))
        );
        assert_eq!(
            review(User::Admin, &asked)
                .ok()
                .map(|r| r["status"]["allowed"].clone()),
            Some(json!(true))
        );
        assert_eq!(
            review(User::Admin, &json!({"spec": {}}))
                .err()
                .map(|f| f.code),
            Some(422)
        );
    }
}
