//! A later step, armed (issue 29): an option's second step that waits for
//! something — "cordon now, drain after the checkpoint" — confirmed once
//! with the whole plan and sent when its condition is seen, by the console
//! or by `nightshift follow`. Kept in the audit log (armed, then fired,
//! refused or cancelled), so that it outlives the process that armed it.

use super::{Action, Timestamp};
use serde::{Deserialize, Serialize};

/// How the cordon of a "cordon now, drain after the checkpoint" plan ends
/// its reason: the drain that follows knows the cordon for its own and
/// replaces its reason (another operator's cordon keeps theirs).
pub const AFTER_CHECKPOINT: &str = ": drain after checkpoint";

/// What an armed step waits for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Trigger {
    /// Each job's checkpoint is newer than when the step was armed (its
    /// `ckpt_last` moved), or the job no longer runs — or, at the latest,
    /// `by`: a checkpoint that has not come an interval after it was due
    /// will not come (the job hangs), and the step goes anyway.
    Checkpoints {
        jobs: Vec<JobMark>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by: Option<Timestamp>,
    },
    /// This time has come.
    At { time: Timestamp },
}

/// A job and its last checkpoint when the step was armed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobMark {
    pub job: String,
    pub ckpt_last: Option<Timestamp>,
}

/// An armed step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Armed {
    /// The audit id of its arming; firing, refusing and cancelling name it.
    pub id: String,
    pub action: Action,
    pub when: Trigger,
    /// The source's clock when it was armed.
    pub armed_at: Timestamp,
    /// The cluster it acts on.
    pub cluster: String,
    /// The operating-system user who confirmed the plan.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub confirmed_by: String,
    /// SHA-256 of the preview the operator confirmed (hex).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub preview_digest: String,
    /// The integrity tag only the arming nightshift could make (an
    /// HMAC-SHA256 over the rest, with the operator's or the site's key):
    /// a line written into the shared audit log by anyone else is never
    /// fired.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub tag: String,
    /// The plan was confirmed past the circuit breaker (`--force`): its
    /// own step keeps that override when it fires (sealed with the rest).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub forced: bool,
}
