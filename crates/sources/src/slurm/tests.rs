//! The mapping against responses recorded from a real Slurm 22.05
//! (tests/fixtures/slurm-22.05, v0.0.38) and a real Slurm 24.11
//! (tests/fixtures/slurm-24.11, v0.0.42), and hand-written v0.0.40-shaped
//! edge cases (tests/fixtures/slurm-v0.0.40). The live tests
//! (tests/slurm_live.rs) check the same mapping against sinfo and squeue
//! on both versions.

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
            "/../../tests/fixtures/",
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
        "job 5: asks for more GPUs than 1024 per node (limits.max_gpus_per_node)",
    ] {
        assert!(all.iter().any(|x| x.contains(needle)), "{needle}: {all:?}");
    }

    let nodes = serde_json::json!({"nodes": [
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
    assert!(err.0.contains("no `nodes` list"), "{err}");
}

/// Real Slurm 24.11 answers (recorded from the lab): a gang with its GPUs
/// by index, a node drained under a job, the array's pending remainder,
/// and the cluster's name from the answers' meta.
#[test]
fn v0042_recorded_from_slurm_24_11() {
    let nodes = parse(fixture!("slurm-24.11/v0.0.42_nodes.json"));
    let jobs = parse(fixture!("slurm-24.11/v0.0.42_jobs.json"));
    let parts = parse(fixture!("slurm-24.11/v0.0.42_partitions.json"));
    let c = clean("lab24", 0, &nodes.nodes, &jobs.jobs, &parts.partitions);
    let g3 = c.node("gpu03").expect("gpu03");
    assert_eq!(g3.state, NodeState::Draining);
    assert_eq!(g3.reason.as_deref(), Some("xid79 gpu3"));
    assert_eq!(g3.gpus_allocated(), 4);
    let ids: Vec<&str> = c.jobs.iter().map(|j| j.id.as_str()).collect();
    assert_eq!(ids, ["1", "2", "3", "4_[0-5]", "5"]);
    let train = c.job("1").expect("train");
    assert_eq!(train.nodes, ["gpu01", "gpu02"]);
    assert_eq!(train.gpus_per_node, Some(8));
    let held_by_1: usize = c
        .nodes
        .iter()
        .flat_map(|n| &n.gpus)
        .filter(|g| g.job.as_deref() == Some("1"))
        .count();
    assert_eq!(held_by_1, 16);
    assert_eq!(train.checkpoint.size_bytes, Some(1_200_000_000_000));
    assert_eq!(
        c.job("3").and_then(|j| j.reason.as_deref()),
        Some("Resources")
    );
    assert_eq!(
        c.job("5").and_then(|j| j.reason.as_deref()),
        Some("JobHeldUser")
    );
    let v: serde_json::Value =
        serde_json::from_str(fixture!("slurm-24.11/v0.0.42_jobs.json")).expect("json");
    assert_eq!(
        v.pointer("/meta/slurm/cluster"),
        Some(&serde_json::json!("lab24"))
    );
    let err = wire::error_text(
        serde_json::from_str::<serde_json::Value>(fixture!(
            "slurm-24.11/v0.0.42_node_update_missing.json"
        ))
        .expect("json")["errors"]
            .as_array()
            .expect("errors"),
    );
    assert!(
        err.as_deref()
            .is_some_and(|e| e.contains("Invalid node name specified")),
        "{err:?}"
    );
}

/// A config for a stand-in slurmrestd at `url`.
fn stand_in_config(url: &str) -> super::SlurmConfig {
    super::SlurmConfig {
        url: url.to_string(),
        user: "root".into(),
        token: Some("t".into()),
        interval: std::time::Duration::from_secs(1),
        timeout: std::time::Duration::from_secs(5),
        cluster_name: None,
        scontrol: "scontrol".into(),
        slurm_conf: None,
        api_version: None,
        rest_budget: 0.03,
        full_jobs_interval: std::time::Duration::from_secs(30),
        max_interval: std::time::Duration::from_secs(15),
        checkpoint_signal: "SIGUSR1".into(),
        validate: Default::default(),
    }
}

/// Slurm 24.11 answers a token it cannot verify with HTTP 511 and
/// errors[] (recorded): an authentication error that says to check the
/// token, not a generic API failure.
#[tokio::test]
async fn a_bad_token_on_24_11_is_an_auth_error() {
    use crate::testserver::{Shared, serve_routes};
    let recorded = fixture!("slurm-24.11/v0.0.42_bad_token.txt");
    let (body, status) = recorded.rsplit_once("\nHTTP ").expect("body, then status");
    let routes = Shared::default();
    {
        let mut r = routes.lock().expect("routes");
        r.bodies
            .insert("/slurm/v0.0.42/nodes".into(), body.to_string());
        r.status.insert(
            "/slurm/v0.0.42/nodes".into(),
            status.trim().parse().expect("status"),
        );
    }
    let url = serve_routes(routes).await;
    let cfg = stand_in_config(&url);
    let client = super::client::Client::new(&cfg).expect("client");
    let err = client
        .get("/slurm/v0.0.42/nodes")
        .await
        .expect_err("bad token");
    assert!(
        matches!(err, crate::SourceError::Auth { status: 511, .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("SLURM_JWT"), "{err}");
}

/// The cheap poll's requests, against a stand-in slurmrestd serving the
/// recorded 24.11 answers: the first poll lists every job; then only job
/// states, the record of a job whose state changed, and nothing for a job
/// that left; an array task changing lists every job again. (The live
/// 24.11 test shows the same behaviour's results on a real slurmrestd.)
#[tokio::test]
async fn on_24_11_only_changed_jobs_are_fetched_between_full_lists() {
    use crate::testserver::{Shared, serve_routes};
    let routes = Shared::default();
    let put = |path: &str, body: String| {
        routes
            .lock()
            .expect("routes")
            .bodies
            .insert(path.to_string(), body);
    };
    let v = "/slurm/v0.0.42";
    put(
        "/openapi/v3",
        r#"{"paths": {"/slurm/v0.0.42/ping/": {}, "/slurm/v0.0.41/ping/": {}}}"#.into(),
    );
    put(
        &format!("{v}/nodes"),
        fixture!("slurm-24.11/v0.0.42_nodes.json").into(),
    );
    put(
        &format!("{v}/partitions"),
        fixture!("slurm-24.11/v0.0.42_partitions.json").into(),
    );
    put(
        &format!("{v}/jobs"),
        fixture!("slurm-24.11/v0.0.42_jobs.json").into(),
    );
    let states = fixture!("slurm-24.11/v0.0.42_jobs_state.json");
    put(&format!("{v}/jobs/state"), states.into());
    let url = serve_routes(routes.clone()).await;
    let mut cfg = stand_in_config(&url);
    cfg.rest_budget = 1.0;
    cfg.full_jobs_interval = std::time::Duration::from_secs(3600);
    let asked = || std::mem::take(&mut routes.lock().expect("routes").asked);
    let mut p = super::Poller::new(super::client::Client::new(&cfg).expect("client"), cfg);
    let m = p.poll().await.expect("first poll");
    assert_eq!(m.cluster.name, "lab24", "Slurm's name, from meta");
    assert_eq!(m.cluster.jobs.len(), 5);
    let first = asked();
    assert!(
        first.contains(&format!("{v}/jobs")),
        "the first poll lists every job"
    );
    assert!(
        first.contains(&format!("{v}/reservations")),
        "and reads the reservations"
    );
    // Nothing changed: states only.
    p.poll().await.expect("second poll");
    let mut a = asked();
    a.sort();
    assert_eq!(
        a,
        [
            format!("{v}/jobs/state"),
            format!("{v}/nodes"),
            format!("{v}/partitions")
        ],
        "the reservations are kept until the full interval"
    );
    // Job 3 starts, job 5 leaves Slurm's memory.
    let mut job3: serde_json::Value =
        serde_json::from_str(fixture!("slurm-24.11/v0.0.42_jobs.json")).expect("json");
    let rec = job3["jobs"]
        .as_array()
        .and_then(|js| js.iter().find(|j| j["job_id"] == 3))
        .cloned()
        .expect("job 3");
    let mut rec = rec;
    rec["job_state"] = serde_json::json!(["RUNNING"]);
    rec["nodes"] = serde_json::json!("gpu04");
    job3["jobs"] = serde_json::json!([rec]);
    put(&format!("{v}/job/3"), job3.to_string());
    let moved = states
        .replace(
            r#""job_id": "3",
      "state": [
        "PENDING""#,
            r#""job_id": "3",
      "state": [
        "RUNNING""#,
        )
        .replace(r#""job_id": "5""#, r#""job_id": "gone""#);
    assert_ne!(moved, states, "the fixture's layout changed");
    let moved = moved.replace(
        r#"{
      "job_id": "gone",
      "state": [
        "PENDING"
      ]
    }"#,
        "",
    );
    put(
        &format!("{v}/jobs/state"),
        moved.replace(
            "},
    
  ]",
            "}
  ]",
        ),
    );
    let m = p.poll().await.expect("third poll");
    let a = asked();
    assert!(a.contains(&format!("{v}/job/3")), "{a:?}");
    assert!(!a.contains(&format!("{v}/jobs")), "{a:?}");
    assert_eq!(m.cluster.job("3").map(|j| j.state), Some(JobState::Running));
    assert!(m.cluster.job("5").is_none(), "a job Slurm dropped goes");
    assert_eq!(m.cluster.jobs.len(), 4);
    // An array task starts: every job again.
    let a_task = r#""job_id": "4_0",
      "state": [
        "PENDING""#;
    let bodies = routes.lock().expect("routes").bodies.clone();
    let cur = bodies
        .get(&format!("{v}/jobs/state"))
        .cloned()
        .unwrap_or_default();
    assert!(cur.contains(a_task));
    put(
        &format!("{v}/jobs/state"),
        cur.replace(
            a_task,
            r#""job_id": "4_0",
      "state": [
        "RUNNING""#,
        ),
    );
    p.poll().await.expect("fourth poll");
    assert!(asked().contains(&format!("{v}/jobs")));
}

mod fuzz {
    //! Short in `cargo test`; long with scripts/fuzz.sh (PROPTEST_CASES).
    use super::super::{gres, hostlist, map, wire};
    use proptest::prelude::*;
    use serde_json::Value;

    use crate::fuzzing::arb_json;

    fn fixtures() -> Vec<(&'static str, &'static str, &'static str)> {
        vec![
            (
                "nodes",
                "node",
                include_str!("../../../../tests/fixtures/slurm-22.05/v0.0.38_nodes_draining.json"),
            ),
            (
                "jobs",
                "job",
                include_str!("../../../../tests/fixtures/slurm-22.05/v0.0.38_jobs.json"),
            ),
            (
                "partitions",
                "partition",
                include_str!("../../../../tests/fixtures/slurm-22.05/v0.0.38_partitions.json"),
            ),
            (
                "nodes",
                "node",
                include_str!("../../../../tests/fixtures/slurm-v0.0.40/nodes.json"),
            ),
            (
                "jobs",
                "job",
                include_str!("../../../../tests/fixtures/slurm-v0.0.40/jobs.json"),
            ),
            (
                "partitions",
                "partition",
                include_str!("../../../../tests/fixtures/slurm-v0.0.40/partitions.json"),
            ),
        ]
    }

    /// Replaces one field of one record (chosen by `pick`) with `v`.
    fn mutate(doc: &mut Value, key: &str, pick: usize, field: usize, v: Value) {
        let Some(list) = doc.get_mut(key).and_then(Value::as_array_mut) else {
            return;
        };
        if list.is_empty() {
            return;
        }
        let n = list.len();
        let Some(rec) = list[pick % n].as_object_mut() else {
            return;
        };
        let keys: Vec<String> = rec.keys().cloned().collect();
        if keys.is_empty() {
            return;
        }
        rec.insert(keys[field % keys.len()].clone(), v);
    }

    /// Decodes and maps a whole answer: the three lists of the kinds.
    fn decode_all(kind_key: &str, kind: &str, doc: Value) -> Result<usize, String> {
        match kind_key {
            "nodes" => {
                let (r, _): (Vec<wire::Node>, _) = wire::list(doc, kind_key, kind)?;
                Ok(map::cluster("f", 0, &r, &[], &[]).cluster.nodes.len())
            }
            "jobs" => {
                let (r, _): (Vec<wire::Job>, _) = wire::list(doc, kind_key, kind)?;
                Ok(map::cluster("f", 0, &[], &r, &[]).cluster.jobs.len())
            }
            _ => {
                let (r, _): (Vec<wire::Partition>, _) = wire::list(doc, kind_key, kind)?;
                Ok(map::cluster("f", 0, &[], &[], &r).cluster.partitions.len())
            }
        }
    }

    proptest! {
        /// Every version's recorded answers with fields replaced by any
        /// JSON at all: never a panic; a record is kept or skipped, never
        /// more come out than went in.
        #[test]
        fn fuzz_slurm_answers_with_hostile_fields(
            which in 0usize..6, pick in 0usize..64, field in 0usize..64,
            field2 in 0usize..64, v in arb_json(), v2 in arb_json(),
        ) {
            let (key, kind, text) = fixtures()[which];
            let mut doc: Value = serde_json::from_str(text).expect("fixture");
            let before = doc.get(key).and_then(Value::as_array).map_or(0, Vec::len);
            mutate(&mut doc, key, pick, field, v);
            mutate(&mut doc, key, pick / 2, field2, v2);
            if let Ok(n) = decode_all(key, kind, doc) {
                prop_assert!(n <= before);
            }
        }

        /// Arbitrary bytes where slurmrestd's JSON should be.
        #[test]
        fn fuzz_slurm_answers_from_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
            if let Ok(v) = serde_json::from_slice::<Value>(&bytes) {
                let _ = decode_all("jobs", "job", v.clone());
                let _ = decode_all("nodes", "node", v.clone());
                let _ = decode_all("partitions", "partition", v);
            }
        }

        /// Any answer shape at all: a list of arbitrary records.
        #[test]
        fn fuzz_slurm_arbitrary_records(recs in prop::collection::vec(arb_json(), 0..6)) {
            for key in ["jobs", "nodes", "partitions"] {
                let doc = serde_json::json!({ key: recs.clone() });
                let kind = &key[..key.len() - 1];
                if let Ok(n) = decode_all(key, kind, doc) {
                    prop_assert!(n <= recs.len());
                }
            }
        }

        #[test]
        fn fuzz_gres_and_hostlists(s in "\\PC{0,40}", t in "[a-z0-9\\[\\],:()=/-]{0,40}") {
            let _ = gres::parse(&s);
            let _ = gres::parse(&t);
            let _ = gres::tres_gpus(&t);
            if let Ok(v) = hostlist::expand(&t) {
                prop_assert!(v.len() as u64 <= crate::limits::get().max_hosts_per_list);
            }
            let _ = hostlist::expand(&s);
        }
    }
}

mod nodes;
