//! The cluster as it stands when the sim starts: nodes, the scenario's jobs,
//! background load, and the incidents that already happened.

use super::{START_TIME, Sim, SimJob, SimPartition};
use crate::model::{
    Checkpoint, EventKind, Gpu, Job, JobState, LastXid, Node, NodeState, Partition, RecoveryAction,
    TimeLimit,
};
use rand::Rng;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Single-node jobs that leave 3,3,3,2,2,2,1 GPUs free on the first seven
/// A100 nodes: 16 free, at most 3 on any node.
const FRAGMENTS: [&[u32]; 7] = [
    &[4, 1],
    &[2, 2, 1],
    &[4, 1],
    &[4, 2],
    &[2, 2, 2],
    &[4, 2],
    &[4, 2, 1],
];

pub(crate) const USERS: [(&str, &str); 8] = [
    ("alice", "llm"),
    ("bob", "vision"),
    ("carol", "vision"),
    ("dave", "speech"),
    ("erin", "rl"),
    ("frank", "research"),
    ("grace", "speech"),
    ("heidi", "research"),
];

pub(crate) const JOB_NAMES: [&str; 12] = [
    "llama-sft",
    "bert-eval",
    "diffusion-xl",
    "moe-ablation",
    "rlhf-ppo",
    "tokenizer-bench",
    "whisper-ft",
    "nerf-train",
    "vit-probe",
    "retrieval-emb",
    "ssm-scan",
    "dpo-sweep",
];

struct Spec<'a> {
    name: &'a str,
    user: &'a str,
    account: &'static str,
    partition: &'a str,
    priority: u64,
    gpus_per_node: u32,
    nodes: u32,
}

pub(crate) fn build(sim: &mut Sim) {
    let h = sim.cfg.nodes / 2;
    let a = sim.cfg.nodes - h;
    add_partition(sim, "h100", "NVIDIA H100 80GB HBM3", 81_559, h);
    add_partition(sim, "a100", "NVIDIA A100-SXM4-80GB", 81_920, a);
    sim.quotas.push(("vision".into(), 16));
    let hn: Vec<usize> = sim.partitions[0].nodes.clone();
    let an: Vec<usize> = sim.partitions[1].nodes.clone();
    // The story, in the order it is told (the seeded draws follow it).
    hung_gang(sim, &hn);
    vision_team(sim, &hn);
    fragmented_a100s(sim, &an);
    never_starting(sim);
    fabric_gangs(sim, &hn);
    // Events were recorded as the story was told; keep them in time order.
    sim.events.sort_by_key(|e| e.time);
    for (i, e) in sim.events.iter_mut().enumerate() {
        e.seq = i as u64 + 1;
    }
    sim.next_seq = sim.events.len() as u64 + 1;

    background_load(sim, &hn, &an);
    extra_queue(sim);
}

/// The 4-node gang that the Xid 79 hung.
fn hung_gang(sim: &mut Sim, hn: &[usize]) {
    let gang = start(
        sim,
        &Spec {
            name: "llm-pretrain-70b",
            user: "alice",
            account: "llm",
            partition: "h100",
            priority: 9000,
            gpus_per_node: 8,
            nodes: 4,
        },
        &hn[0..4],
        18 * 3600,
        72 * 3600,
    );
    {
        let j = &mut sim.jobs[gang];
        j.job_mut().qos = Some("high".into());
        j.job_mut().checkpoint = Checkpoint {
            last: Some(START_TIME - 1050).into(),
            interval_s: Some(1800).into(),
            size_bytes: Some(1_200_000_000_000).into(),
            params: Some(70_000_000_000).into(),
        };
        j.base_occ = 0.82;
        j.mem_frac = 0.93;
        j.hung = true;
    }
    let xid_node = sim.nodes[hn[2]].name.clone();
    Arc::make_mut(&mut sim.nodes[hn[2]]).gpus[3].last_xid = Some(Box::new(LastXid {
        code: 79,
        time: Some(START_TIME - 30),
        message: None,
    }));
    sim.push_event_at(
        START_TIME - 30,
        &xid_node,
        Some(3),
        EventKind::Xid { code: 79 },
        "GPU has fallen off the bus",
    );
}

