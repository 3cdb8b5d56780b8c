//! The mapping, on the fixture cluster the kube-lab serves
//! (tests/fixtures/kube/cluster; its README says where each shape is from).

use super::*;
use crate::model::{EventKind, JobState, NodeState};

fn fixture() -> Cluster {
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/kube/cluster");
    let objects = kubelab::load_dir(&dir).expect("fixture");
    cluster("lab", &Objects::from_values(objects), 1_796_000_000).cluster
}

fn epoch(t: &str) -> i64 {
    time(&Value::String(t.into())).expect("time")
}

#[test]
fn nodes_take_their_state_from_ready_cordon_and_nvidia_taints() {
    let c = fixture();
    assert_eq!(c.nodes.len(), 8);
    let state = |n: &str| c.node(n).map(|n| (n.state, n.reason.clone()));
    assert_eq!(state("gpu-01"), Some((NodeState::Up, None)));
    assert_eq!(
        state("gpu-03"),
        Some((
            NodeState::Cordoned,
            Some("taint nvidia.com/gpu-xid=79:NoSchedule".into())
        ))
    );
    assert_eq!(state("gpu-05").map(|s| s.0), Some(NodeState::Cordoned));
    let (st, reason) = state("gpu-08").unwrap();
    assert_eq!(st, NodeState::Down);
    assert!(reason.unwrap().contains("Kubelet stopped posting"));
    let n = c.node("gpu-01").unwrap();
    assert_eq!(n.gpu_count, 8);
    assert_eq!(n.gpu_model.as_deref(), Some("NVIDIA-H100-80GB-HBM3"));
    assert_eq!(n.gpus[0].memory_total_mib, Some(81559));
    assert_eq!(n.partitions.to_vec(), vec!["h100".to_string()]);
}

#[test]
fn a_kueue_workload_and_its_pytorchjob_pods_are_one_gang() {
    let c = fixture();
    let j = c.job("team-a/llm-pretrain").expect("job");
    assert_eq!(j.state, JobState::Running);
    assert_eq!(
        (j.node_count, j.gpus_per_node, j.gpus_total),
        (Some(4), Some(8), Some(32))
    );
    assert_eq!(j.nodes, vec!["gpu-01", "gpu-02", "gpu-03", "gpu-04"]);
    assert_eq!(j.account.as_deref(), Some("team-a-cq"));
    assert_eq!(j.qos.as_deref(), Some("team-a"));
    assert_eq!(j.priority, Some(1000));
    assert_eq!(j.partition, "h100");
    assert_eq!(j.start_time, Some(epoch("2026-11-29T20:12:30Z")));
    assert_eq!(j.submit_time, Some(epoch("2026-11-29T20:10:00Z")));
    assert_eq!(j.checkpoint.size_bytes, Some(1_100_000_000_000));
    assert_eq!(j.checkpoint.last, Some(epoch("2026-11-30T02:30:00Z")));
    assert_eq!(j.checkpoint.interval_s, Some(1800));
    assert!(j.gang.as_deref().is_some_and(|g| g.contains("PyTorchJob")));
    assert_eq!(j.time_limit, Some(TimeLimit::Unlimited));
    // Its GPUs on each node.
    let on = |n: &str| {
        c.node(n)
            .unwrap()
            .gpus
            .iter()
            .filter(|g| g.job.as_deref() == Some("team-a/llm-pretrain"))
            .count()
    };
    assert_eq!((on("gpu-01"), on("gpu-03")), (8, 8));
}

#[test]
fn pending_jobs_carry_the_scheduler_that_holds_them_and_its_words() {
    let c = fixture();
    let ft = c.job("team-a/finetune-7b").expect("kueue pending");
    assert_eq!(ft.state, JobState::Pending);
    assert!(
        ft.reason
            .as_deref()
            .unwrap()
            .starts_with("Kueue: couldn't assign flavors")
    );
    assert_eq!(ft.gpus_requested(), Some(8));
    assert!(ft.nodes.is_empty());
    // Its pod set requires one rack (Kueue's topologyRequest), the level
    // the nodes' rack domains carry (from the Topology's rack label).
    assert_eq!(ft.same_domain.as_deref(), Some("rack"));
    assert!(
        c.node("gpu-01")
            .is_some_and(|n| n.domain("rack").is_some_and(|d| d.name == "rack-1"))
    );
    assert_eq!(
        c.job("rl/rl-sweep").and_then(|j| j.same_domain.clone()),
        None
    );
    let rl = c.job("rl/rl-sweep").expect("volcano gang");
    assert_eq!(rl.state, JobState::Pending);
    assert!(
        rl.reason
            .as_deref()
            .unwrap()
            .starts_with("Volcano: 3/4 tasks")
    );
    assert_eq!((rl.node_count, rl.gpus_per_node), (Some(4), Some(6)));
    assert_eq!(rl.account.as_deref(), Some("rl"));
    let ev = c.job("team-b/eval-harness").expect("scheduler pending");
    assert!(
        ev.reason
            .as_deref()
            .unwrap()
            .starts_with("0/8 nodes are available")
    );
    assert_eq!(ev.account.as_deref(), Some("team-b-cq"));
}

