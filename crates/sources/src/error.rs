//! What can go wrong reading a source, as types: callers decide on the
//! variant (retry, re-discover, show), never on the words of a message.

pub use crate::protocol::source::{Invalid, SourceError};

/// `Invalid(format!(…))`.
macro_rules! invalid {
    ($($t:tt)*) => {
        $crate::error::Invalid(format!($($t)*))
    };
}
pub(crate) use invalid;

/// Why a source could not start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StartError {
    /// An answer past a bound on what it keeps: the parse stopped there.
    #[error("{what}: the answer holds {passed}; stopped reading it (raise {})", passed.key())]
    Held {
        what: String,
        passed: crate::prometheus::answer::Passed,
    },
    #[error("cannot build the HTTP client: {0}")]
    Http(String),
    #[error("--source none needs node endpoints: --dcgm URL or --prometheus URL")]
    NoEndpoints,
    #[error(transparent)]
    Sim(#[from] crate::sim::SimError),
    #[error(transparent)]
    Prometheus(#[from] PromError),
}

impl From<StartError> for String {
    fn from(e: StartError) -> String {
        e.to_string()
    }
}

/// What can go wrong asking Prometheus, in one line each.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PromError {
    /// Prometheus answered with `status: error`.
    #[error("Prometheus query failed ({kind}): {message}")]
    Failed { kind: String, message: String },
    #[error("Prometheus answered without data.result")]
    NoResult,
    #[error("Prometheus answered a range (matrix) to an instant query")]
    MatrixToInstant,
    #[error("Prometheus answered a range query without a matrix")]
    NoMatrix,
    #[error("Prometheus's history holds more than {0} series (limits.max_series_per_scrape)")]
    TooManySeries(u64),
    /// An answer past a bound on what it keeps: the parse stopped there.
    #[error("{what}: the answer holds {passed}; stopped reading it (raise {})", passed.key())]
    Held {
        what: String,
        passed: crate::prometheus::answer::Passed,
    },
    #[error("cannot build the HTTP client: {0}")]
    Http(String),
    #[error("bad Prometheus URL {base}: {why}")]
    Url { base: String, why: String },
    #[error(transparent)]
    Source(#[from] SourceError),
    #[error("{what}: HTTP {status}, not JSON ({why}): {start}")]
    NotJson {
        what: String,
        status: u16,
        why: String,
        start: String,
    },
    #[error("Prometheus answer not parsed: {0}")]
    Parse(String),
}

/// As the console's freshness line shows it: an HTTP failure as itself.
impl From<PromError> for SourceError {
    fn from(e: PromError) -> SourceError {
        match e {
            PromError::Source(s) => s,
            other => SourceError::Other(other.to_string()),
        }
    }
}

impl From<PromError> for String {
    fn from(e: PromError) -> String {
        e.to_string()
    }
}