/// The vision team at its quota of 16 GPUs, and its queue.
fn vision_team(sim: &mut Sim, hn: &[usize]) {
    for (i, (name, user)) in [("vit-h-finetune", "bob"), ("detr-sweep", "carol")]
        .into_iter()
        .enumerate()
    {
        let spec = Spec {
            name,
            user,
            account: "vision",
            partition: "h100",
            priority: 5000,
            gpus_per_node: 8,
            nodes: 1,
        };
        let j = start(sim, &spec, &hn[4 + i..5 + i], 5 * 3600, 24 * 3600);
        // The sweep was submitted with --no-requeue: draining its node
        // (the one that takes the uncorrectable ECC error) requeues
        // nothing of it, and says so.
        if name == "detr-sweep" {
            sim.jobs[j].job_mut().requeueable = Some(false);
        }
        // Both checkpoint: the finetune's next is due 6 minutes into the
        // night (the node that takes the correctable-error burst), the
        // sweep's 10 minutes in (the node that takes the uncorrectable).
        let (size, every, next_in) = match name {
            "vit-h-finetune" => (400_000_000_000, 1800, 360),
            _ => (150_000_000_000, 3600, 600),
        };
        sim.jobs[j].job_mut().checkpoint = Checkpoint {
            last: Some(START_TIME + next_in - every).into(),
            interval_s: Some(every as u64).into(),
            size_bytes: Some(size).into(),
            params: crate::model::Count::UNKNOWN,
        };
    }
    for (name, gpus, user) in [("vit-g-eval", 4, "bob"), ("clip-distill", 8, "carol")] {
        let spec = Spec {
            name,
            user,
            account: "vision",
            partition: "h100",
            priority: 5200,
            gpus_per_node: gpus,
            nodes: 1,
        };
        queue(sim, &spec, 40 * 60, false);
    }
}

/// The A100 partition: fragmented, one node drained for burn-in.
fn fragmented_a100s(sim: &mut Sim, an: &[usize]) {
    for (k, sizes) in FRAGMENTS.iter().enumerate() {
        for &g in sizes.iter() {
            let (user, account) = USERS[3 + (k + g as usize) % 5];
            let name = JOB_NAMES[(k * 3 + g as usize) % JOB_NAMES.len()];
            let spec = Spec {
                name,
                user,
                account,
                partition: "a100",
                priority: 3000,
                gpus_per_node: g,
                nodes: 1,
            };
            let ran = sim.rng.random_range(3600..6 * 3600);
            start(sim, &spec, &an[k..k + 1], ran, 24 * 3600);
        }
    }
    let drained = an[7];
    Arc::make_mut(&mut sim.nodes[drained]).state = NodeState::Drain;
    Arc::make_mut(&mut sim.nodes[drained]).reason = Some("PSU replaced, burn-in pending".into());
    Arc::make_mut(&mut sim.nodes[drained]).reason_set_by = Some("root".into());
    Arc::make_mut(&mut sim.nodes[drained]).reason_time = Some(START_TIME - 5400);
    for (name, user, account, prio) in [
        ("asr-conformer-8g", "grace", "speech", 8000),
        ("rl-ppo-8g", "erin", "rl", 6000),
    ] {
        let spec = Spec {
            name,
            user,
            account,
            partition: "a100",
            priority: prio,
            gpus_per_node: 8,
            nodes: 1,
        };
        queue(sim, &spec, 42 * 60, false);
    }
}

/// Jobs no scheduler pass will start.
fn never_starting(sim: &mut Sim) {
    let eval = queue(
        sim,
        &Spec {
            name: "llm-eval-70b",
            user: "alice",
            account: "llm",
            partition: "h100",
            priority: 8500,
            gpus_per_node: 8,
            nodes: 1,
        },
        3 * 3600,
        true,
    );
    sim.jobs[eval].job_mut().reason = Some("Dependency".into());
    let held = queue(
        sim,
        &Spec {
            name: "ablation-hold",
            user: "heidi",
            account: "research",
            partition: "h100",
            priority: 1000,
            gpus_per_node: 2,
            nodes: 1,
        },
        2 * 3600,
        true,
    );
    sim.jobs[held].job_mut().reason = Some("JobHeldUser".into());
    // A name full of escape sequences: drawn inert, never sent to the terminal.
    queue(
        sim,
        &Spec {
            name: "\u{1b}[31mpwn\u{1b}[0m\u{7}-eval",
            user: "mallory",
            account: "research",
            partition: "h100",
            priority: 1500,
            gpus_per_node: 4,
            nodes: 1,
        },
        10 * 60,
        false,
    );
}

