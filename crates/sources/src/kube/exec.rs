//! Actions on Kubernetes: each one a short list of exact API calls (shown
//! in the preview before anything is sent), sent, then verified by
//! re-reading what they should have changed.
//!
//! - cordon: `PATCH /api/v1/nodes/N {"spec":{"unschedulable":true}}`, with
//!   the reason in the annotation `nightshift.io/reason`; resume: uncordon.
//! - drain: cordon, then the Eviction API for each pod on the node, skipping
//!   DaemonSet and mirror pods and finished pods (as `kubectl drain
//!   --ignore-daemonsets`); a 429 from a PodDisruptionBudget is retried with
//!   backoff up to `evict_timeout` and then reported pod by pod, naming the
//!   budget.
//! - requeue / preempt: a Kueue workload is deactivated (`spec.active:
//!   false`: Kueue evicts it, its quota is released), and once Kueue says
//!   it is evicted, reactivated so it queues again; a Volcano gang's pods are
//!   evicted (Volcano restarts the job); a bare pod cannot be requeued.
//! - hold / release: a Kueue workload's `spec.active`.
//! - priority: a Kueue workload's `spec.priority`, when its priority comes
//!   from a WorkloadPriorityClass; a pod's priority is immutable.

use super::map;
use super::{Connection, KubeConfig};
use crate::model::Outcome;
use crate::model::{Action, Step};
use serde_json::{Value, json};

mod calls;
mod error;
mod evict;
mod preview;
mod scheduler;
mod validate;

pub use calls::*;
pub use error::{CallError, Cannot};
use preview::Prepared;

/// The most of a text answer (a pod's log) kept: its last bytes.
pub(super) const TEXT_KEEP: usize = 1 << 20;
/// The most of a text answer read before it is cut off.
const TEXT_READ_MAX: usize = 16 << 20;
use std::time::Duration;

/// A pod's namespace and name.
fn name_of(p: &Value) -> Option<(String, String)> {
    Some((
        p["metadata"]["namespace"].as_str()?.to_string(),
        p["metadata"]["name"].as_str()?.to_string(),
    ))
}

/// How a drain ends one of its node's pods' jobs, as the blast radius
/// previews it (whole gangs requeued): a Kueue workload through its
/// workload (deactivated, then activated: Kueue evicts its pods on every
/// node and queues it again), a Volcano gang by evicting its pods on every
/// node, anything else by evicting the pod (issue 58: only the node's own
/// pod was evicted, the workload's other pods ran on).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum DrainPart {
    Workload { ns: String, name: String },
    Gang { ns: String, pods: Vec<String> },
    Pod { ns: String, pod: String },
}

/// What a job id names on Kubernetes.
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    /// A Kueue Workload (namespace, name, its priority comes from a
    /// WorkloadPriorityClass).
    Workload { ns: String, name: String, wpc: bool },
    /// A Volcano gang: its pods.
    Gang { ns: String, pods: Vec<String> },
    /// Pods with no Kueue workload or Volcano group (a Job's, a bare pod).
    Pods {
        ns: String,
        pods: Vec<String>,
        bare: bool,
    },
}

pub struct Executor {
    conn: Connection,
    /// The last prepared action, as read from the server.
    prepared: std::sync::Mutex<Option<Prepared>>,
    /// How long a drain keeps retrying evictions a PDB refuses.
    pub evict_timeout: Duration,
    /// How long a requeue waits for Kueue to evict a deactivated workload.
    pub kueue_timeout: Duration,
    /// `[validate]`: the check before a node is uncordoned.
    pub validate: crate::validate::ValidateSpec,
}

fn err_text(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => {
            let causes: Vec<&str> = s
                .details
                .iter()
                .flat_map(|d| d.causes.iter().map(|c| c.message.as_str()))
                .collect();
            let mut t = format!("HTTP {}: {}", s.code, s.message);
            if !causes.is_empty() {
                t.push_str(&format!(" ({})", causes.join("; ")));
            }
            crate::text::one_line(&t, 400)
        }
        other => crate::text::one_line(&other.to_string(), 400),
    }
}

