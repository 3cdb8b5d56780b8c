//! Small hand-built clusters for the engine's tests.

use crate::model::{
    Checkpoint, Cluster, Gpu, Job, JobState, Node, NodeState, Partition, Quota, TimeLimit,
};
use std::collections::BTreeMap;

pub const NOW: i64 = 1_000_000;

pub fn cluster() -> Cluster {
    Cluster {
        name: "t".into(),
        source: "test".into(),
        time: NOW,
        ..Cluster::default()
    }
}

pub fn add_node(c: &mut Cluster, name: &str, partition: &str, gpus: u32) {
    c.nodes.push(std::sync::Arc::new(Node {
        name: name.into(),
        partitions: vec![partition.into()].into(),
        state: NodeState::Up,
        reason: None,
        reason_set_by: None,
        reason_time: None,
        boot_time: None,
        fault_reports: Vec::new(),
        back_at: None,
        gpu_model: Some("H100".into()),
        domains: Default::default(),
        ib_ports: Default::default(),
        gpu_summary: None,
        labels: BTreeMap::new().into(),
        gpu_count: gpus,
        gpus: (0..gpus).map(|i| Gpu::unknown(name, i)).collect(),
    }));
    match c.partitions.iter_mut().find(|p| p.name == partition) {
        Some(p) => p.nodes.push(name.into()),
        None => c.partitions.push(Partition {
            name: partition.into(),
            nodes: vec![name.into()],
            gpu_model: None,
            max_time_s: None,
        }),
    }
}

pub fn job(id: &str, partition: &str, nodes: u32, gpus_per_node: u32, priority: u64) -> Job {
    Job {
        id: id.into(),
        name: format!("job-{id}"),
        user: "u".into(),
        account: Some("team".into()),
        partition: partition.into(),
        qos: None,
        priority: Some(priority).into(),
        state: JobState::Pending,
        reason: None,
        gpus_per_node: Some(gpus_per_node),
        node_count: Some(nodes),
        gpus_total: Some(nodes * gpus_per_node),
        nodes: Vec::new(),
        submit_time: Some(NOW - 600).into(),
        eligible_time: crate::model::When::UNKNOWN,
        start_time: crate::model::When::UNKNOWN,
        end_time: crate::model::When::UNKNOWN,
        time_limit: Some(TimeLimit::Seconds(3600)),
        gang: (nodes > 1).then(|| format!("gang-{id}").into()),
        checkpoint: Checkpoint::default(),
        restarts: None,
        requeueable: None,
        same_domain: None,
        required_nodes: Default::default(),
        pods: Default::default(),
    }
}

/// Adds a running job on `nodes`, holding `gpus_per_node` GPUs of each,
/// started `ran_s` ago with a `limit_s` time limit.
pub fn run(
    c: &mut Cluster,
    id: &str,
    nodes: &[&str],
    gpus_per_node: u32,
    ran_s: i64,
    limit_s: u64,
) -> usize {
    let part = c
        .nodes
        .iter()
        .find(|n| n.name == nodes[0])
        .map(|n| n.partitions[0].clone())
        .unwrap_or_default();
    let mut j = job(id, &part, nodes.len() as u32, gpus_per_node, 1000);
    j.state = JobState::Running;
    j.start_time = Some(NOW - ran_s).into();
    j.time_limit = Some(TimeLimit::Seconds(limit_s));
    j.nodes = nodes.iter().map(|s| s.to_string()).collect();
    for name in nodes {
        if let Some(n) = c.nodes.iter_mut().find(|n| &n.name == name) {
            let mut need = gpus_per_node;
            for g in std::sync::Arc::make_mut(n)
                .gpus
                .iter_mut()
                .filter(|g| g.job.is_none())
            {
                if need == 0 {
                    break;
                }
                g.job = Some(id.into());
                need -= 1;
            }
        }
    }
    c.jobs.push(std::sync::Arc::new(j));
    c.jobs.len() - 1
}

pub fn pend(
    c: &mut Cluster,
    id: &str,
    partition: &str,
    nodes: u32,
    gpus_per_node: u32,
    priority: u64,
) -> usize {
    c.jobs.push(std::sync::Arc::new(job(
        id,
        partition,
        nodes,
        gpus_per_node,
        priority,
    )));
    c.jobs.len() - 1
}

pub fn quota(c: &mut Cluster, account: &str, limit: u32) {
    let used = c
        .jobs
        .iter()
        .filter(|j| j.state.holds_resources() && j.account.as_deref() == Some(account))
        .filter_map(|j| j.gpus_requested())
        .sum();
    c.quotas.push(Quota {
        account: account.into(),
        gpu_limit: Some(limit),
        gpus_in_use: used,
    });
}

/// The sim run `secs` seconds on, each snapshot of it (one per 5 s)
/// observed into `m` as a watching console observes them (the one before
/// too): the last snapshot and its base with the memory of them all. What
/// is derived from readings (a node down that lasts, a port down, a
/// storm) is derived as it is live.
pub fn watch(
    s: &mut crate::sim::Sim,
    m: &mut crate::engine::memory::Memory,
    secs: u64,
) -> (Cluster, crate::engine::base::Base) {
    let site = crate::engine::SiteParams::default();
    let cat = crate::engine::xid::XidCatalog::default();
    m.observe(&s.snapshot(), &site);
    let mut left = secs;
    while left > 0 {
        let by = left.min(5);
        s.advance(by);
        left -= by;
        m.observe(&s.snapshot(), &site);
    }
    let c = s.snapshot();
    let b = m.base(&c, &site, &cat);
    (c, b)
}
