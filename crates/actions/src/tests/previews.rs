//! What the operator reads before confirming: no-ops refused, jobs that
//! cannot be requeued, unresolved health, a remedy the catalog advises
//! against, and what to do when only part is done.

use super::*;
use crate::model::Phase;

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
    let c = snapshot(&b.world);
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
        value: running.priority.get().expect("a priority"),
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
        assert!(e.to_string().contains("nothing sent"), "{e}");
    }
    assert!(b.log.read().is_empty(), "nothing audited");
}

/// h100-06 runs a job submitted with --no-requeue: the preview, the blast
/// radius and the outcome tell one story (it keeps running, the node stays
/// draining); no requeue the scheduler would refuse is sent.
#[test]
fn a_drain_with_a_no_requeue_job_tells_one_story() {
    let b = bench();
    let c = snapshot(&b.world);
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
        .find(|r| r.phase == Phase::Intent)
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
    let after = snapshot(&b.world);
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
    // Slurm's answer, read by the Slurm executor into a typed refusal.
    let said = format!("{} for job 4702", crate::sources::sim::NO_REQUEUE);
    let answer = crate::sources::slurm::exec::CallError::Refused {
        call: "scontrol requeue 4702".into(),
        said: said.clone(),
    };
    let refused = crate::model::Step::failed("requeue 4702".into(), answer.to_string())
        .refused_for(crate::sources::slurm::exec::refusal(&answer));
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
    // The guard reads the refusal, not the text: the same words with no
    // refusal behind them are a failure to retry.
    let untyped = crate::model::Step::failed("requeue 4702".into(), said);
    assert_eq!(
        guard::next_after(&a, &untyped),
        "retry it: nightshift requeue 4702"
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

/// With the Xid 13 incident ("restart the job; the GPU is fine"), a drain
/// of h100-07 says the catalog's remedy is not a drain and where it is.
#[test]
fn a_drain_the_catalog_advises_against_says_so() {
    let b = bench();
    {
        let s = &b.world;
        s.lock().expect("sim").advance(100);
    }
    let pv = preview(&b, &drain("a100-07"), &Policy::default(), Duration::ZERO);
    assert!(
        pv.warnings.iter().any(|w| w.contains(
            "the catalog's remedy for XID 13 on a100-07 is not a drain: restart the job"
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

#[test]
fn draining_a_node_of_a_failing_switch_is_refused_by_the_breaker_and_its_cordon_is_not() {
    let b = bench();
    {
        let s = &b.world;
        // ib-leaf-2 flaps under h100-05..08 at +20 min.
        s.lock().expect("sim").advance(1230);
    }
    let pv = preview(&b, &drain("h100-07"), &Policy::default(), Duration::ZERO);
    let why = pv
        .refusal
        .as_ref()
        .map(ToString::to_string)
        .unwrap_or_default();
    assert!(
        why.starts_with(
            "circuit breaker: h100-07 is one of the 4 nodes of ib-leaf-2 failing at once"
        ) && why.contains("fixes nothing")
            && why.contains("type `force NODE`"),
        "{why}"
    );
    // The domain's own remedy passes the guard.
    let cordon = Action::Cordon {
        node: "h100-07".into(),
        reason: "ib-leaf-2 flapping".into(),
    };
    let pv = preview(&b, &cordon, &Policy::default(), Duration::ZERO);
    assert!(pv.refusal.is_none(), "{:?}", pv.refusal);
    // All four of them, past the breaker's three nodes in ten minutes.
    for n in ["h100-05", "h100-06", "h100-07", "h100-08"] {
        let cordon = Action::Cordon {
            node: n.into(),
            reason: "ib-leaf-2 flapping".into(),
        };
        let token = preview(&b, &cordon, &Policy::default(), Duration::ZERO)
            .token
            .unwrap_or_else(|| "y".into());
        run(&b, &cordon, &token, &Policy::default(), Duration::ZERO).expect("cordoned");
    }
    let c = snapshot(&b.world);
    assert!(
        ["h100-05", "h100-06", "h100-07", "h100-08"]
            .iter()
            .all(|n| c
                .node(n)
                .is_some_and(|x| x.state == crate::model::NodeState::Cordoned))
    );
    // The domain's remedy cordons are not counted toward the window (the
    // README says so; issue 37 saw them refuse the next unrelated drain):
    // another node's cordon passes the breaker.
    let other = Action::Cordon {
        node: "a100-01".into(),
        reason: "t".into(),
    };
    let pv = preview(&b, &other, &Policy::default(), Duration::ZERO);
    assert!(pv.refusal.is_none(), "{:?}", pv.refusal);
    // A node of the domain with a broken GPU of its own (h100-06's Xid 48)
    // is still drained for that.
    let pv = preview(&b, &drain("h100-06"), &Policy::default(), Duration::ZERO);
    assert!(pv.refusal.is_none(), "{:?}", pv.refusal);
}

/// A validation of a node that still runs work is refused at preview
/// (issue 37): the check needs the whole node, so it would queue behind
/// the job, time out, and leave a healthy node out. The refusal names the
/// job, when the node is empty, and what to do instead; once the node is
/// drained and empty, the same validation is not refused.
#[test]
fn validate_refuses_a_node_that_still_runs_work() {
    let b = bench();
    let c = snapshot(&b.world);
    let node = c
        .nodes
        .iter()
        .find(|n| c.jobs_on_node(&n.name).any(|j| j.state.holds_resources()))
        .map(|n| n.name.clone())
        .expect("a busy node");
    let cordon = Action::Cordon {
        node: node.clone(),
        reason: "remap pending".into(),
    };
    run(&b, &cordon, "y", &Policy::default(), Duration::ZERO).expect("cordoned");
    let validate = Action::Validate {
        node: node.clone(),
        level: 2,
    };
    let p = preview(&b, &validate, &Policy::default(), Duration::ZERO);
    let why = p
        .refusal
        .as_ref()
        .map(ToString::to_string)
        .unwrap_or_default();
    assert!(
        why.contains("still runs job") && why.contains("drain it first"),
        "{why}"
    );
    run(&b, &drain(&node), &node, &Policy::default(), Duration::ZERO).expect("drained");
    let p = preview(&b, &validate, &Policy::default(), Duration::ZERO);
    assert!(
        !p.refusal
            .as_ref()
            .is_some_and(|r| r.to_string().contains("still runs")),
        "{:?}",
        p.refusal
    );
}

/// The calls sent are the calls previewed, on the simulated cluster (issue
/// 37): for every action, the preview's lines against the steps the sim
/// took — one each, in order, each line naming its step (what the line
/// adds after the step's `what` is what it sets); a soft preemption
/// signals, then requeues, as its preview said.
#[test]
fn every_sim_action_sends_exactly_the_steps_its_preview_listed() {
    let b = bench();
    let c = snapshot(&b.world);
    let running: Vec<String> = c
        .jobs
        .iter()
        .filter(|j| j.state == JobState::Running)
        .map(|j| j.id.clone())
        .collect();
    let gang = c
        .jobs
        .iter()
        .find(|j| j.state == JobState::Running && j.nodes.len() > 1)
        .map(|j| j.id.clone())
        .expect("a running gang");
    let pending = c
        .jobs
        .iter()
        .find(|j| j.state.is_pending())
        .map(|j| j.id.clone())
        .expect("a pending job");
    let other = running
        .iter()
        .find(|j| **j != gang && c.job(j).is_some_and(|x| x.nodes.len() == 1))
        .cloned()
        .expect("a one-node job");
    let busy = c.job(&other).expect("job").nodes[0].clone();
    // Another node with work: cordoned, its reason changed, resumed.
    let other_node = c
        .nodes
        .iter()
        .find(|n| n.state == NodeState::Up && n.name != busy)
        .map(|n| n.name.clone())
        .expect("another node in service");
    let actions = vec![
        Action::Cordon {
            node: other_node.clone(),
            reason: "fan".into(),
        },
        Action::SetReason {
            node: other_node.clone(),
            reason: "fan replaced".into(),
        },
        Action::Resume { node: other_node },
        Action::Priority {
            job: pending.clone(),
            value: 500,
        },
        Action::Hold {
            job: pending.clone(),
        },
        Action::Release { job: pending },
        Action::Preempt {
            job: gang.clone(),
            grace_s: Some(60),
        },
        Action::Drain {
            node: busy.clone(),
            reason: "xid 79".into(),
            requeue: true,
        },
        // Drained and empty now: its check.
        Action::Validate {
            node: busy,
            level: 2,
        },
    ];
    let policy = Policy {
        max_partition_share_out: 1.0,
        max_nodes_per_window: 100,
        ..Policy::default()
    };
    for a in actions {
        let p = preview(&b, &a, &policy, Duration::ZERO);
        assert!(p.refusal.is_none(), "{a:?}: {:?}", p.refusal);
        let typed = p.token.clone().unwrap_or_else(|| "y".into());
        let done = execute(&b, &p, &typed, &policy, Duration::ZERO).expect("sent");
        let steps = &done.outcome.steps;
        let shown = format!(
            "{a:?}\npreviewed: {:#?}\nsent: {:#?}",
            p.calls,
            steps.iter().map(|s| &s.what).collect::<Vec<_>>()
        );
        // The alternatives: exactly one of a pass and a failure is sent.
        let alternatives = p.calls.iter().filter(|l| l.starts_with("on a ")).count();
        assert_eq!(
            p.calls.len() - alternatives.saturating_sub(1),
            steps.len(),
            "{shown}"
        );
        let mut k = 0;
        for s in steps {
            let names = |l: &str| l == s.what || l.starts_with(&format!("{} ", s.what));
            let line = p.calls[k..].iter().position(|l| {
                let call = l
                    .split_once("simulated scheduler: ")
                    .map_or(l.as_str(), |x| x.1);
                names(call)
            });
            let Some(at) = line else {
                panic!("step {:?} was not previewed\n{shown}", s.what);
            };
            // Only an alternative may be passed over.
            assert!(
                p.calls[k..k + at].iter().all(|l| l.starts_with("on a ")),
                "{shown}"
            );
            k += at + 1;
        }
        if a.verb() == "preempt" {
            assert!(
                steps.first().is_some_and(|s| s.what.starts_with("signal ")),
                "signalled first: {shown}"
            );
        }
    }
}
