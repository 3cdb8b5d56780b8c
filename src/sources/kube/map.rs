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

/// The Xid code in a driver or node-problem-detector message
/// (`NVRM: Xid (PCI:0000:bb:00): 79, pid=…`, `Xid 79`, `XID 48`).
pub fn xid_code(msg: &str) -> Option<u32> {
    let at = msg.find("Xid").or_else(|| msg.find("XID"))?;
    let rest = &msg[at + 3..];
    let rest = match rest.find("):") {
        Some(i) if rest.trim_start().starts_with('(') => &rest[i + 2..],
        _ => rest,
    };
    let digits: String = rest
        .trim_start_matches([' ', ':'])
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// An NVIDIA health taint (`nvidia.com/…` with NoSchedule/NoExecute).
fn gpu_taint(node: &Value) -> Option<String> {
    node["spec"]["taints"]
        .as_array()?
        .iter()
        .filter(|t| matches!(t["effect"].as_str(), Some("NoSchedule" | "NoExecute")))
        .find(|t| {
            t["key"]
                .as_str()
                .is_some_and(|k| k.starts_with("nvidia.com/"))
        })
        .map(|t| {
            let v = t["value"].as_str().filter(|v| !v.is_empty());
            format!(
                "taint {}{}:{}",
                t["key"].as_str().unwrap_or_default(),
                v.map(|v| format!("={v}")).unwrap_or_default(),
                t["effect"].as_str().unwrap_or_default()
            )
        })
}

/// A node condition that is a GPU health signal (node-problem-detector's
/// or the GPU operator's: a type naming GPU or Xid, status True).
fn gpu_condition(node: &Value) -> Option<&Value> {
    node["status"]["conditions"].as_array()?.iter().find(|c| {
        c["status"] == "True"
            && c["type"]
                .as_str()
                .is_some_and(|t| t.to_lowercase().contains("gpu") || t.contains("Xid"))
    })
}

fn node_of(v: &Value) -> Option<Node> {
    let name = s(v, &["metadata", "name"])?.to_string();
    let labels: BTreeMap<String, String> = v["metadata"]["labels"]
        .as_object()
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default();
    let alloc = &v["status"]["allocatable"];
    let whole = count(&alloc[GPU]).unwrap_or(0);
    let migs: u32 = alloc
        .as_object()
        .map(|m| {
            m.iter()
                .filter(|(k, _)| k.starts_with("nvidia.com/mig-"))
                .filter_map(|(_, v)| count(v))
                .sum()
        })
        .unwrap_or(0);
    let physical = labels
        .get("nvidia.com/gpu.count")
        .and_then(|c| c.parse().ok());
    // Physical GPUs: GFD's count; else the whole GPUs, plus one for any MIG slices.
    let gpu_count = physical.unwrap_or(whole + u32::from(migs > 0));
    if gpu_count == 0 {
        return None;
    }
    let ready = condition(v, "Ready");
    let unschedulable = v["spec"]["unschedulable"].as_bool() == Some(true);
    let taint = gpu_taint(v);
    let (state, reason, reason_time) = if ready.is_none_or(|c| c["status"] != "True") {
        let msg = ready
            .map(|c| {
                format!(
                    "NotReady: {}",
                    c["message"].as_str().unwrap_or("no Ready condition")
                )
            })
            .unwrap_or_else(|| "NotReady: no Ready condition".into());
        (
            NodeState::Down,
            Some(msg),
            ready.and_then(|c| time(&c["lastTransitionTime"])),
        )
    } else if unschedulable {
        let t = v["spec"]["taints"].as_array().and_then(|ts| {
            ts.iter()
                .find(|t| t["key"] == "node.kubernetes.io/unschedulable")
                .and_then(|t| time(&t["timeAdded"]))
        });
        (
            NodeState::Cordoned,
            v["metadata"]["annotations"][super::exec::REASON]
                .as_str()
                .map(str::to_string)
                .or(taint),
            t,
        )
    } else if let Some(t) = taint {
        (NodeState::Cordoned, Some(t), None)
    } else {
        (NodeState::Up, None, None)
    };
    let model = labels.get("nvidia.com/gpu.product").cloned();
    let mem = labels
        .get("nvidia.com/gpu.memory")
        .and_then(|m| m.parse().ok());
    let gpus = (0..gpu_count)
        .map(|i| Gpu {
            model: model.clone(),
            memory_total_mib: mem,
            ..Gpu::unknown(&name, i)
        })
        .collect();
    Some(Node {
        topology: labels.get("topology.kubernetes.io/zone").cloned(),
        boot_time: None,
        reason_set_by: None,
        name,
        partitions: Vec::new(),
        state,
        reason,
        reason_time,
        gpu_model: model,
        labels,
        gpu_count,
        gpus,
    })
}

/// What a gang is, for grouping pods: its kind and name, in a namespace.
fn gang_of(pod: &Value) -> (String, String) {
    let m = &pod["metadata"];
    if let Some(g) = s(m, &["annotations", VOLCANO_GROUP]) {
        return ("PodGroup".into(), g.into());
    }
    if let Some(g) = s(m, &["labels", JOBSET]) {
        return ("JobSet".into(), g.into());
    }
    if let Some(o) = m["ownerReferences"]
        .as_array()
        .and_then(|os| os.iter().find(|o| o["controller"] == true))
    {
        return (
            o["kind"].as_str().unwrap_or("Owner").into(),
            o["name"].as_str().unwrap_or_default().into(),
        );
    }
    ("Pod".into(), m["name"].as_str().unwrap_or_default().into())
}

fn checkpoint(sources: &[&Value]) -> Checkpoint {
    let ann = |k: &str| {
        sources
            .iter()
            .find_map(|v| s(v, &["metadata", "annotations", k]))
    };
    Checkpoint {
        size_bytes: ann(ANN_BYTES).and_then(|v| units::parse_bytes(v).ok()),
        last: ann(ANN_LAST).and_then(|v| {
            v.trim()
                .parse()
                .ok()
                .or_else(|| time(&Value::String(v.into())))
        }),
        interval_s: ann(ANN_EVERY).and_then(|v| units::parse_duration(v).ok()),
        params: ann(ANN_PARAMS).and_then(|v| units::parse_count(v).ok()),
    }
}

/// One gang's parts, before it becomes a `Job`.
#[derive(Default)]
struct Gang<'a> {
    ns: String,
    kind: String,
    name: String,
    pods: Vec<&'a Value>,
    workload: Option<&'a Value>,
    podgroup: Option<&'a Value>,
}

