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
use crate::error::{Invalid, invalid};
use crate::model::{
    Checkpoint, Cluster, Event, EventKind, FaultReport, Gpu, Job, JobState, LastXid, Node,
    NodeState, Partition, Quota, TimeLimit, Timestamp,
};
use serde_json::Value;

mod jobs;
mod nodes;

use super::pod::{Container, Pod};

use jobs::{Gang, gang_of, job_of, scheduling_messages};
use nodes::{add_topology_domains, cordon_times, events, node_of, topology_levels};
pub use nodes::{gpu_named, taint_text, xid_code};
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
    // Kueue's Topology Aware Scheduling: the node labels naming its levels.
    "topologies",
    "podgroups",
    "queues",
    // Kueue's visibility API (polled, not watched): one object per pending
    // workload, `{metadata: {namespace, name}, clusterQueue, position}`.
    "pendingworkloads",
];

/// Every watched object, by kind (a [`KINDS`] entry), then `ns/name`: pods
/// as typed records (see [`Pod`]), the other kinds as slimmed JSON.
#[derive(Debug, Clone, Default)]
pub struct Objects {
    by_kind: BTreeMap<&'static str, BTreeMap<String, Value>>,
    pods: BTreeMap<String, Pod>,
}

impl Objects {
    /// Sorts loose objects (as a List or a directory holds them) by kind.
    pub fn from_values(values: impl IntoIterator<Item = Value>) -> Objects {
        let mut o = Objects::default();
        for v in values {
            let kind = v["kind"].as_str().unwrap_or_default().to_string();
            let kind = kind.as_str();
            let plural = format!("{}s", kind.to_lowercase());
            let plural = match kind {
                "PodDisruptionBudget" => "poddisruptionbudgets".to_string(),
                "Topology" => "topologies".to_string(),
                _ => plural,
            };
            if let Some(k) = KINDS.iter().find(|k| **k == plural) {
                o.insert(k, v);
            }
        }
        o
    }

    /// Keeps `v`, an object of `kind`, as the watch keeps it: slimmed (see
    /// `slim`), a pod as its record.
    pub fn insert(&mut self, kind: &'static str, mut v: Value) {
        if kind == "pods" {
            let p = Pod::from_value(&v);
            self.pods.insert(p.key(), p);
        } else {
            super::slim::slim(kind, &mut v);
            self.by_kind.entry(kind).or_default().insert(key(&v), v);
        }
    }

    pub fn remove(&mut self, kind: &str, key: &str) {
        if kind == "pods" {
            self.pods.remove(key);
        } else if let Some(m) = self.by_kind.get_mut(kind) {
            m.remove(key);
        }
    }

    /// `kind`'s objects are now those of `fresh` (a list read whole).
    pub fn replace_kind(&mut self, kind: &'static str, fresh: Objects) {
        if kind == "pods" {
            self.pods = fresh.pods;
        } else {
            let mut fresh = fresh.by_kind;
            self.by_kind
                .insert(kind, fresh.remove(kind).unwrap_or_default());
        }
    }

    /// `kind`'s objects (not pods) are now `values`; whether that changed them.
    pub fn replace_values(&mut self, kind: &'static str, values: Vec<Value>) -> bool {
        let fresh: BTreeMap<String, Value> = values.into_iter().map(|v| (key(&v), v)).collect();
        if self.by_kind.get(kind) == Some(&fresh) {
            return false;
        }
        self.by_kind.insert(kind, fresh);
        true
    }

    /// The objects of `kind` (pods are read through [`Objects::pods`]).
    pub fn of(&self, kind: &str) -> impl Iterator<Item = &Value> {
        self.by_kind.get(kind).into_iter().flat_map(|m| m.values())
    }