impl Executor {
    pub async fn connect(cfg: &KubeConfig) -> Result<Executor, CallError> {
        Ok(Executor {
            conn: super::connect(cfg)
                .await
                .map_err(|e| CallError::Connect(e.to_string()))?,
            prepared: std::sync::Mutex::new(None),
            evict_timeout: cfg.evict_timeout,
            kueue_timeout: Duration::from_secs(20),
            validate: cfg.validate.clone(),
        })
    }

    pub fn cluster(&self) -> &str {
        &self.conn.cluster
    }

    async fn send(&self, c: &Call) -> Result<Value, kube::Error> {
        let mut req = http::Request::builder().method(c.method).uri(&c.path);
        if c.method == "PATCH" {
            req = req.header("Content-Type", "application/merge-patch+json");
        } else {
            req = req.header("Content-Type", "application/json");
        }
        let body = c
            .body
            .as_ref()
            .map(|b| b.to_string().into_bytes())
            .unwrap_or_default();
        let req = req
            .body(body)
            .map_err(|e| kube::Error::Service(Box::new(e)))?;
        self.conn.client.request::<Value>(req).await
    }

    async fn get(&self, path: &str) -> Result<Value, CallError> {
        self.get_typed(path)
            .await
            .map_err(|e| CallError::Api(err_text(&e)))
    }

    /// A GET of text (a pod's log), its first MB.
    /// A text GET (a pod's log): at most its last `TEXT_KEEP` bytes.
    async fn get_text(&self, path: &str) -> Result<String, kube::Error> {
        use futures_util::AsyncReadExt;
        let req = http::Request::get(path)
            .body(Vec::new())
            .map_err(|e| kube::Error::Service(Box::new(e)))?;
        // Streamed and bounded: a body that never ends (a log still being
        // written, a hostile server) is read up to TEXT_READ_MAX and its
        // last TEXT_KEEP bytes kept — never the whole of it in memory.
        let mut body = self.conn.client.request_stream(req).await?;
        let mut kept: std::collections::VecDeque<u8> = std::collections::VecDeque::new();
        let mut buf = vec![0u8; 64 * 1024];
        let mut read = 0usize;
        while read < TEXT_READ_MAX {
            let n = match body.read(&mut buf).await {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) => return Err(kube::Error::ReadEvents(e)),
            };
            read += n;
            kept.extend(&buf[..n]);
            let over = kept.len().saturating_sub(TEXT_KEEP);
            kept.drain(..over);
        }
        let bytes: Vec<u8> = kept.into();
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// A GET whose error the caller matches on (a 404 is an answer).
    async fn get_typed(&self, path: &str) -> Result<Value, kube::Error> {
        let req = http::Request::get(path)
            .body(Vec::new())
            .map_err(|e| kube::Error::Service(Box::new(e)))?;
        self.conn.client.request::<Value>(req).await
    }

    /// The pods `kubectl drain` would evict from `node`: not DaemonSet's,
    /// not mirror pods, not finished.
    pub async fn pods_to_evict(&self, node: &str) -> Result<Vec<(String, String)>, CallError> {
        Ok(self
            .evictable_pods(node)
            .await?
            .iter()
            .filter_map(name_of)
            .collect())
    }