#[test]
fn quotas_come_from_cluster_queues_and_volcano_queues() {
    let c = fixture();
    let q = |a: &str| {
        c.quotas
            .iter()
            .find(|q| q.account == a)
            .map(|q| (q.gpu_limit, q.gpus_in_use))
    };
    assert_eq!(q("team-a-cq"), Some((Some(32), 32)));
    assert_eq!(q("team-b-cq"), Some((Some(16), 8)));
    assert_eq!(q("rl"), Some((Some(16), 0)));
}

#[test]
fn a_bare_pod_with_a_mig_slice_is_a_job_that_cannot_be_requeued() {
    let c = fixture();
    let j = c.job("default/notebook-alice").expect("bare pod");
    assert_eq!(j.requeueable, Some(false));
    assert_eq!(j.gpus_total, Some(1));
    assert_eq!(j.nodes, vec!["gpu-07"]);
    assert!(j.gang.is_none());
    // dcgm-exporter's DaemonSet pods ask for no GPU: not jobs.
    assert!(!c.jobs.iter().any(|j| j.name.contains("dcgm")));
}

#[test]
fn the_xid_is_one_incident_from_its_event_and_its_node_condition() {
    let c = fixture();
    let xids: Vec<&Event> = c
        .events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Xid { code: 79 }))
        .collect();
    assert_eq!(xids.len(), 1, "{:?}", c.events);
    assert_eq!(xids[0].node, "gpu-03");
    assert_eq!(
        xids[0]
            .jobs
            .iter()
            .map(|j| j.id.as_str())
            .collect::<Vec<_>>(),
        vec!["team-a/llm-pretrain"]
    );
    assert!(
        c.events
            .iter()
            .any(|e| e.node == "gpu-08" && matches!(e.kind, EventKind::NodeState { .. }))
    );
}

#[test]
fn xid_codes_are_read_from_driver_and_detector_messages() {
    assert_eq!(
        xid_code("NVRM: Xid (PCI:0000:bb:00): 79, pid=3112, GPU has fallen off the bus."),
        Some(79)
    );
    assert_eq!(xid_code("Xid 48 seen on GPU 3"), Some(48));
    assert_eq!(xid_code("XID: 94"), Some(94));
    assert_eq!(xid_code("no xid here"), None);
}

#[test]
fn dcgm_exporters_pod_labels_say_which_job_holds_each_gpu() {
    use crate::dcgm::{self, merge};
    let mut c = fixture();
    // Before: the device plugin does not say which GPU a pod got; the
    // node's pods fill its GPUs in order.
    let holder = |c: &Cluster, i: usize| c.node("gpu-07").unwrap().gpus[i].job.clone();
    assert_eq!(holder(&c, 0).as_deref(), Some("team-b/data-prep"));
    // dcgm-exporter's scrape of gpu-07, as it labels GPUs assigned to pods
    // (pod, namespace, container on those GPUs only).
    let mut text = String::new();
    for i in 0..8 {
        let pod = match i {
            2 => r#",container="main",namespace="default",pod="notebook-alice""#,
            4..=7 => r#",container="main",namespace="team-b",pod="data-prep-1-h2d9x""#,
            _ => "",
        };
        text.push_str(&format!(
            "DCGM_FI_DEV_GPU_TEMP{{gpu=\"{i}\",UUID=\"GPU-{i}\",device=\"nvidia{i}\",modelName=\"NVIDIA H100 80GB HBM3\",Hostname=\"gpu-07\"{pod}}} 40\n"
        ));
    }
    let (samples, errors) = dcgm::textformat::parse(&text);
    assert!(errors.is_empty(), "{errors:?}");
    let readings = dcgm::readings(&samples, "gpu-07", c.time);
    merge::merge(
        &mut c,
        &readings,
        "dcgm",
        &merge::HostMap::default(),
        &merge::HealthWatch::default(),
    );
    let holders: Vec<Option<String>> = (0..8).map(|i| holder(&c, i)).collect();
    let want = |j: &str| Some(j.to_string());
    assert_eq!(
        holders,
        vec![
            None,
            None,
            want("default/notebook-alice"),
            None,
            want("team-b/data-prep"),
            want("team-b/data-prep"),
            want("team-b/data-prep"),
            want("team-b/data-prep")
        ]
    );
    // Another node's guesses stand.
    assert_eq!(
        c.node("gpu-06").unwrap().gpus[0].job.as_deref(),
        Some("team-b/data-prep")
    );
}

