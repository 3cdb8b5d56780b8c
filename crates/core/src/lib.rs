//! nightshift's core: what every layer above reads.
//!
//! `model` is plain data (the cluster, its jobs and GPUs, actions and the
//! audit record), `engine` pure, deterministic answers of a snapshot and
//! the site parameters, `sim` the seeded simulated cluster, `report` the
//! answers in words, `text` the helpers that make outside text safe to
//! print. No I/O but the clock (`host`) and the config files the engine's
//! catalogs read. docs/architecture.md draws the layers.

pub mod engine;
pub mod host;
pub mod limits;
pub mod model;
pub mod protocol;
pub mod report;
pub mod sim;
pub mod text;
