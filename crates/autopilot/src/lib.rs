//! The autopilot (issue 61): site policies that carry out nightshift's own
//! plan for the incidents they take — through the same guard as a person,
//! recorded as `policy:<name>` — and page a person only for what a policy
//! cannot decide. The policies ([`policy`]) read an incident's facts
//! ([`facts`]); [`decide`] is a pure function of the snapshot, its
//! analysis and the autopilot's past ([`past`], from the audit log);
//! [`carry`] sends a live policy's plan; [`page`] pages Alertmanager and
//! PagerDuty. `nightshift autopilot` runs them (the program's
//! `autopilot_commands`).

// The layers below under their own names, as in every crate.
use nightshift_actions as actions;
use nightshift_core::{engine, model, text};
use nightshift_sources as sources;

pub mod carry;
pub mod decide;
pub mod facts;
pub mod page;
pub mod past;
pub mod policy;

#[cfg(test)]
mod tests;
