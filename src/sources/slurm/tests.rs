//! The mapping against responses recorded from a real Slurm 22.05
//! (tests/fixtures/slurm-22.05, v0.0.38) and hand-written v0.0.40-shaped
//! ones (tests/fixtures/slurm-v0.0.40: 23.11+ cannot run here; see its
//! README). The live tests (tests/slurm_live.rs) check the same mapping
//! against sinfo and squeue.

use super::{map, wire};
use crate::model::{JobState, NodeState, TimeLimit};

/// An answer's lists, every record readable.
struct Parsed {
    errors: Vec<serde_json::Value>,
    nodes: Vec<wire::Node>,
    jobs: Vec<wire::Job>,
    partitions: Vec<wire::Partition>,
}

fn parse(text: &str) -> Parsed {
    let env: wire::Envelope = serde_json::from_str(text).expect("fixture parses");
    fn all<T: serde::de::DeserializeOwned>(
        l: Option<Vec<serde_json::Value>>,
        kind: &str,
    ) -> Vec<T> {
        let (v, w) = wire::records(&l.unwrap_or_default(), kind);
        assert!(w.is_empty(), "{w:?}");
        v
    }
    Parsed {
        errors: env.errors,
        nodes: all(env.nodes, "node"),
        jobs: all(env.jobs, "job"),
        partitions: all(env.partitions, "partition"),
    }
}

/// The mapping, with no record skipped.
fn clean(
    name: &str,
    now: i64,
    nodes: &[wire::Node],
    jobs: &[wire::Job],
    parts: &[wire::Partition],
) -> crate::model::Cluster {
    let m = map::cluster(name, now, nodes, jobs, parts);
    assert!(m.warnings.is_empty(), "{:?}", m.warnings);
    m.cluster
}

macro_rules! fixture {
    ($path:literal) => {
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/",
            $path
        ))
    };
}

#[test]
fn v0038_draining_node_and_gpus_by_index() {
    let nodes = parse(fixture!("slurm-22.05/v0.0.38_nodes_draining.json"));
    let jobs = parse(fixture!("slurm-22.05/v0.0.38_jobs.json"));
    let parts = parse(fixture!("slurm-22.05/v0.0.38_partitions.json"));
    let c = clean("lab", 0, &nodes.nodes, &jobs.jobs, &parts.partitions);
    let n1 = c.node("gpu01").expect("gpu01");
    assert_eq!(n1.state, NodeState::Draining);
    assert_eq!(n1.reason.as_deref(), Some("xid79"));
    assert_eq!(n1.reason_set_by.as_deref(), Some("root"));
    assert_eq!(n1.gpu_count, 8);
    assert_eq!(n1.gpu_model.as_deref(), Some("H100"));
    assert_eq!(c.node("gpu02").map(|n| n.state), Some(NodeState::Up));
    assert_eq!(c.partitions[0].nodes, ["gpu01", "gpu02", "gpu03", "gpu04"]);
    assert_eq!(c.partitions[0].max_time_s, None, "-1 is unlimited");
    // The 2-node job holds all 16 GPUs of gpu02 and gpu03, by index.
    for n in ["gpu02", "gpu03"] {
        assert!(
            c.node(n)
                .expect("node")
                .gpus
                .iter()
                .all(|g| g.job.as_deref() == Some("2")),
            "{n}"
        );
    }
}

#[test]
fn v0038_jobs_shapes_reasons_and_arrays() {
    let jobs = parse(fixture!("slurm-22.05/v0.0.38_jobs.json"));
    let c = clean("lab", 0, &[], &jobs.jobs, &[]);
    let job = |id: &str| c.job(id).unwrap_or_else(|| panic!("job {id}"));
    let gang = job("2");
    assert_eq!(
        (gang.node_count, gang.gpus_per_node, gang.gpus_total),
        (Some(2), Some(8), Some(16))
    );
    assert_eq!(gang.nodes, ["gpu02", "gpu03"]);
    assert!(gang.gang.is_some());
    assert_eq!(
        gang.time_limit,
        Some(TimeLimit::Unlimited),
        "null is unlimited"
    );
    assert_eq!(
        job("3").time_limit,
        Some(TimeLimit::Seconds(7200)),
        "120 minutes"
    );
    assert_eq!(job("4").reason.as_deref(), Some("Resources"));
    assert_eq!(job("4").gpus_per_node, Some(8));
    assert_eq!(job("5").reason.as_deref(), Some("Priority"));
    assert_eq!(
        job("6_[0-3]").state,
        JobState::Pending,
        "the array's pending rest, as squeue shows it"
    );
    assert_eq!(job("7").reason.as_deref(), Some("JobHeldUser"));
    assert_eq!(job("8").reason.as_deref(), Some("Dependency"));
    assert_eq!(job("9").state, JobState::Failed);
    assert_eq!(job("1").reason, None, "'None' is no reason");
}

