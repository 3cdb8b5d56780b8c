//! Evictions retried while a PodDisruptionBudget refuses them, and the
//! Kueue requeue (deactivate, wait for the eviction, reactivate).

use super::*;

/// The budget's name in a 429's cause ("The disruption budget X needs …").
pub(super) fn pdb_name(e: &kube::Error) -> Option<String> {
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

pub(super) fn is_pdb_refusal(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 429)
}

impl Executor {
    /// One eviction, retried while a PodDisruptionBudget refuses it.
    pub(super) async fn evict(&self, ns: &str, pod: &str) -> Step {
        let what = format!("evict {ns}/{pod}");
        let call = evict_call(ns, pod);
        let started = tokio::time::Instant::now();
        let deadline = started + self.evict_timeout;
        let mut wait = Duration::from_millis(500);
        loop {
            match self.send(&call).await {
                Ok(_) => {
                    let gone = self
                        .get_typed(&format!("/api/v1/namespaces/{ns}/pods/{pod}"))
                        .await;
                    let observed = match gone {
                        Err(kube::Error::Api(s)) if s.code == 404 => "pod gone".to_string(),
                        Ok(p) if !p["metadata"]["deletionTimestamp"].is_null() => {
                            "pod terminating".to_string()
                        }
                        Ok(_) => "eviction accepted; the pod is still there".to_string(),
                        Err(e) => format!("could not re-read the pod: {}", err_text(&e)),
                    };
                    let verified = observed.starts_with("pod ");
                    return Step::sent(what, Outcome { verified, observed });
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

    pub(super) async fn disruptions_allowed(&self, ns: &str, pdb: &str) -> Option<i64> {
        self.get(&format!(
            "/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets/{pdb}"
        ))
        .await
        .ok()?["status"]["disruptionsAllowed"]
            .as_i64()
    }

    /// Deactivate, wait for Kueue to evict, reactivate.
    pub(super) async fn requeue_workload(&self, ns: &str, name: &str) -> Vec<Step> {
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
        let first = Step::sent(
            format!("deactivate workload {ns}/{name}"),
            Outcome {
                verified: evicted.is_some(),
                observed: match &evicted {
                    Some(m) => format!("Kueue evicted it: {m}"),
                    None => format!(
                        "Kueue did not report it evicted within {}s",
                        self.kueue_timeout.as_secs()
                    ),
                },
            },
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
            Err(e) => Err(CallError::Api(format!(
                "{}: the workload is left inactive; reactivate it with kubectl patch workload {name} -n {ns} --type merge -p '{{\"spec\":{{\"active\":true}}}}'",
                err_text(&e)
            ))),
        };
        vec![
            first,
            Step::of(format!("reactivate workload {ns}/{name}"), second),
        ]
    }
}
