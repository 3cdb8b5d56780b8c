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
        &b.log,
        false,
        Ok(&b.sim),
        &SiteParams::default(),
    );
    execute(b, &p, typed, policy, age)
}

/// Runs a preview through the guard, checked against the sim as it is now.
fn execute(
    b: &Bench,
    p: &guard::Preview,
    typed: &str,
    policy: &Policy,
    age: Duration,
) -> Result<guard::Done, String> {
    let c = snapshot(&b.sim);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("rt");
    let now = guard::Check {
        cluster: &c,
        data_age: age,
        policy,
    };
    rt.block_on(guard::run(
        p,
        typed,
        &b.sim,
        &b.log,
        &who(),
        Duration::from_secs(5),
        now,
    ))
}

fn preview(b: &Bench, a: &Action, policy: &Policy, age: Duration) -> guard::Preview {
    let c = snapshot(&b.sim);
    let base = crate::engine::analysis::Base::compute(
        &c,
        None,
        &SiteParams::default(),
        &crate::engine::xid::XidCatalog::default(),
    );
    guard::preview(
        a,
        &c,
        &base,
        age,
        policy,
        &b.log,
        false,
        Ok(&b.sim),
        &SiteParams::default(),
    )
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
    assert_eq!(
        done.undo,
        Some(Action::Resume {
            node: "h100-03".into()
        })
    );
    assert!(
        done.message.contains("drain h100-03 ✓; requeue 4700 ✓"),
        "{}",
        done.message
    );
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
    assert_eq!(
        recs[0].incident.as_deref(),
        Some("e2 XID 79 on h100-03 GPU 3 (open)"),
        "the audit follows the incident it answers"
    );
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
    assert_eq!(b.log.nodes_taken_out_since(0), Ok(2));
}

#[test]
fn draining_a_drained_node_is_refused_as_nothing_to_do() {
    let b = bench();
    let a = Action::Drain {
        node: "a100-08".into(),
        reason: "PSU replaced, burn-in pending".into(),
        requeue: true,
    };
    let pv = preview(&b, &a, &Policy::default(), Duration::ZERO);
    assert!(
        pv.no_op && pv.undo.is_none() && pv.token.is_none(),
        "{pv:?}"
    );
    assert!(pv.calls.is_empty());
    let e = run(&b, &a, "a100-08", &Policy::default(), Duration::ZERO).expect_err("refused");
    assert!(e.contains("nothing to do: a100-08 is drain already"), "{e}");
    assert!(b.log.read().is_empty(), "nothing sent, nothing audited");
}

/// `R` on a pending job, `E` on a job that is not held, `T` on a job at
/// the top, `U` on a node in service: refused at preview with the reason,
/// nothing sent, nothing audited, no undo (they used to ask for the typed
/// id, send the call and audit a failure, or offer an undo that would hold
/// a running job).
#[test]
fn actions_that_change_nothing_are_refused_at_preview() {
    let b = bench();
    let c = snapshot(&b.sim);
    let pending = c
        .jobs
        .iter()
        .find(|j| j.state.is_pending())
        .expect("a pending job")
        .id
        .clone();
    let running = c
        .jobs
        .iter()
        .find(|j| j.state == crate::model::JobState::Running)
        .expect("a running job");
    let top = Action::Priority {
        job: running.id.clone(),
        value: running.priority.expect("a priority"),
    };
    for (a, why) in [
        (
            Action::Requeue {
                job: pending.clone(),
            },
            format!("job {pending} is pending, not running: nothing to requeue"),
        ),
        (
            Action::Release {
                job: running.id.clone(),
            },
            format!(
                "job {} is not held (running): nothing to release",
                running.id
            ),
        ),
        (top, "already".to_string()),
        (
            Action::Resume {
                node: "h100-01".into(),
            },
            "h100-01 is in service already".to_string(),
        ),
    ] {
        let pv = preview(&b, &a, &Policy::default(), Duration::ZERO);
        let refusal = pv
            .refusal
            .as_ref()
            .map(ToString::to_string)
            .unwrap_or_default();
        assert!(
            refusal.starts_with("nothing to do:") && refusal.contains(&why),
            "{a:?}: {refusal}"
        );
        assert!(
            pv.undo.is_none() && pv.token.is_none() && pv.calls.is_empty(),
            "{pv:?}"
        );
        let e = execute(&b, &pv, "y", &Policy::default(), Duration::ZERO).expect_err("refused");
        assert!(e.contains("nothing sent"), "{e}");
    }
    assert!(b.log.read().is_empty(), "nothing audited");
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
        incident: None,
        warnings: Vec::new(),
        outcome: None,
    };
    b.log.write(&intent).expect("write");
    let left = b.log.unfinished();
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].target, "gpu07");
    let warnings = super::audit::warn_unfinished(&b.log);
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
    assert!(
        preview(&b, &a, &Policy::default(), Duration::ZERO)
            .token
            .is_none()
    );
    let done = run(&b, &a, "y", &Policy::default(), Duration::ZERO).expect("priority");
    assert!(done.outcome.verified, "{done:?}");
    assert_eq!(
        done.undo,
        Some(Action::Priority {
            job: "4723".into(),
            value: 6000
        })
    );
}