/// Values no cluster can hold are skipped with a warning naming the object
/// and the key, never clamped to something else or dropped in silence.
#[test]
fn counts_out_of_bounds_are_skipped_and_named() {
    let node = |name: &str, gpus: &str| {
        serde_json::json!({
            "kind": "Node", "metadata": {"name": name},
            "status": {"allocatable": {"nvidia.com/gpu": gpus},
                       "conditions": [{"type": "Ready", "status": "True"}]}
        })
    };
    let pod = |name: &str, gpus: &str| {
        serde_json::json!({
            "kind": "Pod", "metadata": {"namespace": "ml", "name": name},
            "spec": {"nodeName": "ok-node", "containers": [{"name": "main",
                "resources": {"limits": {"nvidia.com/gpu": gpus}}}]},
            "status": {"phase": "Running"}
        })
    };
    let cq = |name: &str, quota: &str| {
        serde_json::json!({
            "kind": "ClusterQueue", "metadata": {"name": name},
            "spec": {"resourceGroups": [{"flavors": [{"name": "default",
                "resources": [{"name": "nvidia.com/gpu", "nominalQuota": quota}]}]}]}
        })
    };
    let objects = vec![
        node("ok-node", "8"),
        node("huge-node", "10000"),
        node("negative-node", "-8"),
        pod("fine", "2"),
        pod("greedy", "99999999999"),
        cq("sane", "16"),
        cq("astronomic", "1e30"),
        cq("negative", "-5"),
    ];
    let m = cluster("lab", &Objects::from_values(objects), 1_796_000_000);
    let names: Vec<&str> = m.cluster.nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["ok-node"]);
    let jobs: Vec<&str> = m.cluster.jobs.iter().map(|j| j.id.as_str()).collect();
    assert_eq!(jobs, ["ml/fine"]);
    let quota = |a: &str| {
        m.cluster
            .quotas
            .iter()
            .find(|q| q.account == a)
            .map(|q| q.gpu_limit)
    };
    assert_eq!(quota("sane"), Some(Some(16)));
    assert_eq!(quota("astronomic"), Some(None), "unknown, not 0");
    assert_eq!(quota("negative"), Some(None), "unknown, not 0");
    let said = |who: &str, key: &str| {
        assert!(
            m.warnings
                .iter()
                .any(|w| w.contains(who) && w.contains(key)),
            "{who} / {key} in {:#?}",
            m.warnings
        );
    };
    said("node huge-node", "limits.max_gpus_per_node");
    said("node negative-node", "nvidia.com/gpu");
    said("pod ml/greedy", "limits.max_gpus_per_node");
    said("ClusterQueue astronomic", "nominalQuota");
    said("ClusterQueue negative", "nominalQuota");
    assert_eq!(m.warnings.len(), 5, "{:#?}", m.warnings);
}

mod fuzz {
    //! Short in `cargo test`; long with scripts/fuzz.sh (PROPTEST_CASES).
    use super::super::{Objects, cluster};
    use crate::fuzzing::{arb_json, replace_deep};
    use proptest::prelude::*;
    use serde_json::Value;

