//! The simulated cluster as a source: the sim itself (a pure, seeded
//! model of a cluster) lives in the core crate; this drives it against wall
//! time and takes its commands.

pub use nightshift_core::sim::*;

/// A command for the sim with the channel its result goes back on.
/// The reply: whether the change is visible, and what was seen.
pub type CommandRequest = (
    crate::model::Action,
    tokio::sync::oneshot::Sender<Result<Vec<crate::model::Step>, SimError>>,
);

/// Drives the sim against wall time: `speed` sim seconds per wall second.
/// Sends a snapshot whenever the sim clock moved or a command changed it.
pub async fn run(
    mut sim: Sim,
    speed: f64,
    out: impl Into<crate::assemble::Outlet>,
    mut commands: tokio::sync::mpsc::Receiver<CommandRequest>,
) {
    use std::sync::Arc;
    const TICK: std::time::Duration = std::time::Duration::from_millis(200);
    let mut tx = out.into();
    if !deliver(&mut tx, Arc::new(sim.snapshot())).await {
        return;
    }
    let mut owed = 0.0f64;
    let mut ticker = tokio::time::interval(TICK);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut commands_open = true;
    loop {
        tokio::select! {
            _ = ticker.tick() => {
                owed += speed.max(0.0) * TICK.as_secs_f64();
                let steps = owed.floor();
                if steps < 1.0 {
                    continue;
                }
                owed -= steps;
                // Stepping can take a while on a huge cluster: keep it off
                // the runtime's async threads.
                tokio::task::block_in_place(|| sim.advance(steps as u64));
            }
            cmd = commands.recv(), if commands_open => match cmd {
                Some((cmd, reply)) => {
                    let result = sim.apply(&cmd);
                    tracing::info!("sim: {cmd:?}: {result:?}");
                    let _ = reply.send(result);
                }
                None => {
                    commands_open = false;
                    continue;
                }
            },
        }
        let snap = tokio::task::block_in_place(|| Arc::new(sim.snapshot()));
        if !deliver(&mut tx, snap).await {
            tracing::debug!("sim source: receiver gone, stopping");
            return;
        }
    }
}

/// A snapshot and the scheduler's "answered"; false when nobody listens.
async fn deliver(
    tx: &mut crate::assemble::Outlet,
    snap: std::sync::Arc<crate::model::Cluster>,
) -> bool {
    use crate::{Origin, Update};
    tx.send(Update::Snapshot(snap)).await.is_ok()
        && tx.send(Update::ok(Origin::Scheduler)).await.is_ok()
}

mod scheduler;
pub use scheduler::{Channel, Own};