#[test]
fn the_first_node_out_of_a_small_partition_is_not_refused_by_the_breaker() {
    use crate::engine::fixture::{add_node, cluster};
    let mut c = cluster();
    add_node(&mut c, "a100n1", "a100", 4);
    add_node(&mut c, "a100n2", "a100", 4);
    let p = Policy::default();
    let drain = |n: &str| Action::Drain {
        node: n.into(),
        reason: "xid79".into(),
        requeue: true,
    };
    // 1 of 2 is 50% > 25%, but it is the first: the commonest 3am case.
    assert_eq!(
        p.check(&drain("a100n1"), &c, Duration::ZERO, 0, false),
        Ok(())
    );
    std::sync::Arc::make_mut(&mut c.nodes[0]).state = NodeState::Drain;
    // The second would empty the partition: that is what the breaker is for.
    let r = p.check(&drain("a100n2"), &c, Duration::ZERO, 0, false);
    assert!(
        matches!(&r, Err(Refusal::Breaker(s)) if s.contains("2 of 2")),
        "{r:?}"
    );
}

#[test]
fn the_breaker_is_shown_before_typing_and_overridden_only_by_typing_force() {
    let b = bench();
    let p = Policy::default();
    for n in ["h100-07", "h100-08"] {
        let a = Action::Cordon {
            node: n.into(),
            reason: "t".into(),
        };
        run(&b, &a, "y", &p, Duration::ZERO).expect("cordon");
    }
    let third = Action::Cordon {
        node: "h100-05".into(),
        reason: "t".into(),
    };
    let pv = preview(&b, &third, &p, Duration::ZERO);
    assert!(matches!(pv.refusal, Some(Refusal::Breaker(_))));
    assert_eq!(pv.force_token().as_deref(), Some("force h100-05"));
    assert!(pv.confirm_prompt().contains("force h100-05"));
    assert!(execute(&b, &pv, "y", &p, Duration::ZERO).is_err());
    assert!(execute(&b, &pv, "h100-05", &p, Duration::ZERO).is_err());
    assert_eq!(
        snapshot(&b.sim).node("h100-05").map(|n| n.state),
        Some(NodeState::Up),
        "nothing sent"
    );
    let done = execute(&b, &pv, "force h100-05", &p, Duration::ZERO).expect("forced");
    assert!(done.outcome.ok, "{done:?}");
    assert_eq!(b.log.nodes_taken_out_since(0), Ok(3));
}

#[test]
fn data_age_is_checked_again_at_execute_time() {
    let b = bench();
    let p = Policy::default();
    let a = Action::Cordon {
        node: "h100-07".into(),
        reason: "t".into(),
    };
    let pv = preview(&b, &a, &p, Duration::from_secs(1));
    assert!(pv.refusal.is_none(), "fresh when the preview opened");
    // The operator reads for a minute while the scheduler stops answering.
    let err = execute(&b, &pv, "y", &p, Duration::from_secs(61)).expect_err("stale now");
    assert!(
        err.contains("refused at execute time") && err.contains("61s old"),
        "{err}"
    );
    assert_eq!(
        snapshot(&b.sim).node("h100-07").map(|n| n.state),
        Some(NodeState::Up)
    );
    assert!(b.log.read().is_empty(), "no intent for a refused action");
}