#[test]
fn v0038_requeued_job() {
    let jobs = parse(fixture!("slurm-22.05/v0.0.38_jobs_after_requeue.json"));
    let c = clean("lab", 0, &[], &jobs.jobs, &[]);
    let j = c.job("1").expect("job 1");
    assert_eq!(j.state, JobState::Pending);
    assert_eq!(j.reason.as_deref(), Some("BeginTime"));
    assert_eq!(j.restarts, Some(1));
    assert!(j.nodes.is_empty() && j.start_time.is_none());
}

#[test]
fn v0038_errors_come_through_verbatim() {
    let bad = parse(fixture!("slurm-22.05/v0.0.38_bad_token.json"));
    assert_eq!(
        wire::error_text(&bad.errors).as_deref(),
        Some("Unspecified error: Failed while looking for jobs (error -1)")
    );
    let denied = parse(fixture!("slurm-22.05/v0.0.38_job_update_nonadmin.json"));
    let text = wire::error_text(&denied.errors).expect("error");
    assert!(
        text.contains("Changes to job priority are not persistent, change nice instead")
            && text.contains("2095"),
        "{text}"
    );
    let missing = parse(fixture!("slurm-22.05/v0.0.38_job_missing.json"));
    assert!(
        wire::error_text(&missing.errors)
            .expect("error")
            .contains("2017")
    );
    let shape = parse(fixture!("slurm-22.05/v0.0.38_job_update_wrong_shape.json"));
    assert!(
        wire::error_text(&shape.errors)
            .expect("error")
            .contains("9001")
    );
}

#[test]
fn v0040_arrays_states_and_set_numbers() {
    let nodes = parse(fixture!("slurm-v0.0.40/nodes.json"));
    let jobs = parse(fixture!("slurm-v0.0.40/jobs.json"));
    let parts = parse(fixture!("slurm-v0.0.40/partitions.json"));
    let c = clean("lab", 0, &nodes.nodes, &jobs.jobs, &parts.partitions);
    let state = |n: &str| c.node(n).map(|n| n.state);
    assert_eq!(state("gpu01"), Some(NodeState::Draining));
    assert_eq!(state("gpu02"), Some(NodeState::Up));
    assert_eq!(state("gpu03"), Some(NodeState::Drain));
    assert_eq!(state("gpu04"), Some(NodeState::Down));
    assert_eq!(
        c.node("gpu01").and_then(|n| n.reason_time),
        Some(1_796_009_583)
    );
    assert_eq!(c.partitions[0].nodes.len(), 4);
    assert_eq!(c.partitions[0].max_time_s, Some(4320 * 60));
    let gang = c.job("21").expect("gang");
    assert_eq!(gang.priority, Some(9000));
    assert_eq!(gang.time_limit, Some(TimeLimit::Unlimited));
    assert_eq!(gang.restarts, Some(2));
    assert_eq!(gang.checkpoint.size_bytes, Some(1_200_000_000_000));
    assert_eq!(gang.checkpoint.interval_s, Some(1800));
    assert_eq!(gang.checkpoint.last, Some(1_796_008_000));
    assert_eq!((gang.gpus_per_node, gang.gpus_total), (Some(4), Some(8)));
    let gpu02 = c.node("gpu02").expect("gpu02");
    assert_eq!(
        gpu02.gpus_allocated(),
        5,
        "4 for the gang, 1 for the array task"
    );
    assert_eq!(c.job("25_[4-9]").map(|j| j.state), Some(JobState::Pending));
    let task = c.job("25_3").expect("array task");
    assert_eq!(task.time_limit, Some(TimeLimit::Seconds(3600)));
    let gpu5 = &c.node("gpu02").expect("gpu02").gpus[5];
    assert_eq!(
        gpu5.job.as_deref(),
        Some("25_3"),
        "IDX:5 goes to the array task"
    );
}

#[test]
fn checkpoint_comment_convention() {
    let ck = map::checkpoint_from_comment(
        "epoch 47, ckpt_bytes=800GiB ckpt_every=1h ckpt_params=70B junk=1",
    );
    assert_eq!(ck.size_bytes, Some(800 * 1024 * 1024 * 1024));
    assert_eq!(ck.interval_s, Some(3600));
    assert_eq!(ck.params, Some(70_000_000_000));
    assert_eq!(map::checkpoint_from_comment("").size_bytes, None);
}

