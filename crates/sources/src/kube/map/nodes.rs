//! Nodes and their incidents: state from Ready, cordon and NVIDIA taints;
//! Xids from node events and GPU conditions.

use super::*;

/// Where a case-insensitive `word` starts in `msg`.
fn find_ci(msg: &str, word: &str) -> Option<usize> {
    msg.to_ascii_lowercase().find(word)
}

/// The number after a label, skipping separators and a few connecting
/// words (`Xid 79`, `XID: 94`, `xid=79`, `XID error 79`, `Xid (PCI:…): 79`).
fn number_after(rest: &str) -> Option<u32> {
    let rest = match rest.find("):") {
        Some(i) if rest.trim_start().starts_with('(') => &rest[i + 2..],
        _ => rest,
    };
    let skipped = rest
        .char_indices()
        .take(16)
        .find(|(_, c)| c.is_ascii_digit())
        .map(|(i, _)| i)?;
    let between = &rest[..skipped];
    // Only separators and a connecting word in between: `Xid error 79`,
    // not `Xid at 10.0.0.1`.
    let word: String = between
        .chars()
        .filter(|c| !matches!(c, ' ' | ':' | '=' | '#' | '-'))
        .collect::<String>()
        .to_ascii_lowercase();
    if !matches!(word.as_str(), "" | "error" | "err" | "code" | "event") {
        return None;
    }
    let digits: String = rest[skipped..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// The Xid code in a driver or node-problem-detector message
/// (`NVRM: Xid (PCI:0000:bb:00): 79, pid=…`, `Xid 79`, `XID 48`, `xid=79`).
pub fn xid_code(msg: &str) -> Option<u32> {
    let at = find_ci(msg, "xid")?;
    number_after(&msg[at + 3..])
}

/// The GPU a fault message names (`GPU 5`, `gpu=5`, `GPU index 5`, `GPU5`);
/// not a UUID (`GPU-3f…`) nor a word (`GPU has fallen off the bus`).
pub fn gpu_named(msg: &str) -> Option<u32> {
    let lower = msg.to_ascii_lowercase();
    let mut from = 0;
    while let Some(i) = lower[from..].find("gpu") {
        let at = from + i + 3;
        from = at;
        let rest = lower[at..]
            .strip_prefix(" index")
            .or_else(|| lower[at..].strip_prefix(" id"))
            .unwrap_or(&lower[at..]);
        let digits_at = rest
            .char_indices()
            .find(|(_, c)| !matches!(c, ' ' | ':' | '=' | '#'))
            .map_or(rest.len(), |(i, _)| i);
        if digits_at > 2 {
            continue;
        }
        let digits: String = rest[digits_at..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        let after = rest[digits_at + digits.len()..].chars().next();
        // `GPU-1a2b…` is a UUID, `GPU 1a…` not an index.
        if !digits.is_empty()
            && digits.len() <= 3
            && after.is_none_or(|c| !c.is_ascii_alphanumeric() && c != '-')
        {
            return digits.parse().ok();
        }
    }
    None
}

/// Words in a taint or condition that say a GPU is at fault (the NVIDIA
/// GPU operator's, node-problem-detector's and common site conventions).
const FAULT_WORDS: [&str; 10] = [
    "xid",
    "unhealthy",
    "fault",
    "error",
    "ecc",
    "dbe",
    "remap",
    "fallen",
    "fail",
    "degraded",
];

fn says_fault(text: &str) -> bool {
    let t = text.to_ascii_lowercase();
    FAULT_WORDS.iter().any(|w| t.contains(w))
}

/// The taints that report a GPU fault: an `nvidia.com/…` key with
/// NoSchedule/NoExecute whose key or value says so (`nvidia.com/gpu-xid=79`,
/// `nvidia.com/gpu.health=unhealthy`). Not GKE's `nvidia.com/gpu=present`,
/// which only keeps non-GPU pods off.
fn fault_taints(node: &Value) -> Vec<&Value> {
    node["spec"]["taints"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| matches!(t["effect"].as_str(), Some("NoSchedule" | "NoExecute")))
        .filter(|t| {
            let key = t["key"].as_str().unwrap_or_default();
            key.starts_with("nvidia.com/")
                && (says_fault(key) || says_fault(t["value"].as_str().unwrap_or_default()))
        })
        .collect()
}

/// A taint as kubectl writes it: `key=value:Effect`.
pub fn taint_text(t: &Value) -> String {
    let v = t["value"].as_str().filter(|v| !v.is_empty());
    format!(
        "{}{}:{}",
        t["key"].as_str().unwrap_or_default(),
        v.map(|v| format!("={v}")).unwrap_or_default(),
        t["effect"].as_str().unwrap_or_default()
    )
}

/// The node conditions that report a GPU fault (node-problem-detector's or
/// the GPU operator's: status True, a type naming the GPU or an Xid, and a
/// type or message that says it is a fault).
fn fault_conditions(node: &Value) -> Vec<&Value> {
    node["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| {
            let ty = c["type"].as_str().unwrap_or_default();
            let lower = ty.to_ascii_lowercase();
            c["status"] == "True"
                && (lower.contains("gpu") || lower.contains("xid"))
                && (says_fault(ty) || xid_code(c["message"].as_str().unwrap_or_default()).is_some())
        })
        .collect()
}

/// Every GPU fault the node's conditions and taints report. A taint that
/// repeats a condition's Xid is given the condition's GPU.
pub(super) fn fault_reports(node: &Value) -> Vec<FaultReport> {
    let mut out: Vec<FaultReport> = fault_conditions(node)
        .into_iter()
        .map(|c| {
            let msg = c["message"].as_str().unwrap_or_default();
            let ty = c["type"].as_str().unwrap_or_default();
            FaultReport {
                source: format!("condition {ty}"),
                gpu: gpu_named(msg),
                xid: xid_code(msg).or_else(|| xid_code(ty)),
                message: crate::text::cut(msg, 200).into_owned(),
                since: time(&c["lastTransitionTime"]),
            }
        })
        .collect();
    for t in fault_taints(node) {
        let text = taint_text(t);
        let value = t["value"].as_str().unwrap_or_default();
        let key = t["key"].as_str().unwrap_or_default();
        let xid = if find_ci(key, "xid").is_some() {
            number_after(value).or_else(|| xid_code(value))
        } else {
            xid_code(value)
        };
        let gpu = gpu_named(value).or_else(|| {
            out.iter()
                .find(|r| r.xid.is_some() && r.xid == xid)
                .and_then(|r| r.gpu)
        });
        out.push(FaultReport {
            source: format!("taint {text}"),
            gpu,
            xid,
            message: text,
            since: time(&t["timeAdded"]),
        });
    }
    out
}

pub(super) fn node_of(v: &Value, warnings: &mut Vec<String>) -> Option<Node> {
    let name = s(v, &["metadata", "name"])?.to_string();
    let labels: BTreeMap<String, String> = v["metadata"]["labels"]
        .as_object()
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default();
    let max = u64::from(crate::limits::get().max_gpus_per_node);
    let alloc = &v["status"]["allocatable"];
    let gpu_keys = alloc
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| k.as_str() == GPU || k.starts_with("nvidia.com/mig-"));
    let label = labels
        .get("nvidia.com/gpu.count")
        .map(|c| ("label nvidia.com/gpu.count", Value::String(c.clone())));
    let (mut whole, mut migs, mut physical) = (0u32, 0u32, None);
    for (key, value) in gpu_keys
        .map(|(k, v)| (format!("status.allocatable.{k}"), v.clone()))
        .chain(label.map(|(k, v)| (k.to_string(), v)))
    {
        let n = match bounded(&value, max) {
            Ok(n) => n.unwrap_or(0),
            Err(e) => {
                // Never a node with a made-up count, never silently gone.
                warnings.push(format!(
                    "node {name}: {key} {e} (limits.max_gpus_per_node); skipped"
                ));
                return None;
            }
        };
        if key.starts_with("label") {
            physical = Some(n);
        } else if key.ends_with(GPU) {
            whole = n;
        } else {
            migs = migs.saturating_add(n);
        }
    }
    // Physical GPUs: GFD's count; else the whole GPUs, plus one for any MIG slices.
    let gpu_count = physical.unwrap_or(whole + u32::from(migs > 0));
    if gpu_count == 0 {
        return None;
    }
    let ready = condition(v, "Ready");
    let reports = fault_reports(v);
    let taint = reports
        .iter()
        .find(|r| r.source.starts_with("taint "))
        .map(|r| r.source.clone());
    let (state, reason, reason_time) = state_of(v, ready, taint);
    let model: Option<std::sync::Arc<str>> = labels
        .get("nvidia.com/gpu.product")
        .map(|m| m.as_str().into());
    let shared: std::sync::Arc<str> = name.as_str().into();
    let mem = labels
        .get("nvidia.com/gpu.memory")
        .and_then(|m| m.parse().ok());
    let gpus = (0..gpu_count)
        .map(|i| Gpu {
            model: model.clone(),
            memory_total_mib: mem,
            // A report naming this GPU and its Xid is its last Xid.
            last_xid: reports.iter().filter(|r| r.gpu == Some(i)).find_map(|r| {
                Some(Box::new(LastXid {
                    code: r.xid?,
                    time: r.since,
                    message: Some(r.message.clone()),
                }))
            }),
            ..Gpu::unknown_on(&shared, i)
        })
        .collect();
    Some(Node {
        domains: domains_from_labels(&labels).into(),
        ib_ports: Default::default(),
        gpu_summary: None,
        boot_time: None,
        reason_set_by: None,
        name,
        partitions: Default::default(),
        state,
        reason,
        reason_time,
        gpu_model: model.as_deref().map(str::to_string),
        labels: labels.into(),
        gpu_count,
        gpus,
        fault_reports: reports,
        back_at: None,
    })
}

/// The node's state, the reason for it and since when: NotReady is down; a
/// cordon keeps nightshift's (or the operator's) reason, else the taint
/// that keeps it out; a fault taint alone keeps it out too.
fn state_of(
    v: &Value,
    ready: Option<&Value>,
    taint: Option<String>,
) -> (NodeState, Option<String>, Option<Timestamp>) {
    let unschedulable = v["spec"]["unschedulable"].as_bool() == Some(true);
    if ready.is_none_or(|c| c["status"] != "True") {
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
            v["metadata"]["annotations"][crate::kube::fields::REASON]
                .as_str()
                .map(str::to_string)
                .or(taint),
            t,
        )
    } else if let Some(t) = taint {
        (NodeState::Cordoned, Some(t), None)
    } else {
        (NodeState::Up, None, None)
    }
}

