//! The options for a job someone wants to preempt.

use super::{
    CapacityOut, Choice, Options, Subject, admit, burning, do_nothing, finish, hours, hung_in,
    index_of, kill_terms, wait_terms,
};
use crate::engine::SiteParams;
use crate::engine::base::Base;
use crate::engine::blast::{Blast, blast, with_grace_period};
use crate::engine::error::EngineError;
use crate::engine::restore::write_time;
use crate::engine::xid::ActionClass;
use crate::model::{Action, Cluster};
use crate::text;

/// The options for a running job someone wants to preempt: hard, soft
/// with a grace period (`grace_s`, else long enough for its checkpoint
/// write), after its next checkpoint, or not at all.
pub fn job_options(
    c: &Cluster,
    base: &Base,
    job: &str,
    grace_s: Option<u64>,
    site: &SiteParams,
) -> Result<Options, EngineError> {
    let j = c
        .job(job)
        .ok_or_else(|| EngineError::NoJob(job.to_string()))?;
    if !j.state.holds_resources() {
        return Err(EngineError::NoOptions {
            job: job.to_string(),
            state: j.state.as_str(),
        });
    }
    let hard = Action::Preempt {
        job: job.to_string(),
        grace_s: None,
    };
    if let Some(e) = crate::engine::admit::cannot_requeue(c, &hard) {
        return Ok(unrequeueable(c, base, j, &e));
    }
    let b = blast(c, base, &hard, site)?;
    job_options_with(c, base, job, grace_s, site, b)
}

/// A job the scheduler will not requeue (--no-requeue; a bare pod): every
/// preemption nightshift can send is a requeue, so each is shown refused
/// with the guard's reason, and doing nothing is what is recommended.
fn unrequeueable(
    c: &Cluster,
    base: &Base,
    j: &crate::model::Job,
    _refused_for: &EngineError,
) -> Options {
    let hard = Action::Preempt {
        job: j.id.clone(),
        grace_s: None,
    };
    let preempt = Choice {
        name: "hard_preempt",
        title: "preempt now".into(),
        actions: vec![hard.command_line()],
        steps: vec![hard],
        ..Choice::default()
    };
    let mut nothing = do_nothing(&Default::default(), ActionClass::None);
    nothing.risk = Some("the job keeps its GPUs: whatever needed them waits".into());
    let mut o = Options {
        target: Subject {
            kind: "job",
            name: j.id.clone(),
            action: ActionClass::None,
            problem: format!(
                "preempt {} ({}, {} GPUs)",
                j.id,
                j.name,
                text::opt(j.gpus_requested())
            ),
            jobs: vec![j.id.clone()],
            hung: Vec::new(),
        },
        time: c.time,
        options: vec![preempt, nothing],
    };
    admit(&mut o, c, base);
    finish(&mut o, None, String::new());
    o
}

/// The same, given the blast radius of preempting it now (the console
/// has it: it also gives the job's restore).
pub fn job_options_with(
    c: &Cluster,
    base: &Base,
    job: &str,
    grace_s: Option<u64>,
    site: &SiteParams,
    b: Blast,
) -> Result<Options, EngineError> {
    let j = c
        .job(job)
        .ok_or_else(|| EngineError::NoJob(job.to_string()))?;
    let hard = Action::Preempt {
        job: job.to_string(),
        grace_s: None,
    };
    let hung = hung_in(base, &b);
    let (lost, back, unknowns) = kill_terms(c, &b);
    let gpus = b.gpus_freed;
    let mut options = vec![Choice {
        name: "hard_preempt",
        title: "preempt now".into(),
        actions: vec![hard.command_line()],
        steps: vec![hard.clone()],
        gpu_hours_lost: lost,
        resume_in_s: back,
        capacity_out: CapacityOut {
            gpus: 0,
            for_s: Some(0),
            note: format!("{gpus} GPUs freed at once"),
        },
        queue_moves: Some(b.moved.len()),
        unknowns: unknowns.clone(),
        ..Choice::default()
    }];

    // A scheduler with no signal to ask for a checkpoint cannot do what a
    // soft preemption promises: not offered there.
    if !c.no_job_signal {
        options.extend(soft_preempt(c, base, job, grace_s, site, &b));
    }

    let (wait, lost_w, unknowns_w) = match wait_terms(c, &b, &hung) {
        Ok((w, l)) => (Some(w), Some(l), unknowns.clone()),
        Err(e) => (None, None, e),
    };
    options.push(Choice {
        name: "wait_checkpoint",
        title: match wait {
            Some(w) => format!(
                "preempt after its next checkpoint (in {}, {})",
                text::duration(w),
                text::clock(c.time + w)
            ),
            None => "preempt after its next checkpoint".into(),
        },
        actions: vec![hard.command_line()],
        steps: vec![hard.clone()],
        gpu_hours_lost: lost_w,
        resume_in_s: wait.zip(back).map(|(w, b)| w + b),
        capacity_out: CapacityOut {
            gpus: 0,
            for_s: Some(0),
            note: match wait {
                Some(w) => format!("{gpus} GPUs freed in {}", text::duration(w)),
                None => "freed when it checkpoints".into(),
            },
        },
        queue_moves: Some(b.moved.len()),
        wait_s: wait,
        armed_step: Some(0),
        unknowns: unknowns_w,
        ..Choice::default()
    });
    options.push(do_nothing(&hung, ActionClass::None));
    if let Some(d) = options.last_mut() {
        d.risk = Some("the job keeps its GPUs: whatever needed them waits".into());
    }
    let mut o = Options {
        target: Subject {
            kind: "job",
            name: job.to_string(),
            action: ActionClass::None,
            problem: format!(
                "preempt {} ({}, {} GPUs)",
                job,
                j.name,
                text::opt(j.gpus_requested())
            ),
            jobs: b.killed.iter().map(|k| k.id.clone()).collect(),
            hung: hung.keys().cloned().collect(),
        },
        time: c.time,
        options,
    };
    admit(&mut o, c, base);
    let (pick, why) = recommend_for_job(&o, &hung, wait, lost_w, lost, site);
    finish(&mut o, pick, why);
    Ok(o)
}

