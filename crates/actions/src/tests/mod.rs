//! The guard on the simulated cluster: refusals send nothing, confirmed
//! actions are executed, verified and audited, interrupted ones are found.
//! The bench and its helpers here; the tests by what they hold the guard to:
//! `execution` (confirmation, policies, execution), `previews` (what the
//! operator reads before confirming), `audit_log` (the log it keeps).

use crate::Action;
use crate::audit::{AuditLog, Record};
use crate::engine::SiteParams;
use crate::executor::Executor;
use crate::guard::{self, Who};
use crate::model::Phase;
use crate::model::{JobState, NodeState};
use crate::policy::{Policy, Refusal};
use crate::sources::sim::{Sim, SimConfig};
use std::sync::{Arc, Mutex};
use std::time::Duration;

mod armed;
mod audit_log;
mod execution;
mod previews;
mod recommended;
mod seal_fuzz;

struct Bench {
    sim: Executor,
    /// The sim the executor acts on, as another operator would see it.
    world: Arc<Mutex<Sim>>,
    log: AuditLog,
    _dir: tempfile::TempDir,
}

fn bench() -> Bench {
    let dir = tempfile::tempdir().expect("tempdir");
    let sim = Sim::new(SimConfig::default()).expect("sim");
    let world = Arc::new(Mutex::new(sim));
    Bench {
        sim: Executor::new(crate::sources::sim::Own(world.clone())),
        world,
        log: AuditLog::new(dir.path().join("audit.jsonl"))
            .with_key(Some(dir.path().join("state/armed.key"))),
        _dir: dir,
    }
}

fn snapshot(world: &Mutex<Sim>) -> crate::model::Cluster {
    world.lock().expect("sim").snapshot()
}

fn who() -> Who {
    Who {
        scheduler_user: Some("oncall".into()),
        cluster: "sim-16".into(),
        source: "sim".into(),
        operator: None,
    }
}

fn drain(node: &str) -> Action {
    Action::Drain {
        node: node.into(),
        reason: "xid79 GPU3".into(),
        requeue: true,
    }
}

/// Previews `a` and runs it through the guard with `typed`.
fn run(
    b: &Bench,
    a: &Action,
    typed: &str,
    policy: &Policy,
    age: Duration,
) -> Result<guard::Done, String> {
    execute(b, &preview(b, a, policy, age), typed, policy, age).map_err(String::from)
}

/// Runs a preview through the guard, checked against the sim as it is now.
fn execute(
    b: &Bench,
    p: &guard::Preview,
    typed: &str,
    policy: &Policy,
    age: Duration,
) -> Result<guard::Done, guard::NotSent> {
    let c = snapshot(&b.world);
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

/// Cordons `node` on the bench's sim directly, as another operator (or an
/// interrupted nightshift) would: no guard, no audit.
fn cordon_behind_the_guard(b: &Bench, node: &str, reason: &str) {
    b.world
        .lock()
        .expect("sim")
        .apply(&Action::Cordon {
            node: node.into(),
            reason: reason.into(),
        })
        .expect("cordon");
}

/// The engine's base of `c` with the default site and catalog.
fn base_of(c: &crate::model::Cluster) -> crate::engine::analysis::Base {
    crate::engine::analysis::Base::compute(
        c,
        None,
        &SiteParams::default(),
        &crate::engine::xid::XidCatalog::default(),
    )
}

/// Fires the armed step `a` on the bench's cluster as it is now, as
/// `follow` would (the default policy, fresh data).
fn fire(b: &Bench, a: &crate::model::Armed) -> crate::follow::Fired {
    let c = snapshot(&b.world);
    let base = base_of(&c);
    let (policy, site, w) = (Policy::default(), SiteParams::default(), who());
    let f = crate::follow::Firing {
        cluster: &c,
        base: &base,
        data_age: Duration::ZERO,
        policy: &policy,
        site: &site,
        log: &b.log,
        executor: &b.sim,
        who: &w,
        timeout: Duration::from_secs(5),
    };
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("rt")
        .block_on(crate::follow::fire_if_due(a, &f))
}

fn preview(b: &Bench, a: &Action, policy: &Policy, age: Duration) -> guard::Preview {
    let c = snapshot(&b.world);
    let base = base_of(&c);
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

fn intent(id: &str, target: &str, time: i64) -> Record {
    Record {
        id: id.into(),
        phase: Phase::Intent,
        time,
        operator: "oncall".into(),
        host: "h".into(),
        cluster: "c".into(),
        source: "slurm".into(),
        action: "drain".into(),
        target: target.into(),
        preview: "p".into(),
        ..Record::default()
    }
}
