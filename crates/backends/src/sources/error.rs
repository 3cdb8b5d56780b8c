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
