//! Armed steps (a plan's step sent later by `follow` or the console):
//! ids, one sender at a time, forged and replayed lines, an interrupted
//! send, the breaker's judgement when a step fires.

use super::*;
use crate::model::Phase;

/// Two steps armed in the same second are shown by ids that tell them
/// apart, and each shown id cancels its own step alone.
#[test]
fn steps_armed_in_one_second_are_shown_and_cancelled_apart() {
    use crate::follow::{self, short_id};
    let b = bench();
    let c = snapshot(&b.world);
    let arm = |node: &str| {
        follow::arm(
            &b.log,
            &who(),
            drain(node),
            crate::engine::armed::after_checkpoints(&c, &["4701".to_string()]),
            c.time,
        )
        .expect("armed")
    };
    let (one, two) = (arm("h100-01"), arm("h100-02"));
    assert_eq!(
        one.id[..12],
        two.id[..12],
        "the same second, the same process"
    );
    let armed = b.log.armed();
    let (s1, s2) = (short_id(&one.id, &armed), short_id(&two.id, &armed));
    assert!(s1.len() >= 12 && s2.len() >= 12);
    assert!(
        !two.id.starts_with(s1) && !one.id.starts_with(s2),
        "{s1} {s2}"
    );
    // Alone, the short form is 12 characters.
    assert_eq!(short_id(&one.id, &armed[..1]), &one.id[..12]);
    let gone = follow::cancel(&b.log, &who(), s2, "test").expect("cancelled");
    assert_eq!(gone.id, two.id);
    let left: Vec<String> = b.log.armed().into_iter().map(|a| a.id).collect();
    assert_eq!(left, vec![one.id]);
}

