//! Kubernetes objects → nightshift's model. Pure: the watch side keeps the
//! objects, this turns them into a snapshot, and the tests feed it the
//! fixture manifests directly.
//!
//! - Nodes: those with GPUs (allocatable `nvidia.com/gpu` or `nvidia.com/mig-*`,
//!   or GPU Feature Discovery's `nvidia.com/gpu.count`); CPU-only nodes are
//!   not shown. State: `Ready` not `True` → down; `spec.unschedulable`
//!   → cordoned; a `NoSchedule`/`NoExecute` taint of NVIDIA's (`nvidia.com/…`)
//!   → cordoned too, with the taint as the reason (the scheduler will not
//!   place GPU pods there either).
//! - Jobs are gangs: a Volcano PodGroup (pods annotated
//!   `scheduling.k8s.io/group-name`), a JobSet, else the pods' controller
//!   (Job, PyTorchJob, RayJob, …), else the bare pod; a Kueue Workload is
//!   joined to the gang of its owner. Job id: `NAMESPACE/NAME`.
//! - Checkpoints from annotations on the pods or the Workload:
//!   `nightshift.io/checkpoint-bytes` (`1.1TB`), `nightshift.io/checkpoint-last`
//!   (RFC 3339 or epoch seconds), `nightshift.io/checkpoint-interval` (`30m`),
//!   `nightshift.io/checkpoint-params` (`70B`); the owner: `nightshift.io/user`
//!   (label or annotation, else the namespace).
//! - Quotas: each Kueue ClusterQueue (`nvidia.com/gpu` nominal quota, usage)
//!   and Volcano Queue (`capability`) is an account; partitions are the Kueue
//!   ResourceFlavors (nodes by `nodeLabels`), else the GPU product.

use crate::engine::units;
use crate::model::{
    Checkpoint, Cluster, Event, EventKind, Gpu, Job, JobState, Node, NodeState, Partition, Quota,
    TimeLimit, Timestamp,
};
use serde_json::Value;

mod jobs;
mod nodes;

use jobs::{Gang, gang_of, job_of, scheduling_messages};
pub use nodes::xid_code;
use nodes::{events, node_of};
use std::collections::{BTreeMap, BTreeSet, HashMap};

pub const GPU: &str = "nvidia.com/gpu";
const ANN_BYTES: &str = "nightshift.io/checkpoint-bytes";
const ANN_LAST: &str = "nightshift.io/checkpoint-last";
const ANN_EVERY: &str = "nightshift.io/checkpoint-interval";
const ANN_PARAMS: &str = "nightshift.io/checkpoint-params";
const ANN_USER: &str = "nightshift.io/user";
const VOLCANO_GROUP: &str = "scheduling.k8s.io/group-name";
const JOBSET: &str = "jobset.sigs.k8s.io/jobset-name";

/// The kinds the source watches; the key of each in [`Objects`].
pub const KINDS: &[&str] = &[
    "nodes",
    "pods",
    "events",
    "poddisruptionbudgets",
    "workloads",
    "clusterqueues",
    "localqueues",
    "resourceflavors",
    "workloadpriorityclasses",
    "podgroups",
    "queues",
    // Kueue's visibility API (polled, not watched): one object per pending
    // workload, `{metadata: {namespace, name}, clusterQueue, position}`.
    "pendingworkloads",
];

/// Every watched object, by kind (a [`KINDS`] entry), then `ns/name`.
#[derive(Debug, Clone, Default)]
pub struct Objects {
    pub by_kind: BTreeMap<&'static str, BTreeMap<String, Value>>,
}

impl Objects {
    /// Sorts loose objects (as a List or a directory holds them) by kind.
    pub fn from_values(values: impl IntoIterator<Item = Value>) -> Objects {
        let mut o = Objects::default();
        for v in values {
            let kind = v["kind"].as_str().unwrap_or_default();
            let plural = format!("{}s", kind.to_lowercase());
            let plural = if kind == "PodDisruptionBudget" {
                "poddisruptionbudgets".to_string()
            } else {
                plural
            };
            if let Some(k) = KINDS.iter().find(|k| **k == plural) {
                o.by_kind.entry(k).or_default().insert(key(&v), v);
            }
        }
        o
    }

