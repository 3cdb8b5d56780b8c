//! The options for a node: drain now, wait for the checkpoint, reset the
//! GPU only, drain and reboot, drain the node that broke the gang, or do
//! nothing — and which one, why.

use super::node_case::NodeCase;
use super::{
    CapacityOut, Choice, Options, admit, burning, cheapest, do_nothing, finish, hours, index_of,
    kill_terms,
};
use crate::engine::SiteParams;
use crate::engine::base::Base;
use crate::engine::blast::{Blast, blast};
use crate::engine::error::EngineError;
use crate::engine::incidents::IncidentKind;
use crate::engine::xid::ActionClass;
use crate::model::{Action, Cluster, NodeState};
use crate::text;
use std::collections::BTreeMap;

/// The options for a node: from its health verdict and its jobs.
pub fn node_options(
    c: &Cluster,
    base: &Base,
    node: &str,
    site: &SiteParams,
) -> Result<Options, EngineError> {
    let drain = Action::Drain {
        node: node.to_string(),
        reason: String::new(),
        requeue: true,
    };
    let b = blast(c, base, &drain, site)?;
    node_options_with(c, base, node, site, b)
}

/// The same, given the blast radius of draining it (the console has it).
pub fn node_options_with(
    c: &Cluster,
    base: &Base,
    node: &str,
    site: &SiteParams,
    b: Blast,
) -> Result<Options, EngineError> {
    let case = NodeCase::new(c, base, node, site, b)?;
    // Draining with nothing left that a drain ends (jobs that refuse a
    // requeue run on): out already, as far as nightshift can take it.
    let drained = matches!(case.n.state, NodeState::Drain | NodeState::Down)
        || (case.n.state == NodeState::Draining && case.b.killed.is_empty());
    let mut options = vec![if drained {
        case.keep_out()
    } else {
        case.drain_now()
    }];
    if let Some(choice) = case.wait_checkpoint() {
        options.push(choice);
    }
    if let Some(choice) = case.reset_gpu()? {
        options.push(choice);
    }
    if let Some(choice) = case.drain_reboot() {
        options.push(choice);
    }
    if let Some(choice) = drain_broken(c, base, node, case.class, &case.hung, site)? {
        options.insert(0, choice);
    }
    if let Some(choice) = case.repair() {
        options.insert(0, choice);
    }
    if let Some(choice) = case.validate_resume() {
        options.insert(0, choice);
    }
    options.push(do_nothing(&case.hung, case.class));
    let mut o = Options {
        target: case.subject(),
        time: c.time,
        options,
    };
    admit(&mut o, c, base);
    recommend_for_node(&mut o, &case.hung, site);
    if let Some(k) = index_of(&o, "keep_out")
        && crate::engine::validate::remedy_window(c, node, case.class)
    {
        // Out of service and empty: this is the drain window its remedy
        // waited for (issue 58: after its own armed drain fired, "keep
        // running, reset at the next drain window" was advised).
        let why = format!(
            "{} is out of service and empty: the drain window for its remedy — {}, then validate it",
            node,
            case.class.remedy()
        );
        finish(&mut o, Some(k), why);
    }
    if let Some(r) = index_of(&o, "repair")
        && (case.class.needs_drain() || !case.n.state.schedulable())
    {
        // A node that keeps failing goes to repair, not through another
        // reboot: the history is the reason.
        let line = case.history_line().unwrap_or_default();
        let why = format!("{line}: another reboot or reset brings it back to fail again");
        finish(&mut o, Some(r), why);
        for c in &mut o.options {
            if [
                "drain_now",
                "wait_checkpoint",
                "reset_gpu",
                "drain_reboot",
                "validate_resume",
            ]
            .contains(&c.name)
            {
                c.why = format!("puts back in service a node that keeps failing ({line})");
            }
        }
    } else if let Some(v) = index_of(&o, "validate_resume")
        && case.class == ActionClass::None
        && !case.last_check_failed()
    {
        let why = format!(
            "{}: check it before jobs land on it; it is resumed only on a pass",
            case.back_words()
        );
        finish(&mut o, Some(v), why);
    } else if case.last_check_failed()
        && !case.n.state.schedulable()
        && let Some(k) = index_of(&o, "do_nothing")
    {
        // Its GPUs read healthy, but its own check said otherwise: not
        // "healthy: nothing to do" (issue 39).
        let why = format!(
            "its last check failed ({}): keep it out of service, fix what the check found, then validate it again",
            case.n.reason.as_deref().unwrap_or_default()
        );
        finish(&mut o, Some(k), why);
    }
    failing_domain_rule(&mut o, c, base, node, case.class);
    Ok(o)
}

