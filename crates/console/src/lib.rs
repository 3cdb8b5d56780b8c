//! nightshift's console: the app's state and its update (`app`), the
//! screens that draw it (`views`, `columns`), and the analyst that runs the
//! engine off the UI thread. No I/O of its own: the program's loop
//! (`tui.rs` in the binary) feeds it messages and carries out what it asks.

use nightshift_backends::{actions, recording, sources};
use nightshift_core::{engine, host, model, report, text};

pub mod analyst;
pub mod app;
pub mod columns;
pub mod fleet;
pub mod views;