/// Two 2-node gangs on the last two H100 nodes of the second leaf switch,
/// 2 GPUs a node each: the jobs the leaf's flap stalls.
fn fabric_gangs(sim: &mut Sim, hn: &[usize]) {
    for (name, user, account, ran) in [
        ("megatron-moe-2n", "erin", "rl", 2 * 3600),
        ("dist-eval-2n", "frank", "research", 3600),
    ] {
        let spec = Spec {
            name,
            user,
            account,
            partition: "h100",
            priority: 4000,
            gpus_per_node: 2,
            nodes: 2,
        };
        let j = start(sim, &spec, &hn[6..8], ran, 12 * 3600);
        sim.jobs[j].base_occ = 0.7;
        sim.jobs[j].mem_frac = 0.8;
    }
}

/// Background load on every node the scenario does not use (the last two
/// H100 nodes of the default night hold the fabric gangs and room for
/// arrivals).
fn background_load(sim: &mut Sim, hn: &[usize], an: &[usize]) {
    let busy: Vec<usize> = hn[8..].iter().chain(an[8..].iter()).copied().collect();
    for n in busy {
        let mut free = 8u32.saturating_sub(sim.nodes[n].gpus_allocated());
        while free > 0 && sim.rng.random_bool(0.8) {
            let g = [1u32, 2, 4, 8][sim.rng.random_range(0..4)].min(free);
            let part = sim.nodes[n].partitions[0].clone();
            let spec = random_spec(sim, &part, g);
            let duration = sim.rng.random_range(3 * 60..15 * 60);
            let ran = sim.rng.random_range(0..duration);
            let idx = start(sim, &spec.as_spec(), &[n], ran, 3600);
            sim.jobs[idx].duration_s = duration;
            free -= g;
        }
    }
}

/// `sim.cfg.jobs`: queued jobs up to that many jobs in all.
fn extra_queue(sim: &mut Sim) {
    if let Some(total) = sim.cfg.jobs {
        while sim.jobs.len() < total {
            let part = if sim.rng.random_bool(0.5) {
                "h100"
            } else {
                "a100"
            };
            let g = [1u32, 2, 4, 8][sim.rng.random_range(0..4)];
            let spec = random_spec(sim, part, g);
            let waited = sim.rng.random_range(60..4 * 3600);
            let idx = queue(sim, &spec.as_spec(), waited, false);
            sim.jobs[idx].duration_s = sim.rng.random_range(3 * 60..15 * 60);
        }
    }
}

/// Nodes under one leaf switch (and in one rack).
pub(crate) const NODES_PER_LEAF: usize = 4;
/// Leaf switches under one spine.
const LEAVES_PER_SPINE: usize = 8;

/// A node's failure domains: its leaf switch (numbered across the
/// cluster), its rack, its spine.
fn domains_of(sim: &Sim, partition: &str, i: usize) -> Vec<crate::model::Domain> {
    use crate::model::Domain;
    // Leaves before this partition's, plus its own.
    let before: usize = sim
        .partitions
        .iter()
        .map(|p| p.nodes.len().div_ceil(NODES_PER_LEAF))
        .sum();
    let leaf = before + (i - 1) / NODES_PER_LEAF + 1;
    vec![
        Domain::new("leaf", &format!("ib-leaf-{leaf}")),
        Domain::new(
            "rack",
            &format!("rack-{partition}-{}", (i - 1) / NODES_PER_LEAF + 1),
        ),
        Domain::new(
            "spine",
            &format!("ib-spine-{}", (leaf - 1) / LEAVES_PER_SPINE + 1),
        ),
    ]
}