/// A node whose failure domain has an open incident (a leaf switch
/// flapping under it): it is not put back, nor left as it is — its GPU
/// check does not test the fabric (issue 37). Validate-then-resume is not
/// offered; the domain's remedy is ("cordon it", or "keep it out until the
/// domain is fixed" when it is out already), and recommended unless the
/// node's own GPUs need more (a drain).
fn failing_domain_rule(o: &mut Options, c: &Cluster, base: &Base, node: &str, class: ActionClass) {
    let Some(d) = base.incidents.iter().find(|i| {
        i.kind == IncidentKind::Domain && i.is_failing() && i.nodes.iter().any(|n| n == node)
    }) else {
        return;
    };
    o.options.retain(|c| c.name != "validate_resume");
    let in_service = c.node(node).is_some_and(|n| n.state.schedulable());
    let why = format!(
        "{} is failing ({}): {node} stays out of new multi-node work until it is fixed; its GPU check does not test the fabric",
        d.node, d.id
    );
    let choice = if in_service {
        let step = Action::Cordon {
            node: node.to_string(),
            reason: format!("{} failing ({})", d.node, d.id),
        };
        Choice {
            name: "domain_remedy",
            title: format!("cordon it: {} is failing (the domain's remedy)", d.node),
            actions: vec![step.command_line()],
            steps: vec![step],
            manual: vec![format!("the network owner fixes {}", d.node)],
            gpu_hours_lost: Some(0.0),
            queue_moves: Some(0),
            ..Choice::default()
        }
    } else {
        Choice {
            name: "domain_remedy",
            title: format!("keep it out until {} is fixed", d.node),
            manual: vec![
                format!("the network owner fixes {}", d.node),
                format!("then validate {node} and resume it"),
            ],
            gpu_hours_lost: Some(0.0),
            queue_moves: Some(0),
            ..Choice::default()
        }
    };
    o.options.insert(0, choice);
    let picked = o.options.iter().position(|c| c.recommended);
    let own_drain = class.needs_drain()
        && picked.is_some_and(|p| !["do_nothing", "domain_remedy"].contains(&o.options[p].name));
    if !own_drain {
        finish(o, Some(0), why);
    }
}

/// What every option for one node reads: the node, its verdict, the blast
/// radius of draining it and what that costs.
/// For a healthy node carrying ranks of a gang hung by another node's
/// broken GPU: the option to drain that node, named.
fn drain_broken(
    c: &Cluster,
    base: &Base,
    node: &str,
    class: ActionClass,
    hung: &BTreeMap<String, f64>,
    site: &SiteParams,
) -> Result<Option<Choice>, EngineError> {
    // A healthy node carrying ranks of a gang hung by another node's broken
    // GPU: the remedy is that node's. Draining this one takes healthy
    // capacity out for nothing.
    let broken: Option<String> = (!class.needs_drain())
        .then(|| {
            base.stalls
                .iter()
                .filter(|s| hung.contains_key(&s.job) && s.node != node)
                .map(|s| s.node.clone())
                .find(|x| base.unusable.contains(x.as_str()))
        })
        .flatten();
    let Some(broken) = &broken else {
        return Ok(None);
    };
    let there = Action::Drain {
        node: broken.clone(),
        reason: base
            .drain_reason(broken)
            .unwrap_or_else(|| crate::model::PLAIN_REASON.to_string()),
        requeue: true,
    };
    let bb = blast(c, base, &there, site)?;
    let (l, bk, u) = kill_terms(c, &bb);
    let what = base
        .node_verdict(broken)
        .map_or_else(String::new, |v| format!(": {}", v.verdict.summary));
    Ok(Some(Choice {
        name: "drain_broken",
        title: format!("drain {broken}, the gang's broken node"),
        actions: vec![there.command_line()],
        steps: vec![there.clone()],
        manual: vec![format!("{broken}{what}")],
        gpu_hours_lost: l,
        resume_in_s: bk,
        capacity_out: CapacityOut {
            gpus: c
                .node(broken)
                .filter(|n| n.state.schedulable())
                .map_or(0, |n| n.gpu_count),
            for_s: None,
            note: format!("{broken}, until its remedy and a resume; {node} keeps running"),
        },
        queue_moves: Some(bb.moved.len()),
        unknowns: u,
        ..Choice::default()
    }))
}

