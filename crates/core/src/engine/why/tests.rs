use super::*;
use crate::engine::SiteParams;
use crate::engine::analysis::Base;
use crate::engine::fixture::*;
use crate::engine::xid::XidCatalog;
use crate::sim::{Sim, SimConfig};
use proptest::prelude::*;

fn why_of(c: &Cluster, job: usize) -> Why {
    let base = Base::compute(c, None, &SiteParams::default(), &XidCatalog::default());
    why(c, job, &base).expect("why")
}

#[test]
fn the_sim_names_the_fragmentation() {
    let c = Sim::new(SimConfig::default()).expect("sim").snapshot();
    let j = c
        .jobs
        .iter()
        .position(|j| j.name == "asr-conformer-8g")
        .expect("job");
    let w = why_of(&c, j);
    let frag = w
        .causes
        .iter()
        .find(|r| matches!(r.cause, Cause::Fragmentation { .. }))
        .expect("fragmentation");
    assert_eq!(
        frag.message,
        "16 GPUs free, but at most 3 on any node; needs 8 on one node"
    );
    assert!(w.causes.iter().any(|r| matches!(&r.cause, Cause::DrainedCapacity { nodes, would_fit: true, .. } if nodes == &["a100-08"])));
    assert!(
        w.suggestions
            .iter()
            .any(|s| s == "resuming a100-08 would let it start"),
        "{:?}",
        w.suggestions
    );
    assert!(
        w.suggestions
            .iter()
            .any(|s| s.starts_with("as ") && s.ends_with("could start now")),
        "{:?}",
        w.suggestions
    );
    assert!(w.eta_s.is_some_and(|s| s > 0));
    assert!(
        matches!(&w.causes[0].cause, Cause::SchedulerReason { reason, .. } if reason == "Resources")
    );
}

#[test]
fn the_sim_names_the_quota() {
    let c = Sim::new(SimConfig::default()).expect("sim").snapshot();
    let j = c
        .jobs
        .iter()
        .position(|j| j.name == "clip-distill")
        .expect("job");
    let w = why_of(&c, j);
    let q = w
        .causes
        .iter()
        .find(|r| matches!(r.cause, Cause::Quota { .. }))
        .expect("quota");
    assert_eq!(
        q.message,
        "team vision uses 16 of its 16 GPUs: 8 more needed for this job's 8"
    );
    assert!(w.causes[0].message.contains("AssocGrpGRES"));
}

/// 4703 waits for its team's GPU quota: the shortfall is said as the
/// scheduler says it, no reshaping is offered (the quota refuses the same
/// total in any shape), and the two jobs whose limits free the quota at
/// the same moment are both counted.
#[test]
fn a_quota_wait_states_the_shortfall_and_counts_every_job_that_frees_it() {
    let c = Sim::new(SimConfig::default()).expect("sim").snapshot();
    let j = c.jobs.iter().position(|j| j.id == "4703").expect("4703");
    let w = why_of(&c, j);
    let q = w
        .causes
        .iter()
        .find(|r| matches!(r.cause, Cause::Quota { .. }))
        .expect("quota");
    assert!(
        q.message.ends_with("4 more needed for this job's 4"),
        "{}",
        q.message
    );
    assert!(
        !w.suggestions.iter().any(|s| s.contains("could start now")),
        "{:?}",
        w.suggestions
    );
    assert!(
        w.suggestions
            .iter()
            .any(|s| s.contains("frees 16 GPUs") && s.contains("4701, 4702")),
        "{:?}",
        w.suggestions
    );
}

#[test]
fn held_jobs_say_so() {
    let c = Sim::new(SimConfig::default()).expect("sim").snapshot();
    let j = c
        .jobs
        .iter()
        .position(|j| j.reason.as_deref() == Some("JobHeldUser"))
        .expect("held");
    let w = why_of(&c, j);
    assert!(
        w.causes
            .iter()
            .any(|r| matches!(r.cause, Cause::Blocked { .. }))
    );
    assert_eq!(w.eta_s, None);
}

#[test]
fn reasons_read_plainly() {
    assert!(explain_reason("QOSMaxGRESPerUser").contains("per-job limit of its QOS"));
    assert!(explain_reason("AssocGrpGRES").contains("team"));
    assert!(explain_reason("SomethingNew").contains("SomethingNew"));
}