/// An armed step is sent once (issue 29): while another nightshift on the
/// same audit log holds the sending lock (a console and `follow` both
/// watching), this one waits and sends nothing; a step that the other
/// fired meanwhile is not sent again.
#[test]
fn an_armed_step_is_sent_by_one_nightshift_only() {
    use crate::follow::{self, Fired};
    let b = bench();
    let c = snapshot(&b.world);
    let state = || snapshot(&b.world).node("h100-03").map(|n| n.state);
    let before = state();
    assert_ne!(before, Some(NodeState::Drain));
    let a = follow::arm(
        &b.log,
        &who(),
        drain("h100-03"),
        // Due at once: the job it waits for does not run.
        due_at_once(),
        c.time,
    )
    .expect("armed");
    let other = b.log.firing().expect("lock").expect("free");
    match fire(&b, &a) {
        Fired::Waiting(w) => assert!(w.contains("another nightshift"), "{w}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(state(), before, "nothing sent");
    // The other one fires it (sealing its end with the shared key) and
    // lets go.
    let key = b.log.seal_key().expect("key");
    b.log
        .write(&Record {
            phase: Phase::Fired,
            seal: Some(crate::seal::end_tag(&key, &a.id, "fired")),
            ..intent(&a.id, "h100-03", c.time)
        })
        .expect("fired");
    drop(other);
    match fire(&b, &a) {
        Fired::Waiting(w) => assert!(w.contains("sent or cancelled"), "{w}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(state(), before, "nothing sent");
}

/// What may be fired, and how (issue 43): a sending lock that cannot be
/// taken (a directory where `<log>.fire` should be) sends nothing; a step
/// written into the shared log by hand — no seal, a seal copied onto
/// another action, a real step's id reused — is never listed nor fired;
/// the real step still is.
#[test]
fn a_lock_that_cannot_be_taken_and_forged_steps_send_nothing() {
    use crate::follow::{self, Fired};
    use crate::model::Armed;
    let b = bench();
    let c = snapshot(&b.world);
    let state = |n: &str| snapshot(&b.world).node(n).map(|n| n.state);
    let gone = due_at_once();
    let real = follow::arm(&b.log, &who(), drain("h100-03"), gone.clone(), c.time).expect("armed");
    // Forged lines: a drain that cancels a gang, unsealed; the real step's
    // seal on another node; the real step's id on a resume.
    let forged = |a: Armed| Record {
        phase: Phase::Armed,
        armed: Some(a),
        ..intent(&real.id, "x", c.time)
    };
    let unsealed = Armed {
        id: "1796006850-1-1-1".into(),
        action: Action::Drain {
            node: "h100-01".into(),
            reason: "x".into(),
            requeue: false,
        },
        tag: String::new(),
        forced: false,
        ..real.clone()
    };
    let moved = Armed {
        id: "1796006850-1-1-2".into(),
        action: drain("h100-05"),
        ..real.clone()
    };
    let reused = Armed {
        action: Action::Resume {
            node: "h100-08".into(),
        },
        ..real.clone()
    };
    for a in [unsealed, moved, reused] {
        b.log.write(&forged(a)).expect("forged");
    }
    let checked = b.log.armed_checked();
    assert_eq!(checked.trusted, vec![real.clone()], "{:?}", checked.refused);
    assert_eq!(checked.refused.len(), 3, "{:?}", checked.refused);
    assert!(
        checked
            .warnings()
            .iter()
            .all(|w| w.starts_with("not sent: "))
    );
    let mut fire_lock = b.log.path.clone().into_os_string();
    fire_lock.push(".fire");
    std::fs::create_dir(&fire_lock).expect("a directory as the lock");
    let before = [state("h100-01"), state("h100-03"), state("h100-05")];
    match fire(&b, &real) {
        Fired::Waiting(w) => assert!(w.contains("nothing sent"), "{w}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        [state("h100-01"), state("h100-03"), state("h100-05")],
        before,
        "nothing sent"
    );
    std::fs::remove_dir(&fire_lock).expect("rmdir");
    // A forged step handed to the firing directly is not this log's step.
    let mut forged_step = real.clone();
    forged_step.action = drain("h100-05");
    match fire(&b, &forged_step) {
        Fired::Waiting(w) => assert!(w.contains("sent or cancelled"), "{w}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(state("h100-05"), before[2]);
    match fire(&b, &real) {
        Fired::Sent { .. } => {}
        other => panic!("{other:?}"),
    }
    assert_eq!(state("h100-03"), Some(NodeState::Drain));
}

/// A `follow` killed mid-send and started again (issue 43): the step's
/// intent has no outcome, and its drain went out but not the requeues.
/// The send is its own, not another operator's drain in flight: it is
/// closed as interrupted and the step is sent again — the gang requeued —
/// not refused and disarmed.
#[test]
fn a_send_cut_off_mid_way_is_finished_when_the_follower_comes_back() {
    use crate::follow::{self, Fired};
    let b = bench();
    let c0 = snapshot(&b.world);
    let jobs: Vec<String> = c0
        .jobs_on_node("h100-03")
        .filter(|j| j.state.holds_resources())
        .map(|j| j.id.clone())
        .collect();
    assert!(!jobs.is_empty());
    let gone = due_at_once();
    let a = follow::arm(&b.log, &who(), drain("h100-03"), gone, c0.time).expect("armed");
    // The first follower: its intent written, the node taken out, killed
    // before the requeues and the outcome.
    b.log
        .write(&Record {
            step_of: Some(a.id.clone()),
            time: crate::audit::now(),
            ..intent("cut-1", "h100-03", 0)
        })
        .expect("intent");
    cordon_behind_the_guard(&b, "h100-03", "xid79");
    match fire(&b, &a) {
        Fired::Sent { ok: true, .. } => {}
        other => panic!("{other:?}"),
    }
    let after = snapshot(&b.world);
    for j in &jobs {
        assert!(
            after.job(j).is_some_and(|j| !j.state.holds_resources()),
            "job {j} requeued"
        );
    }
    assert!(b.log.unfinished().is_empty(), "{:?}", b.log.unfinished());
    assert!(b.log.armed().is_empty(), "fired");
}

/// An armed drain whose node someone else drained meanwhile (its reason
/// no longer the plan's cordon's) is refused, naming their reason — not
/// recorded "fired … done and verified" over their drain (issue 37).
#[test]
fn an_armed_drain_over_someone_elses_drain_is_refused() {
    use crate::follow::{self, Fired};
    let b = bench();
    let c = snapshot(&b.world);
    let a = follow::arm(&b.log, &who(), drain("h100-05"), due_at_once(), c.time).expect("armed");
    cordon_behind_the_guard(&b, "h100-05", "theirs: remap pending, RMA");
    match fire(&b, &a) {
        Fired::Refused(why) => assert!(
            why.contains("already") && why.contains("theirs: remap pending"),
            "{why}"
        ),
        other => panic!("{other:?}"),
    }
    assert!(b.log.armed().is_empty(), "disarmed");
}

/// A plan confirmed past the circuit breaker (`--force`) keeps that
/// override for its own armed step (issue 37: it was refused when it
/// fired, the node left cordoned and its job running); a plan armed
/// without it is judged by the breaker again when it fires.
#[test]
fn a_forced_plan_keeps_its_override_for_its_armed_step() {
    use crate::follow::{self, Fired};
    let b = bench();
    let c = snapshot(&b.world);
    let gone = due_at_once();
    // The partition is past its share out: two more h100 nodes down.
    for n in ["h100-01", "h100-02"] {
        run(
            &b,
            &Action::Cordon {
                node: n.into(),
                reason: "psu".into(),
            },
            "y",
            &Policy::default(),
            Duration::ZERO,
        )
        .expect("cordoned");
    }
    let plain = follow::arm(&b.log, &who(), drain("h100-04"), gone.clone(), c.time).expect("armed");
    match fire(&b, &plain) {
        Fired::Refused(why) => assert!(why.contains("circuit breaker"), "{why}"),
        other => panic!("{other:?}"),
    }
    let forced =
        follow::arm_forced(&b.log, &who(), drain("h100-04"), gone, c.time, true).expect("armed");
    match fire(&b, &forced) {
        Fired::Sent { ok: true, .. } => {}
        other => panic!("{other:?}"),
    }
    assert_eq!(
        snapshot(&b.world).node("h100-04").map(|n| n.state),
        Some(NodeState::Drain)
    );
}

/// The breaker does not count an armed step's own plan's cordon against
/// it (issue 59: the guard's count did, where `follow`'s own did not):
/// with the limit at three, the plan's cordon of h100-05 and two other
/// nodes out, the drain of h100-05 — back in service meanwhile — fires;
/// a drain of a fourth node in its place is refused.
#[test]
fn an_armed_steps_own_cordon_is_not_counted_by_the_breaker() {
    use crate::follow::{self, Fired};
    let b = bench();
    // The partitions' share is not what this is about.
    let loose = Policy {
        max_partition_share_out: 1.0,
        ..Policy::default()
    };
    let cordon = |n: &str| {
        run(
            &b,
            &Action::Cordon {
                node: n.into(),
                reason: "psu".into(),
            },
            "y",
            &loose,
            Duration::ZERO,
        )
        .expect("cordoned");
    };
    for n in ["h100-05", "a100-01", "a100-02"] {
        cordon(n);
    }
    let c = snapshot(&b.world);
    let a = follow::arm(&b.log, &who(), drain("h100-05"), due_at_once(), c.time).expect("armed");
    let other =
        follow::arm(&b.log, &who(), drain("h100-04"), due_at_once(), c.time).expect("armed");
    run(
        &b,
        &Action::Resume {
            node: "h100-05".into(),
        },
        "y",
        &Policy::default(),
        Duration::ZERO,
    )
    .expect("resumed");
    match fire(&b, &other) {
        Fired::Refused(why) => assert!(why.contains("circuit breaker"), "{why}"),
        other => panic!("{other:?}"),
    }
    match fire(&b, &a) {
        Fired::Sent { ok: true, .. } => {}
        other => panic!("{other:?}"),
    }
    assert_eq!(
        snapshot(&b.world).node("h100-05").map(|n| n.state),
        Some(NodeState::Drain)
    );
}

/// A trigger that is due at once: the job it waits for does not run.
fn due_at_once() -> crate::model::Trigger {
    crate::model::Trigger::Checkpoints {
        jobs: vec![crate::model::JobMark {
            job: "no-such-job".into(),
            ckpt_last: None,
        }],
        by: None,
    }
}

/// Issue 59: a step is its sealed id, and only a sealed end ends it.
/// - An unsealed "cancelled" (or "fired") line with a step's id ends
///   nothing: the step is still armed and fires.
/// - A fired step's sealed line appended again under a new outer id is
///   the same step, ended: not armed again, never sent twice.
#[test]
fn a_step_ends_only_by_a_sealed_end_and_a_replayed_line_is_not_armed_again() {
    use crate::follow::{self, Fired};
    let b = bench();
    let c = snapshot(&b.world);
    let a = follow::arm(&b.log, &who(), drain("h100-03"), due_at_once(), c.time).expect("armed");
    for phase in [Phase::Cancelled, Phase::Fired] {
        b.log
            .write(&Record {
                phase,
                ..intent(&a.id, "h100-03", c.time)
            })
            .expect("unsealed end");
    }
    assert_eq!(b.log.armed(), vec![a.clone()], "still armed");
    match fire(&b, &a) {
        Fired::Sent { ok: true, .. } => {}
        other => panic!("{other:?}"),
    }
    assert!(b.log.armed().is_empty(), "fired, ended by its sealed end");
    // Its armed line, appended again under a new outer id.
    let line = b
        .log
        .reading()
        .records
        .iter()
        .find(|r| r.phase == Phase::Armed)
        .cloned()
        .expect("its armed record");
    b.log
        .write(&Record {
            id: "1796006850-99-99-99".into(),
            ..line
        })
        .expect("replayed");
    assert!(
        b.log.armed().is_empty(),
        "a replayed step is not armed again"
    );
}
