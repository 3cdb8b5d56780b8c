//! nightshift's brain: pure, deterministic functions of a cluster snapshot
//! and a few site parameters. No I/O, no clock but the snapshot's; usable
//! from the TUI and the CLI alike. docs/decision-engine.md describes every
//! model and its inputs.

pub mod action;
pub mod admit;
pub mod analysis;
pub mod armed;
pub mod base;
pub mod blast;
pub mod changed;
pub mod derive;
pub mod domains;
pub mod error;
pub mod exact;
pub mod fabric;
#[cfg(any(test, feature = "fixture"))]
pub mod fixture;
pub mod health;
pub mod incidents;
pub mod kpis;
pub mod memory;
pub mod options;
pub mod plan;
pub mod repeat;
pub mod restore;
pub mod schedmsg;
pub mod stall;
pub mod units;
pub mod validate;
pub mod whatif;
pub mod why;
pub mod xid;

use serde::{Deserialize, Serialize};

/// Where a number in an answer came from, so nobody mistakes a guess for a
/// fact.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Provenance {
    /// Reported by the scheduler or the job (checkpoint metadata).
    JobMetadata,
    /// A site parameter (configuration or default).
    SiteDefault,
    /// Computed by nightshift's models from the snapshot.
    Model,
    /// A stand-in where the real value is unknown; said so.
    #[default]
    Assumption,
    /// Given on the command line (what-if).
    Given,
}

/// Site parameters. Every one has a default and a key in the configuration
/// file's `[engine]` table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SiteParams {
    /// Aggregate read bandwidth of checkpoint storage, bytes/s.
    pub storage_read_bw: f64,
    /// Aggregate write bandwidth of checkpoint storage, bytes/s: how long a
    /// job signalled to checkpoint takes to write it.
    pub storage_write_bw: f64,
    /// Read bandwidth of one node (its NIC or local path), bytes/s; a
    /// node writes through the same path.
    pub node_read_bw: f64,
    /// Container start, NCCL init and the like, seconds.
    pub startup_s: u64,
    /// Price of one GPU-hour, for costs; none by default.
    pub gpu_hour_price: Option<f64>,
    /// Checkpoint bytes per model parameter (16 for mixed-precision Adam).
    pub bytes_per_param: u64,
    /// Correctable ECC errors per hour above which a GPU is watched.
    pub sbe_watch_per_hour: f64,
    /// NVLink errors (CRC, replays, recoveries) per hour above which a
    /// GPU's links are watched.
    pub nvlink_watch_per_hour: f64,
    /// NVLink errors per hour above which a GPU's links are drained and
    /// investigated (a storm).
    pub nvlink_drain_per_hour: f64,
    /// Fabric events (IB links lost, nodes down) on several nodes of one
    /// failure domain starting within this many seconds are one incident.
    pub domain_window_s: u64,
    /// Fewest nodes whose events make a domain's incident.
    pub domain_min_nodes: u32,
    /// Time limit assumed for a job that reports none, seconds.
    pub default_time_limit_s: u64,
    /// How long past its time limit a job that reaches it still holds its
    /// GPUs (Slurm: up to its limit-check period, 30 s, plus KillWait).
    pub limit_overrun_s: u64,
    /// Whether a preempted job goes back to the queue (Slurm
    /// PreemptMode=REQUEUE) or is cancelled.
    pub preempt_requeues: bool,
    /// The longest wait for a job's next checkpoint that the options
    /// recommend before draining a node with a warning-level problem.
    pub checkpoint_wait_max_s: u64,
    /// How long a GPU reset takes (the GPU and its node's free GPUs out).
    pub gpu_reset_s: u64,
    /// How long a node reboot takes, until the node can be resumed.
    pub node_reboot_s: u64,
    /// How long a job's GPUs must show the hung-collective signature
    /// before it is reported stalled, seconds.
    pub stall_window_s: u64,
    /// The signature: utilization at least this (0–1)…
    pub stall_util_min: f64,
    /// …with SM occupancy at most this (0–1).
    pub stall_occupancy_max: f64,
    /// How many hardware faults of a kind in how long make a node a
    /// repeat offender (`[engine] repeat_offender = "3 in 30d"`).
    pub repeat_offender: repeat::RepeatRule,
}

impl Default for SiteParams {
    fn default() -> Self {
        SiteParams {
            storage_read_bw: 10e9,
            storage_write_bw: 5e9,
            node_read_bw: 25e9,
            startup_s: 300,
            gpu_hour_price: None,
            bytes_per_param: 16,
            sbe_watch_per_hour: 100.0,
            nvlink_watch_per_hour: 60.0,
            nvlink_drain_per_hour: 3600.0,
            domain_window_s: 60,
            domain_min_nodes: 3,
            default_time_limit_s: 24 * 3600,
            limit_overrun_s: 0,
            preempt_requeues: true,
            checkpoint_wait_max_s: 900,
            gpu_reset_s: 120,
            node_reboot_s: 900,
            stall_window_s: 300,
            stall_util_min: 0.9,
            stall_occupancy_max: 0.05,
            repeat_offender: repeat::RepeatRule::default(),
        }
    }
}