    /// The pods objects `kubectl drain` would evict from `node`.
    pub(super) async fn evictable_pods(&self, node: &str) -> Result<Vec<Value>, CallError> {
        let list = self
            .get(&format!(
                "/api/v1/pods?fieldSelector=spec.nodeName%3D{node}"
            ))
            .await?;
        Ok(list["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|p| !matches!(p["status"]["phase"].as_str(), Some("Succeeded" | "Failed")))
            .filter(|p| p["metadata"]["annotations"]["kubernetes.io/config.mirror"].is_null())
            .filter(|p| {
                !p["metadata"]["ownerReferences"]
                    .as_array()
                    .is_some_and(|os| {
                        os.iter()
                            .any(|o| o["kind"] == "DaemonSet" && o["controller"] == true)
                    })
            })
            .cloned()
            .collect())
    }

    /// How a drain ends each of `pods`' jobs ([`DrainPart`]), each gang once.
    pub(crate) async fn drain_parts(&self, pods: &[Value]) -> Vec<DrainPart> {
        let mut parts: Vec<DrainPart> = Vec::new();
        let mut known: std::collections::HashMap<String, Option<Target>> = Default::default();
        for p in pods {
            let Some((ns, pod)) = name_of(p) else {
                continue;
            };
            let meta = &p["metadata"];
            let job = meta["annotations"]["scheduling.k8s.io/group-name"]
                .as_str()
                .or_else(|| {
                    meta["ownerReferences"]
                        .as_array()?
                        .iter()
                        .find(|o| o["controller"] == true)?["name"]
                        .as_str()
                })
                .unwrap_or(&pod)
                .to_string();
            // A pod a PodDisruptionBudget protects now is evicted (and the
            // eviction refused, said by name), never taken out through its
            // workload behind the budget's back.
            let protected = !self.pdb_blocks(std::slice::from_ref(p)).await.is_empty();
            // One lookup a job: a gang's pods on the node share it.
            let id = format!("{ns}/{job}");
            let target = match known.get(&id) {
                Some(t) => t.clone(),
                None => {
                    let t = self.target(&id).await.ok();
                    known.insert(id, t.clone());
                    t
                }
            };
            let part = match target {
                Some(Target::Workload { ns, name, .. }) if !protected => {
                    DrainPart::Workload { ns, name }
                }
                Some(Target::Gang { ns, mut pods }) if !protected && pods.contains(&pod) => {
                    pods.sort();
                    DrainPart::Gang { ns, pods }
                }
                _ => DrainPart::Pod { ns, pod },
            };
            if !parts.contains(&part) {
                parts.push(part);
            }
        }
        parts
    }

    /// What a job id (`ns/name`) names now.
    pub async fn target(&self, job: &str) -> Result<Target, CallError> {
        let (ns, name) = job
            .split_once('/')
            .ok_or_else(|| CallError::NotAJobId(job.to_string()))?;
        if let Ok(wls) = self
            .get(&format!("{KUEUE}/namespaces/{ns}/workloads"))
            .await
        {
            let found = wls["items"].as_array().into_iter().flatten().find(|w| {
                w["metadata"]["name"] == name
                    || w["metadata"]["ownerReferences"]
                        .as_array()
                        .is_some_and(|os| os.iter().any(|o| o["name"] == name))
            });
            if let Some(w) = found {
                return Ok(Target::Workload {
                    ns: ns.into(),
                    name: w["metadata"]["name"].as_str().unwrap_or(name).into(),
                    wpc: w["spec"]["priorityClassSource"] == "kueue.x-k8s.io/workloadpriorityclass",
                });
            }
        }
        let pods = self.get(&format!("/api/v1/namespaces/{ns}/pods")).await?;
        let items: Vec<&Value> = pods["items"].as_array().into_iter().flatten().collect();
        let pod_names = |pred: &dyn Fn(&Value) -> bool| -> Vec<String> {
            items
                .iter()
                .filter(|p| pred(p))
                .filter_map(|p| p["metadata"]["name"].as_str().map(str::to_string))
                .collect()
        };
        let group =
            |p: &Value| p["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == name;
        // A Volcano gang: pods annotated with its group (as the map groups them).
        let gang = pod_names(&group);
        if !gang.is_empty() {
            return Ok(Target::Gang {
                ns: ns.into(),
                pods: gang,
            });
        }
        let owned = |p: &Value| {
            p["metadata"]["ownerReferences"]
                .as_array()
                .is_some_and(|os| {
                    os.iter()
                        .any(|o| o["controller"] == true && o["name"] == name)
                })
        };
        let owned_pods = pod_names(&owned);
        if !owned_pods.is_empty() {
            return Ok(Target::Pods {
                ns: ns.into(),
                pods: owned_pods,
                bare: false,
            });
        }
        let bare = pod_names(&|p: &Value| p["metadata"]["name"] == name);
        if bare.is_empty() {
            return Err(CallError::NoJob(job.to_string()));
        }
        Ok(Target::Pods {
            ns: ns.into(),
            pods: bare,
            bare: true,
        })
    }

    /// Sends the action step by step, re-reading after each.
    pub async fn execute(&self, a: &Action) -> Vec<Step> {
        let what = format!("{} {}", a.verb(), a.target());
        match a {
            Action::Cordon { node, reason } => vec![self.cordon_step(what, node, reason, a).await],
            Action::Resume { node } => vec![self.node_step(what, &uncordon_call(node), a).await],
            Action::Validate { node, level } => self.validate(node, *level).await,
            Action::SetReason { node, reason } => {
                vec![self.node_step(what, &reason_call(node, reason), a).await]
            }
            Action::Drain { node, reason, .. } => {
                let cordon = Action::Cordon {
                    node: node.clone(),
                    reason: reason.clone(),
                };
                let first = self
                    .cordon_step(format!("cordon {node}"), node, reason, &cordon)
                    .await;
                if !first.ok {
                    return vec![first];
                }
                let mut steps = vec![first];
                match self.evictable_pods(node).await {
                    Ok(pods) => {
                        for part in self.drain_parts(&pods).await {
                            match part {
                                DrainPart::Workload { ns, name } => {
                                    steps.extend(self.requeue_workload(&ns, &name).await);
                                }
                                DrainPart::Gang { ns, pods } => {
                                    for p in pods {
                                        steps.push(self.evict(&ns, &p).await);
                                    }
                                }
                                DrainPart::Pod { ns, pod } => {
                                    steps.push(self.evict(&ns, &pod).await);
                                }
                            }
                        }
                    }
                    Err(e) => steps.push(Step::of(
                        format!("list the pods on {node}"),
                        Err(format!("{e}: nothing was evicted")),
                    )),
                }
                steps
            }
            // What the preview refuses is never sent (its grace would be
            // ignored: the pods would end at once).
            Action::Preempt {
                job,
                grace_s: Some(_),
            } => vec![Step::of(
                what,
                Err(Cannot::NoSoftPreempt(job.clone()).to_string()),
            )],
            Action::Requeue { job } | Action::Preempt { job, .. } => match self.target(job).await {
                Ok(Target::Workload { ns, name, .. }) => self.requeue_workload(&ns, &name).await,
                Ok(Target::Gang { ns, pods }) => {
                    let mut steps = Vec::new();
                    for p in pods {
                        steps.push(self.evict(&ns, &p).await);
                    }
                    steps
                }
                Ok(_) => vec![Step::of(
                    what,
                    Err(format!(
                        "{job} has no Kueue workload or Volcano group: it cannot be requeued, only its pods evicted (drain its node)"
                    )),
                )],
                Err(e) => vec![Step::of(what, Err(e))],
            },
            Action::Hold { job } | Action::Release { job } | Action::Priority { job, .. } => {
                let spec = match a {
                    Action::Hold { .. } => json!({"active": false}),
                    Action::Release { .. } => json!({"active": true}),
                    Action::Priority { value, .. } => json!({"priority": value}),
                    _ => json!({}),
                };
                match self.target(job).await {
                    Ok(Target::Workload { ns, name, wpc }) => {
                        if matches!(a, Action::Priority { .. }) && !wpc {
                            return vec![Step::of(
                                what,
                                Err(format!(
                                    "{job}'s priority is its pods' PriorityClass: immutable"
                                )),
                            )];
                        }
                        let call = workload_call(&ns, &name, spec.clone());
                        let sent = self
                            .send(&call)
                            .await
                            .map_err(|e| CallError::Api(err_text(&e)));
                        let r = match sent {
                            Ok(_) => self.observe(a).await,
                            Err(e) => Err(e),
                        };
                        vec![Step::of(what, r)]
                    }
                    Ok(_) => vec![Step::of(
                        what,
                        Err(format!("{job} is not a Kueue workload")),
                    )],
                    Err(e) => vec![Step::of(what, Err(e))],
                }
            }
        }
    }

    /// Cordons, unless the node is cordoned already (another operator's
    /// drain, maybe under way): then its reason is kept, nothing is sent,
    /// and the step says so — there is nothing of this action's to undo.
    async fn cordon_step(&self, what: String, node: &str, reason: &str, check: &Action) -> Step {
        if let Ok(n) = self.get(&node_path(node)).await
            && n["spec"]["unschedulable"] == true
            // nightshift's own "drain after the checkpoint" cordon: this is
            // its second step, whose reason replaces it.
            && !n["metadata"]["annotations"][REASON]
                .as_str()
                .is_some_and(|r| r.ends_with(crate::model::AFTER_CHECKPOINT))
        {
            let theirs = n["metadata"]["annotations"][REASON]
                .as_str()
                .map_or(String::new(), |r| format!(" (reason {r:?}, kept)"));
            let mut step = Step::sent(
                what,
                Outcome {
                    verified: true,
                    observed: format!("node {node}: already cordoned by someone else{theirs}"),
                },
            );
            step.unchanged = true;
            return step;
        }
        self.node_step(what, &cordon_call(node, reason), check)
            .await
    }

    async fn node_step(&self, what: String, call: &Call, check: &Action) -> Step {
        let sent = self
            .send(call)
            .await
            .map_err(|e| CallError::Api(err_text(&e)));
        let r = match sent {
            Ok(_) => self.observe(check).await,
            // A call that failed may still have been applied: re-read.
            Err(e) => match self.observe(check).await {
                Ok(o) if o.verified => Ok(Outcome {
                    verified: true,
                    observed: format!("{} (the call reported: {e})", o.observed),
                }),
                _ => Err(e),
            },
        };
        Step::of(what, r)
    }

    /// Re-reads what an action should have changed.
    pub async fn observe(&self, a: &Action) -> Result<Outcome, CallError> {
        match a {
            Action::Cordon { node, .. }
            | Action::Resume { node }
            | Action::Validate { node, .. }
            | Action::Drain { node, .. }
            | Action::SetReason { node, .. } => {
                let n = self.get(&node_path(node)).await?;
                let cordoned = n["spec"]["unschedulable"] == true;
                let reason = n["metadata"]["annotations"][REASON].as_str().unwrap_or("");
                // Uncordoned is not in service while a taint or NotReady keeps it out.
                let kept_out = preview::keeps_out(&n);
                let verified = match a {
                    Action::Resume { .. } => !cordoned && kept_out.is_empty(),
                    // Passed (uncordoned) or failed (kept out, with the
                    // check's words).
                    Action::Validate { .. } => {
                        !cordoned || reason.starts_with(crate::model::VALIDATION_FAILED)
                    }
                    Action::SetReason { reason: want, .. } => reason == want,
                    _ => cordoned,
                };
                let state = match (cordoned, kept_out.is_empty()) {
                    (true, _) => "cordoned".to_string(),
                    (false, true) => "schedulable".to_string(),
                    (false, false) => {
                        format!("uncordoned, still out of service: {}", kept_out.join(", "))
                    }
                };
                Ok(Outcome {
                    verified,
                    observed: format!(
                        "node {node}: {state}{}",
                        if reason.is_empty() {
                            String::new()
                        } else {
                            format!(" ({reason})")
                        }
                    ),
                })
            }
            Action::Requeue { job }
            | Action::Preempt { job, .. }
            | Action::Hold { job }
            | Action::Release { job }
            | Action::Priority { job, .. } => match self.target(job).await? {
                Target::Workload { ns, name, .. } => {
                    let w = self
                        .get(&format!("{KUEUE}/namespaces/{ns}/workloads/{name}"))
                        .await?;
                    let active = w["spec"]["active"] != false;
                    let prio = w["spec"]["priority"].as_i64();
                    let verified = match a {
                        Action::Hold { .. } => !active,
                        Action::Priority { value, .. } => prio == Some(*value as i64),
                        _ => active,
                    };
                    Ok(Outcome {
                        verified,
                        observed: format!(
                            "workload {ns}/{name}: {}, priority {}",
                            if active { "active" } else { "inactive" },
                            prio.map_or("-".into(), |p| p.to_string())
                        ),
                    })
                }
                _ => Err(CallError::NotAWorkload(job.to_string())),
            },
        }
    }
}
