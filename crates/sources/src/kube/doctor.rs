//! `nightshift doctor` on Kubernetes: the context and who it
//! authenticates as, the scheduling kinds served, and whether that user
//! may do what nightshift does (one SelfSubjectAccessReview per verb, as
//! `kubectl auth can-i` asks).

use super::{Connection, Discovered, KubeConfig, Watched};
use crate::SourceError;
use crate::protocol::doctor::{Check, Verdict, check};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};

/// The Kubernetes checks: where and as whom, then the rights. `read_only`:
/// nightshift will not act here, so rights to act are not asked for.
pub async fn checks(cfg: &KubeConfig, read_only: bool) -> Vec<Check> {
    match super::discover_on(cfg).await {
        Err(e) => vec![kubernetes(Err(&e))],
        Ok((d, conn, watched)) => vec![
            kubernetes(Ok(&d)),
            rights(&conn, cfg, &watched, read_only).await,
        ],
    }
}

/// One right nightshift needs: the verb on the resource, and what it is
/// for.
struct Right {
    verb: &'static str,
    group: String,
    resource: String,
    subresource: Option<&'static str>,
    namespace: Option<String>,
    for_what: String,
    /// An action's (not a reading's): not needed in read-only mode.
    acts: bool,
}

fn needed(cfg: &KubeConfig, watched: &[Watched]) -> Vec<Right> {
    let mut out = Vec::new();
    for w in watched {
        let ns = if w.namespaced {
            cfg.namespace.clone()
        } else {
            None
        };
        for verb in ["list", "watch"] {
            out.push(Right {
                verb,
                group: w.resource.group.clone(),
                resource: w.resource.plural.clone(),
                subresource: None,
                namespace: ns.clone(),
                for_what: format!("reading {}", w.resource.plural),
                acts: false,
            });
        }
    }
    let act = |verb, group: &str, resource: &str, sub, ns: Option<String>, what: &str| Right {
        verb,
        group: group.into(),
        resource: resource.into(),
        subresource: sub,
        namespace: ns,
        for_what: what.into(),
        acts: true,
    };
    out.push(act(
        "patch",
        "",
        "nodes",
        None,
        None,
        "cordon, uncordon, a reason",
    ));
    out.push(act(
        "create",
        "",
        "pods",
        Some("eviction"),
        cfg.namespace.clone(),
        "a drain's evictions",
    ));
    if watched.iter().any(|w| w.resource.plural == "workloads") {
        out.push(act(
            "patch",
            "kueue.x-k8s.io",
            "workloads",
            None,
            cfg.namespace.clone(),
            "requeue, hold, priority",
        ));
    }
    let vns = Some(cfg.validate.namespace.clone());
    out.push(act(
        "create",
        "batch",
        "jobs",
        None,
        vns.clone(),
        "validation",
    ));
    out.push(act(
        "delete",
        "batch",
        "jobs",
        None,
        vns,
        "validation's clean-up",
    ));
    out
}

impl Right {
    fn said(&self) -> String {
        let res = match (self.group.as_str(), self.subresource) {
            ("", None) => self.resource.clone(),
            ("", Some(s)) => format!("{}/{s}", self.resource),
            (g, None) => format!("{}.{g}", self.resource),
            (g, Some(s)) => format!("{}.{g}/{s}", self.resource),
        };
        format!("{} {res} ({})", self.verb, self.for_what)
    }
}

/// Asks the API server, as this user, whether it may do each thing
/// nightshift does.
async fn rights(
    conn: &Connection,
    cfg: &KubeConfig,
    watched: &[Watched],
    read_only: bool,
) -> Check {
    let api: kube::Api<SelfSubjectAccessReview> = kube::Api::all(conn.client.clone());
    let mut denied_reads = Vec::new();
    let mut denied_acts = Vec::new();
    let rights: Vec<Right> = needed(cfg, watched)
        .into_iter()
        .filter(|r| !(read_only && r.acts))
        .collect();
    for r in &rights {
        let review = SelfSubjectAccessReview {
            spec: SelfSubjectAccessReviewSpec {
                resource_attributes: Some(ResourceAttributes {
                    verb: Some(r.verb.into()),
                    group: Some(r.group.clone()),
                    resource: Some(r.resource.clone()),
                    subresource: r.subresource.map(str::to_string),
                    namespace: r.namespace.clone(),
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let allowed = match api.create(&Default::default(), &review).await {
            Ok(a) => a.status.is_some_and(|s| s.allowed),
            Err(e) => {
                return check(
                    "kubernetes rights",
                    Verdict::Warn,
                    format!(
                        "could not ask (SelfSubjectAccessReview): {}",
                        super::causes(&e)
                    ),
                    Some("`kubectl auth can-i --list` with the same context"),
                );
            }
        };
        if !allowed {
            if r.acts {
                denied_acts.push(r.said());
            } else {
                denied_reads.push(r.said());
            }
        }
    }
    let asked = rights.len();
    match (denied_reads.is_empty(), denied_acts.is_empty()) {
        (true, true) => check(
            "kubernetes rights",
            Verdict::Ok,
            format!(
                "all {asked} verbs nightshift uses are allowed{}",
                if read_only {
                    " (read-only: actions' verbs not asked)"
                } else {
                    ""
                }
            ),
            None,
        ),
        (false, _) => check(
            "kubernetes rights",
            Verdict::Fail,
            format!(
                "blind: may not {}{}",
                denied_reads.join(", "),
                if denied_acts.is_empty() {
                    String::new()
                } else {
                    format!("; nor {}", denied_acts.join(", "))
                }
            ),
            Some("a ClusterRole with get/list/watch on these, bound to this user"),
        ),
        (true, false) => check(
            "kubernetes rights",
            Verdict::Fail,
            format!("reads all; cannot act: may not {}", denied_acts.join(", ")),
            Some("bind this user the verbs named, or run nightshift --read-only"),
        ),
    }
}

/// Where a Kubernetes source connects, as whom, and which scheduling
/// kinds the server serves.
fn kubernetes(d: Result<&Discovered, &SourceError>) -> Check {
    match d {
        Err(e) => check(
            "kubernetes",
            Verdict::Fail,
            e.to_string(),
            Some(if e.to_string().starts_with("no kubeconfig") {
                "point at a kubeconfig: KUBECONFIG=FILE, --kubeconfig FILE or [kube] kubeconfig"
            } else {
                "`kubectl --context CONTEXT get nodes` with the same kubeconfig"
            }),
        ),
        Ok(d) => {
            let kinds = if d.kinds.is_empty() {
                "no Kueue, Volcano or Topology kinds: pods' own priority and gangs only".to_string()
            } else {
                d.kinds.join(", ")
            };
            check(
                "kubernetes",
                Verdict::Ok,
                format!(
                    "context {} as user {} at {} (Kubernetes {}); {kinds}{}",
                    d.context.as_deref().unwrap_or("(in-cluster)"),
                    d.user.as_deref().unwrap_or("(service account)"),
                    d.url,
                    d.version.as_deref().unwrap_or("version not given"),
                    if d.notes.is_empty() {
                        String::new()
                    } else {
                        format!("; {}", d.notes.join("; "))
                    }
                ),
                None,
            )
        }
    }
}
