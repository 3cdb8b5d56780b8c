//! The lab API server's state: the resources it serves, the objects, their
//! resourceVersions and the history that watches resume from.

pub use super::query::{field_query, label_query, merge};
pub use super::resources::{Resource, builtin_resources, crd_resources};

/// Whether a label selector (`matchLabels`, `matchExpressions`) selects
/// `labels`, written from the Kubernetes documentation ("Labels and
/// Selectors", and `LabelSelector` in the API reference), not from
/// nightshift's mapper, so a mistake in one is not hidden by the same
/// mistake in the other:
/// - the requirements of `matchLabels` and `matchExpressions` are ANDed;
/// - an empty selector (`{}`) selects every object; a null one (absent)
///   selects none (policy/v1 PodDisruptionBudget);
/// - `In` and `NotIn` need a non-empty `values` (else the selector is
///   invalid and selects nothing); `NotIn` also selects objects without
///   the key; `Exists` and `DoesNotExist` take no values;
/// - any other operator is invalid: nothing.
pub fn selects(selector: &Value, labels: &Value) -> bool {
    let Some(sel) = selector.as_object() else {
        return false;
    };
    let label = |k: &str| labels.get(k).and_then(Value::as_str);
    let match_labels = match sel.get("matchLabels") {
        None | Some(Value::Null) => true,
        Some(Value::Object(m)) => m
            .iter()
            .all(|(k, v)| v.as_str().is_some_and(|v| label(k) == Some(v))),
        Some(_) => false,
    };
    let requirement = |e: &Value| -> bool {
        let Some(key) = e.get("key").and_then(Value::as_str) else {
            return false;
        };
        let values: Option<Vec<&str>> = match e.get("values") {
            None | Some(Value::Null) => None,
            Some(Value::Array(a)) => a.iter().map(Value::as_str).collect(),
            Some(_) => return false,
        };
        let values = values.unwrap_or_default();
        match e.get("operator").and_then(Value::as_str) {
            Some("In") if !values.is_empty() => label(key).is_some_and(|v| values.contains(&v)),
            Some("NotIn") if !values.is_empty() => label(key).is_none_or(|v| !values.contains(&v)),
            Some("Exists") if values.is_empty() => label(key).is_some(),
            Some("DoesNotExist") if values.is_empty() => label(key).is_none(),
            _ => false,
        }
    };
    let match_expressions = match sel.get("matchExpressions") {
        None | Some(Value::Null) => true,
        Some(Value::Array(es)) => es.iter().all(requirement),
        Some(_) => false,
    };
    match_labels && match_expressions
}
use serde_json::{Value, json};

mod kueue;
use std::collections::{BTreeMap, VecDeque};
use tokio::sync::broadcast;

/// A change, as a watch stream sends it.
#[derive(Debug, Clone)]
pub struct Change {
    pub rv: u64,
    /// `ADDED`, `MODIFIED`, `DELETED`.
    pub kind: &'static str,
    /// Index into `Store::resources`.
    pub resource: usize,
    pub object: Value,
}

/// Why a request failed, as a Kubernetes `Status`.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    pub causes: Vec<(String, String)>,
}

impl Failure {
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Failure {
            code,
            reason,
            message: message.into(),
            causes: Vec::new(),
        }
    }

    pub fn status(&self) -> Value {
        let mut s = json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {},
            "status": "Failure", "message": self.message, "reason": self.reason,
            "code": self.code,
        });
        if !self.causes.is_empty() {
            s["details"] = json!({"causes": self.causes.iter()
                .map(|(r, m)| json!({"reason": r, "message": m})).collect::<Vec<_>>()});
        }
        s
    }
}

type Key = (usize, String, String);

/// Every object, the global resourceVersion, and the recent changes.
pub struct Store {
    pub resources: Vec<Resource>,
    objects: BTreeMap<Key, Value>,
    rv: u64,
    history: VecDeque<Change>,
    /// Watches from a version before this get 410 Gone.
    oldest: u64,
    changes: broadcast::Sender<Change>,
    uid: u64,
}

/// How many changes are kept for watches to resume from.
const HISTORY: usize = 10_000;