/// h100-06 runs a job submitted with --no-requeue: the preview, the blast
/// radius and the outcome tell one story (it keeps running, the node stays
/// draining); no requeue the scheduler would refuse is sent.
#[test]
fn a_drain_with_a_no_requeue_job_tells_one_story() {
    let b = bench();
    let c = snapshot(&b.sim);
    let sweep = c
        .jobs
        .iter()
        .find(|j| j.name == "detr-sweep")
        .expect("sweep")
        .clone();
    assert_eq!(sweep.requeueable, Some(false));
    let node = sweep.nodes[0].clone();
    let a = Action::Drain {
        node: node.clone(),
        reason: "ecc GPU5".into(),
        requeue: true,
    };
    let pv = preview(&b, &a, &Policy::default(), Duration::ZERO);
    let blast = pv.blast.clone().expect("blast").expect("blast");
    assert_eq!(blast.keep_running, vec![sweep.id.clone()]);
    assert!(
        !blast.killed.iter().any(|k| k.id == sweep.id),
        "not \"dies … back in\": {:?}",
        blast.killed
    );
    assert!(
        pv.summary
            .contains("refuse a requeue (--no-requeue) and keep running"),
        "{}",
        pv.summary
    );
    assert!(
        pv.warnings
            .iter()
            .any(|w| w.contains("--no-requeue") && w.contains("stays draining")),
        "{:?}",
        pv.warnings
    );
    assert!(
        !pv.calls
            .iter()
            .any(|x| x.contains(&format!("requeue {}", sweep.id)))
    );
    let done = execute(&b, &pv, &node, &Policy::default(), Duration::ZERO).expect("ran");
    let o = &done.outcome;
    assert!(o.ok && !o.partial, "{o:?}");
    assert_eq!(o.steps.len(), 2);
    assert!(
        o.steps[1].unchanged && o.steps[1].observed.contains("keeps running"),
        "{o:?}"
    );
    assert_eq!(done.undo, Some(Action::Resume { node: node.clone() }));
    // The audit keeps the preview the operator saw, its warnings with it.
    let intent = b
        .log
        .read()
        .into_iter()
        .find(|r| r.phase == "intent")
        .expect("intent");
    assert!(
        intent.preview.contains("keep running"),
        "{}",
        intent.preview
    );
    assert!(
        intent.warnings.iter().any(|w| w.contains("--no-requeue")),
        "{:?}",
        intent.warnings
    );
    let after = snapshot(&b.sim);
    assert_eq!(
        after.node(&node).map(|n| n.state),
        Some(NodeState::Draining),
        "the job still runs on it"
    );
    assert_eq!(
        after.job(&sweep.id).map(|j| j.state),
        Some(crate::model::JobState::Running)
    );
    // A requeue of it alone is refused at preview, with what to do instead.
    let pv = preview(
        &b,
        &Action::Requeue {
            job: sweep.id.clone(),
        },
        &Policy::default(),
        Duration::ZERO,
    );
    let r = pv.refusal.map(|r| r.to_string()).unwrap_or_default();
    assert!(r.contains("--no-requeue") && r.contains("cancel"), "{r}");
}

/// A drain that comes back partly done says what to do next.
#[test]
fn a_partly_done_drain_says_what_to_do_next() {
    let a = drain("h100-06");
    let refused = crate::model::Step::failed(
        "requeue 4702".into(),
        format!("{} for job 4702", crate::sources::sim::NO_REQUEUE),
    );
    let next = guard::next_after(&a, &refused);
    assert!(
        next.contains("keeps running and h100-06 stays draining") && next.contains("cancel it"),
        "{next}"
    );
    let timed_out = crate::model::Step::failed("requeue 4700".into(), "timed out".into());
    assert_eq!(
        guard::next_after(&a, &timed_out),
        "retry it: nightshift requeue 4700"
    );
}

