//! What a source tells the console: snapshots, each origin's health, the
//! playback's position, and what can go wrong reading a source, as types
//! (callers decide on the variant — retry, re-discover, show — never on
//! the words of a message).

use std::sync::Arc;

/// Where data comes from: the scheduler, or one node endpoint. Each has its
/// own age and last error; the age of one never stands in for another's.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Origin {
    /// The scheduler (sim, slurmrestd): jobs, nodes, the queue.
    Scheduler,
    /// A dcgm-exporter / agent URL, or a Prometheus server.
    Endpoint(String),
}

impl Origin {
    pub fn name(&self) -> String {
        match self {
            Origin::Scheduler => "scheduler".into(),
            Origin::Endpoint(u) => u.clone(),
        }
    }
}

/// What a source tells the UI.
#[derive(Debug, Clone)]
pub enum Update {
    /// The newest complete picture of the cluster. It says nothing about
    /// freshness: that is `Status`, per origin.
    Snapshot(Arc<crate::model::Cluster>),
    /// One origin was polled: it answered (`None`), or this went wrong and
    /// its last data stands, growing stale.
    Status {
        origin: Origin,
        error: Option<SourceError>,
    },
    /// GPU history from before nightshift opened (Prometheus), once, with
    /// hosts named as the scheduler names its nodes.
    Backfill(Arc<crate::model::Backfill>),
    /// How often an origin is polled now, and why (the configured interval,
    /// or slower to keep within slurmrestd's budget); sent when it changes.
    Refresh {
        origin: Origin,
        every: std::time::Duration,
        /// Slower than configured, to keep within slurmrestd's budget.
        stretched: bool,
        note: String,
    },
    /// An origin answered, but slowly or in part (`note`, for the header);
    /// `None`: whole and in time again. The answer itself stands.
    Quality {
        origin: Origin,
        note: Option<String>,
    },
    /// Something the on-call should know that is no origin's data: the
    /// console's recording stopped, for one.
    Notice(String),
    /// Playing a recording: where it is and how it plays.
    Playback(Playback),
    /// A replay jumped: what the analysis remembers of the recorded
    /// snapshots before the next one, read from the recording's start. The
    /// analyst takes it in place of its own, so the console after a jump
    /// answers what `--replay --at` answers for that moment (stalls since
    /// when they began, every fault of the night).
    Recalled(Arc<crate::engine::memory::Memory>),
}

/// A recording's playback as the console shows it in the header.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Playback {
    pub paused: bool,
    /// Recorded seconds per second.
    pub speed: f64,
    /// The snapshot shown, and the recording's first and last.
    pub at: crate::model::Timestamp,
    pub start: crate::model::Timestamp,
    pub end: crate::model::Timestamp,
    /// Nothing more to play.
    pub ended: bool,
}

impl Update {
    pub fn ok(origin: Origin) -> Update {
        Update::Status {
            origin,
            error: None,
        }
    }

    pub fn failed(origin: Origin, e: SourceError) -> Update {
        Update::Status {
            origin,
            error: Some(e),
        }
    }
}

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

/// The faults the audit log says nightshift acted on, by the cluster name
/// each intent was recorded under: typed data the analysis reads beside
/// the snapshots (no relay writes them into a snapshot).
pub type Audited = std::collections::BTreeMap<String, Vec<crate::model::PastFault>>;

/// The audited faults of one cluster: those recorded under its name in
/// `[[clusters]]` (`configured`) or under its snapshot's name, each once.
pub fn audited_for(
    audited: &Audited,
    configured: Option<&str>,
    snapshot: &str,
) -> Vec<crate::model::PastFault> {
    let mut out: Vec<crate::model::PastFault> = Vec::new();
    for name in configured.into_iter().chain([snapshot]) {
        for f in audited.get(name).into_iter().flatten() {
            let same = |g: &crate::model::PastFault| {
                g.node == f.node && g.gpu == f.gpu && g.fault == f.fault && g.time == f.time
            };
            if !out.iter().any(same) {
                out.push(f.clone());
            }
        }
    }
    out
}

#[cfg(test)]
mod audited_tests {
    use super::*;
    use crate::model::{Fault, PastFault};

    fn fault(node: &str) -> PastFault {
        PastFault {
            time: 100,
            node: node.into(),
            gpu: Some(3),
            fault: Fault::Xid(79),
            from: "audit".into(),
        }
    }

    /// A cluster's faults are those recorded under its configured name and
    /// under its snapshot's name, never another cluster's of one shared log.
    #[test]
    fn a_clusters_audited_faults_are_its_own_under_either_name() {
        let mut a = Audited::new();
        a.insert("west".into(), vec![fault("gpu01")]);
        a.insert("east".into(), vec![fault("gpu02")]);
        let nodes = |a: &Audited| -> Vec<String> {
            audited_for(a, Some("west"), "slurm-west")
                .into_iter()
                .map(|f| f.node)
                .collect()
        };
        assert_eq!(nodes(&a), ["gpu01"]);
        a.insert("slurm-west".into(), vec![fault("gpu03"), fault("gpu01")]);
        assert_eq!(nodes(&a), ["gpu01", "gpu03"]);
    }
}