    pub fn of(&self, kind: &str) -> impl Iterator<Item = &Value> {
        self.by_kind.get(kind).into_iter().flat_map(|m| m.values())
    }
}

/// `ns/name`, or `name` for cluster-scoped objects.
pub fn key(v: &Value) -> String {
    let m = &v["metadata"];
    let name = m["name"].as_str().unwrap_or_default();
    match m["namespace"].as_str() {
        Some(ns) if !ns.is_empty() => format!("{ns}/{name}"),
        _ => name.to_string(),
    }
}

fn s<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    let mut cur = v;
    for p in path {
        cur = cur.get(p)?;
    }
    cur.as_str()
}

/// RFC 3339 → epoch seconds.
pub fn time(v: &Value) -> Option<Timestamp> {
    let t = v.as_str()?;
    chrono::DateTime::parse_from_rfc3339(t)
        .ok()
        .map(|d| d.timestamp())
}

/// A Kubernetes quantity as a whole count (`8`, `"8"`, `"1k"`).
fn count(v: &Value) -> Option<u32> {
    match v {
        Value::Number(n) => n.as_u64().map(|n| n.min(u32::MAX as u64) as u32),
        Value::String(s) => s.trim().parse::<u32>().ok().or_else(|| {
            units::parse_count(s)
                .ok()
                .map(|n| n.min(u32::MAX as u64) as u32)
        }),
        _ => None,
    }
}

/// Whole GPUs and MIG slices a pod asks for (limits, else requests).
pub fn pod_gpus(pod: &Value) -> (u32, u32) {
    let mut whole = 0u32;
    let mut mig = 0u32;
    let containers = pod["spec"]["containers"].as_array().into_iter().flatten();
    for c in containers {
        let res = &c["resources"];
        let map = res["limits"]
            .as_object()
            .filter(|m| m.keys().any(|k| k.starts_with("nvidia.com/")))
            .or_else(|| res["requests"].as_object());
        for (k, v) in map.into_iter().flatten() {
            if k == GPU {
                whole = whole.saturating_add(count(v).unwrap_or(0));
            } else if k.starts_with("nvidia.com/mig-") {
                mig = mig.saturating_add(count(v).unwrap_or(0));
            }
        }
    }
    (whole, mig)
}

fn is_gpu_pod(pod: &Value) -> bool {
    let (w, m) = pod_gpus(pod);
    w + m > 0
}

fn condition<'a>(v: &'a Value, kind: &str) -> Option<&'a Value> {
    v["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
}

/// Whether a LabelSelector (`matchLabels`, `matchExpressions`) selects
/// these labels. An empty selector selects everything (policy/v1).
pub fn selects(selector: &Value, labels: &Value) -> bool {
    let label = |k: &str| labels.get(k).and_then(Value::as_str);
    let labels_ok = selector["matchLabels"]
        .as_object()
        .is_none_or(|m| m.iter().all(|(k, v)| label(k) == v.as_str()));
    let exprs_ok = selector["matchExpressions"].as_array().is_none_or(|es| {
        es.iter().all(|e| {
            let key = e["key"].as_str().unwrap_or_default();
            let values: Vec<&str> = e["values"]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            match e["operator"].as_str().unwrap_or_default() {
                "In" => label(key).is_some_and(|v| values.contains(&v)),
                "NotIn" => label(key).is_none_or(|v| !values.contains(&v)),
                "Exists" => label(key).is_some(),
                "DoesNotExist" => label(key).is_none(),
                _ => false,
            }
        })
    });
    labels_ok && exprs_ok
}