#[test]
fn resuming_a_node_with_unresolved_critical_health_needs_its_name_typed() {
    let b = bench();
    run(
        &b,
        &drain("h100-03"),
        "h100-03",
        &Policy::default(),
        Duration::ZERO,
    )
    .expect("drain");
    let resume = Action::Resume {
        node: "h100-03".into(),
    };
    let pv = preview(&b, &resume, &Policy::default(), Duration::ZERO);
    assert_eq!(pv.token.as_deref(), Some("h100-03"));
    assert!(
        pv.warnings.iter().any(|w| w.contains("Xid 79")),
        "the unresolved evidence is shown: {:?}",
        pv.warnings
    );
    // The gang requeued by the drain would land on it again at once.
    assert!(
        pv.warnings
            .iter()
            .any(|w| w.contains("the scheduler would start") && w.contains("4700")),
        "{:?}",
        pv.warnings
    );
    assert!(
        pv.summary.contains("16 GPUs back in service")
            || pv.summary.contains("8 GPUs back in service"),
        "not \"nothing changes\": {}",
        pv.summary
    );
    assert_eq!(
        pv.undo,
        Some(Action::Drain {
            node: "h100-03".into(),
            reason: "xid79 GPU3".into(),
            requeue: true,
        }),
        "undo drains it again with its old reason"
    );
    assert!(execute(&b, &pv, "y", &Policy::default(), Duration::ZERO).is_err());
    let done = execute(&b, &pv, "h100-03", &Policy::default(), Duration::ZERO).expect("resume");
    assert!(done.outcome.ok);
    // A healthy drained node takes a plain y.
    let pv = preview(
        &b,
        &Action::Resume {
            node: "a100-08".into(),
        },
        &Policy::default(),
        Duration::ZERO,
    );
    assert_eq!(pv.token, None);
    assert!(pv.warnings.is_empty());
}

#[test]
fn an_intent_in_flight_counts_against_the_breaker() {
    let b = bench();
    let mut intent = Record {
        id: "other-1".into(),
        phase: "intent".into(),
        time: super::audit::now(),
        operator: "someone".into(),
        scheduler_user: None,
        host: "h".into(),
        cluster: "c".into(),
        source: "sim".into(),
        action: "drain".into(),
        target: "h100-01".into(),
        reason: None,
        preview: "p".into(),
        incident: None,
        warnings: Vec::new(),
        outcome: None,
    };
    b.log.write(&intent).expect("write");
    assert_eq!(
        b.log.nodes_taken_out_since(0),
        Ok(1),
        "another nightshift is draining"
    );
    intent.phase = "outcome".into();
    intent.outcome = Some(super::audit::Outcome::of_steps(vec![crate::model::Step {
        what: "drain h100-01".into(),
        ok: false,
        verified: false,
        observed: String::new(),
        error: Some("refused".into()),
        unchanged: false,
    }]));
    b.log.write(&intent).expect("write");
    assert_eq!(
        b.log.nodes_taken_out_since(0),
        Ok(0),
        "it failed: nothing was taken out"
    );
}

fn intent(id: &str, target: &str, time: i64) -> Record {
    Record {
        id: id.into(),
        phase: "intent".into(),
        time,
        operator: "oncall".into(),
        scheduler_user: None,
        host: "h".into(),
        cluster: "c".into(),
        source: "slurm".into(),
        action: "drain".into(),
        target: target.into(),
        reason: None,
        preview: "p".into(),
        incident: None,
        warnings: Vec::new(),
        outcome: None,
    }
}

#[test]
fn a_torn_last_line_does_not_swallow_the_next_record() {
    let b = bench();
    b.log.write(&intent("a", "gpu01", 1)).expect("write");
    // A crash mid-write: half a record, no newline.
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&b.log.path)
        .expect("open");
    std::io::Write::write_all(&mut f, b"{\"id\":\"b\",\"phase\":\"int").expect("tear");
    b.log.write(&intent("c", "gpu03", 3)).expect("write");
    let ids: Vec<String> = b.log.read().into_iter().map(|r| r.id).collect();
    assert_eq!(ids, ["a", "c"], "the record after the torn line is whole");
    let text = std::fs::read_to_string(&b.log.path).expect("read");
    assert_eq!(
        text.lines().count(),
        3,
        "the torn line is kept, on its own:\n{text}"
    );
}

