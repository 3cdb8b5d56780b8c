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
use std::time::Duration;

/// One API call, as the preview shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    pub method: &'static str,
    pub path: String,
    pub body: Option<Value>,
}

impl std::fmt::Display for Call {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.body {
            Some(b) => write!(f, "{} {} {b}", self.method, self.path),
            None => write!(f, "{} {}", self.method, self.path),
        }
    }
}

pub const REASON: &str = "nightshift.io/reason";
const KUEUE: &str = "/apis/kueue.x-k8s.io/v1beta1";

fn node_path(node: &str) -> String {
    format!("/api/v1/nodes/{node}")
}

pub fn cordon_call(node: &str, reason: &str) -> Call {
    Call {
        method: "PATCH",
        path: node_path(node),
        body: Some(json!({"metadata": {"annotations": {REASON: reason}},
            "spec": {"unschedulable": true}})),
    }
}

pub fn uncordon_call(node: &str) -> Call {
    Call {
        method: "PATCH",
        path: node_path(node),
        body: Some(json!({"metadata": {"annotations": {REASON: null}},
            "spec": {"unschedulable": null}})),
    }
}

pub fn reason_call(node: &str, reason: &str) -> Call {
    Call {
        method: "PATCH",
        path: node_path(node),
        body: Some(json!({"metadata": {"annotations": {REASON: reason}}})),
    }
}

pub fn evict_call(ns: &str, pod: &str) -> Call {
    Call {
        method: "POST",
        path: format!("/api/v1/namespaces/{ns}/pods/{pod}/eviction"),
        body: Some(json!({"apiVersion": "policy/v1", "kind": "Eviction",
            "metadata": {"name": pod, "namespace": ns}})),
    }
}

