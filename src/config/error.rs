//! Why a setting cannot be taken: one line naming it.

use super::{MAX_SECONDS, MAX_SIM_JOBS, MAX_SIM_NODES, MAX_SIM_SECONDS, MAX_SPEED};
use crate::engine::units;
use std::path::PathBuf;

/// A setting nightshift cannot take, one line naming it.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("config {}: {}", path.display(), one_line_toml(source))]
    Parse {
        path: PathBuf,
        source: toml::de::Error,
    },
    #[error("config: {0}")]
    Cluster(String),
    /// A `[[policy]]` that cannot be taken: none is loaded.
    #[error("config: [[policy]] {0}; no policy loaded")]
    Policy(crate::autopilot::policy::PolicyError),
    #[error("config: topology.domains: {0}")]
    Topology(String),
    #[error("config: limits.{0} must be > 0")]
    LimitZero(&'static str),
    #[error("slurm.checkpoint_signal is {0:?}: a signal name such as SIGUSR1")]
    Signal(String),
    #[error("cannot read the Slurm token file {}: {source}", path.display())]
    Token {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("--source slurm needs --slurm-url URL (or [slurm] url in the config)")]
    NoSlurmUrl,
    #[error(
        "no Slurm user name: this user has no name in the account database; pass --slurm-user or set [slurm] user"
    )]
    NoSlurmUser,
    #[error("slurm.rest_budget is {0}: a fraction of one core, above 0 and at most 1 (0.03 is 3%)")]
    RestBudget(f64),
    #[error(transparent)]
    SlurmApi(#[from] crate::sources::slurm::error::SetupError),
    #[error("config: engine.{key}: {source}")]
    Unit {
        key: &'static str,
        source: units::UnitError,
    },
    #[error("config: engine.{key} must be at most {MAX_SECONDS:e} seconds, got {given:?}")]
    TooLong { key: &'static str, given: String },
    #[error(
        "config: engine.domain_min_nodes must be at least 2 (one node is its own incident), got {0}"
    )]
    DomainMinNodes(u32),
    #[error("config: engine.gpu_hour_price must be ≥ 0, got {0}")]
    Price(f64),
    #[error("config: engine.{key} must be a finite number above 0, got {value}")]
    Rate { key: &'static str, value: f64 },
    /// `key` with its section: `engine.stall_util_min`.
    #[error("config: {key} must be in 0..1, got {value}")]
    Fraction { key: String, value: f64 },
    #[error("config: engine.repeat_offender {0}")]
    RepeatRule(String),
    #[error("config: validate.{0}")]
    Validate(String),
    #[error("config: {key} must be a number of seconds in (0, {MAX_SECONDS:e}], got {value}")]
    Seconds { key: String, value: f64 },
    #[error(transparent)]
    Catalog(#[from] XidCatalogError),
    #[error("config: unknown source {0:?} (known: sim, slurm, kube, none)")]
    Source(String),
    #[error("--speed (sim.speed) must be a number from 0 to {MAX_SPEED}, got {0}")]
    Speed(f64),
    #[error("--nodes (sim.nodes) must be at most {MAX_SIM_NODES}, got {0}")]
    Nodes(usize),
    #[error("--jobs (sim.jobs) must be at most {MAX_SIM_JOBS}, got {0}")]
    Jobs(usize),
    #[error("--sim-seconds must be at most {MAX_SIM_SECONDS} (30 days), got {0}")]
    SimSeconds(u64),
}

/// Two errors are the same when they say the same.
impl PartialEq for ConfigError {
    fn eq(&self, other: &ConfigError) -> bool {
        self.to_string() == other.to_string()
    }
}

impl From<ConfigError> for String {
    fn from(e: ConfigError) -> String {
        e.to_string()
    }
}

use crate::engine::xid::CatalogError as XidCatalogError;

/// toml's error in one line: its first line (`TOML parse error at line 1,
/// column 8`) and its message, without the drawing of the line between
/// them (whose newlines would print as U+FFFD).
fn one_line_toml(e: &toml::de::Error) -> String {
    let text = e.to_string();
    let first = text.lines().next().unwrap_or_default().trim();
    let message = e.message().split_whitespace().collect::<Vec<_>>().join(" ");
    if first.is_empty() || first == message {
        message
    } else {
        format!("{first}: {message}")
    }
}
