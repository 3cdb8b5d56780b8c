//! The messages between the layers: what sources tell the console
//! (`source`), what the console asks of the action runner and of a
//! recording's playback (`action`, `replay`), and what every backend supplies to the guard
//! (`scheduler`). Plain data, so the console
//! depends on the core alone and never on the backends' I/O crates.

pub mod action;
pub mod doctor;
pub mod replay;
pub mod scheduler;
pub mod source;