proptest! {
    #[test]
    fn a_job_that_fits_now_has_no_fragmentation_cause(free in prop::collection::vec(0u32..9, 1..6), g in 1u32..9, k in 1u32..3) {
        let mut c = cluster();
        for (i, f) in free.iter().enumerate() {
            let name = format!("n{i}");
            add_node(&mut c, &name, "p", 8);
            if *f < 8 {
                run(&mut c, &format!("r{i}"), &[&name], 8 - f, 0, 3600);
            }
        }
        let j = pend(&mut c, "q", "p", k, g, 1);
        let w = why_of(&c, j);
        let fits = free.iter().filter(|&&f| f >= g).count() as u32 >= k;
        let frag = w.causes.iter().any(|r| matches!(r.cause, Cause::Fragmentation { .. }));
        if fits {
            prop_assert!(!frag);
            prop_assert_eq!(w.eta_s, Some(0));
        }
        prop_assert!(w.eta_s.is_none_or(|s| s >= 0));
    }
}

/// A requeued job waits for its begin time (Slurm's `BeginTime`, with the
/// time in `eligible_time`): it gets an estimate from then, as `squeue
/// --start` gives one, not "none while BeginTime".
#[test]
fn a_requeued_job_is_planned_from_its_begin_time() {
    let mut c = cluster();
    add_node(&mut c, "n1", "p", 8);
    add_node(&mut c, "n2", "p", 8);
    run(&mut c, "1", &["n1"], 8, 600, 7200);
    let j = pend(&mut c, "2", "p", 1, 8, 100);
    let job = std::sync::Arc::make_mut(&mut c.jobs[j]);
    job.reason = Some("BeginTime".into());
    job.eligible_time = Some(NOW + 120).into();
    job.restarts = Some(1);
    let w = why_of(&c, j);
    match &w.estimate {
        Some(crate::engine::plan::Estimate::Starts { start, nodes }) => {
            assert_eq!(*start, NOW + 120);
            assert_eq!(nodes, &["n2"]);
        }
        other => panic!("{other:?}"),
    }
    assert!(
        w.causes.iter().any(|r| r
            .message
            .contains("requeued: the scheduler holds it back until")),
        "{:?}",
        w.causes
    );
    assert!(
        !w.causes
            .iter()
            .any(|r| matches!(r.cause, Cause::Blocked { .. }))
    );
    // The estimate's sentence is its own field, never among the suggestions.
    assert!(
        w.estimate_note
            .as_deref()
            .is_some_and(|n| n.contains("at its begin time")),
        "{:?}",
        w.estimate_note
    );
    assert!(!w.suggestions.iter().any(|s| s.contains("estimated start")));
    // Without a known begin time it stays blocked.
    std::sync::Arc::make_mut(&mut c.jobs[j]).eligible_time = crate::model::When::UNKNOWN;
    assert!(matches!(
        why_of(&c, j).estimate,
        Some(crate::engine::plan::Estimate::Blocked { .. })
    ));
}

/// A job bound to one leaf switch (Slurm `--switches=1`) hears each
/// leaf's free GPUs when none has room for it; one that fits under a leaf
/// hears nothing of it.
#[test]
fn a_job_bound_to_one_leaf_hears_each_leafs_free_gpus() {
    let mut c = Sim::new(SimConfig::default()).expect("sim").snapshot();
    let mut job = (*c.jobs[0]).clone();
    job.id = "9001".into();
    job.name = "moe-2x8".into();
    job.partition = "a100".into();
    job.state = crate::model::JobState::Pending;
    job.nodes = Vec::new();
    job.reason = Some("Resources".into());
    job.gpus_per_node = Some(8);
    job.node_count = Some(2);
    job.gpus_total = Some(16);
    job.same_domain = Some("leaf".into());
    c.jobs.push(std::sync::Arc::new(job.clone()));
    let w = why_of(&c, c.jobs.len() - 1);
    let t = w
        .causes
        .iter()
        .find(|r| matches!(r.cause, Cause::Topology { .. }))
        .expect("the topology cause");
    // The A100s under ib-leaf-3 (a100-01..04) have 3+3+3+2 free, those
    // under ib-leaf-4 2+2+1 (a100-08 drained).
    assert_eq!(
        t.message,
        "needs 16 under one leaf (2 × 8): ib-leaf-3 has 11 free, ib-leaf-4 5"
    );
    // Not bound: no such cause.
    job.same_domain = None;
    let last = c.jobs.len() - 1;
    c.jobs[last] = std::sync::Arc::new(job);
    let w = why_of(&c, last);
    assert!(
        !w.causes
            .iter()
            .any(|r| matches!(r.cause, Cause::Topology { .. }))
    );
}