/// The whole snapshot.
pub fn cluster(name: &str, o: &Objects, now: Timestamp) -> Cluster {
    let mut nodes: Vec<Node> = o.of("nodes").filter_map(node_of).collect();
    nodes.sort_by(|a, b| a.name.cmp(&b.name));
    let node_labels: HashMap<String, BTreeMap<String, String>> = nodes
        .iter()
        .map(|n| (n.name.clone(), n.labels.clone()))
        .collect();

    // Partitions: Kueue flavors with node labels, else GPU products.
    let mut partitions: Vec<Partition> = Vec::new();
    let mut node_parts: HashMap<String, Vec<String>> = HashMap::new();
    for f in o.of("resourceflavors") {
        let Some(fname) = s(f, &["metadata", "name"]) else {
            continue;
        };
        let want = f["spec"]["nodeLabels"].as_object();
        let members: Vec<String> = nodes
            .iter()
            .filter(|n| {
                want.is_some_and(|w| {
                    w.iter()
                        .all(|(k, v)| n.labels.get(k).map(String::as_str) == v.as_str())
                })
            })
            .map(|n| n.name.clone())
            .collect();
        if !members.is_empty() {
            for m in &members {
                node_parts
                    .entry(m.clone())
                    .or_default()
                    .push(fname.to_string());
            }
            partitions.push(Partition {
                name: fname.into(),
                gpu_model: nodes
                    .iter()
                    .find(|n| n.name == members[0])
                    .and_then(|n| n.gpu_model.clone()),
                nodes: members,
                max_time_s: None,
            });
        }
    }
    // Nodes no flavor selects: one partition per GPU product.
    let mut by_product: HashMap<String, usize> = HashMap::new();
    for n in &nodes {
        if node_parts.contains_key(&n.name) {
            continue;
        }
        let pname = n.gpu_model.clone().unwrap_or_else(|| "gpu".into());
        node_parts.insert(n.name.clone(), vec![pname.clone()]);
        match by_product.get(&pname) {
            Some(&i) => partitions[i].nodes.push(n.name.clone()),
            None => {
                by_product.insert(pname.clone(), partitions.len());
                partitions.push(Partition {
                    name: pname,
                    nodes: vec![n.name.clone()],
                    gpu_model: n.gpu_model.clone(),
                    max_time_s: None,
                });
            }
        }
    }
    for n in &mut nodes {
        n.partitions = node_parts.get(&n.name).cloned().unwrap_or_default();
    }
    let partition_of_node =
        |node: &str| -> Option<String> { node_parts.get(node).and_then(|p| p.first()).cloned() };

    // Gangs.
    let mut gangs: BTreeMap<(String, String, String), Gang> = BTreeMap::new();
    for p in o.of("pods").filter(|p| is_gpu_pod(p)) {
        let ns = s(p, &["metadata", "namespace"])
            .unwrap_or("default")
            .to_string();
        let (kind, gname) = gang_of(p);
        let g = gangs
            .entry((ns.clone(), kind.clone(), gname.clone()))
            .or_insert_with(|| Gang {
                ns,
                kind,
                name: gname,
                ..Gang::default()
            });
        g.pods.push(p);
    }
    for pg in o.of("podgroups") {
        let ns = s(pg, &["metadata", "namespace"])
            .unwrap_or("default")
            .to_string();
        let name = s(pg, &["metadata", "name"]).unwrap_or_default().to_string();
        gangs
            .entry((ns.clone(), "PodGroup".into(), name.clone()))
            .or_insert_with(|| Gang {
                ns,
                kind: "PodGroup".into(),
                name,
                ..Gang::default()
            })
            .podgroup = Some(pg);
    }
    for wl in o.of("workloads") {
        let ns = s(wl, &["metadata", "namespace"])
            .unwrap_or("default")
            .to_string();
        let owner = wl["metadata"]["ownerReferences"]
            .as_array()
            .and_then(|os| os.first());
        let (kind, name) = match owner {
            Some(o) => (
                o["kind"].as_str().unwrap_or("Owner").to_string(),
                o["name"].as_str().unwrap_or_default().to_string(),
            ),
            None => (
                "Workload".to_string(),
                s(wl, &["metadata", "name"]).unwrap_or_default().to_string(),
            ),
        };
        gangs
            .entry((ns.clone(), kind.clone(), name.clone()))
            .or_insert_with(|| Gang {
                ns,
                kind,
                name,
                ..Gang::default()
            })
            .workload = Some(wl);
    }

    let sched = scheduling_messages(o);
    let positions: HashMap<String, (String, u64)> = o
        .of("pendingworkloads")
        .filter_map(|p| {
            Some((
                key(p),
                (
                    p["clusterQueue"].as_str()?.to_string(),
                    p["position"].as_u64()?,
                ),
            ))
        })
        .collect();
    let cqs: HashMap<&str, &Value> = o
        .of("clusterqueues")
        .filter_map(|c| Some((s(c, &["metadata", "name"])?, c)))
        .collect();
    let lqs: HashMap<String, &str> = o
        .of("localqueues")
        .filter_map(|l| Some((key(l), s(l, &["spec", "clusterQueue"])?)))
        .collect();
    let largest = partitions
        .iter()
        .max_by_key(|p| p.nodes.len())
        .map(|p| p.name.clone())
        .unwrap_or_default();

    let mut jobs: Vec<Job> = gangs
        .values()
        .filter(|g| !g.pods.is_empty() || g.workload.is_some() || g.podgroup.is_some())
        .map(|g| {
            job_of(
                g,
                &sched,
                &positions,
                &cqs,
                &lqs,
                &partition_of_node,
                &largest,
                &node_labels,
            )
        })
        .collect();
    jobs.sort_by(|a, b| a.submit_time.cmp(&b.submit_time).then(a.id.cmp(&b.id)));

    // GPUs on nodes: the device plugin does not say which index a pod got,
    // so a node's pods fill its GPUs in order (node-level attribution is
    // exact; per-GPU is not, until dcgm-exporter's pod labels say).
    let node_ix: HashMap<String, usize> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.name.clone(), i))
        .collect();
    for j in jobs.iter().filter(|j| j.state.holds_resources()) {
        for n in &j.nodes {
            let Some(node) = node_ix.get(n).map(|&i| &mut nodes[i]) else {
                continue;
            };
            let per = j.gpus_per_node.unwrap_or(1).max(1);
            for g in node
                .gpus
                .iter_mut()
                .filter(|g| g.job.is_none())
                .take(per as usize)
            {
                g.job = Some(j.id.clone());
            }
        }
    }

    let mut quotas: Vec<Quota> = Vec::new();
    for cq in o.of("clusterqueues") {
        let name = s(cq, &["metadata", "name"]).unwrap_or_default();
        let mut limit = 0u32;
        let mut any = false;
        for g in cq["spec"]["resourceGroups"]
            .as_array()
            .into_iter()
            .flatten()
        {
            for f in g["flavors"].as_array().into_iter().flatten() {
                for r in f["resources"].as_array().into_iter().flatten() {
                    if r["name"] == GPU {
                        any = true;
                        limit += count(&r["nominalQuota"]).unwrap_or(0);
                    }
                }
            }
        }
        let used: u32 = cq["status"]["flavorsUsage"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|f| f["resources"].as_array().into_iter().flatten())
            .filter(|r| r["name"] == GPU)
            .filter_map(|r| count(&r["total"]))
            .sum();
        quotas.push(Quota {
            account: name.into(),
            gpu_limit: any.then_some(limit),
            gpus_in_use: used,
        });
    }
    for q in o.of("queues") {
        let name = s(q, &["metadata", "name"]).unwrap_or_default();
        let limit = count(&q["spec"]["capability"][GPU]);
        let used = jobs
            .iter()
            .filter(|j| j.state.holds_resources() && j.account.as_deref() == Some(name))
            .filter_map(Job::gpus_requested)
            .sum();
        quotas.push(Quota {
            account: name.into(),
            gpu_limit: limit,
            gpus_in_use: used,
        });
    }

    let mut c = Cluster {
        name: name.to_string(),
        source: "kube".into(),
        time: now,
        partitions,
        nodes: nodes.into_iter().map(std::sync::Arc::new).collect(),
        jobs: jobs.into_iter().map(std::sync::Arc::new).collect(),
        events: Vec::new(),
        quotas,
    };
    c.events = events(o, &c);
    c
}

#[cfg(test)]
mod tests;
