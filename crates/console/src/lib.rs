//! nightshift's console: the app's state and its update (`app`), the
//! screens that draw it (`views`, `columns`), and the analyst that runs the
//! engine off the UI thread. No I/O of its own, and no backend: the
//! program's loop (`tui.rs` in the binary) feeds it the core's `protocol`
//! messages (the sources', the runner's) and carries out what it asks.

#[cfg(test)]
use nightshift_core::sim;
use nightshift_core::{engine, host, model, protocol, report, text};

pub mod analyst;
pub mod app;
pub mod columns;
pub mod fleet;
pub mod views;
