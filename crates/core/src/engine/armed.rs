//! Armed steps (issue 29): when an option's later step is due, read from
//! the snapshot alone. Pure; the guard re-checks its rules when it fires.

use crate::model::{Armed, Cluster, JobMark, Timestamp, Trigger};
use crate::text;

/// Where an armed step stands on a snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Due {
    /// Not yet: what it waits for, in one line.
    Wait(String),
    /// Now: why, in one line.
    Fire(String),
}

/// The trigger "after the checkpoint" of the jobs a drain of `node` would
/// end: each job's last checkpoint now, to be seen moving; at the latest
/// one interval after the last of them is due (the next checkpoint, or now
/// when it is overdue) — none when a job's interval is not known.
pub fn after_checkpoints(c: &Cluster, jobs: &[String]) -> Trigger {
    let by = jobs
        .iter()
        .map(|id| {
            let j = c.job(id)?;
            let every = j.checkpoint.interval_s.get()? as Timestamp;
            let due = j
                .checkpoint
                .last
                .get()
                .map_or(c.time, |l| (l + every).max(c.time));
            Some(due + every)
        })
        .collect::<Option<Vec<_>>>()
        .and_then(|t| t.into_iter().max());
    Trigger::Checkpoints {
        jobs: jobs
            .iter()
            .map(|id| JobMark {
                job: id.clone(),
                ckpt_last: c.job(id).and_then(|j| j.checkpoint.last.get()),
            })
            .collect(),
        by,
    }
}

/// Whether `a` is due on `c`.
pub fn due(a: &Armed, c: &Cluster) -> Due {
    match &a.when {
        Trigger::At { time } if c.time >= *time => {
            Due::Fire(format!("{} has come", text::moment(*time, c.time)))
        }
        Trigger::At { time } => Due::Wait(format!(
            "the time {} (in {})",
            text::moment(*time, c.time),
            text::duration(time - c.time)
        )),
        Trigger::Checkpoints { jobs, by } => {
            let mut waiting = Vec::new();
            let mut done = Vec::new();
            for m in jobs {
                match c.job(&m.job) {
                    Some(j) if j.state.holds_resources() => {
                        let now = j.checkpoint.last.get();
                        if now.is_some() && now > m.ckpt_last {
                            done.push(format!(
                                "job {} checkpointed at {}",
                                m.job,
                                text::moment(now.unwrap_or_default(), c.time)
                            ));
                        } else {
                            let next = j
                                .checkpoint
                                .last
                                .get()
                                .zip(j.checkpoint.interval_s.get())
                                .map(|(l, i)| l + i as Timestamp);
                            waiting.push(match next {
                                Some(next) => format!(
                                    "job {}'s checkpoint (next {})",
                                    m.job,
                                    text::moment(next, c.time)
                                ),
                                None => format!("job {}'s checkpoint", m.job),
                            });
                        }
                    }
                    _ => done.push(format!("job {} no longer runs", m.job)),
                }
            }
            match by {
                _ if waiting.is_empty() => Due::Fire(done.join(", ")),
                Some(by) if c.time >= *by => Due::Fire(format!(
                    "no checkpoint by {} ({}): sent anyway",
                    text::moment(*by, c.time),
                    waiting.join(", ")
                )),
                Some(by) => Due::Wait(format!(
                    "{}; at the latest {}",
                    waiting.join(", "),
                    text::moment(*by, c.time)
                )),
                None => Due::Wait(waiting.join(", ")),
            }
        }
    }
}

/// The plan in one line: `drain h100-05 after job 4701's checkpoint`.
pub fn describe(a: &Armed) -> String {
    describe_plan(&a.action, &a.when)
}

/// `action` armed `when`, in one line, before it is armed.
pub fn describe_plan(action: &crate::model::Action, when: &Trigger) -> String {
    let what = format!("{} {}", action.verb(), action.target());
    match when {
        Trigger::At { time } => format!("{what} at {}", text::clock(*time)),
        Trigger::Checkpoints { jobs, .. } if jobs.is_empty() => what,
        Trigger::Checkpoints { jobs, .. } => {
            let ids: Vec<&str> = jobs.iter().map(|m| m.job.as_str()).collect();
            format!(
                "{what} after the checkpoint of job{} {}",
                if ids.len() == 1 { "" } else { "s" },
                ids.join(", ")
            )
        }
    }
}