/// The newest FailedScheduling message per pod (`ns/name`).
fn scheduling_messages(o: &Objects) -> HashMap<String, (Timestamp, String)> {
    let mut out: HashMap<String, (Timestamp, String)> = HashMap::new();
    for e in o.of("events") {
        if e["reason"] != "FailedScheduling" || e["involvedObject"]["kind"] != "Pod" {
            continue;
        }
        let io = &e["involvedObject"];
        let k = format!(
            "{}/{}",
            io["namespace"].as_str().unwrap_or_default(),
            io["name"].as_str().unwrap_or_default()
        );
        let t = time(&e["lastTimestamp"])
            .or_else(|| time(&e["eventTime"]))
            .unwrap_or(0);
        let msg = e["message"].as_str().unwrap_or_default().to_string();
        if out.get(&k).is_none_or(|(old, _)| *old <= t) {
            out.insert(k, (t, msg));
        }
    }
    out
}

/// The flavor a Kueue workload is admitted to (or whose quota it waits
/// for: its ClusterQueue's first flavor covering GPUs).
fn kueue_flavor(wl: &Value, cq: Option<&Value>) -> Option<String> {
    let admitted = wl["status"]["admission"]["podSetAssignments"]
        .as_array()
        .and_then(|a| a.iter().find_map(|p| p["flavors"][GPU].as_str()));
    admitted.map(str::to_string).or_else(|| {
        cq?["spec"]["resourceGroups"]
            .as_array()?
            .iter()
            .filter(|g| {
                g["coveredResources"]
                    .as_array()
                    .is_some_and(|r| r.iter().any(|r| r == GPU))
            })
            .find_map(|g| g["flavors"][0]["name"].as_str().map(str::to_string))
    })
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
        nodes,
        jobs,
        events: Vec::new(),
        quotas,
    };
    c.events = events(o, &c);
    c
}