/// When each cordoned node was cordoned, where its taint did not say
/// (`kubectl cordon` sets no time): the kubelet's latest
/// `NodeNotSchedulable` event for it. The circuit breaker counts a node
/// someone else took out in its window by this time.
pub(super) fn cordon_times(o: &Objects, nodes: &mut [Node]) {
    for e in o.of("events") {
        if e["involvedObject"]["kind"] != "Node" || e["reason"] != "NodeNotSchedulable" {
            continue;
        }
        let name = e["involvedObject"]["name"].as_str().unwrap_or_default();
        let Some(t) = time(&e["lastTimestamp"])
            .or_else(|| time(&e["eventTime"]))
            .or_else(|| time(&e["firstTimestamp"]))
        else {
            continue;
        };
        if let Some(n) = nodes
            .iter_mut()
            .find(|n| n.name == name && n.state == NodeState::Cordoned)
            && n.reason_time.is_none_or(|r| r < t)
        {
            n.reason_time = Some(t);
        }
    }
}

/// Xid events (node events and GPU health conditions naming an Xid) and
/// node state changes (NodeNotReady), oldest first.
pub(super) fn events(o: &Objects, c: &Cluster) -> Vec<Event> {
    let mut out: Vec<Event> = Vec::new();
    // One event per (node, kind, time); the jobs hit are those on its GPU
    // when the report names one, else on the node.
    let push = |out: &mut Vec<Event>,
                time: Timestamp,
                node: &str,
                gpu: Option<u32>,
                kind: EventKind,
                message: String| {
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
            gpu,
            kind,
            message,
            jobs: c.jobs_at(node, gpu),
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
            let kind = EventKind::Xid { code };
            push(&mut out, t, node, gpu_named(msg), kind, msg.to_string());
        } else if e["reason"] == "NodeNotReady" {
            let kind = EventKind::NodeState {
                from: "up".into(),
                to: "down".into(),
            };
            push(&mut out, t, node, None, kind, msg.to_string());
        }
    }
    // The Xids the nodes' conditions and taints report: one event per
    // fault (the same Xid from its event a few seconds apart, or from the
    // condition and the taint that says it again, is one).
    for n in &c.nodes {
        for r in &n.fault_reports {
            let Some(code) = r.xid else { continue };
            let t = r.since.unwrap_or(c.time);
            if let Some(e) = out.iter_mut().find(|e| {
                e.node == n.name
                    && e.kind == (EventKind::Xid { code })
                    && ((e.time - t).abs() <= 60 || r.source.starts_with("taint "))
            }) {
                if e.gpu.is_none() && r.gpu.is_some() {
                    e.gpu = r.gpu;
                    e.jobs = c.jobs_at(&n.name, r.gpu);
                }
                continue;
            }
            let kind = EventKind::Xid { code };
            push(&mut out, t, &n.name, r.gpu, kind, r.message.clone());
        }
    }
    out.sort_by(|a, b| a.time.cmp(&b.time).then(a.node.cmp(&b.node)));
    for (i, e) in out.iter_mut().enumerate() {
        e.seq = i as u64 + 1;
    }
    out
}

