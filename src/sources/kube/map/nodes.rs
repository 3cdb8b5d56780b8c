//! Nodes and their incidents: state from Ready, cordon and NVIDIA taints;
//! Xids from node events and GPU conditions.

use super::*;

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
pub(super) fn gpu_taint(node: &Value) -> Option<String> {
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
pub(super) fn gpu_condition(node: &Value) -> Option<&Value> {
    node["status"]["conditions"].as_array()?.iter().find(|c| {
        c["status"] == "True"
            && c["type"]
                .as_str()
                .is_some_and(|t| t.to_lowercase().contains("gpu") || t.contains("Xid"))
    })
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
            v["metadata"]["annotations"][crate::sources::kube::exec::REASON]
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

/// Xid events (node events and GPU health conditions naming an Xid) and
/// node state changes (NodeNotReady), oldest first.
pub(super) fn events(o: &Objects, c: &Cluster) -> Vec<Event> {
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