    fn objects() -> Vec<Value> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/kube/cluster");
        kubelab::load_dir(&dir).expect("fixture")
    }

    proptest! {
        /// The fixture cluster with values anywhere in two of its objects
        /// replaced by any JSON (hostile numbers and strings included):
        /// never a panic, never more nodes than Node objects.
        #[test]
        fn fuzz_kube_objects_with_hostile_fields(
            pick in 0usize..256, path in prop::collection::vec(0usize..64, 1..6),
            pick2 in 0usize..256, path2 in prop::collection::vec(0usize..64, 1..6),
            v in arb_json(), v2 in arb_json(),
        ) {
            let mut all = objects();
            let n = all.len();
            replace_deep(&mut all[pick % n], &path, v);
            replace_deep(&mut all[pick2 % n], &path2, v2);
            let node_objects = all.iter().filter(|o| o["kind"] == "Node").count();
            let m = cluster("lab", &Objects::from_values(all), 1_796_000_000);
            prop_assert!(m.cluster.nodes.len() <= node_objects);
        }

        /// Arbitrary objects of every kind the source reads.
        #[test]
        fn fuzz_kube_arbitrary_objects(
            objs in prop::collection::vec((0usize..11, arb_json()), 0..8),
        ) {
            let kinds = ["Node", "Pod", "Event", "PodDisruptionBudget", "Workload", "ClusterQueue",
                "LocalQueue", "ResourceFlavor", "WorkloadPriorityClass", "PodGroup", "Queue"];
            let values = objs.into_iter().map(|(k, mut v)| {
                if !v.is_object() {
                    v = serde_json::json!({"spec": v});
                }
                v["kind"] = Value::String(kinds[k].to_string());
                v
            });
            let _ = cluster("lab", &Objects::from_values(values), 1_796_000_000);
        }
    }
}

