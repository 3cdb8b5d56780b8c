//! Jobs as gangs: pods grouped by Volcano group, JobSet or controller,
//! joined with their Kueue Workload; state and the scheduler's words.

use super::*;
use crate::kube::pod::Meta;

/// What a gang is, for grouping pods: its kind and name, in a namespace.
pub(super) fn gang_of(pod: &Pod) -> (String, String) {
    if let Some(g) = pod.annotation(VOLCANO_GROUP) {
        return ("PodGroup".into(), g.into());
    }
    if let Some(g) = pod.label(JOBSET) {
        return ("JobSet".into(), g.into());
    }
    if let Some(o) = pod.owners.iter().find(|o| o.controller) {
        return (
            o.kind.as_deref().unwrap_or("Owner").into(),
            o.name.as_deref().unwrap_or_default().into(),
        );
    }
    ("Pod".into(), pod.name.to_string())
}

pub(super) fn checkpoint(sources: &[&dyn Meta]) -> Checkpoint {
    let ann = |k: &str| sources.iter().find_map(|v| v.annotation(k));
    Checkpoint {
        size_bytes: ann(ANN_BYTES)
            .and_then(|v| units::parse_bytes(v).ok())
            .into(),
        last: ann(ANN_LAST)
            .and_then(|v| {
                v.trim()
                    .parse()
                    .ok()
                    .or_else(|| time(&Value::String(v.into())))
            })
            .into(),
        interval_s: ann(ANN_EVERY)
            .and_then(|v| units::parse_duration(v).ok())
            .into(),
        params: ann(ANN_PARAMS)
            .and_then(|v| units::parse_count(v).ok())
            .into(),
    }
}

/// One gang's parts, before it becomes a `Job`.
#[derive(Default)]
pub(super) struct Gang<'a> {
    pub(super) ns: String,
    pub(super) kind: String,
    pub(super) name: String,
    pub(super) pods: Vec<&'a Pod>,
    pub(super) workload: Option<&'a Value>,
    pub(super) podgroup: Option<&'a Value>,
}

/// The newest FailedScheduling message per pod (`ns/name`).
pub(super) fn scheduling_messages(o: &Objects) -> HashMap<String, (Timestamp, String)> {
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
pub(super) fn kueue_flavor(wl: &Value, cq: Option<&Value>) -> Option<String> {
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

#[allow(clippy::too_many_arguments)]
pub(super) fn job_of(
    g: &Gang,
    sched: &HashMap<String, (Timestamp, String)>,
    positions: &HashMap<String, (String, u64)>,
    cqs: &HashMap<&str, &Value>,
    lqs: &HashMap<String, &str>,
    partition_of_node: &dyn Fn(&str) -> Option<String>,
    largest: &str,
    node_labels: &HashMap<String, std::sync::Arc<BTreeMap<String, String>>>,
) -> Job {
    let wl = g.workload;
    let pg = g.podgroup;
    let pods = &g.pods;
    let first = pods.first().copied();
    let running: Vec<&Pod> = pods.iter().copied().filter(|p| p.is("Running")).collect();

    let (node_count, gpus_per_node, gpus_total) = shape_of(g);

    let mut nodes: Vec<String> = running
        .iter()
        .filter_map(|p| p.node_name.as_deref().map(str::to_string))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    nodes.sort();

    // The queue: Kueue's LocalQueue → ClusterQueue; Volcano's queue.
    let local_queue = wl
        .and_then(|w| s(w, &["spec", "queueName"]))
        .or_else(|| first.and_then(|p| p.label("kueue.x-k8s.io/queue-name")));
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
            let product = first.and_then(|p| p.selector("nvidia.com/gpu.product"))?;
            node_labels
                .iter()
                .find(|(_, l)| l.get("nvidia.com/gpu.product").map(String::as_str) == Some(product))
                .and_then(|(n, _)| partition_of_node(n))
        })
        .unwrap_or_else(|| largest.to_string());

    let (state, reason) = state_of(g, sched, positions, node_count, &running);

    let priority = wl
        .and_then(|w| w["spec"]["priority"].as_i64())
        .or_else(|| first.and_then(|p| p.priority))
        .map(|p| p.max(0) as u64);
    let created = |v: &Value| time(&v["metadata"]["creationTimestamp"]);
    let submit_time = wl
        .and_then(created)
        .or_else(|| pg.and_then(created))
        .or_else(|| pods.iter().filter_map(|p| p.created).min());
    let start_time = if state.holds_resources() {
        running.iter().filter_map(|p| p.start_time).min()
    } else {
        None
    };
    let deadline = first
        .and_then(|p| p.active_deadline_s)
        .or_else(|| wl.and_then(|w| w["spec"]["maximumExecutionTimeSeconds"].as_u64()));
    let mut ck_sources: Vec<&dyn Meta> = pods.iter().map(|p| *p as &dyn Meta).collect();
    ck_sources.extend(wl.map(|w| w as &dyn Meta));
    let user = user_of(&ck_sources).unwrap_or(&g.ns).to_string();
    let restarts = pods.iter().map(|p| p.restarts).fold(0, u32::saturating_add);
    Job {
        id: format!("{}/{}", g.ns, g.name),
        name: g.name.clone(),
        user,
        account: account.map(Into::into),
        partition,
        qos: local_queue.or(volcano_queue).map(Into::into),
        priority: priority.into(),
        state,
        reason,
        gpus_per_node: Some(gpus_per_node),
        node_count: Some(node_count.max(1)),
        gpus_total: Some(gpus_total),
        nodes,
        submit_time: submit_time.into(),
        eligible_time: crate::model::When::UNKNOWN,
        start_time: start_time.into(),
        end_time: crate::model::When::UNKNOWN,
        // Kubernetes jobs without a deadline run until they finish.
        time_limit: Some(deadline.map_or(TimeLimit::Unlimited, TimeLimit::Seconds)),
        gang: (node_count > 1 || pg.is_some())
            .then(|| format!("{} {}/{}", g.kind, g.ns, g.name).into()),
        checkpoint: checkpoint(&ck_sources),
        restarts: Some(restarts),
        requeueable: Some(wl.is_some() || pg.is_some()),
        same_domain: wl.and_then(required_topology).map(Into::into),
        required_nodes: Default::default(),
        pods: pods.iter().map(|p| p.key()).collect(),
    }
}

