//! The guard on the simulated cluster: refusals send nothing, confirmed
//! actions are executed, verified and audited, interrupted ones are found.

use super::Action;
use super::audit::{AuditLog, Record};
use super::executor::Executor;
use super::guard::{self, Who};
use super::policy::{Policy, Refusal};
use crate::engine::SiteParams;
use crate::model::{JobState, NodeState};
use crate::sources::sim::{Sim, SimConfig};
use std::sync::Mutex;
use std::time::Duration;

struct Bench {
    sim: Executor,
    log: AuditLog,
    _dir: tempfile::TempDir,
}

fn bench() -> Bench {
    let dir = tempfile::tempdir().expect("tempdir");
    let sim = Sim::new(SimConfig::default()).expect("sim");
    Bench {
        sim: Executor::LocalSim(Box::new(Mutex::new(sim))),
        log: AuditLog::new(dir.path().join("audit.jsonl")),
        _dir: dir,
    }
}

fn snapshot(e: &Executor) -> crate::model::Cluster {
    match e {
        Executor::LocalSim(s) => s.lock().expect("sim").snapshot(),
        _ => unreachable!("tests use a local sim"),
    }
}

fn who() -> Who {
    Who {
        scheduler_user: Some("oncall".into()),
        cluster: "sim-16".into(),
        source: "sim".into(),
    }
}

fn drain(node: &str) -> Action {
    Action::Drain {
        node: node.into(),
        reason: "xid79 GPU3".into(),
        requeue: true,
    }
}

