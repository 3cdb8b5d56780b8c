//! nightshift: a terminal console for the engineer on call for a GPU cluster.
//!
//! Data flows one way: `sources` → `model` → `views`; `app` holds the state
//! and the update loop; `tui` owns the terminal.

pub mod action_commands;
pub mod actions;
pub mod agent;
pub mod analyst;
pub mod app;
pub mod cli;
pub mod columns;
pub mod config;
pub mod engine;
#[cfg(test)]
mod fuzzing;
pub mod host;
pub mod limits;
pub mod logging;
pub mod model;
pub mod output;
pub mod postmortem;
pub mod recording;
pub mod recording_commands;
pub mod report;
pub mod sources;
pub mod text;
pub mod tui;
pub mod views;
