//! A failure domain's options (a switch, a rack): cordon its nodes for new
//! multi-node work, drain them all, or wait, each with its cost. When the
//! domain is failing (its incident is open), cordoning is the remedy:
//! draining kills every job under it and fixes nothing.

use super::super::SiteParams;
use super::super::base::Base;
use super::super::blast::{Target, blast, blast_domain};
use super::super::error::EngineError;
use super::super::xid::ActionClass;
use super::{
    CapacityOut, Choice, Options, Subject, admit, burning, do_nothing, finish, hung_in, index_of,
    kill_terms,
};
use crate::engine::incidents::IncidentKind;
use crate::model::{Action, Cluster};

/// The options for domain `name` (at any level).
pub fn domain_options(
    c: &Cluster,
    base: &Base,
    name: &str,
    site: &SiteParams,
) -> Result<Options, EngineError> {
    let nodes: Vec<&crate::model::Node> = c
        .nodes
        .iter()
        .filter(|n| n.in_domain(name))
        .map(|n| &**n)
        .collect();
    if nodes.is_empty() {
        return Err(EngineError::NoTarget(name.to_string()));
    }
    let incident = base
        .incidents
        .iter()
        .find(|i| i.kind == IncidentKind::Domain && i.node == name && i.is_open());
    let drain = blast_domain(c, base, name, true, site)?;
    let hung = hung_in(base, &drain);
    // Multi-node jobs with a rank under it (whole gangs): what the fabric
    // takes down with it.
    let jobs: Vec<String> = drain
        .killed
        .iter()
        .filter(|k| k.nodes.len() > 1)
        .map(|k| k.id.clone())
        .collect();
    let in_service: u32 = nodes
        .iter()
        .filter(|n| n.state.schedulable())
        .map(|n| n.gpu_count)
        .sum();
    let cordon = cordon_choice(c, base, name, &nodes, &hung, in_service, site);
    let drain_all = drain_all_choice(c, name, &nodes, &drain);
    // Quiet again with nodes still out (remedied): they go back through
    // their checks, as each node's options and the incident say.
    let quiet = incident.filter(|i| !i.is_failing());
    let incident = incident.filter(|i| i.is_failing());
    let class = if incident.is_some() {
        ActionClass::CordonDomain
    } else {
        ActionClass::None
    };
    let wait = do_nothing(&hung, class);
    let back = quiet.map(|_| back_to_service(c, base, &nodes));
    let mut o = Options {
        target: Subject {
            kind: "domain",
            name: name.to_string(),
            action: class,
            problem: incident
                .map(|i| i.message.clone())
                .or_else(|| quiet.map(|i| format!("{} — {}", i.message, i.status)))
                .unwrap_or_else(|| format!("{name}: no fabric failure seen")),
            jobs,
            hung: hung.keys().cloned().collect(),
        },
        time: c.time,
        options: back
            .clone()
            .into_iter()
            .chain([cordon, drain_all, wait])
            .collect(),
    };
    admit(&mut o, c, base);
    if let (Some(q), Some(_)) = (quiet, &back) {
        let why = format!(
            "links quiet: its nodes out of service go back through their checks ({})",
            q.status
        );
        let pick = index_of(&o, "validate_resume");
        finish(&mut o, pick, why);
    }
    if incident.is_some() {
        let why = format!(
            "the fabric failed, not the GPUs: stop new multi-node work there and get the switch fixed; {}",
            if hung.is_empty() {
                "nothing running is lost".to_string()
            } else {
                format!(
                    "its stalled gangs ({:.0} GPU-hours per hour burning) restart from their checkpoints",
                    burning(&hung)
                )
            }
        );
        let pick = index_of(&o, "cordon_domain");
        finish(&mut o, pick, why);
        if let Some(d) = o.options.iter_mut().find(|c| c.name == "drain_domain") {
            d.why = "drains good GPUs and fixes nothing: the switch is at fault".into();
        }
    }
    Ok(o)
}

/// Drain every node of the domain: whole gangs requeued, good GPUs out.
fn drain_all_choice(
    c: &Cluster,
    name: &str,
    nodes: &[&crate::model::Node],
    drain: &crate::engine::blast::Blast,
) -> Choice {
    let (lost, back, unknowns) = kill_terms(c, drain);
    Choice {
        name: "drain_domain",
        title: format!("drain all {} nodes of {name}", nodes.len()),
        actions: nodes
            .iter()
            .map(|n| {
                Action::Drain {
                    node: n.name.clone(),
                    reason: format!("{name} failing"),
                    requeue: true,
                }
                .command_line()
            })
            .collect(),
        steps: Vec::new(),
        gpu_hours_lost: lost,
        resume_in_s: back,
        capacity_out: CapacityOut {
            gpus: drain.gpus_out_of_service,
            for_s: None,
            note: "until each node is resumed".into(),
        },
        queue_moves: Some(drain.moved.len()),
        unknowns,
        risk: Some(format!(
            "kills {} job(s) under it, single-node ones whose GPUs are fine included",
            drain.killed.len()
        )),
        ..Choice::default()
    }
}

