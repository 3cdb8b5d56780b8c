//! Slurm as a scheduler for the guard: the calls a preview shows and the
//! steps that send them, each failed call re-read before it is reported
//! as failed, soft preemption's wait for the checkpoint, and a node that
//! someone else took out left as it is.

use super::{Call, CallError as SlurmCallError, Executor as SlurmExec, Outcome};
use crate::model::{Action, Step};
use crate::protocol::scheduler::{ObserveError, Pending, Scheduler};

/// A step that could not be sent at all.
fn unsent(what: String, error: String) -> Step {
    Step::failed(what, error)
}

impl Scheduler for SlurmExec {
    fn cannot(&self, a: &Action) -> Option<String> {
        match a {
            Action::Validate { .. } => self.validate_cannot(),
            _ => None,
        }
    }

    fn extra_time(&self, a: &Action) -> std::time::Duration {
        match a {
            Action::Validate { .. } => self.validate_timeout() + std::time::Duration::from_secs(60),
            _ => std::time::Duration::ZERO,
        }
    }

    fn calls(&self, a: &Action, jobs: &[String]) -> Vec<String> {
        calls(self, a, jobs)
    }

    fn execute<'a>(&'a self, a: &'a Action) -> Pending<'a, Vec<Step>> {
        Box::pin(slurm_steps(self, a))
    }

    fn observe<'a>(&'a self, a: &'a Action) -> Pending<'a, Result<Outcome, ObserveError>> {
        Box::pin(async move { SlurmExec::observe(self, a).await.map_err(ObserveError::new) })
    }
}

fn calls(x: &SlurmExec, a: &Action, jobs: &[String]) -> Vec<String> {
    if let Action::Preempt {
        job,
        grace_s: Some(g),
    } = a
    {
        return vec![
            x.signal_call(job, x.checkpoint_signal()).to_string(),
            format!(
                "wait up to {} for job {job}'s checkpoint (its ckpt_last moves)",
                crate::text::duration(*g as i64)
            ),
            x.requeue_call(job).to_string(),
        ];
    }
    let calls: Vec<Call> = match a {
        Action::Cordon { node, reason } => {
            vec![x.drain_call(node, &format!("cordon: {reason}"))]
        }
        Action::Resume { node } => vec![x.resume_call(node)],
        Action::Validate { node, level } => {
            return x.validate_calls(node, *level);
        }
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
        Action::SetReason { node, reason } => vec![x.reason_call(node, reason)],
        Action::Requeue { job } | Action::Preempt { job, .. } => {
            vec![x.requeue_call(job)]
        }
        Action::Priority { job, value } => vec![x.priority_call(job, *value)],
        Action::Hold { job } => vec![x.hold_call(job)],
        Action::Release { job } => vec![x.release_call(job)],
    };
    calls.iter().map(ToString::to_string).collect()
}

/// One Slurm call as a step; a failed call is re-read before it is
/// reported as failed.
async fn slurm_step(
    x: &SlurmExec,
    what: String,
    sent: Result<Outcome, SlurmCallError>,
    check: Option<&Action>,
) -> Step {
    let refused = sent.as_ref().err().and_then(crate::slurm::exec::refusal);
    slurm_step_sent(x, what, sent, check)
        .await
        .refused_for(refused)
}

async fn slurm_step_sent(
    x: &SlurmExec,
    what: String,
    sent: Result<Outcome, SlurmCallError>,
    check: Option<&Action>,
) -> Step {
    match sent.map_err(|e| e.to_string()) {
        Ok(o) => Step::sent(what, o),
        Err(e) => match match check {
            Some(a) => x.observe(a).await.map_err(|e| e.to_string()),
            None => Err(e.clone()),
        } {
            Ok(o) if o.verified => Step {
                what,
                ok: true,
                verified: true,
                observed: format!("{} (the call reported: {e})", o.observed),
                error: None,
                unchanged: false,
                refused: None,
            },
            Ok(o) => Step {
                what,
                ok: false,
                verified: false,
                observed: o.observed,
                error: Some(e),
                unchanged: false,
                refused: None,
            },
            Err(_) => unsent(what, e),
        },
    }
}