/// The node's one compute HCA port, up at 400 Gb/s (NDR) with clean counters.
fn healthy_port() -> crate::model::IbPort {
    crate::model::IbPort {
        device: "mlx5_0".into(),
        port: 1,
        state: Some(crate::model::IB_STATE_ACTIVE),
        physical_state: Some(crate::model::IB_PHYS_LINK_UP),
        rate_bytes_per_second: Some(50e9),
        link_downed: Some(0),
        link_error_recovery: Some(0),
        symbol_errors: Some(0),
        receive_errors: Some(0),
    }
}

fn add_partition(sim: &mut Sim, name: &str, model: &str, mem_mib: u64, count: usize) {
    let width = count.to_string().len().max(2);
    let mut members = Vec::with_capacity(count);
    // One copy of the model's name for every GPU of the partition.
    let model_name: Arc<str> = model.into();
    for i in 1..=count {
        let node_name = format!("{name}-{i:0width$}");
        let domains = domains_of(sim, name, i);
        let rack = domains[1].name.clone();
        let mut labels = BTreeMap::new();
        labels.insert(
            "nvidia.com/gpu.product".to_string(),
            model.replace(' ', "-"),
        );
        labels.insert("topology.rack".to_string(), rack.clone());
        let shared: Arc<str> = node_name.as_str().into();
        let gpus = (0..8)
            .map(|g| {
                let mut gpu = Gpu::unknown_on(&shared, g);
                gpu.uuid = Some(format!("GPU-{:08x}-{:04x}-{g}", fnv(&node_name), i).into());
                gpu.model = Some(model_name.clone());
                gpu.memory_total_mib = Some(mem_mib);
                gpu.ecc.sbe_volatile = Some(0).into();
                gpu.ecc.dbe_volatile = Some(0).into();
                gpu.ecc.sbe_aggregate = Some(0).into();
                gpu.ecc.dbe_aggregate = Some(0).into();
                gpu.row_remap_pending = Some(false);
                gpu.row_remap_failed = Some(false);
                gpu.nvlink = crate::model::NvLinkErrors {
                    crc_flit: Some(0).into(),
                    crc_data: Some(0).into(),
                    replay: Some(0).into(),
                    recovery: Some(0).into(),
                };
                gpu.recovery_action = Some(RecoveryAction::None);
                gpu
            })
            .collect();
        members.push(sim.nodes.len());
        sim.nodes.push(Arc::new(Node {
            name: node_name,
            partitions: vec![name.to_string()].into(),
            state: NodeState::Up,
            reason: None,
            reason_set_by: None,
            reason_time: None,
            boot_time: None,
            fault_reports: Vec::new(),
            back_at: None,
            gpu_model: Some(model.to_string()),
            domains: domains.into(),
            ib_ports: vec![healthy_port()].into(),
            gpu_summary: None,
            labels: labels.into(),
            gpu_count: 8,
            gpus,
        }));
    }
    let partition = Partition {
        name: name.to_string(),
        nodes: members.iter().map(|&i| sim.nodes[i].name.clone()).collect(),
        gpu_model: Some(model.to_string()),
        max_time_s: Some(7 * 24 * 3600),
    };
    sim.partitions.push(SimPartition {
        partition,
        nodes: members,
    });
}