/// Marks one option recommended and says why in one line.
fn recommend_for_node(o: &mut Options, hung: &BTreeMap<String, f64>, site: &SiteParams) {
    let class = o.target.action;
    // The catalog's remedy (drain and reset, drain and look) before a
    // reboot, which is offered where the remedy is lighter and is a guess
    // there: an NVLink storm's incident says "drain+look", and so does its
    // recommended option (issue 39).
    let drains = ["drain_now", "keep_out", "reset_gpu"];
    let pick_drain = |o: &Options| cheapest(o, &drains).or_else(|| cheapest(o, &["drain_reboot"]));
    let wait = index_of(o, "wait_checkpoint").filter(|&w| o.options[w].gpu_hours_lost.is_some());
    let wait_in = wait.and_then(|w| o.options[w].wait_s).map(text::duration);
    let drain_lost = index_of(o, "drain_now").and_then(|i| o.options[i].gpu_hours_lost);
    let broken = index_of(o, "drain_broken");
    let (pick, why) = if let Some(i) = broken {
        (
            Some(i),
            format!(
                "{} is healthy: its job(s) {} hang because of a rank on a broken GPU elsewhere; {} (burning {:.0} GPU-hours per hour), not this node",
                o.target.name,
                hung.keys().cloned().collect::<Vec<_>>().join(","),
                o.options[i].title,
                burning(hung)
            ),
        )
    } else if !hung.is_empty() {
        (
            pick_drain(o),
            format!(
                "job(s) {} already hung ({}): waiting for a checkpoint saves nothing, it burns {:.0} GPU-hours per hour",
                hung.keys().cloned().collect::<Vec<_>>().join(","),
                o.target.problem,
                burning(hung)
            ),
        )
    } else if class.needs_drain() {
        let mut why = format!("{}: do not run on it", o.target.problem);
        if let (Some(w), Some(dl)) = (wait, drain_lost)
            && let Some(wl) = o.options[w].gpu_hours_lost
            && wl < dl
        {
            why.push_str(&format!(
                "; waiting for the checkpoint in {} would save {:.1} GPU-hours but keeps running on it",
                wait_in.clone().unwrap_or_default(),
                dl - wl
            ));
        }
        (pick_drain(o), why)
    } else if class == ActionClass::ResetNextDrain {
        let due = wait.filter(|&w| {
            o.options[w]
                .wait_s
                .is_some_and(|s| s <= site.checkpoint_wait_max_s as i64)
        });
        match due {
            Some(w) => {
                let l = o.options[w].gpu_hours_lost;
                (
                    Some(w),
                    format!(
                        "next checkpoint in {}: draining right after it loses {} GPU-hours instead of {} now",
                        wait_in.unwrap_or_default(),
                        hours(l),
                        hours(drain_lost),
                    ),
                )
            }
            None => (
                index_of(o, "do_nothing"),
                format!(
                    "no checkpoint due within {}: keep running, {}",
                    text::duration(site.checkpoint_wait_max_s as i64),
                    class.advice()
                ),
            ),
        }
    } else {
        (
            index_of(o, "do_nothing"),
            match class {
                ActionClass::None => "healthy: nothing to do".to_string(),
                c => format!("{}: {}", o.target.problem, c.advice()),
            },
        )
    };
    finish(o, pick, why);
}