/// A quiet domain's nodes out of service, back through their checks: each
/// empty one validated at its check level, in order; one still running
/// work once it is empty; one whose own GPUs say drain kept out.
fn back_to_service(c: &Cluster, base: &Base, nodes: &[&crate::model::Node]) -> Choice {
    let mut steps = Vec::new();
    let mut manual = Vec::new();
    let mut gpus = 0;
    for n in nodes.iter().filter(|n| !n.state.schedulable()) {
        if base
            .node_verdict(&n.name)
            .is_some_and(|v| crate::engine::validate::own_remedy_pending(v.verdict.action))
        {
            manual.push(format!(
                "{} stays out for its own GPUs (see its incident)",
                n.name
            ));
            continue;
        }
        let level = crate::engine::repeat::check_level(base.history(&n.name));
        let step = Action::Validate {
            node: n.name.clone(),
            level,
        };
        match crate::engine::validate::busy_until(c, &n.name) {
            None => {
                gpus += n.gpu_count;
                steps.push(step);
            }
            Some(by) => manual.push(format!(
                "{}: {}",
                n.name,
                crate::engine::validate::words(level, Some(by))
            )),
        }
    }
    Choice {
        name: "validate_resume",
        title: "validate and resume its nodes out of service".into(),
        actions: steps.iter().map(Action::command_line).collect(),
        steps,
        manual,
        gpu_hours_lost: Some(0.0),
        resume_in_s: Some(0),
        capacity_out: CapacityOut {
            gpus: 0,
            for_s: Some(0),
            note: format!("{gpus} GPUs back in service on a pass"),
        },
        queue_moves: Some(0),
        ..Choice::default()
    }
}

/// Cordon the domain's nodes in service for new work, page the network
/// owner, requeue its stalled gangs (they are lost either way): nothing
/// running dies.
fn cordon_choice(
    c: &Cluster,
    base: &Base,
    name: &str,
    nodes: &[&crate::model::Node],
    hung: &std::collections::BTreeMap<String, f64>,
    in_service: u32,
    site: &SiteParams,
) -> Choice {
    // Cordon: nothing running dies; the stalled gangs are requeued from
    // their checkpoints (they are lost either way).
    let mut requeue_lost = Some(0.0);
    let mut requeue_back = Some(0);
    let mut unknowns = Vec::new();
    let mut steps: Vec<Action> = nodes
        .iter()
        .filter(|n| n.state.schedulable())
        .map(|n| Action::Cordon {
            node: n.name.clone(),
            reason: format!("{name} failing: fabric, not the GPUs"),
        })
        .collect();
    // The requeues are the plan's last steps: their terms on the cluster
    // its cordons leave (issue 39: the row said "back in 5m30s", the
    // requeue's own preview after the cordons "back in 12h05m").
    let mut cordoned = c.clone();
    for n in cordoned.nodes.iter_mut() {
        if steps.iter().any(|a| a.target() == n.name) {
            std::sync::Arc::make_mut(n).state = crate::model::NodeState::Cordoned;
        }
    }
    for id in hung.keys() {
        if let Ok(b) = blast(&cordoned, base, &Target::Requeue { job: id.clone() }, site) {
            let (l, r, u) = kill_terms(&cordoned, &b);
            requeue_lost = requeue_lost.zip(l).map(|(a, b)| a + b);
            requeue_back = requeue_back.zip(r).map(|(a, b): (i64, i64)| a.max(b));
            unknowns.extend(u);
            steps.push(Action::Requeue { job: id.clone() });
        }
    }
    let level = nodes
        .first()
        .and_then(|n| n.domains.iter().find(|d| d.name == name))
        .map_or("domain", |d| d.level.as_str());
    let (owner, check) = super::super::fabric::owner_of(level);
    Choice {
        name: "cordon_domain",
        title: format!(
            "cordon {name}'s {} nodes for new work, page {owner}{}",
            nodes.len(),
            if hung.is_empty() {
                String::new()
            } else {
                ", requeue its stalled gangs".into()
            }
        ),
        actions: steps.iter().map(Action::command_line).collect(),
        steps,
        manual: vec![format!("page {owner}: {name} ({level}) — {check}")],
        gpu_hours_lost: requeue_lost,
        resume_in_s: requeue_back,
        capacity_out: CapacityOut {
            gpus: in_service,
            for_s: None,
            note: format!("no new work there until {owner} fixes it; running jobs keep their GPUs"),
        },
        queue_moves: None,
        unknowns,
        risk: None,
        ..Choice::default()
    }
}
