//! Confirmation, the policies (read-only, data age, the circuit breaker)
//! and execution: what is sent, verified and audited, and when nothing is.

use super::*;
use crate::model::Phase;

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
    let c = snapshot(&b.world);
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
        Some("e1 XID 79 on h100-03 GPU 3 (open)"),
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
        snapshot(&b.world).node("h100-03").map(|n| n.state),
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
        snapshot(&b.world).node("h100-03").map(|n| n.state),
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
    let c = snapshot(&b.world);
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
fn reversible_actions_take_y_and_report_their_undo() {
    let b = bench();
    let c = snapshot(&b.world);
    let top = crate::top_priority(&c, "4723").expect("top");
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
        snapshot(&b.world).node("h100-05").map(|n| n.state),
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
    assert!(matches!(err, guard::NotSent::RefusedNow(_)), "{err:?}");
    let err = err.to_string();
    assert!(
        err.contains("refused at execute time") && err.contains("61s old"),
        "{err}"
    );
    assert_eq!(
        snapshot(&b.world).node("h100-07").map(|n| n.state),
        Some(NodeState::Up)
    );
    assert!(b.log.read().is_empty(), "no intent for a refused action");
}

#[test]
fn an_intent_in_flight_counts_against_the_breaker() {
    let b = bench();
    let mut intent = Record {
        id: "other-1".into(),
        phase: Phase::Intent,
        time: crate::audit::now(),
        operator: "someone".into(),
        host: "h".into(),
        cluster: "c".into(),
        source: "sim".into(),
        action: "drain".into(),
        target: "h100-01".into(),
        preview: "p".into(),
        ..Record::default()
    };
    b.log.write(&intent).expect("write");
    assert_eq!(
        b.log.nodes_taken_out_since(0),
        Ok(1),
        "another nightshift is draining"
    );
    intent.phase = Phase::Outcome;
    intent.outcome = Some(crate::audit::Outcome::of_steps(vec![crate::model::Step {
        what: "drain h100-01".into(),
        ok: false,
        verified: false,
        observed: String::new(),
        error: Some("refused".into()),
        unchanged: false,
        refused: None,
    }]));
    b.log.write(&intent).expect("write");
    assert_eq!(
        b.log.nodes_taken_out_since(0),
        Ok(0),
        "it failed: nothing was taken out"
    );
}

/// Two operators drain the same node at once: the second is refused while
/// the first is in flight (its intent has no outcome yet), instead of
/// overwriting its reason and offering an undo that would undo it.
#[test]
fn a_second_drain_while_the_first_is_in_flight_is_refused() {
    let b = bench();
    b.log
        .write(&intent("other", "h100-07", crate::audit::now()))
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
        snapshot(&b.world)
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
    assert!(err.to_string().contains("since the preview"), "{err}");
    let c = snapshot(&b.world);
    assert_eq!(
        c.node("h100-07").and_then(|n| n.reason.clone()).as_deref(),
        Some("theirs"),
        "their reason stands"
    );
    // A drain previewed on the cordoned node now: no resume as its undo.
    let p = preview(&b, &drain("h100-07"), &Policy::default(), Duration::ZERO);
    assert_eq!(p.undo, None, "{:?}", p.undo);
}

/// The circuit breaker's one rule (issue 37): distinct nodes, this
/// cluster's records alone, on the source's clock. Another cluster's
/// drains sharing the log, the same node twice, and an earlier sim run's
/// drains at other hours of its night are not "3 nodes in the last 10
/// minutes"; three of this cluster's nodes are, and the refusal names them
/// with their times.
#[test]
fn the_breaker_counts_this_clusters_distinct_nodes_on_the_sources_clock() {
    let b = bench();
    let c = snapshot(&b.world);
    let at = |id: &str, cluster: &str, node: &str, source_time: Option<i64>| Record {
        cluster: cluster.into(),
        source_time,
        time: crate::audit::now(),
        ..intent(id, node, 0)
    };
    // East's three drains; this cluster's one node, twice; an earlier run
    // of the same night three hours on.
    for (i, n) in ["h100-01", "h100-02", "h100-04"].iter().enumerate() {
        b.log
            .write(&at(&format!("e{i}"), "east", n, Some(c.time)))
            .expect("write");
    }
    b.log
        .write(&at("s1", "sim-16", "h100-07", Some(c.time - 30)))
        .expect("write");
    b.log
        .write(&at("s2", "sim-16", "h100-07", Some(c.time - 20)))
        .expect("write");
    b.log
        .write(&at("s3", "sim-16", "a100-01", Some(c.time + 3 * 3600)))
        .expect("write");
    b.log
        .write(&at("s4", "sim-16", "a100-02", Some(c.time + 3 * 3600)))
        .expect("write");
    let p = Policy::default();
    let pv = preview(&b, &drain("a100-05"), &p, Duration::ZERO);
    assert!(
        !pv.refusal
            .as_ref()
            .is_some_and(|r| r.to_string().contains("already taken out")),
        "{:?}",
        pv.refusal
    );
    // Two more of this cluster's nodes in its window: the third refuses
    // the fourth, naming them.
    b.log
        .write(&at("s5", "sim-16", "h100-08", Some(c.time - 10)))
        .expect("write");
    b.log
        .write(&at("s6", "sim-16", "a100-07", Some(c.time - 5)))
        .expect("write");
    let pv = preview(&b, &drain("a100-05"), &p, Duration::ZERO);
    let why = pv
        .refusal
        .as_ref()
        .map(ToString::to_string)
        .unwrap_or_default();
    assert!(
        why.contains("3 node(s) already taken out")
            && why.contains("h100-07 at")
            && why.contains("h100-08 at")
            && why.contains("a100-07 at"),
        "{why}"
    );
}

/// The breaker counts what the scheduler says went out of service in its
/// window whoever did it (issue 37): three cordons typed by someone else
/// (the sim's own command, no audit record) refuse the fourth node,
/// naming them with their times; a failing domain's remedy cordon, which
/// the scheduler also shows cordoned, is not counted; nor is a node
/// drained an hour and a half before (the sim's long-drained node).
#[test]
fn the_breaker_counts_nodes_someone_else_took_out_in_its_window() {
    let b = bench();
    let c = snapshot(&b.world);
    let p = Policy::default();
    let refusal = |b: &Bench| {
        preview(b, &drain("a100-05"), &p, Duration::ZERO)
            .refusal
            .map(|r| r.to_string())
            .unwrap_or_default()
    };
    // A domain remedy nightshift sent, the cordon seen by the scheduler.
    b.log
        .write(&Record {
            cluster: c.name.clone(),
            action: "cordon".into(),
            domain_remedy: true,
            source_time: Some(c.time),
            time: crate::audit::now(),
            ..intent("r1", "h100-08", 0)
        })
        .expect("write");
    cordon_behind_the_guard(&b, "h100-08", "leaf ib-leaf-2 failing");
    for n in ["h100-01", "a100-01"] {
        cordon_behind_the_guard(&b, n, "theirs");
    }
    let why = refusal(&b);
    assert!(!why.contains("already taken out"), "{why}");
    cordon_behind_the_guard(&b, "a100-07", "theirs");
    let why = refusal(&b);
    assert!(
        why.contains("3 node(s) already taken out")
            && ["h100-01 at", "a100-01 at", "a100-07 at"]
                .iter()
                .all(|n| why.contains(n))
            && !why.contains("h100-08"),
        "{why}"
    );
}