/// Soft preemption on Slurm: signal the job to checkpoint, wait until its
/// checkpoint moves (its comment's `ckpt_last`) or the grace period ends,
/// then requeue it. What it waited for is a step of its own.
async fn soft_preempt(x: &SlurmExec, job: &str, grace_s: u64) -> Vec<Step> {
    let before = x.checkpoint_of(job).await.ok().and_then(|(c, _)| c);
    let signal = x.checkpoint_signal();
    let signalled = slurm_step(
        x,
        format!("signal {job} {signal}"),
        x.signal(job, signal).await,
        None,
    )
    .await;
    if !signalled.ok {
        return vec![signalled];
    }
    let began = std::time::Instant::now();
    let limit = std::time::Duration::from_secs(grace_s);
    let waited = loop {
        match x.checkpoint_of(job).await {
            Ok((after, _)) if after.is_some() && after > before => {
                break Step::sent(
                    format!("wait for {job}'s checkpoint"),
                    Outcome {
                        verified: true,
                        observed: format!(
                            "checkpoint written after {}",
                            crate::text::duration(began.elapsed().as_secs() as i64)
                        ),
                    },
                );
            }
            Ok((_, false)) => {
                break Step::sent(
                    format!("wait for {job}'s checkpoint"),
                    Outcome {
                        verified: true,
                        observed: "the job ended by itself".into(),
                    },
                );
            }
            _ if began.elapsed() >= limit => {
                break Step::sent(
                    format!("wait for {job}'s checkpoint"),
                    Outcome {
                        verified: true,
                        observed: format!(
                            "no checkpoint seen within {}: requeued without it",
                            crate::text::duration(grace_s as i64)
                        ),
                    },
                );
            }
            _ => tokio::time::sleep(std::time::Duration::from_secs(2)).await,
        }
    };
    let check = Action::Requeue { job: job.into() };
    let requeued = slurm_step(
        x,
        format!("requeue {job}"),
        x.requeue(job).await,
        Some(&check),
    )
    .await;
    vec![signalled, waited, requeued]
}

/// A node drained (or draining) as this action is sent — by another
/// operator since the preview: its reason is kept and nothing is sent for
/// it, and the step says so (nothing of this action's to undo).
async fn taken_out_by_someone(x: &SlurmExec, node: &str, what: &str) -> Option<Step> {
    let n = x.node_now(node).await.ok()?;
    if !matches!(
        n.state,
        crate::model::NodeState::Drain
            | crate::model::NodeState::Draining
            | crate::model::NodeState::Cordoned
    ) {
        return None;
    }
    // The cordon of nightshift's own "drain after the checkpoint" plan:
    // this drain is its second step, and its reason replaces the cordon's.
    if n.reason
        .as_deref()
        .is_some_and(|r| r.ends_with(crate::model::AFTER_CHECKPOINT))
    {
        return None;
    }
    let mut step = Step::sent(
        what.to_string(),
        Outcome {
            verified: true,
            observed: format!(
                "node {node}: already {} by someone else (reason {:?}, kept)",
                n.state.as_str(),
                n.reason.as_deref().unwrap_or("")
            ),
        },
    );
    step.unchanged = true;
    Some(step)
}

async fn slurm_steps(x: &SlurmExec, a: &Action) -> Vec<Step> {
    let what = format!("{} {}", a.verb(), a.target());
    match a {
        Action::Drain {
            node,
            reason,
            requeue,
        } => {
            let drained = match taken_out_by_someone(x, node, &what).await {
                Some(kept) => kept,
                None => slurm_step(x, what, x.drain(node, reason).await, Some(a)).await,
            };
            if !drained.ok {
                return vec![drained];
            }
            let mut steps = vec![drained];
            let jobs = match x.jobs_on(node).await {
                Ok(j) => j,
                Err(e) => {
                    steps.push(unsent(
                        format!("list the jobs on {node}"),
                        format!("{e}: its jobs were not requeued"),
                    ));
                    return steps;
                }
            };
            for (job, requeueable) in jobs {
                if *requeue && !requeueable {
                    steps.push(Step::refuses_requeue(&job, node));
                    continue;
                }
                let check = Action::Requeue { job: job.clone() };
                let (verb, sent, check) = if *requeue {
                    ("requeue", x.requeue(&job).await, Some(&check))
                } else {
                    ("cancel", x.cancel(&job).await, None)
                };
                steps.push(slurm_step(x, format!("{verb} {job}"), sent, check).await);
            }
            steps
        }
        Action::Cordon { node, reason } => match taken_out_by_someone(x, node, &what).await {
            Some(kept) => vec![kept],
            None => vec![
                slurm_step(
                    x,
                    what,
                    x.drain(node, &format!("cordon: {reason}")).await,
                    Some(a),
                )
                .await,
            ],
        },
        Action::Resume { node } => vec![slurm_step(x, what, x.resume(node).await, Some(a)).await],
        Action::Validate { node, level } => x.validate(node, *level).await,
        Action::SetReason { node, reason } => {
            vec![slurm_step(x, what, x.set_reason(node, reason).await, Some(a)).await]
        }
        Action::Preempt {
            job,
            grace_s: Some(g),
        } => soft_preempt(x, job, *g).await,
        Action::Requeue { job } | Action::Preempt { job, .. } => {
            vec![slurm_step(x, what, x.requeue(job).await, Some(a)).await]
        }
        Action::Priority { job, value } => {
            vec![slurm_step(x, what, x.set_priority(job, *value).await, Some(a)).await]
        }
        Action::Hold { job } => vec![slurm_step(x, what, x.hold(job).await, Some(a)).await],
        Action::Release { job } => vec![slurm_step(x, what, x.release(job).await, Some(a)).await],
    }
}
