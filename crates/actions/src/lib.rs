//! Guarded actions: every change to the cluster goes through one guard —
//! preview → confirm → execute → verify → audit — for the TUI and the CLI
//! alike. Each backend only supplies an executor.

// The layers below under their own names, so `crate::model` and
// `crate::sources` read the same in every crate.
use nightshift_core::{engine, host, model, protocol, text};
use nightshift_sources as sources;

pub mod audit;
pub mod autopilot_state;
pub mod executor;
pub mod follow;
pub mod guard;
pub mod orchestrator;
pub mod policy;
pub mod runner;
pub mod seal;

pub use crate::model::Action;

pub use crate::engine::action::top_priority;

#[cfg(test)]
mod tests;