/// An armed option's cost as the engine counts it (the figures of its
/// row in the options), in one line for its confirmation: the preview
/// there is of what is sent now — the cordon before an armed drain, or
/// the armed step itself as if sent now — not of the plan. `None` for an
/// option that arms nothing.
pub fn plan_cost(choice: &crate::engine::options::Choice) -> Option<String> {
    let k = choice.armed_step?;
    Some(plan_cost_of(choice.steps.get(k)?, k == 0, choice))
}

/// The same for `step` armed as `choice` waits (a requeue armed as the
/// job's "preempt after its checkpoint" loses the same); `first`: nothing
/// is sent before it, so its preview is of it sent now.
pub fn plan_cost_of(
    step: &crate::model::Action,
    first: bool,
    choice: &crate::engine::options::Choice,
) -> String {
    let lost = match (choice.gpu_hours_lost, choice.unknowns.first()) {
        (Some(h), _) => format!("{h:.1} GPU-h lost"),
        (None, Some(why)) => format!("GPU-h lost unknown ({why})"),
        (None, None) => "GPU-h lost unknown".to_string(),
    };
    let when = choice
        .wait_s
        .map_or("when the checkpoint is seen".to_string(), |w| {
            format!("in about {}", text::duration(w))
        });
    let now = if first {
        "; the preview's GPU-h are lost only if it were sent now"
    } else {
        ""
    };
    format!(
        "as planned: {} {} {when}, {lost}{now}",
        step.verb(),
        step.target()
    )
}

/// Whether `a` acts on `node`.
pub fn on_node(a: &Armed, node: &str) -> bool {
    a.action.on_node() && a.action.target() == node
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::fixture::*;
    use crate::model::Action;
    use std::sync::Arc;

    fn armed(c: &Cluster, jobs: &[String]) -> Armed {
        Armed {
            id: "a1".into(),
            action: Action::Drain {
                node: "n1".into(),
                reason: "remap".into(),
                requeue: true,
            },
            when: after_checkpoints(c, jobs),
            armed_at: c.time,
            cluster: "c".into(),
            confirmed_by: String::new(),
            preview_digest: String::new(),
            tag: String::new(),
            forced: false,
        }
    }

    #[test]
    fn a_drain_armed_after_the_checkpoint_fires_when_it_moves_or_the_job_ends() {
        let mut c = cluster();
        add_node(&mut c, "n1", "p", 8);
        let j = run(&mut c, "r", &["n1"], 8, 7200, 86_400);
        {
            let job = Arc::make_mut(&mut c.jobs[j]);
            job.checkpoint.interval_s = Some(1800).into();
            job.checkpoint.last = Some(NOW - 1500).into();
        }
        let a = armed(&c, &["r".to_string()]);
        assert_eq!(describe(&a), "drain n1 after the checkpoint of job r");
        match due(&a, &c) {
            Due::Wait(w) => assert!(w.starts_with("job r's checkpoint (next "), "{w}"),
            other => panic!("{other:?}"),
        }
        // The checkpoint moved.
        let mut later = c.clone();
        Arc::make_mut(&mut later.jobs[j]).checkpoint.last = Some(NOW + 300).into();
        later.time = NOW + 310;
        assert!(matches!(due(&a, &later), Due::Fire(w) if w.contains("checkpointed")));
        // Or it never came: an interval after it was due (02:53:30 + 30m
        // here), the step goes anyway.
        let Trigger::Checkpoints { by, .. } = &a.when else {
            panic!("{:?}", a.when)
        };
        assert_eq!(*by, Some(NOW + 300 + 1800));
        match due(&a, &c) {
            Due::Wait(w) => assert!(
                w.ends_with(&format!("; at the latest {}", text::clock(NOW + 2100))),
                "{w}"
            ),
            other => panic!("{other:?}"),
        }
        let mut hung = c.clone();
        hung.time = NOW + 2100;
        assert!(
            matches!(due(&a, &hung), Due::Fire(w) if w.contains("sent anyway")),
            "{:?}",
            due(&a, &hung)
        );
        // Or the job is gone.
        let mut gone = c.clone();
        gone.jobs.clear();
        assert!(matches!(due(&a, &gone), Due::Fire(w) if w.contains("no longer runs")));
        // A time.
        let at = Armed {
            when: Trigger::At { time: NOW + 60 },
            ..a.clone()
        };
        assert!(matches!(due(&at, &c), Due::Wait(_)));
        assert!(matches!(due(&at, &later), Due::Fire(_)));
    }
}