    pub fn pods(&self) -> impl Iterator<Item = &Pod> {
        self.pods.values()
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

pub use super::fields::time;

/// A count (allocatable GPUs), 0 when absent or not a count.
pub fn count_of(v: &Value) -> u64 {
    count(v).map_or(0, u64::from)
}

/// A Kubernetes quantity as a whole count (`8`, `"8"`, `"1k"`), leniently:
/// `None` when absent or not a count in range.
fn count(v: &Value) -> Option<u32> {
    bounded(v, u64::from(u32::MAX)).ok().flatten()
}

/// A Kubernetes quantity that must be a whole count in `0..=max`: `Ok(None)`
/// when absent, an error saying what is wrong with it otherwise (negative,
/// fractional, not a quantity, over `max`). Never clamped: a count nightshift
/// cannot believe is reported, not shown as something else.
fn bounded(v: &Value, max: u64) -> Result<Option<u32>, Invalid> {
    let n = match v {
        Value::Null => return Ok(None),
        Value::Number(n) => n
            .as_u64()
            .ok_or_else(|| invalid!("{n} is not a whole count ≥ 0"))?,
        Value::String(t) => match t.trim().parse::<u64>() {
            Ok(n) => n,
            Err(_) => units::parse_count(t).map_err(|e| Invalid(e.to_string()))?,
        },
        other => return Err(invalid!("{other} is not a quantity")),
    };
    if n > max {
        return Err(invalid!("{n} is more than {max}"));
    }
    u32::try_from(n)
        .map(Some)
        .map_err(|_| invalid!("{n} is out of range"))
}

/// Whole GPUs and MIG slices a pod asks for (limits, else requests),
/// leniently (a count out of range is none).
pub fn pod_gpus(pod: &Pod) -> (u32, u32) {
    gpus_checked(&pod.containers).unwrap_or((0, 0))
}

/// Whole GPUs and MIG slices a pod template (a Kueue pod set's) asks for,
/// leniently.
pub fn template_gpus(template: &Value) -> (u32, u32) {
    let containers: Vec<Container> = template["spec"]["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .map(Container::from_value)
        .collect();
    gpus_checked(&containers).unwrap_or((0, 0))
}

/// Whole GPUs and MIG slices containers ask for; an error naming the
/// container and key when one is not a count up to
/// `limits.max_gpus_per_node`.
fn gpus_checked(containers: &[Container]) -> Result<(u32, u32), Invalid> {
    let max = u64::from(crate::limits::get().max_gpus_per_node);
    let mut whole = 0u32;
    let mut mig = 0u32;
    for c in containers {
        // Only NVIDIA's keys are kept: limits that name one, else requests.
        let (which, map) = if c.limits.is_empty() {
            ("requests", &c.requests)
        } else {
            ("limits", &c.limits)
        };
        for (k, v) in map.iter() {
            if &**k != GPU && !k.starts_with("nvidia.com/mig-") {
                continue;
            }
            let n = bounded(v, max).map_err(|e| {
                invalid!(
                    "container {} resources.{which}.{k}: {e} (limits.max_gpus_per_node)",
                    c.name.as_deref().unwrap_or("?")
                )
            })?;
            let slot = if &**k == GPU { &mut whole } else { &mut mig };
            *slot = slot.saturating_add(n.unwrap_or(0));
        }
    }
    if u64::from(whole) > max {
        return Err(invalid!(
            "asks for {whole} GPUs in all, more than {max} (limits.max_gpus_per_node)"
        ));
    }
    Ok((whole, mig))
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
/// A snapshot, and a line for each object (or value) skipped because it
/// could not be believed.
#[derive(Debug, Clone)]
pub struct Mapped {
    pub cluster: Cluster,
    pub warnings: Vec<String>,
}

pub fn cluster(name: &str, o: &Objects, now: Timestamp) -> Mapped {
    let mut warnings = Vec::new();
    let mut nodes: Vec<Node> = o
        .of("nodes")
        .filter_map(|v| node_of(v, &mut warnings))
        .collect();
    nodes.sort_by(|a, b| a.name.cmp(&b.name));
    cordon_times(o, &mut nodes);
    let levels = topology_levels(o);
    for n in &mut nodes {
        add_topology_domains(n, &levels);
    }
    let node_labels: HashMap<String, std::sync::Arc<BTreeMap<String, String>>> = nodes
        .iter()
        .map(|n| (n.name.clone(), n.labels.clone()))
        .collect();
    let (partitions, node_parts) = partitions_of(o, &nodes);
    for n in &mut nodes {
        n.partitions = node_parts.get(&n.name).cloned().unwrap_or_default().into();
    }
    let gangs = gangs_of(o, &mut warnings);
    let jobs = jobs_of(o, &gangs, &partitions, &node_parts, &node_labels);
    attribute_gpus(&mut nodes, &jobs);
    let quotas = quotas_of(o, &jobs, &mut warnings);
    let mut c = Cluster {
        history: Vec::new(),
        name: name.to_string(),
        source: "kube".into(),
        no_job_signal: true,
        reservations: Vec::new(),
        time: now,
        partitions,
        nodes: nodes.into_iter().map(std::sync::Arc::new).collect(),
        jobs: jobs.into_iter().map(std::sync::Arc::new).collect(),
        events: Vec::new(),
        quotas,
    };
    c.events = events(o, &c);
    Mapped {
        cluster: c,
        warnings,
    }
}

/// Partitions: Kueue flavors with node labels, else GPU products; and each
/// node's partitions.
fn partitions_of(o: &Objects, nodes: &[Node]) -> (Vec<Partition>, HashMap<String, Vec<String>>) {
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
    for n in nodes {
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
    (partitions, node_parts)
}

/// The gangs: pods grouped by what owns them (a Volcano PodGroup, a Kueue
/// workload's owner, a controller), with the group's objects.
fn gangs_of<'a>(
    o: &'a Objects,
    warnings: &mut Vec<String>,
) -> BTreeMap<(String, String, String), Gang<'a>> {
    let mut gangs: BTreeMap<(String, String, String), Gang> = BTreeMap::new();
    for p in o.pods() {
        match gpus_checked(&p.containers) {
            Ok((w, m)) if w + m > 0 => {}
            Ok(_) => continue,
            Err(e) => {
                warnings.push(format!("pod {}: {e}; skipped", p.key()));
                continue;
            }
        }
        let ns = p.namespace.as_deref().unwrap_or("default").to_string();
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

    gangs
}

/// One job per gang, with where it waits in Kueue's queues.
fn jobs_of(
    o: &Objects,
    gangs: &BTreeMap<(String, String, String), Gang<'_>>,
    partitions: &[Partition],
    node_parts: &HashMap<String, Vec<String>>,
    node_labels: &HashMap<String, std::sync::Arc<BTreeMap<String, String>>>,
) -> Vec<Job> {
    let partition_of_node =
        |node: &str| -> Option<String> { node_parts.get(node).and_then(|p| p.first()).cloned() };
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
                node_labels,
            )
        })
        .collect();
    jobs.sort_by(|a, b| a.submit_time.cmp(&b.submit_time).then(a.id.cmp(&b.id)));

    jobs
}

/// GPUs on nodes: the device plugin does not say which index a pod got,
/// so a node's pods fill its GPUs in order (node-level attribution is
/// exact; per-GPU is not, until dcgm-exporter's pod labels say).
fn attribute_gpus(nodes: &mut [Node], jobs: &[Job]) {
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
}

/// GPU quotas: Kueue ClusterQueues' nominal quotas and usage, Volcano
/// Queues' capability.
fn quotas_of(o: &Objects, jobs: &[Job], warnings: &mut Vec<String>) -> Vec<Quota> {
    let mut quotas: Vec<Quota> = Vec::new();
    let mut quota_count = |obj: &str, field: &str, v: &Value| -> Option<Option<u32>> {
        match bounded(v, u64::from(u32::MAX)) {
            Ok(n) => Some(n),
            Err(e) => {
                warnings.push(format!("{obj}: {field} {e}; not read"));
                None
            }
        }
    };
    for cq in o.of("clusterqueues") {
        let name = s(cq, &["metadata", "name"]).unwrap_or_default();
        let obj = format!("ClusterQueue {name}");
        let mut limit = Some(0u32);
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
                        // One unbelievable flavor quota: the limit is unknown.
                        let n =
                            quota_count(&obj, "nominalQuota of nvidia.com/gpu", &r["nominalQuota"]);
                        limit = match (limit, n) {
                            (Some(l), Some(n)) => Some(l.saturating_add(n.unwrap_or(0))),
                            _ => None,
                        };
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
            .filter_map(|r| {
                quota_count(&obj, "flavorsUsage total of nvidia.com/gpu", &r["total"]).flatten()
            })
            .fold(0, u32::saturating_add);
        quotas.push(Quota {
            account: name.into(),
            gpu_limit: limit.filter(|_| any),
            gpus_in_use: used,
        });
    }
    for q in o.of("queues") {
        let name = s(q, &["metadata", "name"]).unwrap_or_default();
        let limit = quota_count(
            &format!("Queue {name}"),
            "spec.capability.nvidia.com/gpu",
            &q["spec"]["capability"][GPU],
        )
        .flatten();
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

    quotas
}

#[cfg(test)]
mod tests;
