//! What the lab emulates of Kueue: its visibility API's pending workloads,
//! and its reaction to a Workload's `spec.active`.

use super::{Store, now_rfc3339};
use serde_json::{Value, json};
use std::collections::BTreeMap;

impl Store {
    /// Kueue's visibility API: the ClusterQueue's pending workloads in
    /// queue order (priority, then age), as `PendingWorkloadsSummary`.
    /// `None` when Kueue is not served.
    pub fn pending_workloads(&self, cq: &str) -> Option<Value> {
        let wr = self.resource("kueue.x-k8s.io", "v1beta1", "workloads")?;
        let lr = self.resource("kueue.x-k8s.io", "v1beta1", "localqueues")?;
        let cq_of = |ns: &str, lq: &str| {
            self.get(lr, ns, lq)
                .and_then(|q| q["spec"]["clusterQueue"].as_str())
                .map(str::to_string)
        };
        let mut pending: Vec<&Value> = self
            .list(wr, None)
            .into_iter()
            .filter(|w| w["spec"]["active"] != false && w["status"]["admission"].is_null())
            .filter(|w| {
                let ns = w["metadata"]["namespace"].as_str().unwrap_or_default();
                let lq = w["spec"]["queueName"].as_str().unwrap_or_default();
                cq_of(ns, lq).as_deref() == Some(cq)
            })
            .collect();
        pending.sort_by(|a, b| {
            let p = |w: &Value| w["spec"]["priority"].as_i64().unwrap_or(0);
            let t = |w: &Value| {
                w["metadata"]["creationTimestamp"]
                    .as_str()
                    .unwrap_or("")
                    .to_string()
            };
            p(b).cmp(&p(a)).then(t(a).cmp(&t(b)))
        });
        let mut in_lq: BTreeMap<String, u64> = BTreeMap::new();
        let items: Vec<Value> = pending
            .iter()
            .enumerate()
            .map(|(i, w)| {
                let lq = w["spec"]["queueName"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                let ns = w["metadata"]["namespace"].as_str().unwrap_or_default();
                let n = in_lq.entry(format!("{ns}/{lq}")).or_insert(0);
                let pos = *n;
                *n += 1;
                json!({"metadata": {"name": w["metadata"]["name"], "namespace": ns,
                        "creationTimestamp": w["metadata"]["creationTimestamp"],
                        "ownerReferences": w["metadata"]["ownerReferences"]},
                    "priority": w["spec"]["priority"].as_i64().unwrap_or(0),
                    "localQueueName": lq, "positionInClusterQueue": i, "positionInLocalQueue": pos})
            })
            .collect();
        Some(json!({"kind": "PendingWorkloadsSummary",
            "apiVersion": "visibility.kueue.x-k8s.io/v1beta1", "metadata": {}, "items": items}))
    }

    /// What Kueue (and the job's controller) do when a Workload is
    /// deactivated, as far as the lab emulates them: the workload is marked
    /// Evicted (InactiveWorkload), loses its admission and its quota
    /// (the ClusterQueue's usage drops), and its pods are deleted.
    pub(super) fn kueue_deactivated(&mut self, r: usize, ns: &str, name: &str) {
        let Some(mut w) = self.get(r, ns, name).cloned() else {
            return;
        };
        let now = now_rfc3339();
        let cond = |t: &str, s: &str, reason: &str, m: &str| {
            json!({"type": t, "status": s, "reason": reason, "message": m,
                "lastTransitionTime": now, "observedGeneration": 1})
        };
        let gpus: u64 = w["status"]["admission"]["podSetAssignments"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|a| {
                a["resourceUsage"]["nvidia.com/gpu"]
                    .as_str()?
                    .parse::<u64>()
                    .ok()
            })
            .sum();
        let cq = w["status"]["admission"]["clusterQueue"]
            .as_str()
            .map(str::to_string);
        if let Some(st) = w["status"].as_object_mut() {
            st.remove("admission");
        }
        w["status"]["conditions"] = json!([
            cond(
                "Evicted",
                "True",
                "InactiveWorkload",
                "The workload is deactivated"
            ),
            cond(
                "QuotaReserved",
                "False",
                "Pending",
                "The workload is deactivated"
            ),
            cond(
                "Admitted",
                "False",
                "NoReservation",
                "The workload has no reservation"
            ),
        ]);
        self.record((r, ns.to_string(), name.to_string()), w.clone(), "MODIFIED");
        if let (Some(cq), Some(cqr)) = (
            cq,
            self.resource("kueue.x-k8s.io", "v1beta1", "clusterqueues"),
        ) && let Some(mut q) = self.get(cqr, "", &cq).cloned()
        {
            for f in q["status"]["flavorsUsage"]
                .as_array_mut()
                .into_iter()
                .flatten()
            {
                for res in f["resources"].as_array_mut().into_iter().flatten() {
                    if res["name"] == "nvidia.com/gpu" {
                        let used: u64 = res["total"]
                            .as_str()
                            .and_then(|t| t.parse().ok())
                            .unwrap_or(0);
                        res["total"] = json!(used.saturating_sub(gpus).to_string());
                    }
                }
            }
            self.record((cqr, String::new(), cq), q, "MODIFIED");
        }
        let owner = w["metadata"]["ownerReferences"][0]["name"]
            .as_str()
            .map(str::to_string);
        let pods = self.resource("", "v1", "pods").unwrap_or(usize::MAX);
        let victims: Vec<String> = self
            .list(pods, Some(ns))
            .into_iter()
            .filter(|p| {
                p["metadata"]["ownerReferences"]
                    .as_array()
                    .is_some_and(|os| {
                        os.iter().any(|o| {
                            o["controller"] == true && o["name"].as_str() == owner.as_deref()
                        })
                    })
            })
            .filter_map(|p| p["metadata"]["name"].as_str().map(str::to_string))
            .collect();
        for p in victims {
            let _ = self.delete(pods, ns, &p);
        }
    }

    /// Reactivated: Kueue queues it again (the lab does not admit it).
    pub(super) fn kueue_reactivated(&mut self, r: usize, ns: &str, name: &str) {
        let Some(mut w) = self.get(r, ns, name).cloned() else {
            return;
        };
        let now = now_rfc3339();
        let mut conds: Vec<Value> = w["status"]["conditions"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .filter(|c| c["type"] != "QuotaReserved")
            .collect();
        conds.push(
            json!({"type": "QuotaReserved", "status": "False", "reason": "Pending",
            "message": "Workload is requeued: waiting for quota", "lastTransitionTime": now,
            "observedGeneration": 1}),
        );
        w["status"]["conditions"] = json!(conds);
        self.record((r, ns.to_string(), name.to_string()), w, "MODIFIED");
    }
}