impl Store {
    /// Loads objects (CRDs first, so their kinds are served); an object of
    /// a kind no resource serves is refused with its name, as `kubectl
    /// apply` would be.
    pub fn new(objects: Vec<Value>) -> Result<Store, crate::LabError> {
        let mut resources = builtin_resources();
        for o in &objects {
            if o["kind"] == "CustomResourceDefinition" {
                resources.extend(crd_resources(o));
            }
        }
        let (changes, _) = broadcast::channel(4096);
        let mut s = Store {
            resources,
            objects: BTreeMap::new(),
            rv: 1,
            history: VecDeque::new(),
            oldest: 1,
            changes,
            uid: 0,
        };
        for o in objects {
            let what = format!("{} {}", o["kind"], o["metadata"]["name"]);
            s.put(o).map_err(|f| crate::LabError::Object {
                what,
                why: f.message,
            })?;
        }
        s.pdb_status();
        s.history.clear();
        s.oldest = s.rv;
        Ok(s)
    }

    pub fn resource_version(&self) -> u64 {
        self.rv
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Change> {
        self.changes.subscribe()
    }

    /// The resource serving `kind` in `apiVersion`.
    pub fn resource_of(&self, api_version: &str, kind: &str) -> Option<usize> {
        self.resources
            .iter()
            .position(|r| r.group_version() == api_version && r.kind == kind)
    }

    /// The resource at `group/version/plural`.
    pub fn resource(&self, group: &str, version: &str, plural: &str) -> Option<usize> {
        self.resources
            .iter()
            .position(|r| r.group == group && r.version == version && r.plural == plural)
    }

    /// Creates or replaces an object (by kind, namespace, name).
    pub fn put(&mut self, mut o: Value) -> Result<Value, Failure> {
        let api = o["apiVersion"].as_str().unwrap_or_default().to_string();
        let kind = o["kind"].as_str().unwrap_or_default().to_string();
        let Some(r) = self.resource_of(&api, &kind) else {
            return Err(Failure::new(
                404,
                "NotFound",
                format!(
                    "the server could not find the requested resource: no kind {kind:?} in {api:?}"
                ),
            ));
        };
        let name = o["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if name.is_empty() {
            return Err(Failure::new(
                422,
                "Invalid",
                format!("{kind} without metadata.name"),
            ));
        }
        let ns = if self.resources[r].namespaced {
            let ns = o["metadata"]["namespace"]
                .as_str()
                .unwrap_or("default")
                .to_string();
            o["metadata"]["namespace"] = json!(ns);
            ns
        } else {
            String::new()
        };
        let key = (r, ns, name);
        let old = self.objects.get(&key);
        if o["metadata"]["uid"].is_null() {
            let uid = match old {
                Some(old) => old["metadata"]["uid"].clone(),
                None => {
                    self.uid += 1;
                    json!(format!("00000000-0000-4000-8000-{:012x}", self.uid))
                }
            };
            o["metadata"]["uid"] = uid;
        }
        if o["metadata"]["creationTimestamp"].is_null() {
            o["metadata"]["creationTimestamp"] = match old {
                Some(old) => old["metadata"]["creationTimestamp"].clone(),
                None => json!(now_rfc3339()),
            };
        }
        let kind_of_change = if old.is_some() { "MODIFIED" } else { "ADDED" };
        Ok(self.record(key, o, kind_of_change))
    }

    fn record(&mut self, key: Key, mut o: Value, kind: &'static str) -> Value {
        self.rv += 1;
        o["metadata"]["resourceVersion"] = json!(self.rv.to_string());
        let resource = key.0;
        if kind == "DELETED" {
            self.objects.remove(&key);
        } else {
            self.objects.insert(key, o.clone());
        }
        let change = Change {
            rv: self.rv,
            kind,
            resource,
            object: o.clone(),
        };
        self.history.push_back(change.clone());
        while self.history.len() > HISTORY {
            if let Some(c) = self.history.pop_front() {
                self.oldest = c.rv;
            }
        }
        let _ = self.changes.send(change);
        o
    }

    pub fn get(&self, r: usize, ns: &str, name: &str) -> Option<&Value> {
        self.objects.get(&(r, ns.to_string(), name.to_string()))
    }

    /// Objects of a resource, in one namespace or all (`None`).
    pub fn list(&self, r: usize, ns: Option<&str>) -> Vec<&Value> {
        self.objects
            .range((r, String::new(), String::new())..)
            .take_while(|((ri, _, _), _)| *ri == r)
            .filter(|((_, n, _), _)| ns.is_none_or(|want| want == n))
            .map(|(_, o)| o)
            .collect()
    }

    /// Changes after `rv` (for a watch resuming from it), or `None` when
    /// that version is older than the kept history: 410 Gone.
    pub fn since(&self, rv: u64) -> Option<Vec<Change>> {
        if rv < self.oldest {
            return None;
        }
        Some(self.history.iter().filter(|c| c.rv > rv).cloned().collect())
    }

    /// Forgets the history through now, as etcd compaction does: every
    /// watch that resumes from a version it has seen gets 410 Gone.
    pub fn compact(&mut self) {
        self.history.clear();
        self.oldest = self.rv + 1;
    }

    /// Applies a JSON merge patch (RFC 7386; a strategic merge patch of
    /// maps and scalars is the same thing).
    pub fn patch(
        &mut self,
        r: usize,
        ns: &str,
        name: &str,
        patch: &Value,
    ) -> Result<Value, Failure> {
        let Some(old) = self.get(r, ns, name).cloned() else {
            return Err(self.not_found(r, name));
        };
        let mut new = old.clone();
        merge(&mut new, patch);
        // Identity is not patchable.
        new["metadata"]["name"] = old["metadata"]["name"].clone();
        new["metadata"]["uid"] = old["metadata"]["uid"].clone();
        new["kind"] = old["kind"].clone();
        new["apiVersion"] = old["apiVersion"].clone();
        if new == old {
            return Ok(old);
        }
        let active_was = old["spec"]["active"] != false;
        let out = self.record((r, ns.to_string(), name.to_string()), new, "MODIFIED");
        if self.resources[r].kind == "Workload" && self.resources[r].group == "kueue.x-k8s.io" {
            let active = out["spec"]["active"] != false;
            if active_was && !active {
                self.kueue_deactivated(r, ns, name);
            } else if !active_was && active {
                self.kueue_reactivated(r, ns, name);
            }
        }
        self.pdb_status();
        Ok(self.get(r, ns, name).cloned().unwrap_or(out))
    }

    pub fn delete(&mut self, r: usize, ns: &str, name: &str) -> Result<Value, Failure> {
        let Some(old) = self.get(r, ns, name).cloned() else {
            return Err(self.not_found(r, name));
        };
        let out = self.record((r, ns.to_string(), name.to_string()), old, "DELETED");
        self.pdb_status();
        Ok(out)
    }

    pub fn not_found(&self, r: usize, name: &str) -> Failure {
        let res = &self.resources[r];
        let what = if res.group.is_empty() {
            res.plural.clone()
        } else {
            format!("{}.{}", res.plural, res.group)
        };
        Failure::new(404, "NotFound", format!("{what} \"{name}\" not found"))
    }

    /// The Eviction API: deletes the pod unless a PodDisruptionBudget that
    /// selects it allows no disruption now (429, with the budget named).
    pub fn evict(&mut self, ns: &str, name: &str) -> Result<(), Failure> {
        let pods = self.resource("", "v1", "pods").unwrap_or(usize::MAX);
        let Some(pod) = self.get(pods, ns, name).cloned() else {
            return Err(Failure::new(
                404,
                "NotFound",
                format!("pods \"{name}\" not found"),
            ));
        };
        if pod["status"]["phase"] == "Running" {
            let pdbs = self
                .resource("policy", "v1", "poddisruptionbudgets")
                .unwrap_or(usize::MAX);
            for pdb in self.list(pdbs, Some(ns)) {
                if !selects(&pdb["spec"]["selector"], &pod["metadata"]["labels"]) {
                    continue;
                }
                let st = &pdb["status"];
                if st["disruptionsAllowed"].as_i64().unwrap_or(0) <= 0 {
                    let pdb_name = pdb["metadata"]["name"].as_str().unwrap_or_default();
                    let mut f = Failure::new(
                        429,
                        "TooManyRequests",
                        "Cannot evict pod as it would violate the pod's disruption budget.",
                    );
                    f.causes.push((
                        "DisruptionBudget".into(),
                        format!(
                            "The disruption budget {pdb_name} needs {} healthy pods and has {} currently",
                            st["desiredHealthy"].as_i64().unwrap_or(0),
                            st["currentHealthy"].as_i64().unwrap_or(0)
                        ),
                    ));
                    return Err(f);
                }
            }
        }
        self.delete(pods, ns, name).map(|_| ())
    }

    /// Recomputes each PodDisruptionBudget's status from the pods it
    /// selects, as the disruption controller does.
    fn pdb_status(&mut self) {
        let (Some(pdbs), Some(pods)) = (
            self.resource("policy", "v1", "poddisruptionbudgets"),
            self.resource("", "v1", "pods"),
        ) else {
            return;
        };
        let budgets: Vec<Value> = self.list(pdbs, None).into_iter().cloned().collect();
        for pdb in budgets {
            let ns = pdb["metadata"]["namespace"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let name = pdb["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let selected: Vec<&Value> = self
                .list(pods, Some(&ns))
                .into_iter()
                .filter(|p| selects(&pdb["spec"]["selector"], &p["metadata"]["labels"]))
                .collect();
            let expected = selected.len() as i64;
            let healthy = selected
                .iter()
                .filter(|p| p["status"]["phase"] == "Running")
                .count() as i64;
            let spec = &pdb["spec"];
            let desired = if !spec["minAvailable"].is_null() {
                int_or_percent(&spec["minAvailable"], expected, true)
            } else if !spec["maxUnavailable"].is_null() {
                expected - int_or_percent(&spec["maxUnavailable"], expected, false)
            } else {
                expected
            }
            .max(0);
            let status = json!({
                "currentHealthy": healthy, "desiredHealthy": desired,
                "disruptionsAllowed": (healthy - desired).max(0),
                "expectedPods": expected,
                "observedGeneration": pdb["metadata"]["generation"].as_i64().unwrap_or(1),
            });
            if pdb["status"] != status {
                let mut new = pdb.clone();
                new["status"] = status;
                self.record((pdbs, ns, name), new, "MODIFIED");
            }
        }
    }
}

fn int_or_percent(v: &Value, total: i64, round_up: bool) -> i64 {
    match v {
        Value::Number(n) => n.as_i64().unwrap_or(0),
        Value::String(s) => {
            let pct: i64 = s.trim_end_matches('%').parse().unwrap_or(0);
            let scaled = total * pct;
            if round_up {
                (scaled + 99) / 100
            } else {
                scaled / 100
            }
        }
        _ => 0,
    }
}

/// Now, as Kubernetes writes times.
pub fn now_rfc3339() -> String {
    chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, labels: Value, phase: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "ml", "labels": labels},
            "spec": {"nodeName": "gpu-01"}, "status": {"phase": phase}})
    }

    #[test]
    fn a_pdb_with_no_disruption_left_refuses_an_eviction_with_its_name() {
        let pdb = json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "train-pdb", "namespace": "ml"},
            "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "train"}}}});
        let mut s = Store::new(vec![
            pdb,
            pod("a", json!({"app": "train"}), "Running"),
            pod("b", json!({"app": "train"}), "Running"),
            pod("c", json!({"app": "other"}), "Running"),
        ])
        .unwrap();
        let err = s.evict("ml", "a").unwrap_err();
        assert_eq!(err.code, 429);
        assert!(
            err.causes[0]
                .1
                .contains("train-pdb needs 2 healthy pods and has 2"),
            "{err:?}"
        );
        assert!(s.evict("ml", "c").is_ok());
        let pods = s.resource("", "v1", "pods").unwrap();
        assert!(s.get(pods, "ml", "c").is_none());
        assert!(s.get(pods, "ml", "a").is_some());
    }

    #[test]
    fn a_watch_from_before_compaction_is_gone_and_one_from_after_gets_changes() {
        let mut s = Store::new(vec![pod("a", json!({}), "Running")]).unwrap();
        let pods = s.resource("", "v1", "pods").unwrap();
        let before = s.resource_version();
        s.patch(
            pods,
            "ml",
            "a",
            &json!({"metadata": {"labels": {"x": "1"}}}),
        )
        .unwrap();
        assert_eq!(s.since(before).unwrap().len(), 1);
        s.compact();
        assert!(s.since(before).is_none());
        assert!(
            s.since(s.resource_version()).is_none(),
            "compacted through now"
        );
        s.delete(pods, "ml", "a").unwrap();
        let now = s.resource_version() - 1;
        assert!(s.since(now).is_none(), "still before the compaction");
        let now = s.resource_version();
        s.put(pod("b", json!({}), "Running")).unwrap();
        let changes = s.since(now).unwrap();
        assert_eq!(changes[0].kind, "ADDED");
    }

    #[test]
    fn crds_define_what_is_served() {
        let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "workloads.kueue.x-k8s.io"},
            "spec": {"group": "kueue.x-k8s.io", "scope": "Namespaced",
                "names": {"plural": "workloads", "kind": "Workload", "singular": "workload"},
                "versions": [{"name": "v1beta1", "served": true, "storage": true}]}});
        let wl = json!({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Workload",
            "metadata": {"name": "w", "namespace": "ml"}});
        assert!(Store::new(vec![wl.clone()]).is_err());
        let s = Store::new(vec![crd, wl]).unwrap();
        assert!(
            s.resource("kueue.x-k8s.io", "v1beta1", "workloads")
                .is_some()
        );
    }

    #[test]
    fn selectors_and_queries() {
        let labels = json!({"app": "train", "tier": "gpu"});
        assert!(label_query("app=train,tier", &labels));
        assert!(!label_query("app!=train", &labels));
        assert!(label_query("!missing", &labels));
        let sel =
            json!({"matchExpressions": [{"key": "app", "operator": "In", "values": ["train"]}]});
        assert!(selects(&sel, &labels));
        // From the documentation's rules, each.
        assert!(selects(&json!({}), &labels), "empty selects all");
        assert!(!selects(&Value::Null, &labels), "null selects none");
        let expr = |op: &str, values: Value| json!({"matchExpressions": [{"key": "zone", "operator": op, "values": values}]});
        assert!(
            selects(&expr("NotIn", json!(["a"])), &labels),
            "NotIn: key absent"
        );
        assert!(!selects(&expr("In", json!([])), &labels), "In needs values");
        assert!(
            !selects(&expr("Exists", json!(["x"])), &labels),
            "Exists takes none"
        );
        assert!(
            !selects(&expr("Gt", json!(["1"])), &labels),
            "not a selector operator"
        );
        assert!(
            !selects(
                &json!({"matchLabels": {"app": "train"}, "matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}),
                &labels
            ),
            "ANDed"
        );
        // Set-based queries (`labelSelector=`), with commas inside sets.
        assert!(label_query("app in (train,serve),tier", &labels));
        assert!(!label_query("app notin (train),tier", &labels));
        assert!(label_query("zone notin (a, b)", &labels));
        assert!(!label_query("zone in (a)", &labels));
        assert!(label_query("app==train , tier!=cpu", &labels));
        let p = pod("a", json!({}), "Running");
        assert!(field_query("spec.nodeName=gpu-01", &p));
        assert!(!field_query("spec.nodeName=gpu-02", &p));
        assert!(field_query("status.phase!=Succeeded", &p));
    }

    #[test]
    fn merge_patch_sets_and_removes() {
        let mut o = json!({"spec": {"unschedulable": true, "taints": [1]}, "x": 1});
        merge(
            &mut o,
            &json!({"spec": {"unschedulable": null}, "y": {"z": 2}}),
        );
        assert_eq!(o, json!({"spec": {"taints": [1]}, "x": 1, "y": {"z": 2}}));
    }
}