#[allow(clippy::too_many_arguments)]
fn job_of(
    g: &Gang,
    sched: &HashMap<String, (Timestamp, String)>,
    positions: &HashMap<String, (String, u64)>,
    cqs: &HashMap<&str, &Value>,
    lqs: &HashMap<String, &str>,
    partition_of_node: &dyn Fn(&str) -> Option<String>,
    largest: &str,
    node_labels: &HashMap<String, BTreeMap<String, String>>,
) -> Job {
    let wl = g.workload;
    let pg = g.podgroup;
    let pods = &g.pods;
    let first = pods.first().copied();
    let running: Vec<&&Value> = pods
        .iter()
        .filter(|p| p["status"]["phase"] == "Running")
        .collect();
    let phases = |ph: &str| pods.iter().filter(|p| p["status"]["phase"] == ph).count();

    // Shape: Kueue pod sets, else the pods, else Volcano's minMember.
    let (node_count, gpus_per_node, gpus_total) =
        if let Some(sets) = wl.and_then(|w| w["spec"]["podSets"].as_array()) {
            let mut pods_n = 0u32;
            let mut total = 0u32;
            let mut per = 0u32;
            for set in sets {
                let n = count(&set["count"]).unwrap_or(1);
                let (w, m) = pod_gpus(&set["template"]);
                pods_n += n;
                total += n * (w + m);
                per = per.max(w + m);
            }
            (pods_n, per, total)
        } else if !pods.is_empty() {
            let per: Vec<u32> = pods
                .iter()
                .map(|p| {
                    let (w, m) = pod_gpus(p);
                    w + m
                })
                .collect();
            let min_member = pg.and_then(|p| count(&p["spec"]["minMember"])).unwrap_or(0);
            let n = (pods.len() as u32).max(min_member);
            let max = per.iter().copied().max().unwrap_or(0);
            (
                n,
                max,
                per.iter().sum::<u32>() + (n - pods.len() as u32) * max,
            )
        } else {
            let n = pg.and_then(|p| count(&p["spec"]["minMember"])).unwrap_or(1);
            let total = pg
                .and_then(|p| count(&p["spec"]["minResources"][GPU]))
                .unwrap_or(0);
            (n, total.div_ceil(n.max(1)), total)
        };

    let mut nodes: Vec<String> = running
        .iter()
        .filter_map(|p| s(p, &["spec", "nodeName"]).map(str::to_string))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    nodes.sort();

    // The queue: Kueue's LocalQueue → ClusterQueue; Volcano's queue.
    let local_queue = wl
        .and_then(|w| s(w, &["spec", "queueName"]))
        .or_else(|| first.and_then(|p| s(p, &["metadata", "labels", "kueue.x-k8s.io/queue-name"])));
    let cluster_queue = wl
        .and_then(|w| s(w, &["status", "admission", "clusterQueue"]))
        .map(str::to_string)
        .or_else(|| {
            local_queue.and_then(|q| lqs.get(&format!("{}/{q}", g.ns)).map(|c| c.to_string()))
        });
    let volcano_queue = pg.and_then(|p| s(p, &["spec", "queue"]));
    let account = cluster_queue
        .clone()
        .or_else(|| volcano_queue.map(str::to_string))
        .or_else(|| Some(g.ns.clone()));

    let partition = wl
        .and_then(|w| {
            kueue_flavor(
                w,
                cluster_queue.as_deref().and_then(|c| cqs.get(c).copied()),
            )
        })
        .or_else(|| nodes.first().and_then(|n| partition_of_node(n)))
        .or_else(|| {
            let product =
                first.and_then(|p| s(p, &["spec", "nodeSelector", "nvidia.com/gpu.product"]))?;
            node_labels
                .iter()
                .find(|(_, l)| l.get("nvidia.com/gpu.product").map(String::as_str) == Some(product))
                .and_then(|(n, _)| partition_of_node(n))
        })
        .unwrap_or_else(|| largest.to_string());

    // State and the scheduler's words.
    let cond_true = |w: &Value, t: &str| condition(w, t).is_some_and(|c| c["status"] == "True");
    let min_member = pg
        .and_then(|p| count(&p["spec"]["minMember"]))
        .unwrap_or(node_count.max(1));
    let sched_msg = pods
        .iter()
        .filter(|p| p["status"]["phase"] == "Pending")
        .filter_map(|p| sched.get(&key(p)))
        .max_by_key(|(t, _)| *t)
        .map(|(_, m)| m.clone());
    let (state, reason) = if wl.is_some_and(|w| w["spec"]["active"] == false) {
        (JobState::Pending, Some("WorkloadInactive".to_string()))
    } else if let Some(w) = wl.filter(|w| cond_true(w, "Evicted") && running.is_empty()) {
        let m = condition(w, "Evicted")
            .and_then(|c| c["message"].as_str())
            .unwrap_or("evicted");
        (JobState::Requeued, Some(format!("Kueue: evicted: {m}")))
    } else if let Some(w) =
        wl.filter(|w| !cond_true(w, "QuotaReserved") && !cond_true(w, "Admitted"))
    {
        let m = condition(w, "QuotaReserved")
            .and_then(|c| c["message"].as_str())
            .unwrap_or("waiting for quota");
        // Its place in line, where Kueue's visibility API says it.
        let place = positions
            .get(&key(w))
            .map(|(cq, p)| format!("#{} in ClusterQueue {cq}: ", p + 1))
            .unwrap_or_default();
        (JobState::Pending, Some(format!("Kueue: {place}{m}")))
    } else if !running.is_empty()
        && running.len() as u32 >= min_member.min(pods.len() as u32).max(1)
    {
        (JobState::Running, None)
    } else if !pods.is_empty() && phases("Succeeded") == pods.len() {
        (JobState::Completed, None)
    } else if phases("Failed") > 0 && running.is_empty() && phases("Pending") == 0 {
        (JobState::Failed, None)
    } else {
        let gang = pg
            .and_then(|p| condition(p, "Unschedulable"))
            .filter(|c| c["status"] == "True")
            .and_then(|c| c["message"].as_str())
            .map(|m| format!("Volcano: {m}"));
        (
            JobState::Pending,
            gang.or(sched_msg).or(Some("Pending".into())),
        )
    };

    let priority = wl
        .and_then(|w| w["spec"]["priority"].as_i64())
        .or_else(|| first.and_then(|p| p["spec"]["priority"].as_i64()))
        .map(|p| p.max(0) as u64);
    let created = |v: &Value| time(&v["metadata"]["creationTimestamp"]);
    let submit_time = wl
        .and_then(created)
        .or_else(|| pg.and_then(created))
        .or_else(|| pods.iter().filter_map(|p| created(p)).min());
    let start_time = if state.holds_resources() {
        running
            .iter()
            .filter_map(|p| time(&p["status"]["startTime"]))
            .min()
    } else {
        None
    };
    let deadline = first
        .and_then(|p| p["spec"]["activeDeadlineSeconds"].as_u64())
        .or_else(|| wl.and_then(|w| w["spec"]["maximumExecutionTimeSeconds"].as_u64()));
    let mut ck_sources: Vec<&Value> = pods.to_vec();
    ck_sources.extend(wl);
    let user = ck_sources
        .iter()
        .find_map(|v| {
            s(v, &["metadata", "labels", ANN_USER])
                .or_else(|| s(v, &["metadata", "annotations", ANN_USER]))
        })
        .unwrap_or(&g.ns)
        .to_string();
    let restarts: u32 = pods
        .iter()
        .flat_map(|p| {
            p["status"]["containerStatuses"]
                .as_array()
                .into_iter()
                .flatten()
        })
        .filter_map(|c| c["restartCount"].as_u64())
        .map(|n| n as u32)
        .sum();
    Job {
        id: format!("{}/{}", g.ns, g.name),
        name: g.name.clone(),
        user,
        account,
        partition,
        qos: local_queue.or(volcano_queue).map(str::to_string),
        priority,
        state,
        reason,
        gpus_per_node: Some(gpus_per_node),
        node_count: Some(node_count.max(1)),
        gpus_total: Some(gpus_total),
        nodes,
        submit_time,
        start_time,
        end_time: None,
        // Kubernetes jobs without a deadline run until they finish.
        time_limit: Some(deadline.map_or(TimeLimit::Unlimited, TimeLimit::Seconds)),
        gang: (node_count > 1 || pg.is_some()).then(|| format!("{} {}/{}", g.kind, g.ns, g.name)),
        checkpoint: checkpoint(&ck_sources),
        restarts: Some(restarts),
        requeueable: Some(wl.is_some() || pg.is_some()),
        pods: pods.iter().map(|p| key(p)).collect(),
    }
}