/// The node labels Kueue's Topology objects name as levels (broadest
/// first in each), the hostname level left out: a node is no domain.
pub fn topology_levels(o: &super::Objects) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for t in o.of("topologies") {
        for l in t["spec"]["levels"].as_array().into_iter().flatten() {
            if let Some(label) = l["nodeLabel"].as_str()
                && label != "kubernetes.io/hostname"
                && !out.iter().any(|x| x == label)
            {
                out.push(label.to_string());
            }
        }
    }
    out
}

/// A level's word from its label: `cloud.provider.com/topology-rack` →
/// `rack`, `example.com/leaf` → `leaf`.
pub fn level_of_label(label: &str) -> String {
    let last = label.rsplit('/').next().unwrap_or(label);
    last.strip_prefix("topology-").unwrap_or(last).to_string()
}

/// The node's domains from Kueue's levels (narrowest first) ahead of the
/// well-known labels' (see [`DOMAIN_LABELS`]).
pub fn add_topology_domains(n: &mut crate::model::Node, levels: &[String]) {
    let mut ds: Vec<crate::model::Domain> = levels
        .iter()
        .rev()
        .filter_map(|label| {
            n.labels
                .get(label)
                .map(|v| crate::model::Domain::new(&level_of_label(label), v))
        })
        .collect();
    if ds.is_empty() {
        return;
    }
    let known: Vec<String> = ds.iter().map(|d| d.name.clone()).collect();
    ds.extend(
        n.domains
            .iter()
            .filter(|d| !known.contains(&d.name))
            .cloned(),
    );
    n.domains = ds.into();
}

/// Node labels that name a failure domain, narrowest first, with the
/// level each names: NVIDIA GPU feature discovery's NVLink clique (GB200
/// NVL72), AWS's network layers (3 nearest the node), GKE's topology
/// sub-block and block, and the zone.
pub const DOMAIN_LABELS: [(&str, &str); 7] = [
    ("nvidia.com/gpu.clique", "nvlink"),
    ("topology.k8s.aws/network-node-layer-3", "leaf"),
    ("topology.k8s.aws/network-node-layer-2", "spine"),
    ("topology.k8s.aws/network-node-layer-1", "core"),
    ("cloud.google.com/gce-topology-subblock", "subblock"),
    ("cloud.google.com/gce-topology-block", "block"),
    ("topology.kubernetes.io/zone", "zone"),
];

/// The failure domains a node's labels name (see [`DOMAIN_LABELS`]).
pub fn domains_from_labels(
    labels: &std::collections::BTreeMap<String, String>,
) -> Vec<crate::model::Domain> {
    DOMAIN_LABELS
        .iter()
        .filter_map(|(label, level)| {
            labels
                .get(*label)
                .map(|v| crate::model::Domain::new(level, v))
        })
        .collect()
}
