//! nightshift's backends: each source turns its wire format into model
//! updates (`sources`); actions go back to them through one guard
//! (`actions`); `recording` keeps a night to replay, `postmortem` reads it
//! back. Built on the core crate, below the console.

// The core's modules under their own names, so `crate::model` reads the
// same in every crate.
use nightshift_core::{engine, host, limits, model, protocol, report, text};

pub mod actions;
#[cfg(test)]
mod fuzzing;
pub mod postmortem;
pub mod recording;
pub mod sources;