#[test]
fn every_interrupted_intent_is_counted_and_the_newest_named() {
    let b = bench();
    for (i, t) in ["gpu01", "gpu02", "gpu03", "gpu04", "gpu05"]
        .iter()
        .enumerate()
    {
        b.log
            .write(&intent(&format!("x{i}"), t, i as i64 + 1))
            .expect("write");
    }
    let w = super::audit::warn_unfinished(&b.log);
    assert!(
        w[0].starts_with("5 earlier action(s) were interrupted"),
        "{}",
        w[0]
    );
    assert!(
        w[0].contains("gpu05") && w[0].contains("gpu04") && w[0].contains("gpu03"),
        "the newest three: {}",
        w[0]
    );
    assert!(w[0].contains("and 2 older"), "{}", w[0]);
    assert_eq!(w.len(), 6, "then every one on its own line");
}

#[test]
fn the_audit_is_read_across_rotated_files() {
    let b = bench();
    let old = b.log.path.with_file_name("audit.jsonl.1");
    let older = b.log.path.with_file_name("audit.jsonl.2");
    AuditLog::new(older)
        .write(&intent("1", "gpu01", 1))
        .expect("write");
    AuditLog::new(old)
        .write(&intent("2", "gpu02", 2))
        .expect("write");
    b.log.write(&intent("3", "gpu03", 3)).expect("write");
    let ids: Vec<String> = b.log.read().into_iter().map(|r| r.id).collect();
    assert_eq!(ids, ["1", "2", "3"], "oldest first");
}

/// A crash mid-write can tear the last line inside a multi-byte character:
/// the file is then not UTF-8 at all. Every whole record before it still
/// counts (the breaker, the interrupted intents) and the torn line is named.
#[test]
fn a_last_line_torn_mid_character_loses_no_earlier_record() {
    let b = bench();
    let now = super::audit::now();
    for (i, n) in ["h100-07", "h100-08", "a100-07"].iter().enumerate() {
        b.log
            .write(&intent(&format!("t{i}"), n, now))
            .expect("write");
    }
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&b.log.path)
        .expect("open");
    // `é` is 0xC3 0xA9: the write stopped after its first byte.
    std::io::Write::write_all(&mut f, b"{\"id\":\"t3\",\"target\":\"h\xC3").expect("tear");
    drop(f);
    assert_eq!(b.log.nodes_taken_out_since(0), Ok(3), "the breaker counts");
    assert_eq!(b.log.unfinished().len(), 3, "the interrupted intents");
    let reading = b.log.reading();
    assert_eq!(reading.skipped.len(), 1, "{:?}", reading.skipped);
    assert!(
        reading.skipped[0].contains("line 4") && reading.skipped[0].contains("UTF-8"),
        "{:?}",
        reading.skipped
    );
    // Three nodes out in the window: a fourth is refused.
    let err = run(
        &b,
        &drain("a100-05"),
        "a100-05",
        &Policy::default(),
        Duration::ZERO,
    )
    .expect_err("the breaker");
    assert!(err.contains("circuit breaker"), "{err}");
}

/// A symlink where the audit log should be is never followed: nothing is
/// written through it, and no action is taken without an audit.
#[test]
fn an_audit_log_that_is_a_symlink_is_refused() {
    let b = bench();
    let target = b.log.path.with_file_name("elsewhere");
    std::fs::write(&target, "").expect("target");
    std::os::unix::fs::symlink(&target, &b.log.path).expect("symlink");
    let err = b
        .log
        .write(&intent("a", "h100-07", 1))
        .expect_err("refused");
    assert!(err.contains("symbolic link"), "{err}");
    assert_eq!(
        std::fs::read(&target).expect("read"),
        b"",
        "nothing written through it"
    );
    let p = preview(&b, &drain("h100-03"), &Policy::default(), Duration::ZERO);
    let why = p.refusal.map(|r| r.to_string()).unwrap_or_default();
    assert!(
        why.contains("symbolic link") && why.contains("audit log"),
        "{why}"
    );
    let err = run(
        &b,
        &drain("h100-03"),
        "h100-03",
        &Policy::default(),
        Duration::ZERO,
    )
    .expect_err("refused");
    assert!(err.contains("nothing sent"), "{err}");
    let c = snapshot(&b.sim);
    assert!(
        c.node("h100-03").is_some_and(|n| n.state.schedulable()),
        "the node was not drained"
    );
}

