//! What can go wrong talking to Slurm, as types: setting the client up, the
//! API versions, and the calls an action sends (REST, scontrol, scancel).

use crate::SourceError;
use crate::error::Invalid;
use std::sync::Arc;
use std::time::Duration;

/// The versions as Slurm names them: `v0.0.38, v0.0.40`.
fn names(vs: &[u32]) -> String {
    vs.iter()
        .map(|v| format!("v0.0.{v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Setting up the connection to slurmrestd.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SetupError {
    #[error("slurm url {0:?} must start with http://, https:// or unix:")]
    Url(String),
    #[error("cannot build the HTTP client: {0}")]
    Http(String),
    #[error(
        "slurm API version {given:?} is not one nightshift reads ({})",
        names(known)
    )]
    Version {
        given: String,
        known: &'static [u32],
    },
    #[error(
        "slurmrestd serves {} but nightshift reads {}",
        if served.is_empty() { "no API version it could see".to_string() } else { names(served) },
        names(known)
    )]
    NoCommonVersion {
        served: Vec<u32>,
        known: &'static [u32],
    },
}

impl From<SetupError> for SourceError {
    fn from(e: SetupError) -> SourceError {
        SourceError::Other(e.to_string())
    }
}

impl From<SetupError> for String {
    fn from(e: SetupError) -> String {
        e.to_string()
    }
}

/// A call an action sent to Slurm, or the re-reading that verifies it.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CallError {
    #[error(transparent)]
    Setup(#[from] SetupError),
    #[error(transparent)]
    Source(#[from] SourceError),
    /// An answer that could not be read, about `what`.
    #[error("{what}: {why}")]
    Read { what: String, why: Invalid },
    #[error("{call} timed out after {after:?}")]
    Timeout { call: String, after: Duration },
    #[error("cannot run {program}: {source}")]
    Spawn {
        program: String,
        source: Arc<std::io::Error>,
    },
    /// The scheduler said no, in its own words (scontrol's, scancel's).
    #[error("{call}: {said}")]
    Refused { call: String, said: String },
    #[error("node {0} not found")]
    NoNode(String),
    #[error("job {0} not found")]
    NoJob(String),
}

impl From<CallError> for String {
    fn from(e: CallError) -> String {
        e.to_string()
    }
}
