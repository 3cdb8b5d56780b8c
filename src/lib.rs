//! nightshift: a terminal console for the engineer on call for a GPU cluster.
//!
//! Data flows one way: sources → model → engine → console; actions go back
//! through one guard. The layers are crates (docs/architecture.md):
//! `nightshift-core` (model, engine, sim, text), `nightshift-sources`,
//! `nightshift-actions`, `nightshift-recording` (the backends: reading,
//! acting, recording), `nightshift-console` (app, views,
//! columns, analyst), `nightshift-agent` (the NVML node agent), and this
//! one, the program: the command line, the config, the console's loop.
//! Their modules are re-exported here under their own names.

pub use nightshift_actions as actions;
pub use nightshift_autopilot as autopilot;
pub use nightshift_console::{analyst, app, columns, fleet, views};
pub use nightshift_core::{engine, host, limits, model, protocol, report, text};
pub use nightshift_recording::{self as recording, postmortem};
pub use nightshift_sources as sources;

#[cfg(feature = "agent")]
pub use nightshift_agent as agent;

pub mod action_commands;
pub mod alloc;
pub mod autopilot_commands;
pub mod autopilot_shadow;
pub mod build_info;
pub mod cli;
pub mod config;
pub mod doctor;
pub mod error;
pub mod fleet_tui;
pub mod follow_commands;
pub mod logging;
pub mod one_shot;
pub mod output;
pub mod recording_commands;
pub mod tui;

/// Says (on stderr) the `[topology]` nodes a one-shot's cluster does not
/// have: a typo in the config, never passed over in silence.
pub fn warn_unknown_topology(unknown: &[String]) {
    if let Some(note) = crate::sources::site_topology::unknown_note(unknown) {
        crate::text::warn(&note);
    }
}
