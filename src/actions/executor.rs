//! Executors: how an action reaches each backend, the exact calls it will
//! make (for the preview), and what was seen afterwards (verify).

use super::Action;
use crate::sources::sim::{CommandRequest, Sim, SimCommand};
use crate::sources::slurm::exec::{Call, Executor as SlurmExec, Outcome};
use std::sync::Mutex;
use tokio::sync::{mpsc, oneshot};

pub enum Executor {
    /// The sim running in the TUI, through its command channel.
    Sim(mpsc::Sender<CommandRequest>),
    /// A sim owned by this process (the CLI).
    LocalSim(Box<Mutex<Sim>>),
    Slurm(Box<SlurmExec>),
}

fn sim_command(a: &Action) -> SimCommand {
    match a.clone() {
        Action::Cordon { node, .. } => SimCommand::Cordon { node },
        Action::Resume { node } => SimCommand::Resume { node },
        Action::Drain {
            node,
            reason,
            requeue,
        } => SimCommand::Drain {
            node,
            reason,
            requeue,
        },
        Action::Requeue { job } => SimCommand::Requeue { job },
        Action::Priority { job, value } => SimCommand::Priority { job, value },
        Action::Hold { job } => SimCommand::Hold { job },
        Action::Release { job } => SimCommand::Release { job },
    }
}

impl Executor {
    /// The exact calls, in order, shown before anything is sent. `jobs` are
    /// the jobs a drain will end (from the preview's blast radius).
    pub fn calls(&self, a: &Action, jobs: &[String]) -> Vec<String> {
        match self {
            Executor::Sim(_) | Executor::LocalSim(_) => vec![format!("sim: {:?}", sim_command(a))],
            Executor::Slurm(x) => {
                let calls: Vec<Call> = match a {
                    Action::Cordon { node, reason } => {
                        vec![x.drain_call(node, &format!("cordon: {reason}"))]
                    }
                    Action::Resume { node } => vec![x.resume_call(node)],
                    Action::Drain {
                        node,
                        reason,
                        requeue,
                    } => std::iter::once(x.drain_call(node, reason))
                        .chain(jobs.iter().map(|j| {
                            if *requeue {
                                x.requeue_call(j)
                            } else {
                                x.cancel_call(j)
                            }
                        }))
                        .collect(),
                    Action::Requeue { job } => vec![x.requeue_call(job)],
                    Action::Priority { job, value } => vec![x.priority_call(job, *value)],
                    Action::Hold { job } => vec![x.hold_call(job)],
                    Action::Release { job } => vec![x.release_call(job)],
                };
                calls.iter().map(ToString::to_string).collect()
            }
        }
    }

    /// Sends the action and re-reads the state. Errors carry the
    /// scheduler's own text.
    pub async fn execute(&self, a: &Action) -> Result<Outcome, String> {
        match self {
            Executor::Sim(tx) => {
                let (reply, rx) = oneshot::channel();
                tx.send((sim_command(a), reply))
                    .await
                    .map_err(|_| "the simulated cluster has stopped".to_string())?;
                let (verified, observed) = rx
                    .await
                    .map_err(|_| "the simulated cluster did not answer".to_string())??;
                Ok(Outcome { verified, observed })
            }
            Executor::LocalSim(sim) => {
                let mut sim = sim
                    .lock()
                    .map_err(|_| "the simulated cluster is unusable".to_string())?;
                let (verified, observed) = sim.apply(&sim_command(a))?;
                Ok(Outcome { verified, observed })
            }
            Executor::Slurm(x) => match a {
                Action::Cordon { node, reason } => {
                    x.drain(node, &format!("cordon: {reason}")).await
                }
                Action::Resume { node } => x.resume(node).await,
                Action::Drain {
                    node,
                    reason,
                    requeue,
                } => {
                    let drained = x.drain(node, reason).await?;
                    let mut observed = vec![drained.observed];
                    let mut verified = drained.verified;
                    for job in x.jobs_on(node).await? {
                        let o = if *requeue {
                            x.requeue(&job).await?
                        } else {
                            x.cancel(&job).await?
                        };
                        verified &= o.verified;
                        observed.push(o.observed);
                    }
                    Ok(Outcome {
                        verified,
                        observed: observed.join("; "),
                    })
                }
                Action::Requeue { job } => x.requeue(job).await,
                Action::Priority { job, value } => x.set_priority(job, *value).await,
                Action::Hold { job } => x.hold(job).await,
                Action::Release { job } => x.release(job).await,
            },
        }
    }
}
