//! Everything the console shows from the engine for one snapshot: the queue
//! plan, health verdicts, and the answers for what the on-call is looking
//! at (why and restore for a job, the drain blast radius for a node).

use super::SiteParams;
pub use super::base::Base;
use super::blast::{Blast, Target, blast};
use super::health::NodeVerdict;
use super::options::{Options, job_options_with, node_options_with};
use super::restore::{Restore, restore};
use super::why::{Why, why};
use super::xid::XidCatalog;
use crate::model::Cluster;
use std::sync::Arc;

/// What the screen is focused on, for the answers that cost a what-if.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Focus {
    #[default]
    None,
    Job(String),
    Node(String),
}

#[derive(Debug, Clone)]
pub enum FocusAnswer {
    Job {
        id: String,
        why: Option<Box<Why>>,
        restore: Option<Box<Restore>>,
        /// Its preemption options, when it runs.
        options: Option<Box<Options>>,
    },
    Node {
        name: String,
        drain: Result<Box<Blast>, super::error::EngineError>,
        /// The remediation options, side by side.
        options: Option<Box<Options>>,
    },
}

#[derive(Debug, Clone, Default)]
pub struct Analysis {
    /// Shared between the analyses of one snapshot: a new focus reuses it.
    pub base: Arc<Base>,
    pub focus: Option<FocusAnswer>,
    /// The snapshot analysed, where the analyst sends it with its base
    /// (issue 60: one message, the pair): what a request to the runner
    /// carries with the base.
    pub cluster: Option<Arc<Cluster>>,
}

impl Analysis {
    pub fn compute(
        c: &Cluster,
        prev: Option<&Cluster>,
        focus: &Focus,
        site: &SiteParams,
        cat: &XidCatalog,
    ) -> Analysis {
        Analysis::with_base(Arc::new(Base::compute(c, prev, site, cat)), c, focus, site)
    }

    /// The answers for `focus`, on a base already computed for `c`.
    pub fn with_base(base: Arc<Base>, c: &Cluster, focus: &Focus, site: &SiteParams) -> Analysis {
        let focus = match focus {
            Focus::None => None,
            Focus::Job(id) => c
                .jobs
                .iter()
                .position(|j| &j.id == id)
                .map(|j| (j, running_answers(c, &base, j, site)))
                .map(|(j, running)| FocusAnswer::Job {
                    id: id.clone(),
                    why: if c.jobs[j].state.is_pending() {
                        why(c, j, &base).map(Box::new)
                    } else {
                        None
                    },
                    restore: running.as_ref().and_then(|(r, _)| r.clone()).map(Box::new),
                    options: running.and_then(|(_, o)| o).map(Box::new),
                }),
            // A failure domain's incident: the domain's blast and options.
            Focus::Node(name)
                if c.node(name).is_none() && c.nodes.iter().any(|n| n.in_domain(name)) =>
            {
                let drain = super::blast::blast_domain(c, &base, name, true, site);
                let options = super::options::domain_options(c, &base, name, site)
                    .ok()
                    .map(Box::new);
                Some(FocusAnswer::Node {
                    name: name.clone(),
                    drain: drain.map(Box::new),
                    options,
                })
            }
            Focus::Node(name) => {
                let drain = blast(
                    c,
                    &base,
                    &Target::Drain {
                        reason: String::new(),
                        node: name.clone(),
                        requeue: true,
                    },
                    site,
                );
                let options = drain
                    .as_ref()
                    .ok()
                    .and_then(|b| node_options_with(c, &base, name, site, b.clone()).ok())
                    .map(Box::new);
                Some(FocusAnswer::Node {
                    name: name.clone(),
                    drain: drain.map(Box::new),
                    options,
                })
            }
        };
        Analysis {
            base,
            focus,
            cluster: None,
        }
    }

    pub fn node_verdict(&self, node: &str) -> Option<&NodeVerdict> {
        self.base.node_verdict(node)
    }
}

/// A running job's restore if restarted now and its preemption options,
/// from one what-if: where preempted jobs are requeued, preempting it is
/// requeueing it, and the blast's restore of it is the restore.
fn running_answers(
    c: &Cluster,
    base: &Base,
    j: usize,
    site: &SiteParams,
) -> Option<(Option<Restore>, Option<Options>)> {
    let job = c.jobs.get(j)?;
    if !job.state.holds_resources() {
        return None;
    }
    let hard = Target::Preempt {
        job: job.id.clone(),
        grace_s: None,
    };
    let Ok(b) = blast(c, base, &hard, site) else {
        // A job that refuses a requeue: its options say so, none offered.
        let o = super::options::job_options(c, base, &job.id, None, site).ok();
        return Some((restore(c, base, j, site), o));
    };
    let r = if site.preempt_requeues {
        b.killed
            .iter()
            .find(|k| k.id == job.id)
            .map(|k| k.restore.clone())
    } else {
        restore(c, base, j, site)
    };
    let o = job_options_with(c, base, &job.id, None, site, b).ok();
    Some((r, o))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::{Sim, SimConfig};

    #[test]
    fn a_new_focus_reuses_the_snapshots_plan_and_verdicts() {
        let c = Sim::new(SimConfig::default()).expect("sim").snapshot();
        let (site, cat) = (SiteParams::default(), XidCatalog::default());
        let first = Analysis::compute(&c, None, &Focus::Node("h100-03".into()), &site, &cat);
        let second = Analysis::with_base(first.base.clone(), &c, &Focus::Job("4722".into()), &site);
        assert!(Arc::ptr_eq(&first.base, &second.base));
        assert!(
            matches!(&first.focus, Some(FocusAnswer::Node { drain: Ok(b), .. }) if b.killed.len() == 1)
        );
        assert!(matches!(
            &second.focus,
            Some(FocusAnswer::Job { why: Some(_), .. })
        ));
        assert!(second.node_verdict("h100-03").is_some());
    }
}