fn workload_call(ns: &str, wl: &str, spec: Value) -> Call {
    Call {
        method: "PATCH",
        path: format!("{KUEUE}/namespaces/{ns}/workloads/{wl}"),
        body: Some(json!({ "spec": spec })),
    }
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

/// What preparing an action read from the server.
struct Prepared {
    action: Action,
    /// Its calls, or why it cannot be done.
    calls: Result<Vec<String>, String>,
    /// What will go wrong (PDBs that refuse evictions).
    warnings: Vec<String>,
}

pub struct Executor {
    conn: Connection,
    /// The last prepared action, as read from the server.
    prepared: std::sync::Mutex<Option<Prepared>>,
    /// How long a drain keeps retrying evictions a PDB refuses.
    pub evict_timeout: Duration,
    /// How long a requeue waits for Kueue to evict a deactivated workload.
    pub kueue_timeout: Duration,
}

fn is_pdb_refusal(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 429)
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
    pub async fn connect(cfg: &KubeConfig) -> Result<Executor, String> {
        Ok(Executor {
            conn: super::connect(cfg).await.map_err(|e| e.to_string())?,
            prepared: std::sync::Mutex::new(None),
            evict_timeout: cfg.evict_timeout,
            kueue_timeout: Duration::from_secs(20),
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

    async fn get(&self, path: &str) -> Result<Value, String> {
        let req = http::Request::get(path)
            .body(Vec::new())
            .map_err(|e| e.to_string())?;
        self.conn
            .client
            .request::<Value>(req)
            .await
            .map_err(|e| err_text(&e))
    }

    /// The pods `kubectl drain` would evict from `node`: not DaemonSet's,
    /// not mirror pods, not finished.
    pub async fn pods_to_evict(&self, node: &str) -> Result<Vec<(String, String)>, String> {
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
            .filter_map(|p| {
                Some((
                    p["metadata"]["namespace"].as_str()?.to_string(),
                    p["metadata"]["name"].as_str()?.to_string(),
                ))
            })
            .collect())
    }

    /// What a job id (`ns/name`) names now.
    pub async fn target(&self, job: &str) -> Result<Target, String> {
        let (ns, name) = job
            .split_once('/')
            .ok_or_else(|| format!("{job:?} is not a Kubernetes job id (NAMESPACE/NAME)"))?;
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
        let o = map::Objects::from_values(items.iter().map(|p| {
            let mut p = (*p).clone();
            p["kind"] = json!("Pod");
            p
        }));
        let c = map::cluster("", &o, 0);
        let pod_names = |pred: &dyn Fn(&Value) -> bool| -> Vec<String> {
            items
                .iter()
                .filter(|p| pred(p))
                .filter_map(|p| p["metadata"]["name"].as_str().map(str::to_string))
                .collect()
        };
        let group =
            |p: &Value| p["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == name;
        if c.job(job)
            .is_some_and(|j| j.gang.as_deref().is_some_and(|g| g.starts_with("PodGroup")))
        {
            return Ok(Target::Gang {
                ns: ns.into(),
                pods: pod_names(&group),
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
            return Err(format!("no Kueue workload, Volcano group or pod {job}"));
        }
        Ok(Target::Pods {
            ns: ns.into(),
            pods: bare,
            bare: true,
        })
    }

    /// Reads the server for the exact calls of `a` (see [`Self::calls`]).
    pub async fn prepare(&self, a: &Action) {
        let calls = self.read_calls(a).await;
        let warnings = match a {
            Action::Drain { node, .. } => self.pdb_blocks(node).await,
            _ => Vec::new(),
        };
        if let Ok(mut p) = self.prepared.lock() {
            *p = Some(Prepared {
                action: a.clone(),
                calls,
                warnings,
            });
        }
    }

    /// The warnings found when `a` was prepared.
    pub fn warnings(&self, a: &Action) -> Vec<String> {
        match self.prepared.lock().ok().as_deref() {
            Some(Some(p)) if &p.action == a => p.warnings.clone(),
            _ => Vec::new(),
        }
    }

    /// The pods on `node` whose eviction a PodDisruptionBudget will refuse
    /// now (it allows no disruption), one line each.
    async fn pdb_blocks(&self, node: &str) -> Vec<String> {
        let Ok(pods) = self
            .get(&format!(
                "/api/v1/pods?fieldSelector=spec.nodeName%3D{node}"
            ))
            .await
        else {
            return Vec::new();
        };
        let Ok(pdbs) = self.get("/apis/policy/v1/poddisruptionbudgets").await else {
            return Vec::new();
        };
        let evicted = self.pods_to_evict(node).await.unwrap_or_default();
        let mut out = Vec::new();
        for p in pods["items"].as_array().into_iter().flatten() {
            let ns = p["metadata"]["namespace"].as_str().unwrap_or_default();
            let name = p["metadata"]["name"].as_str().unwrap_or_default();
            if p["status"]["phase"] != "Running"
                || !evicted.iter().any(|(n, x)| n == ns && x == name)
            {
                continue;
            }
            for b in pdbs["items"].as_array().into_iter().flatten() {
                if b["metadata"]["namespace"] == ns
                    && map::selects(&b["spec"]["selector"], &p["metadata"]["labels"])
                    && b["status"]["disruptionsAllowed"].as_i64().unwrap_or(0) <= 0
                {
                    out.push(format!(
                        "PDB {} allows 0 disruptions: the eviction of {ns}/{name} will be refused (retried for up to {}s, then reported)",
                        b["metadata"]["name"].as_str().unwrap_or("?"),
                        self.evict_timeout.as_secs()
                    ));
                }
            }
        }
        out
    }

    /// The exact calls, in order, before anything is sent: as prepared, or,
    /// when not prepared, their shape.
    pub fn calls(&self, a: &Action) -> Vec<String> {
        if let Ok(p) = self.prepared.lock()
            && let Some(Prepared {
                action,
                calls: Ok(calls),
                ..
            }) = p.as_ref()
            && action == a
        {
            return calls.clone();
        }
        match a {
            Action::Cordon { node, reason } => vec![cordon_call(node, reason).to_string()],
            Action::Resume { node } => vec![uncordon_call(node).to_string()],
            Action::SetReason { node, reason } => vec![reason_call(node, reason).to_string()],
            Action::Drain { node, reason, .. } => vec![
                cordon_call(node, reason).to_string(),
                format!(
                    "POST /api/v1/namespaces/NS/pods/POD/eviction for each pod on {node} but DaemonSet and mirror pods"
                ),
            ],
            other => vec![format!(
                "{} {} through its Kueue workload (read when sent)",
                other.verb(),
                other.target()
            )],
        }
    }

    /// Why `a` cannot be done, when preparing it found out.
    pub fn cannot(&self, a: &Action) -> Option<String> {
        let p = self.prepared.lock().ok()?;
        match p.as_ref()? {
            Prepared {
                action,
                calls: Err(e),
                ..
            } if action == a => Some(e.clone()),
            _ => None,
        }
    }

    async fn read_calls(&self, a: &Action) -> Result<Vec<String>, String> {
        let calls: Result<Vec<Call>, String> = match a {
            Action::Cordon { node, reason } => Ok(vec![cordon_call(node, reason)]),
            Action::Resume { node } => Ok(vec![uncordon_call(node)]),
            Action::SetReason { node, reason } => Ok(vec![reason_call(node, reason)]),
            Action::Drain { node, reason, .. } => match self.pods_to_evict(node).await {
                Ok(pods) => Ok(std::iter::once(cordon_call(node, reason))
                    .chain(pods.iter().map(|(ns, p)| evict_call(ns, p)))
                    .collect()),
                Err(e) => Err(e),
            },
            Action::Requeue { job } | Action::Preempt { job } => {
                self.target(job).await.and_then(|t| match t {
                    Target::Workload { ns, name, .. } => Ok(vec![
                        workload_call(&ns, &name, json!({"active": false})),
                        workload_call(&ns, &name, json!({"active": true})),
                    ]),
                    Target::Gang { ns, pods } => Ok(pods.iter().map(|p| evict_call(&ns, p)).collect()),
                    Target::Pods { bare: true, .. } => Err(format!(
                        "{job} is a bare pod: it cannot be requeued, only evicted (drain its node)"
                    )),
                    Target::Pods { .. } => Err(format!(
                        "{job} has no Kueue workload or Volcano group to requeue it through: evicting its pods leaves the restart to its controller"
                    )),
                })
            }
            Action::Hold { job } | Action::Release { job } => {
                let active = matches!(a, Action::Release { .. });
                self.target(job).await.and_then(|t| match t {
                    Target::Workload { ns, name, .. } => {
                        Ok(vec![workload_call(&ns, &name, json!({"active": active}))])
                    }
                    _ => Err(format!("{job} is not a Kueue workload: only those can be held (spec.active)")),
                })
            }
            Action::Priority { job, value } => self.target(job).await.and_then(|t| match t {
                Target::Workload { ns, name, wpc: true } => {
                    Ok(vec![workload_call(&ns, &name, json!({"priority": value}))])
                }
                Target::Workload { .. } => Err(format!(
                    "{job}'s priority comes from its pods' PriorityClass, and a pod's priority is immutable: give its workload a WorkloadPriorityClass"
                )),
                _ => Err(format!(
                    "a pod's priority is immutable; {job} has no Kueue workload whose priority could change"
                )),
            }),
        };
        calls.map(|c| c.iter().map(ToString::to_string).collect())
    }

    /// Sends the action step by step, re-reading after each.
    pub async fn execute(&self, a: &Action) -> Vec<Step> {
        let what = format!("{} {}", a.verb(), a.target());
        match a {
            Action::Cordon { node, reason } => {
                vec![self.node_step(what, &cordon_call(node, reason), a).await]
            }
            Action::Resume { node } => vec![self.node_step(what, &uncordon_call(node), a).await],
            Action::SetReason { node, reason } => {
                vec![self.node_step(what, &reason_call(node, reason), a).await]
            }
            Action::Drain { node, reason, .. } => {
                let cordon = Action::Cordon {
                    node: node.clone(),
                    reason: reason.clone(),
                };
                let first = self
                    .node_step(
                        format!("cordon {node}"),
                        &cordon_call(node, reason),
                        &cordon,
                    )
                    .await;
                if !first.ok {
                    return vec![first];
                }
                let mut steps = vec![first];
                match self.pods_to_evict(node).await {
                    Ok(pods) => {
                        for (ns, pod) in pods {
                            steps.push(self.evict(&ns, &pod).await);
                        }
                    }
                    Err(e) => steps.push(Step::of(
                        format!("list the pods on {node}"),
                        Err(format!("{e}: nothing was evicted")),
                    )),
                }
                steps
            }
            Action::Requeue { job } | Action::Preempt { job } => match self.target(job).await {
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
                        let sent = self.send(&call).await.map_err(|e| err_text(&e));
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

    async fn node_step(&self, what: String, call: &Call, check: &Action) -> Step {
        let sent = self.send(call).await.map_err(|e| err_text(&e));
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

    /// One eviction, retried while a PodDisruptionBudget refuses it.
    async fn evict(&self, ns: &str, pod: &str) -> Step {
        let what = format!("evict {ns}/{pod}");
        let call = evict_call(ns, pod);
        let started = tokio::time::Instant::now();
        let deadline = started + self.evict_timeout;
        let mut wait = Duration::from_millis(500);
        loop {
            match self.send(&call).await {
                Ok(_) => {
                    let gone = self
                        .get(&format!("/api/v1/namespaces/{ns}/pods/{pod}"))
                        .await;
                    let observed = match gone {
                        Err(e) if e.contains("404") => "pod gone".to_string(),
                        Ok(p) if !p["metadata"]["deletionTimestamp"].is_null() => {
                            "pod terminating".to_string()
                        }
                        Ok(_) => "eviction accepted; the pod is still there".to_string(),
                        Err(e) => format!("could not re-read the pod: {e}"),
                    };
                    let verified = observed.starts_with("pod ");
                    return Step::of(what, Ok(Outcome { verified, observed }));
                }
                Err(e) if is_pdb_refusal(&e) && tokio::time::Instant::now() + wait < deadline => {
                    tracing::info!("evict {ns}/{pod}: {}", err_text(&e));
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(Duration::from_secs(5));
                }
                Err(e) if is_pdb_refusal(&e) => {
                    let budget = pdb_name(&e).unwrap_or_else(|| "a PodDisruptionBudget".into());
                    let allowed = self.disruptions_allowed(ns, &budget).await;
                    return Step::of(
                        what,
                        Err(format!(
                            "blocked by PDB {budget}: {} disruptions allowed (retried for {:.1}s): {}",
                            allowed.map_or("no".to_string(), |n| n.to_string()),
                            started.elapsed().as_secs_f64(),
                            err_text(&e)
                        )),
                    );
                }
                Err(e) => return Step::of(what, Err(err_text(&e))),
            }
        }
    }

    async fn disruptions_allowed(&self, ns: &str, pdb: &str) -> Option<i64> {
        self.get(&format!(
            "/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets/{pdb}"
        ))
        .await
        .ok()?["status"]["disruptionsAllowed"]
            .as_i64()
    }

    /// Deactivate, wait for Kueue to evict, reactivate.
    async fn requeue_workload(&self, ns: &str, name: &str) -> Vec<Step> {
        let path = format!("{KUEUE}/namespaces/{ns}/workloads/{name}");
        let off = workload_call(ns, name, json!({"active": false}));
        if let Err(e) = self.send(&off).await {
            return vec![Step::of(
                format!("deactivate workload {ns}/{name}"),
                Err(err_text(&e)),
            )];
        }
        let deadline = tokio::time::Instant::now() + self.kueue_timeout;
        let mut evicted = None;
        while tokio::time::Instant::now() < deadline {
            if let Ok(w) = self.get(&path).await {
                let cond = w["status"]["conditions"]
                    .as_array()
                    .and_then(|cs| {
                        cs.iter()
                            .find(|c| c["type"] == "Evicted" && c["status"] == "True")
                    })
                    .cloned();
                if let Some(c) = cond {
                    evicted = Some(c["message"].as_str().unwrap_or("evicted").to_string());
                    break;
                }
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        let first = Step::of(
            format!("deactivate workload {ns}/{name}"),
            Ok(Outcome {
                verified: evicted.is_some(),
                observed: match &evicted {
                    Some(m) => format!("Kueue evicted it: {m}"),
                    None => format!(
                        "Kueue did not report it evicted within {}s",
                        self.kueue_timeout.as_secs()
                    ),
                },
            }),
        );
        let on = workload_call(ns, name, json!({"active": true}));
        let second = match self.send(&on).await {
            Ok(_) => match self.get(&path).await {
                Ok(w) => Ok(Outcome {
                    verified: w["spec"]["active"] != false,
                    observed: format!(
                        "active again, queued: {}",
                        w["status"]["conditions"]
                            .as_array()
                            .and_then(|cs| cs.iter().find(|c| c["type"] == "QuotaReserved"))
                            .and_then(|c| c["message"].as_str())
                            .unwrap_or("waiting for Kueue")
                    ),
                }),
                Err(e) => Err(e),
            },
            Err(e) => Err(format!(
                "{}: the workload is left inactive; reactivate it with kubectl patch workload {name} -n {ns} --type merge -p '{{\"spec\":{{\"active\":true}}}}'",
                err_text(&e)
            )),
        };
        vec![
            first,
            Step::of(format!("reactivate workload {ns}/{name}"), second),
        ]
    }

    /// Re-reads what an action should have changed.
    pub async fn observe(&self, a: &Action) -> Result<Outcome, String> {
        match a {
            Action::Cordon { node, .. }
            | Action::Resume { node }
            | Action::Drain { node, .. }
            | Action::SetReason { node, .. } => {
                let n = self.get(&node_path(node)).await?;
                let cordoned = n["spec"]["unschedulable"] == true;
                let reason = n["metadata"]["annotations"][REASON].as_str().unwrap_or("");
                let verified = match a {
                    Action::Resume { .. } => !cordoned,
                    Action::SetReason { reason: want, .. } => reason == want,
                    _ => cordoned,
                };
                Ok(Outcome {
                    verified,
                    observed: format!(
                        "node {node}: {}{}",
                        if cordoned { "cordoned" } else { "schedulable" },
                        if reason.is_empty() {
                            String::new()
                        } else {
                            format!(" ({reason})")
                        }
                    ),
                })
            }
            Action::Requeue { job }
            | Action::Preempt { job }
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
                _ => Err(format!("{job} is not a Kueue workload")),
            },
        }
    }
}

/// The budget's name in a 429's cause ("The disruption budget X needs …").
fn pdb_name(e: &kube::Error) -> Option<String> {
    let kube::Error::Api(s) = e else { return None };
    s.details
        .iter()
        .flat_map(|d| d.causes.iter())
        .find_map(|c| {
            c.message
                .strip_prefix("The disruption budget ")
                .and_then(|r| r.split_whitespace().next())
                .map(str::to_string)
        })
}