/// Xid events (node events and GPU health conditions naming an Xid) and
/// node state changes (NodeNotReady), oldest first.
fn events(o: &Objects, c: &Cluster) -> Vec<Event> {
    let mut out: Vec<Event> = Vec::new();
    let push =
        |out: &mut Vec<Event>, time: Timestamp, node: &str, kind: EventKind, message: String| {
            if c.node(node).is_none()
                || out
                    .iter()
                    .any(|e| e.node == node && e.kind == kind && e.time == time)
            {
                return;
            }
            out.push(Event {
                seq: 0,
                time,
                node: node.to_string(),
                gpu: None,
                kind,
                message,
                jobs: c.jobs_at(node, None),
            });
        };
    for e in o.of("events") {
        if e["involvedObject"]["kind"] != "Node" {
            continue;
        }
        let node = e["involvedObject"]["name"].as_str().unwrap_or_default();
        let t = time(&e["lastTimestamp"])
            .or_else(|| time(&e["eventTime"]))
            .or_else(|| time(&e["firstTimestamp"]))
            .unwrap_or(c.time);
        let msg = e["message"].as_str().unwrap_or_default();
        if let Some(code) = xid_code(msg) {
            push(&mut out, t, node, EventKind::Xid { code }, msg.to_string());
        } else if e["reason"] == "NodeNotReady" {
            push(
                &mut out,
                t,
                node,
                EventKind::NodeState {
                    from: "up".into(),
                    to: "down".into(),
                },
                msg.to_string(),
            );
        }
    }
    for n in o.of("nodes") {
        let Some(cond) = gpu_condition(n) else {
            continue;
        };
        let msg = cond["message"].as_str().unwrap_or_default();
        if let (Some(code), Some(node)) = (xid_code(msg), s(n, &["metadata", "name"])) {
            let t = time(&cond["lastTransitionTime"]).unwrap_or(c.time);
            // The same Xid from its event a few seconds apart is one incident.
            if !out.iter().any(|e| {
                e.node == node && e.kind == (EventKind::Xid { code }) && (e.time - t).abs() <= 60
            }) {
                push(&mut out, t, node, EventKind::Xid { code }, msg.to_string());
            }
        }
    }
    out.sort_by(|a, b| a.time.cmp(&b.time).then(a.node.cmp(&b.node)));
    for (i, e) in out.iter_mut().enumerate() {
        e.seq = i as u64 + 1;
    }
    out
}

#[cfg(test)]
mod tests;