/// The topology level a Kueue workload's pods must share (Topology Aware
/// Scheduling: a pod set's `topologyRequest.required`, or its template's
/// `kueue.x-k8s.io/podset-required-topology` annotation), as the level
/// word the node's domains use (`cloud.provider.com/topology-rack` →
/// `rack`). A preferred topology binds nothing.
fn required_topology(wl: &Value) -> Option<String> {
    wl["spec"]["podSets"]
        .as_array()?
        .iter()
        .find_map(|set| {
            set["topologyRequest"]["required"].as_str().or_else(|| {
                set["template"]["metadata"]["annotations"]
                    ["kueue.x-k8s.io/podset-required-topology"]
                    .as_str()
            })
        })
        .map(super::nodes::level_of_label)
}

/// Shape: Kueue pod sets, else the pods, else Volcano's minMember — as
/// (nodes, GPUs per node, GPUs in all).
fn shape_of(g: &Gang) -> (u32, u32, u32) {
    let (wl, pg, pods) = (g.workload, g.podgroup, &g.pods);
    if let Some(sets) = wl.and_then(|w| w["spec"]["podSets"].as_array()) {
        let mut pods_n = 0u32;
        let mut total = 0u32;
        let mut per = 0u32;
        for set in sets {
            let n = count(&set["count"]).unwrap_or(1);
            let (w, m) = template_gpus(&set["template"]);
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
    }
}

/// State and the scheduler's words: Kueue's conditions (inactive,
/// evicted, waiting for quota with its place in line), the pods' phases,
/// Volcano's gang condition, the newest FailedScheduling event.
fn state_of(
    g: &Gang,
    sched: &HashMap<String, (Timestamp, String)>,
    positions: &HashMap<String, (String, u64)>,
    node_count: u32,
    running: &[&Pod],
) -> (JobState, Option<String>) {
    let (wl, pg, pods) = (g.workload, g.podgroup, &g.pods);
    let phases = |ph: &str| pods.iter().filter(|p| p.is(ph)).count();
    let cond_true = |w: &Value, t: &str| condition(w, t).is_some_and(|c| c["status"] == "True");
    let min_member = pg
        .and_then(|p| count(&p["spec"]["minMember"]))
        .unwrap_or(node_count.max(1));
    let sched_msg = pods
        .iter()
        .filter(|p| p.is("Pending"))
        .filter_map(|p| sched.get(&p.key()))
        .max_by_key(|(t, _)| *t)
        .map(|(_, m)| m.clone());
    if wl.is_some_and(|w| w["spec"]["active"] == false) {
        (JobState::Pending, Some("WorkloadInactive".to_string()))
    } else if let Some(w) = wl.filter(|w| cond_true(w, "Evicted") && running.is_empty()) {
        let m = condition(w, "Evicted")
            .and_then(|c| c["message"].as_str())
            .unwrap_or("evicted");
        (JobState::Requeued, Some(format!("Kueue: evicted: {m}")))
    } else if let Some(w) =
        wl.filter(|w| !cond_true(w, "QuotaReserved") && !cond_true(w, "Admitted"))
    {
        let reserved = condition(w, "QuotaReserved");
        let m = reserved
            .and_then(|c| c["message"].as_str())
            .unwrap_or("waiting for quota");
        // Kueue's own word for why, where it is more than "Pending"
        // (Deactivated, OnHold, NoMatchingFlavor, WaitingForQuota,
        // TopologyPlacementFailed, WaitingForPreemptedWorkloads, …).
        let m = match reserved.and_then(|c| c["reason"].as_str()) {
            Some(r) if !r.is_empty() && r != "Pending" => format!("{r}: {m}"),
            _ => m.to_string(),
        };
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
    }
}

/// Who owns the job: the user label or annotation of a pod or the workload.
fn user_of<'a>(objects: &[&'a dyn Meta]) -> Option<&'a str> {
    objects
        .iter()
        .find_map(|v| v.label(ANN_USER).or_else(|| v.annotation(ANN_USER)))
}