/// A stable per-name number for made-up UUIDs.
fn fnv(s: &str) -> u32 {
    s.bytes().fold(0x811c_9dc5u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

pub(crate) struct OwnedSpec {
    name: String,
    user: &'static str,
    account: &'static str,
    partition: String,
    priority: u64,
    gpus: u32,
    nodes: u32,
}

impl OwnedSpec {
    fn as_spec(&self) -> Spec<'_> {
        Spec {
            name: &self.name,
            user: self.user,
            account: self.account,
            partition: &self.partition,
            priority: self.priority,
            gpus_per_node: self.gpus,
            nodes: self.nodes,
        }
    }
}

pub(crate) fn random_spec(sim: &mut Sim, partition: &str, gpus: u32) -> OwnedSpec {
    // Skip the vision team: its queue is the scenario's.
    let pick = [0usize, 3, 4, 5, 6, 7][sim.rng.random_range(0..6)];
    let (user, account) = USERS[pick];
    let name = JOB_NAMES[sim.rng.random_range(0..JOB_NAMES.len())];
    OwnedSpec {
        name: format!("{name}-{}", sim.rng.random_range(1..100)),
        user,
        account,
        partition: partition.to_string(),
        priority: sim.rng.random_range(1000..5000),
        gpus,
        nodes: 1,
    }
}

/// Submits a new pending job from a random spec; used by arrivals.
pub(crate) fn submit(sim: &mut Sim, spec: &OwnedSpec, duration_s: u64) -> usize {
    let idx = queue(sim, &spec.as_spec(), 0, false);
    sim.jobs[idx].duration_s = duration_s;
    idx
}

pub(crate) fn with_nodes(mut spec: OwnedSpec, nodes: u32) -> OwnedSpec {
    spec.nodes = nodes;
    spec
}

fn new_job(sim: &mut Sim, spec: &Spec, submitted_ago: u64, limit_s: u64) -> SimJob {
    let id = sim.next_job_id;
    sim.next_job_id += 1;
    let base_occ = sim.rng.random_range(0.35..0.9);
    let mem_frac = sim.rng.random_range(0.4..0.95);
    let multi = spec.nodes > 1;
    let (account, qos) = (sim.name(spec.account), sim.name("normal"));
    SimJob {
        job: std::sync::Arc::new(Job {
            id: id.to_string(),
            name: spec.name.to_string(),
            user: spec.user.to_string(),
            account: Some(account),
            partition: spec.partition.to_string(),
            qos: Some(qos),
            priority: Some(spec.priority).into(),
            state: JobState::Pending,
            reason: None,
            gpus_per_node: Some(spec.gpus_per_node),
            node_count: Some(spec.nodes),
            gpus_total: Some(spec.gpus_per_node * spec.nodes),
            nodes: Vec::new(),
            submit_time: Some(sim.now - submitted_ago as i64).into(),
            eligible_time: crate::model::When::UNKNOWN,
            start_time: crate::model::When::UNKNOWN,
            end_time: crate::model::When::UNKNOWN,
            time_limit: Some(TimeLimit::Seconds(limit_s)),
            gang: multi.then(|| format!("job-{id}").into()),
            checkpoint: Checkpoint {
                last: crate::model::When::UNKNOWN,
                interval_s: multi.then_some(1800).into(),
                size_bytes: multi
                    .then(|| u64::from(spec.nodes) * 150_000_000_000)
                    .into(),
                params: crate::model::Count::UNKNOWN,
            },
            restarts: Some(0),
            requeueable: Some(true),
            same_domain: None,
            required_nodes: Default::default(),
            pods: Default::default(),
        }),
        duration_s: limit_s,
        base_occ,
        mem_frac,
        hung: false,
        blocked: false,
    }
}

fn queue(sim: &mut Sim, spec: &Spec, waited_s: u64, blocked: bool) -> usize {
    let mut job = new_job(sim, spec, waited_s, 24 * 3600);
    job.blocked = blocked;
    sim.jobs.push(job);
    sim.sched_dirty = true;
    sim.jobs.len() - 1
}

/// A job that has been running for `ran_s` on `nodes`, on their lowest free GPUs.
fn start(sim: &mut Sim, spec: &Spec, nodes: &[usize], ran_s: u64, limit_s: u64) -> usize {
    let mut job = new_job(sim, spec, ran_s + 600, limit_s);
    job.job_mut().state = JobState::Running;
    job.job_mut().start_time = Some(sim.now - ran_s as i64).into();
    if job.job.checkpoint.interval_s.is_some() {
        let started = job.job.start_time;
        job.job_mut().checkpoint.last = started;
    }
    let id = job.job.id.clone();
    for &n in nodes {
        job.job_mut().nodes.push(sim.nodes[n].name.clone());
        sim.allocate(n, &id, spec.gpus_per_node);
    }
    sim.jobs.push(job);
    sim.jobs.len() - 1
}