/// An audit log that cannot be read at all (here: a directory) refuses
/// every mutating action with the reason, a cordon included.
#[test]
fn an_unreadable_audit_log_refuses_every_action() {
    let b = bench();
    std::fs::create_dir(&b.log.path).expect("dir");
    assert!(b.log.nodes_taken_out_since(0).is_err());
    let cordon = Action::Cordon {
        node: "h100-07".into(),
        reason: "t".into(),
    };
    let err = run(&b, &cordon, "y", &Policy::default(), Duration::ZERO).expect_err("refused");
    assert!(
        err.contains("not a regular file") && err.contains("nothing sent"),
        "{err}"
    );
}

/// Two operators drain the same node at once: the second is refused while
/// the first is in flight (its intent has no outcome yet), instead of
/// overwriting its reason and offering an undo that would undo it.
#[test]
fn a_second_drain_while_the_first_is_in_flight_is_refused() {
    let b = bench();
    b.log
        .write(&intent("other", "h100-07", super::audit::now()))
        .expect("write");
    let err = run(
        &b,
        &drain("h100-07"),
        "h100-07",
        &Policy::default(),
        Duration::ZERO,
    )
    .expect_err("refused");
    assert!(
        err.contains("in flight") && err.contains("nothing sent"),
        "{err}"
    );
    assert!(
        snapshot(&b.sim)
            .node("h100-07")
            .is_some_and(|n| n.state.schedulable()),
        "nothing was sent"
    );
    // An intent interrupted long ago does not block the node for ever.
    let b = bench();
    b.log.write(&intent("old", "h100-07", 1)).expect("write");
    run(
        &b,
        &drain("h100-07"),
        "h100-07",
        &Policy::default(),
        Duration::ZERO,
    )
    .expect("an old interrupted intent does not block");
}

/// Previewed on a node in service, confirmed after someone else took it
/// out: refused (it would overwrite their reason, and its undo would put
/// their node back in service).
#[test]
fn a_node_taken_out_since_the_preview_is_not_acted_on() {
    let b = bench();
    let p = preview(&b, &drain("h100-07"), &Policy::default(), Duration::ZERO);
    assert!(
        p.undo.is_some(),
        "in service at preview: a resume undoes it"
    );
    run(
        &b,
        &Action::Cordon {
            node: "h100-07".into(),
            reason: "theirs".into(),
        },
        "y",
        &Policy::default(),
        Duration::ZERO,
    )
    .expect("someone else's cordon");
    let err = execute(&b, &p, "h100-07", &Policy::default(), Duration::ZERO).expect_err("refused");
    assert!(err.contains("since the preview"), "{err}");
    let c = snapshot(&b.sim);
    assert_eq!(
        c.node("h100-07").and_then(|n| n.reason.clone()).as_deref(),
        Some("theirs"),
        "their reason stands"
    );
    // A drain previewed on the cordoned node now: no resume as its undo.
    let p = preview(&b, &drain("h100-07"), &Policy::default(), Duration::ZERO);
    assert_eq!(p.undo, None, "{:?}", p.undo);
}

/// With the Xid 13 incident ("restart the job; the GPU is fine"), a drain
/// of h100-07 says the catalog's remedy is not a drain and where it is.
#[test]
fn a_drain_the_catalog_advises_against_says_so() {
    let b = bench();
    if let Executor::LocalSim(s) = &b.sim {
        s.lock().expect("sim").advance(100);
    }
    let pv = preview(&b, &drain("h100-07"), &Policy::default(), Duration::ZERO);
    assert!(
        pv.warnings.iter().any(|w| w.contains(
            "the catalog's remedy for XID 13 on h100-07 is not a drain: restart the job"
        ) && w.contains("options")),
        "{:?}",
        pv.warnings
    );
    // A drain the catalog asks for carries no such warning.
    let pv = preview(&b, &drain("h100-03"), &Policy::default(), Duration::ZERO);
    assert!(
        !pv.warnings.iter().any(|w| w.contains("not a drain")),
        "{:?}",
        pv.warnings
    );
}
