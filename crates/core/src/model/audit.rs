//! The audit log's records, as plain data: what was about to be done
//! (intent) and what came of it (outcome). Written and read by the actions'
//! audit log; kept in recordings beside the snapshots.

use super::Step;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    /// Every step succeeded.
    pub ok: bool,
    /// The change was seen in the scheduler's state afterwards.
    pub verified: bool,
    pub no_op: bool,
    /// Some steps succeeded and some failed: part of it was done.
    #[serde(default)]
    pub partial: bool,
    pub observed: String,
    /// The first failure, when one step failed.
    pub error: Option<String>,
    #[serde(default)]
    pub steps: Vec<Step>,
}

impl Outcome {
    pub fn of_steps(steps: Vec<Step>) -> Outcome {
        let ok = !steps.is_empty() && steps.iter().all(|s| s.ok);
        let any = steps.iter().any(|s| s.ok);
        Outcome {
            ok,
            verified: ok && steps.iter().all(|s| s.verified),
            no_op: false,
            partial: any && !ok,
            observed: steps
                .iter()
                .map(|s| s.observed.as_str())
                .filter(|o| !o.is_empty())
                .collect::<Vec<_>>()
                .join("; "),
            error: steps
                .iter()
                .find_map(|s| s.error.as_ref().map(|e| format!("{}: {e}", s.what))),
            steps,
        }
    }
}

/// Which step of an action's life a record is.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// Before it is sent: what will be sent, and why.
    #[default]
    Intent,
    /// After: what was seen (shares the intent's id).
    Outcome,
    /// A step armed to fire later (`follow`, the console).
    Armed,
    /// An armed step called off.
    Cancelled,
    /// An armed step whose time came, refused by the guard.
    Refused,
    /// An armed step sent.
    Fired,
    /// The autopilot paused, for every process reading this log: its
    /// `operator` paused it, its `note` says why (issue 61).
    Paused,
    /// The autopilot resumed.
    Resumed,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Intent => "intent",
            Phase::Outcome => "outcome",
            Phase::Armed => "armed",
            Phase::Cancelled => "cancelled",
            Phase::Refused => "refused",
            Phase::Fired => "fired",
            Phase::Paused => "paused",
            Phase::Resumed => "resumed",
        }
    }
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// Shared by an intent and its outcome.
    pub id: String,
    pub phase: Phase,
    /// Unix seconds, wall clock.
    pub time: i64,
    /// The operating-system user at the keyboard.
    pub operator: String,
    /// Who the scheduler was told we are.
    pub scheduler_user: Option<String>,
    pub host: String,
    pub cluster: String,
    pub source: String,
    pub action: String,
    pub target: String,
    pub reason: Option<String>,
    /// The preview the operator confirmed, in one line.
    pub preview: String,
    /// The open incident this action answers (`e2 XID 79 on h100-03 GPU 3`),
    /// so that the audit follows the incident's lifecycle.
    #[serde(default)]
    pub incident: Option<String>,
    /// The hardware fault that incident is, as data: its node, GPU, kind
    /// and first time — the same in every process (the label's `e1` is
    /// not: it restarts in each), so a node's faults are counted apart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fault: Option<super::PastFault>,
    /// An intent that sends an armed step: that step's id (a `follow`
    /// killed mid-send and started again finds its own interrupted send).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_of: Option<String>,
    /// The source's clock when it was previewed: the breaker's window is
    /// the source's (a simulated night's earlier runs, at other hours, are
    /// not "the last 10 minutes"); wall-clock `time` for older records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_time: Option<i64>,
    /// A cordon that is a failing domain's remedy: not counted by the
    /// circuit breaker.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub domain_remedy: bool,
    /// The warnings the operator read before confirming (a --no-requeue
    /// job that keeps running, a resume of unresolved health).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    pub outcome: Option<Outcome>,
    /// `armed`: the step and what it waits for (`fired`, `refused` and
    /// `cancelled` records share its id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub armed: Option<super::Armed>,
    /// `refused`, `cancelled`: why, in one line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// `fired`, `refused`, `cancelled`: the end's seal, an HMAC over the
    /// step's id and this phase by the key that sealed the step. An end
    /// without it (a line written by hand) ends nothing (issue 59).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seal: Option<String>,
}
