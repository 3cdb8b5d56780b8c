//! The preview's side: the exact calls read from the server before
//! anything is sent, what the backend cannot do, and what will go wrong.

use super::*;

/// What preparing an action read from the server.
pub(super) struct Prepared {
    action: Action,
    /// Its calls, or why it cannot be done.
    calls: Result<Vec<String>, Cannot>,
    /// What will go wrong (PDBs that refuse evictions).
    warnings: Vec<String>,
}

impl Executor {
    /// Reads the server for the exact calls of `a` (see [`Self::calls`]).
    pub async fn prepare(&self, a: &Action) {
        // A drain's pods are read once: its calls and its warnings need them.
        let pods = match a {
            Action::Drain { node, .. } => Some(self.evictable_pods(node).await),
            _ => None,
        };
        let calls = self.read_calls(a, pods.as_ref()).await;
        let warnings = match (&pods, a) {
            (Some(Ok(pods)), _) => self.pdb_blocks(pods).await,
            (_, Action::Resume { node }) => match self.get(&node_path(node)).await {
                Ok(n) => still_out_after_uncordon(node, &n),
                Err(_) => Vec::new(),
            },
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

    /// The pods (of those a drain evicts) whose eviction a PodDisruptionBudget will refuse
    /// now (it allows no disruption), one line each.
    pub(super) async fn pdb_blocks(&self, pods: &[Value]) -> Vec<String> {
        let Ok(pdbs) = self.get("/apis/policy/v1/poddisruptionbudgets").await else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for p in pods {
            let ns = p["metadata"]["namespace"].as_str().unwrap_or_default();
            let name = p["metadata"]["name"].as_str().unwrap_or_default();
            if p["status"]["phase"] != "Running" {
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
                    "POST /api/v1/namespaces/NS/pods/POD/eviction for each pod on {node} but DaemonSet and mirror pods; a Kueue workload's through the workload (spec.active false, then true), a Volcano gang's on every node"
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
    pub fn cannot(&self, a: &Action) -> Option<Cannot> {
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

    pub(super) async fn read_calls(
        &self,
        a: &Action,
        drained: Option<&Result<Vec<Value>, CallError>>,
    ) -> Result<Vec<String>, Cannot> {
        let calls: Result<Vec<Call>, Cannot> = match a {
            Action::Cordon { node, reason } => Ok(vec![cordon_call(node, reason)]),
            Action::Resume { node } => Ok(vec![uncordon_call(node)]),
            Action::Validate { node, level } => return Ok(self.validate_calls(node, *level)),
            Action::SetReason { node, reason } => Ok(vec![reason_call(node, reason)]),
            Action::Drain { node, reason, .. } => match drained {
                Some(Ok(pods)) => {
                    let mut calls = vec![cordon_call(node, reason)];
                    for part in self.drain_parts(pods).await {
                        match part {
                            DrainPart::Workload { ns, name } => {
                                calls.push(workload_call(&ns, &name, json!({"active": false})));
                                calls.push(workload_call(&ns, &name, json!({"active": true})));
                            }
                            DrainPart::Gang { ns, pods } => {
                                calls.extend(pods.iter().map(|p| evict_call(&ns, p)));
                            }
                            DrainPart::Pod { ns, pod } => calls.push(evict_call(&ns, &pod)),
                        }
                    }
                    Ok(calls)
                }
                Some(Err(e)) => Err(e.clone().into()),
                None => Err(Cannot::PodsNotRead(node.clone())),
            },
            Action::Preempt {
                job,
                grace_s: Some(_),
            } => Err(Cannot::NoSoftPreempt(job.clone())),
            Action::Requeue { job } | Action::Preempt { job, .. } => self
                .target(job)
                .await
                .map_err(Cannot::from)
                .and_then(|t| match t {
                    Target::Workload { ns, name, .. } => Ok(vec![
                        workload_call(&ns, &name, json!({"active": false})),
                        workload_call(&ns, &name, json!({"active": true})),
                    ]),
                    Target::Gang { ns, pods } => {
                        Ok(pods.iter().map(|p| evict_call(&ns, p)).collect())
                    }
                    Target::Pods { bare: true, .. } => Err(Cannot::BarePod(job.clone())),
                    Target::Pods { .. } => Err(Cannot::NoRequeuePath(job.clone())),
                }),
            Action::Hold { job } | Action::Release { job } => {
                let active = matches!(a, Action::Release { .. });
                self.target(job)
                    .await
                    .map_err(Cannot::from)
                    .and_then(|t| match t {
                        Target::Workload { ns, name, .. } => {
                            Ok(vec![workload_call(&ns, &name, json!({"active": active}))])
                        }
                        _ => Err(Cannot::NotHoldable(job.clone())),
                    })
            }
            Action::Priority { job, value } => self
                .target(job)
                .await
                .map_err(Cannot::from)
                .and_then(|t| match t {
                    Target::Workload {
                        ns,
                        name,
                        wpc: true,
                    } => Ok(vec![workload_call(&ns, &name, json!({"priority": value}))]),
                    Target::Workload { .. } => Err(Cannot::PriorityFromClass(job.clone())),
                    _ => Err(Cannot::PodPriority(job.clone())),
                }),
        };
        calls.map(|c| c.iter().map(ToString::to_string).collect())
    }
}

/// What keeps a node out of service besides its cordon: the taints with
/// NoSchedule/NoExecute that nightshift did not set (an uncordon leaves
/// them), and a Ready condition that is not True. One line each, in the
/// words the operator acts on.
pub(super) fn keeps_out(n: &Value) -> Vec<String> {
    let mut out: Vec<String> = n["spec"]["taints"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| matches!(t["effect"].as_str(), Some("NoSchedule" | "NoExecute")))
        // The cordon's own taint goes with the cordon.
        .filter(|t| t["key"] != "node.kubernetes.io/unschedulable")
        .map(|t| format!("taint {}", map::taint_text(t)))
        .collect();
    let ready = n["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Ready");
    if let Some(r) = ready.filter(|r| r["status"] != "True") {
        out.push(format!(
            "Ready is {}",
            r["status"].as_str().unwrap_or("unknown")
        ));
    }
    out
}

/// The preview's warning for a resume: what still keeps the node out once
/// it is uncordoned.
fn still_out_after_uncordon(node: &str, n: &Value) -> Vec<String> {
    keeps_out(n)
        .into_iter()
        .map(|why| {
            format!(
                "{node} stays out of service after the uncordon: {why} (nightshift did not set it; it is removed when its cause clears, or by hand: kubectl taint nodes {node} KEY-)"
            )
        })
        .collect()
}