/// Soft preemption: the grace given, else the slowest killed job's write
/// with a quarter to spare, in whole minutes; none when that is unknown.
fn soft_preempt(
    c: &Cluster,
    base: &Base,
    job: &str,
    grace_s: Option<u64>,
    site: &SiteParams,
    b: &Blast,
) -> Option<Choice> {
    let gpus = b.gpus_freed;
    let writes: Vec<Option<f64>> = b
        .killed
        .iter()
        .filter_map(|k| c.job(&k.id))
        .map(|kj| write_time(kj, site).value)
        .collect();
    let grace = grace_s.or_else(|| {
        let w: Option<Vec<f64>> = writes.iter().copied().collect();
        w.map(|w| {
            let m = w.into_iter().fold(0.0, f64::max) * 1.25;
            ((m / 60.0).ceil().max(1.0) * 60.0) as u64
        })
    });
    let g = grace?;
    let soft = Action::Preempt {
        job: job.to_string(),
        grace_s: Some(g),
    };
    let sb = with_grace_period(b, c, base, g, site);
    let (l, bk, mut u) = kill_terms(c, &sb);
    for k in &sb.killed {
        if let Some(gr) = &k.restore.grace
            && gr.fits != Some(true)
        {
            u.push(gr.note.clone());
        }
    }
    let fits = sb.killed.iter().all(|k| {
        k.restore
            .grace
            .as_ref()
            .is_some_and(|g| g.fits == Some(true))
    });
    Some(Choice {
        name: "soft_preempt",
        title: format!(
            "preempt with a {} grace period (checkpoint on the way out)",
            text::duration(g as i64)
        ),
        actions: vec![soft.command_line()],
        steps: vec![soft],
        gpu_hours_lost: l,
        resume_in_s: bk,
        capacity_out: CapacityOut {
            gpus: 0,
            for_s: Some(0),
            note: format!("{gpus} GPUs freed within {}", text::duration(g as i64)),
        },
        queue_moves: Some(sb.moved.len()),
        wait_s: Some(g as i64),
        unknowns: if fits { Vec::new() } else { u },
        risk: Some(
            "a job that does not handle SIGUSR1 dies of it at once (its default): for jobs that checkpoint on the signal"
                .into(),
        ),
        ..Choice::default()
    })
}

/// Which option to take, and why: hard when the gang is hung, else after
/// its next checkpoint when that is soon and loses less, else a grace
/// period long enough for its write, else now.
fn recommend_for_job(
    o: &Options,
    hung: &std::collections::BTreeMap<String, f64>,
    wait: Option<i64>,
    lost_w: Option<f64>,
    lost: Option<f64>,
    site: &SiteParams,
) -> (Option<usize>, String) {
    let soft = index_of(o, "soft_preempt");
    let soft_ok = soft.filter(|&s| o.options[s].unknowns.is_empty());
    if !hung.is_empty() {
        (
            index_of(o, "hard_preempt"),
            format!(
                "job(s) {} hung: no checkpoint will come, every hour burns {:.0} GPU-hours",
                hung.keys().cloned().collect::<Vec<_>>().join(","),
                burning(hung)
            ),
        )
    } else if let (Some(w), Some(ws)) = (index_of(o, "wait_checkpoint"), wait)
        && lost_w.is_some()
        && soft_ok.is_none_or(|s| o.options[s].wait_s.is_some_and(|g| ws <= g))
        && ws <= site.checkpoint_wait_max_s as i64
    {
        (
            Some(w),
            format!(
                "its next checkpoint is in {}: preempting right after it loses {} GPU-hours instead of {} now",
                text::duration(ws),
                hours(lost_w),
                hours(lost)
            ),
        )
    } else if let Some(s) = soft_ok {
        (
            Some(s),
            format!(
                "a grace period long enough for its checkpoint write loses {} GPU-hours instead of {}",
                hours(o.options[s].gpu_hours_lost),
                hours(lost)
            ),
        )
    } else {
        (
            index_of(o, "hard_preempt"),
            "no checkpoint can be taken on the way out in time: preempt now".to_string(),
        )
    }
}