fn run(
    b: &Bench,
    a: &Action,
    typed: &str,
    policy: &Policy,
    age: Duration,
) -> Result<guard::Done, String> {
    let c = snapshot(&b.sim);
    let base = crate::engine::analysis::Base::compute(
        &c,
        None,
        &SiteParams::default(),
        &crate::engine::xid::XidCatalog::default(),
    );
    let p = guard::preview(
        a,
        &c,
        &base,
        age,
        policy,
        0,
        false,
        &b.sim,
        &SiteParams::default(),
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("rt");
    rt.block_on(guard::run(
        &p,
        typed,
        &b.sim,
        &b.log,
        &who(),
        Duration::from_secs(5),
    ))
}

#[test]
fn drain_and_requeue_takes_the_whole_gang_verified_and_audited() {
    let b = bench();
    let done = run(
        &b,
        &drain("h100-03"),
        "h100-03",
        &Policy::default(),
        Duration::ZERO,
    )
    .expect("done");
    assert!(done.outcome.ok && done.outcome.verified, "{done:?}");
    assert_eq!(done.undo.as_deref(), Some("resume h100-03"));
    assert!(done.message.contains("requeued: 4700"), "{}", done.message);
    let c = snapshot(&b.sim);
    let n = c.node("h100-03").expect("node");
    assert_eq!(
        (n.state, n.reason.as_deref()),
        (NodeState::Drain, Some("xid79 GPU3"))
    );
    let gang = c.job("4700").expect("gang");
    assert_eq!(
        gang.state,
        JobState::Pending,
        "every rank requeued: the gang is one job, pending again"
    );
    assert!(
        c.nodes
            .iter()
            .all(|n| n.gpus.iter().all(|g| g.job.as_deref() != Some("4700"))),
        "no rank holds a GPU"
    );
    let recs = b.log.read();
    assert_eq!(
        recs.iter().map(|r| r.phase.as_str()).collect::<Vec<_>>(),
        ["intent", "outcome"]
    );
    assert_eq!(recs[0].id, recs[1].id);
    assert!(
        recs[0].preview.contains("1 job(s) die"),
        "{}",
        recs[0].preview
    );
    assert_eq!(recs[1].outcome.as_ref().map(|o| o.verified), Some(true));
    assert!(b.log.unfinished().is_empty());
}

#[test]
fn a_wrong_confirmation_sends_nothing() {
    let b = bench();
    let err = run(
        &b,
        &drain("h100-03"),
        "h100-3",
        &Policy::default(),
        Duration::ZERO,
    )
    .expect_err("refused");
    assert!(err.contains("nothing sent"), "{err}");
    assert_eq!(
        snapshot(&b.sim).node("h100-03").map(|n| n.state),
        Some(NodeState::Up)
    );
    assert!(b.log.read().is_empty(), "no intent either");
}

#[test]
fn read_only_and_stale_data_send_nothing() {
    let b = bench();
    let ro = Policy {
        read_only: true,
        ..Policy::default()
    };
    let err = run(&b, &drain("h100-03"), "h100-03", &ro, Duration::ZERO).expect_err("read-only");
    assert!(err.contains("read-only"), "{err}");
    let err = run(
        &b,
        &drain("h100-03"),
        "h100-03",
        &Policy::default(),
        Duration::from_secs(120),
    )
    .expect_err("stale");
    assert!(err.contains("too old"), "{err}");
    assert_eq!(
        snapshot(&b.sim).node("h100-03").map(|n| n.state),
        Some(NodeState::Up)
    );
    assert!(b.log.read().is_empty());
}

#[test]
fn the_circuit_breaker_trips_on_a_third_of_a_partition() {
    let b = bench();
    let p = Policy::default();
    // 2 of 8 h100 nodes (25%) may go; the third (38%) may not.
    for n in ["h100-07", "h100-08"] {
        run(
            &b,
            &Action::Cordon {
                node: n.into(),
                reason: "t".into(),
            },
            "y",
            &p,
            Duration::ZERO,
        )
        .expect("cordon");
    }
    let err = run(
        &b,
        &Action::Cordon {
            node: "h100-05".into(),
            reason: "t".into(),
        },
        "y",
        &p,
        Duration::ZERO,
    )
    .expect_err("breaker");
    assert!(
        err.contains("circuit breaker") && err.contains("3 of 8"),
        "{err}"
    );
    // And by count in the window, from the audit log.
    let c = snapshot(&b.sim);
    let refusal = p.check(
        &Action::Cordon {
            node: "a100-01".into(),
            reason: "t".into(),
        },
        &c,
        Duration::ZERO,
        3,
        false,
    );
    assert!(matches!(refusal, Err(Refusal::Breaker(_))), "{refusal:?}");
    assert!(
        p.check(
            &Action::Cordon {
                node: "a100-01".into(),
                reason: "t".into()
            },
            &c,
            Duration::ZERO,
            3,
            true
        )
        .is_ok(),
        "force overrides"
    );
    assert_eq!(b.log.nodes_taken_out_since(0), 2);
}

#[test]
fn draining_a_drained_node_is_a_no_op_not_an_error() {
    let b = bench();
    let a = Action::Drain {
        node: "a100-08".into(),
        reason: "PSU replaced, burn-in pending".into(),
        requeue: true,
    };
    let done = run(&b, &a, "a100-08", &Policy::default(), Duration::ZERO).expect("no-op");
    assert!(done.outcome.no_op && done.outcome.ok, "{done:?}");
}

#[test]
fn an_interrupted_action_is_found_at_the_next_start() {
    let b = bench();
    let intent = Record {
        id: "x-1".into(),
        phase: "intent".into(),
        time: 1,
        operator: "oncall".into(),
        scheduler_user: None,
        host: "h".into(),
        cluster: "c".into(),
        source: "slurm".into(),
        action: "drain".into(),
        target: "gpu07".into(),
        reason: Some("xid79".into()),
        preview: "p".into(),
        outcome: None,
    };
    b.log.write(&intent).expect("write");
    let left = b.log.unfinished();
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].target, "gpu07");
    let warnings = super::cli::warn_unfinished(&b.log);
    assert!(
        warnings[0].contains("interrupted") && warnings[0].contains("gpu07"),
        "{warnings:?}"
    );
}

#[test]
fn reversible_actions_take_y_and_report_their_undo() {
    let b = bench();
    let c = snapshot(&b.sim);
    let top = super::top_priority(&c, "4723").expect("top");
    assert_eq!(top, 8001, "one above the a100 queue's best");
    let a = Action::Priority {
        job: "4723".into(),
        value: top,
    };
    assert!(a.confirm_token().is_none());
    let done = run(&b, &a, "y", &Policy::default(), Duration::ZERO).expect("priority");
    assert!(done.outcome.verified, "{done:?}");
    assert_eq!(done.undo.as_deref(), Some("priority 4723 6000"));
}