#[test]
fn node_state_changes_become_incidents() {
    let drained = parse(fixture!("slurm-22.05/v0.0.38_nodes_draining.json"));
    let mut watch = super::NodeWatch::default();
    let mut first = clean("lab", 1_796_009_600, &drained.nodes, &[], &[]);
    watch.observe(&mut first);
    assert_eq!(first.events.len(), 1, "gpu01 was already draining");
    assert_eq!(first.events[0].node, "gpu01");
    assert_eq!(first.events[0].message, "xid79");
    let after = parse(fixture!("slurm-22.05/v0.0.38_nodes_drained.json"));
    let mut second = clean("lab", 1_796_009_700, &after.nodes, &[], &[]);
    watch.observe(&mut second);
    let last = second.events.last().expect("event");
    assert_eq!(last.label(), "NODE DRAIN");
    assert_eq!(last.time, 1_796_009_700);
    let mut third = clean("lab", 1_796_009_800, &after.nodes, &[], &[]);
    watch.observe(&mut third);
    assert_eq!(
        third.events.len(),
        second.events.len(),
        "no change, no incident"
    );
}

/// Hostile answers: each bad record is skipped with a warning naming it,
/// the rest stands; a missing list is an error; nothing wraps or aborts.
#[test]
fn unreadable_records_are_skipped_by_name_and_nothing_wraps() {
    use serde_json::json;
    let jobs = json!({"jobs": [
        {"job_id": 1, "name": "ok", "job_state": "RUNNING", "nodes": "gpu01", "node_count": 1,
         "tres_per_node": "gres:gpu:8", "partition": "gpu"},
        {"job_id": 2, "name": "wraps", "job_state": "RUNNING", "node_count": 4294967297u64},
        {"job_id": 3, "name": "forever", "job_state": "PENDING", "time_limit": 9223372036854775000i64},
        {"job_id": null, "name": "nameless", "job_state": "PENDING"},
        {"job_id": 5, "name": "huge", "job_state": "RUNNING", "node_count": 2,
         "tres_per_node": "gres:gpu:4294967295"},
        {"job_id": 6, "name": "odd priority", "priority": "high"}
    ]});
    let (records, w): (Vec<wire::Job>, _) = wire::list(jobs, "jobs", "job").expect("list");
    let m = map::cluster("lab", 0, &[], &records, &[]);
    let ids: Vec<&str> = m.cluster.jobs.iter().map(|j| j.id.as_str()).collect();
    // A priority of the wrong shape is unknown, field by field: job 6 stays.
    assert_eq!(ids, ["1", "6"], "{:?} {:?}", m.warnings, w);
    assert_eq!(m.cluster.jobs[1].priority, None);
    assert!(!ids.contains(&"0"), "a null id is never job 0");
    let all: Vec<&String> = w.iter().chain(&m.warnings).collect();
    for needle in [
        "job 2: node_count 4294967297 is out of range",
        "job 3: time_limit",
        "a job named \"nameless\" with no job id",
        "job 5: GPUs per node × nodes out of range",
    ] {
        assert!(all.iter().any(|x| x.contains(needle)), "{needle}: {all:?}");
    }

    let nodes = json!({"nodes": [
        {"name": "gpu01", "state": "idle", "gres": "gpu:h100:8"},
        {"name": "evil", "state": "idle", "gres": "gpu:h100:4294967295"}
    ]});
    let (records, _): (Vec<wire::Node>, _) = wire::list(nodes, "nodes", "node").expect("list");
    let m = map::cluster("lab", 0, &records, &[], &[]);
    assert_eq!(m.cluster.nodes.len(), 1);
    assert!(
        m.warnings[0].contains("evil") && m.warnings[0].contains("limits.max_gpus_per_node"),
        "{:?}",
        m.warnings
    );

    // A null nested object is that field's default, not a lost partition.
    let parts = json!({"partitions": [{"name": "gpu", "nodes": "gpu[01-02]", "maximums": null}]});
    let (records, w): (Vec<wire::Partition>, _) =
        wire::list(parts, "partitions", "partition").expect("list");
    assert!(w.is_empty(), "{w:?}");
    assert_eq!(records[0].name, "gpu");

    // `{}` is not an empty cluster.
    let err = wire::list::<wire::Node>(json!({}), "nodes", "node").expect_err("no list");
    assert!(err.contains("no `nodes` list"), "{err}");
}
