//! Everything the console shows from the engine for one snapshot: the queue
//! plan, health verdicts, and the answers for what the on-call is looking
//! at (why and restore for a job, the drain blast radius for a node).

use super::SiteParams;
use super::blast::{Blast, Target, blast};
use super::health::{NodeVerdict, verdicts};
use super::plan::{Plan, plan};
use super::restore::{Restore, restore};
use super::why::{Why, why};
use super::xid::XidCatalog;
use crate::model::{Cluster, Timestamp};
use std::collections::HashMap;

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
    },
    Node {
        name: String,
        drain: Result<Box<Blast>, String>,
    },
}

#[derive(Debug, Clone, Default)]
pub struct Analysis {
    /// The snapshot time this answers for.
    pub time: Timestamp,
    pub plan: Plan,
    pub verdicts: Vec<NodeVerdict>,
    pub verdict_of_node: HashMap<String, usize>,
    pub focus: Option<FocusAnswer>,
}

impl Analysis {
    pub fn compute(
        c: &Cluster,
        prev: Option<&Cluster>,
        focus: &Focus,
        site: &SiteParams,
        cat: &XidCatalog,
    ) -> Analysis {
        let plan = plan(c, site);
        let verdicts = verdicts(c, prev, cat, site);
        let verdict_of_node = verdicts
            .iter()
            .enumerate()
            .map(|(i, v)| (v.node.clone(), i))
            .collect();
        let focus = match focus {
            Focus::None => None,
            Focus::Job(id) => c
                .jobs
                .iter()
                .position(|j| &j.id == id)
                .map(|j| FocusAnswer::Job {
                    id: id.clone(),
                    why: if c.jobs[j].state.is_pending() {
                        why(c, j, &plan).map(Box::new)
                    } else {
                        None
                    },
                    restore: if c.jobs[j].state.holds_resources() {
                        restore(c, j, site).map(Box::new)
                    } else {
                        None
                    },
                }),
            Focus::Node(name) => Some(FocusAnswer::Node {
                name: name.clone(),
                drain: blast(
                    c,
                    &Target::Drain {
                        node: name.clone(),
                        requeue: true,
                    },
                    site,
                )
                .map(Box::new),
            }),
        };
        Analysis {
            time: c.time,
            plan,
            verdicts,
            verdict_of_node,
            focus,
        }
    }

    pub fn node_verdict(&self, node: &str) -> Option<&NodeVerdict> {
        self.verdict_of_node
            .get(node)
            .and_then(|&i| self.verdicts.get(i))
    }
}
