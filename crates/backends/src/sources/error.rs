//! What can go wrong reading a source, as types: callers decide on the
//! variant (retry, re-discover, show), never on the words of a message.

/// An error from a scheduler or a node endpoint. Its text is one line,
/// already bounded (a body is quoted at most one line long).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SourceError {
    /// Nothing answered: connection refused, DNS, TLS, reset.
    #[error("cannot reach {what}: {detail}")]
    Unreachable { what: String, detail: String },
    /// It did not answer in time.
    #[error("{what}: no answer within {secs}s")]
    Timeout { what: String, secs: u64 },
    /// 401/403: the token is missing, expired or not allowed.
    #[error("{what}: not authorized (HTTP {status}): {detail}")]
    Auth {
        what: String,
        status: u16,
        detail: String,
    },
    /// 404: the path (an API version) or the object is not there.
    #[error("{what}: not found (HTTP 404){detail}")]
    NotFound { what: String, detail: String },
    /// The server answered with errors (HTTP status, slurmrestd `errors[]`,
    /// Prometheus `error`).
    #[error("{what}: {}", errors.join("; "))]
    Api { what: String, errors: Vec<String> },
    /// The answer could not be read.
    #[error("{what}: unexpected answer: {detail}")]
    Decode { what: String, detail: String },
    /// An answer larger than the configured limit.
    #[error("{what}: answer larger than {limit} bytes (raise {key})")]
    TooLarge {
        what: String,
        limit: u64,
        key: &'static str,
    },
    /// Anything else, in one line.
    #[error("{0}")]
    Other(String),
}

impl SourceError {
    /// Whether the server is up but does not serve this path: worth
    /// discovering the API version again.
    pub fn is_not_found(&self) -> bool {
        matches!(self, SourceError::NotFound { .. })
    }
}

impl From<SourceError> for String {
    fn from(e: SourceError) -> String {
        e.to_string()
    }
}

/// Text from outside — a record, a line, a hostlist, a label — that
/// nightshift cannot read, and why, in one line. The caller skips what it
/// names (and says so) or refuses the answer; nobody reads its words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Invalid(pub String);

impl From<String> for Invalid {
    fn from(why: String) -> Invalid {
        Invalid(why)
    }
}

impl From<&str> for Invalid {
    fn from(why: &str) -> Invalid {
        Invalid(why.to_string())
    }
}

impl From<Invalid> for String {
    fn from(e: Invalid) -> String {
        e.0
    }
}

impl From<Invalid> for SourceError {
    fn from(e: Invalid) -> SourceError {
        SourceError::Other(e.0)
    }
}

/// `Invalid(format!(…))`.
macro_rules! invalid {
    ($($t:tt)*) => {
        $crate::sources::error::Invalid(format!($($t)*))
    };
}
pub(crate) use invalid;

/// Why a source could not start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StartError {
    #[error("cannot build the HTTP client: {0}")]
    Http(String),
    #[error("--source none needs node endpoints: --dcgm URL or --prometheus URL")]
    NoEndpoints,
    #[error(transparent)]
    Sim(#[from] crate::sources::sim::SimError),
    #[error(transparent)]
    Prometheus(#[from] crate::sources::prometheus::PromError),
}

impl From<StartError> for String {
    fn from(e: StartError) -> String {
        e.to_string()
    }
}