/// The fixture with `node` reporting a GPU fault the way the GPU operator
/// and node-problem-detector do: a `GpuXidError` condition naming GPU 5
/// and Xid 79 (set three days ago, older than any event window), the
/// `nvidia.com/gpu-xid=79:NoSchedule` taint, and a cordon by someone.
fn with_gpu_fault(node: &str, message: &str) -> Cluster {
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/kube/cluster");
    let mut objects = kubelab::load_dir(&dir).expect("fixture");
    let now = 1_796_000_000;
    let then = chrono::DateTime::from_timestamp(now - 3 * 86_400, 0)
        .expect("a time")
        .format("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    let n = objects
        .iter_mut()
        .find(|o| o["kind"] == "Node" && o["metadata"]["name"] == node)
        .expect("the node");
    n["spec"]["unschedulable"] = Value::Bool(true);
    n["spec"]["taints"] = serde_json::json!([
        {"key": "nvidia.com/gpu-xid", "value": "79", "effect": "NoSchedule", "timeAdded": then},
        {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule", "timeAdded": then},
    ]);
    n["status"]["conditions"]
        .as_array_mut()
        .expect("conditions")
        .push(serde_json::json!({
            "type": "GpuXidError", "status": "True", "reason": "XidCritical",
            "message": message, "lastTransitionTime": then,
        }));
    cluster("lab", &Objects::from_values(objects), now).cluster
}

#[test]
fn a_gpu_fault_condition_or_taint_keeps_the_node_critical_however_old() {
    use crate::engine::analysis::Base;
    use crate::engine::incidents::Stage;
    use crate::engine::{SiteParams, xid::XidCatalog};
    for message in [
        "GPU 5: Xid 79 (GPU has fallen off the bus)",
        "XID error 79 on gpu=5",
        "gpu index 5 reported xid=79, pid=3112",
    ] {
        let c = with_gpu_fault("gpu-02", message);
        let n = c.node("gpu-02").expect("node");
        assert_eq!(n.fault_reports.len(), 2, "{message}: {:?}", n.fault_reports);
        assert!(
            n.fault_reports
                .iter()
                .all(|r| r.gpu == Some(5) && r.xid == Some(79))
        );
        assert_eq!(
            n.gpus[5].last_xid.as_ref().map(|x| x.code),
            Some(79),
            "{message}"
        );
        let b = Base::compute(&c, None, &SiteParams::default(), &XidCatalog::default());
        assert!(b.unusable.contains("gpu-02"), "{message}: critical");
        let v = b.gpu_verdict("gpu-02", 5).expect("GPU 5's verdict");
        assert!(v.verdict.action.needs_drain(), "{message}: {:?}", v.verdict);
        assert!(
            v.verdict.evidence[0].contains("reported by condition GpuXidError"),
            "{:?}",
            v.verdict.evidence
        );
        // Cordoned but its gang still runs: open, not "remedied".
        let i = b.node_incident("gpu-02").expect("an incident on gpu-02");
        assert_eq!((i.gpu, i.xid), (Some(5), Some(79)), "{i:?}");
        assert_eq!(i.stage, Stage::Open, "{}", i.status);
    }
    // The fixture's gpu-03: the message names only a PCI address.
    let c = fixture();
    let b = Base::compute(&c, None, &SiteParams::default(), &XidCatalog::default());
    assert!(b.unusable.contains("gpu-03"));
}

#[test]
fn gpu_indexes_are_read_from_fault_messages_but_not_from_uuids_or_words() {
    assert_eq!(gpu_named("GPU 5: Xid 79"), Some(5));
    assert_eq!(gpu_named("on gpu=3"), Some(3));
    assert_eq!(gpu_named("GPU index 7 fell off"), Some(7));
    assert_eq!(gpu_named("GPU5 xid 48"), Some(5));
    assert_eq!(gpu_named("GPU has fallen off the bus"), None);
    assert_eq!(gpu_named("GPU-1a2b3c4d-0000 Xid 79"), None);
    assert_eq!(xid_code("XID error 79 on gpu=5"), Some(79));
    assert_eq!(xid_code("xid=79"), Some(79));
    assert_eq!(xid_code("Xid at 10.0.0.1"), None);
}

#[test]
fn gke_s_gpu_present_taint_is_not_a_fault() {
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/kube/cluster");
    let mut objects = kubelab::load_dir(&dir).expect("fixture");
    let n = objects
        .iter_mut()
        .find(|o| o["kind"] == "Node" && o["metadata"]["name"] == "gpu-01")
        .expect("the node");
    n["spec"]["taints"] =
        serde_json::json!([{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]);
    let c = cluster("lab", &Objects::from_values(objects), 1_796_000_000).cluster;
    let n = c.node("gpu-01").expect("node");
    assert_eq!(n.state, NodeState::Up);
    assert!(n.fault_reports.is_empty());
}

/// A pod waiting for kube-scheduler is not behind a Kueue workload that
/// waits for its quota (it has no pods yet), even one of higher priority.
#[test]
fn a_pod_at_kube_scheduler_is_not_queued_behind_a_workload_waiting_for_kueue() {
    use crate::engine::analysis::Base;
    use crate::engine::why::{Cause, why};
    use crate::engine::{SiteParams, xid::XidCatalog};
    let mut c = fixture();
    let k = c
        .jobs
        .iter()
        .position(|j| j.id == "team-a/finetune-7b")
        .expect("kueue pending");
    std::sync::Arc::make_mut(&mut c.jobs[k]).priority = Some(1_000_000).into();
    let b = Base::compute(&c, None, &SiteParams::default(), &XidCatalog::default());
    let i = c
        .jobs
        .iter()
        .position(|j| j.id == "team-b/eval-harness")
        .expect("pod pending");
    assert_eq!(c.jobs[i].partition, c.jobs[k].partition);
    let w = why(&c, i, &b).expect("why");
    assert!(
        !w.causes
            .iter()
            .any(|r| matches!(r.cause, Cause::Priority { .. })),
        "{:?}",
        w.causes
    );
    assert_eq!(crate::engine::plan::queue_of(&c.jobs[k]), "kueue");
    assert_eq!(crate::engine::plan::queue_of(&c.jobs[i]), "scheduler");
}

/// Kueue's `QuotaReserved=False` reasons (issue 38) reach `why` in its own
/// word: a topology it cannot place, a hold; a hold (and a deactivation)
/// is blocking — no free capacity starts it.
#[test]
fn kueue_quota_reserved_reasons_are_kept_in_its_words() {
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/kube/cluster");
    let with_reason = |reason: &str| {
        let mut objects = kubelab::load_dir(&dir).expect("fixture");
        for o in &mut objects {
            if o["kind"] == "Workload"
                && let Some(cs) = o["status"]["conditions"].as_array_mut()
            {
                for c in cs {
                    if c["type"] == "QuotaReserved" && c["status"] == "False" {
                        c["reason"] = Value::from(reason);
                        c["message"] = Value::from("the admin said so");
                    }
                }
            }
        }
        cluster("lab", &Objects::from_values(objects), 1_796_000_000).cluster
    };
    let c = with_reason("TopologyPlacementFailed");
    let r = c
        .job("team-a/finetune-7b")
        .and_then(|j| j.reason.clone())
        .expect("reason");
    assert_eq!(r, "Kueue: TopologyPlacementFailed: the admin said so");
    let words = crate::engine::schedmsg::explain(&r).expect("explained");
    assert!(
        words.contains("required topology cannot be placed"),
        "{words}"
    );
    assert!(!crate::engine::plan::is_blocking_reason(&r));
    let c = with_reason("OnHold");
    let r = c
        .job("team-a/finetune-7b")
        .and_then(|j| j.reason.clone())
        .expect("reason");
    assert!(crate::engine::plan::is_blocking_reason(&r), "{r}");
    assert!(crate::engine::plan::is_blocking_reason(
        "Kueue: #2 in ClusterQueue team-a-cq: Deactivated: by the owner"
    ));
}
