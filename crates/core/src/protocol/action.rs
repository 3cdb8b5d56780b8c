//! What the console asks of the action runner and what it answers: the
//! guard's preview (what will be sent, what it costs, why it may be
//! refused), the operator's answer, and the outcome. Plain data; the guard,
//! the policies and the executors that make them are the backends'.

use crate::engine::analysis::Base;
use crate::engine::blast::Blast;
use crate::engine::error::EngineError;
use crate::model::audit::Outcome as AuditOutcome;
use crate::model::{Action, Cluster};
use std::sync::Arc;
use std::time::Duration;

/// What the operator sees before confirming.
#[derive(Debug, Clone)]
pub struct Preview {
    pub action: Action,
    pub blast: Option<Result<Blast, EngineError>>,
    /// One line: what it costs.
    pub summary: String,
    /// The exact scheduler calls, in the scheduler's words.
    pub calls: Vec<String>,
    pub no_op: bool,
    /// Set when a policy refuses; confirming then does nothing, unless the
    /// refusal is the circuit breaker's and the override is typed.
    pub refusal: Option<Refusal>,
    pub undo: Option<Action>,
    /// What must be typed to confirm (a node name, a job id); `None`: `y`.
    pub token: Option<String>,
    /// Things the operator must read before confirming: the unresolved
    /// health of a node about to be resumed.
    pub warnings: Vec<String>,
    /// The circuit breaker was overridden when the preview was made
    /// (`--force` on the command line).
    pub forced: bool,
    /// A cordon of a node of a failing domain: the domain's remedy, not
    /// counted against the circuit breaker (checked when previewed).
    pub domain_remedy: bool,
    /// The open incident on the node this acts on, for the audit.
    pub incident: Option<String>,
    /// That incident's hardware fault, as data (`audit::fault_of`).
    pub fault: Option<crate::model::PastFault>,
    /// The armed step this sends, when it sends one.
    pub step_of: Option<String>,
    /// The source's clock at the preview.
    pub source_time: i64,
    /// The node acted on was in service when the preview was made (a drain
    /// of a node that someone took out meanwhile must not go on).
    pub node_in_service: bool,
    /// The cluster it acts on, when the console watches several: named in
    /// the preview, and typed before the target (`CLUSTER/NODE`).
    pub cluster: Option<String>,
}

/// How the operator answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    No,
    Yes,
    /// Yes, overriding the circuit breaker (typed `force TARGET`).
    Force,
}

impl Preview {
    /// What to type to override the circuit breaker, when it refuses.
    pub fn force_token(&self) -> Option<String> {
        matches!(self.refusal, Some(Refusal::Breaker(_))).then(|| match &self.cluster {
            Some(c) => format!("force {c}/{}", self.action.target()),
            None => format!("force {}", self.action.target()),
        })
    }

    /// The same preview for one cluster of several: its name goes before
    /// what is typed to confirm (`CLUSTER/NODE`; `y` stays `y`).
    pub fn in_cluster(mut self, name: &str) -> Preview {
        self.token = self.token.map(|t| format!("{name}/{t}"));
        self.cluster = Some(name.to_string());
        self
    }

    /// The undo's command line, naming the cluster when it is one of
    /// several.
    pub fn undo_line(&self) -> Option<String> {
        self.undo
            .as_ref()
            .map(|u| u.command_line_in(self.cluster.as_deref()))
    }

    /// What must be typed: the target for destructive actions, else `y`.
    pub fn confirm_prompt(&self) -> String {
        if let Some(f) = self.force_token() {
            return format!("type `{f}` and press enter to override the circuit breaker");
        }
        match &self.token {
            Some(t) => format!("type {t} and press enter to confirm"),
            None => "press y to confirm".into(),
        }
    }

    pub fn answer(&self, typed: &str) -> Answer {
        let typed = typed.trim();
        if let Some(f) = self.force_token() {
            return if typed == f {
                Answer::Force
            } else {
                Answer::No
            };
        }
        let yes = match &self.token {
            Some(t) => typed == t,
            None => typed.eq_ignore_ascii_case("y") || typed.eq_ignore_ascii_case("yes"),
        };
        if yes { Answer::Yes } else { Answer::No }
    }

    pub fn accepts(&self, typed: &str) -> bool {
        self.answer(typed) != Answer::No
    }
}

/// Why the guard will not act.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    ReadOnly,
    Stale(String),
    Breaker(String),
    Unknown(String),
    /// It would change nothing (already so, nothing to requeue): nothing
    /// is sent and nothing is audited.
    Nothing(String),
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::ReadOnly => write!(
                f,
                "read-only mode: nightshift changes nothing (start it without --read-only to act)"
            ),
            Refusal::Stale(s) => write!(f, "data too old to act on: {s}; wait for a refresh"),
            Refusal::Breaker(s) => write!(
                f,
                "circuit breaker: {s} (override: --force on the command line, type `force NODE` in the console)"
            ),
            Refusal::Unknown(s) => write!(f, "{s}"),
            Refusal::Nothing(s) => write!(f, "nothing to do: {s}"),
        }
    }
}

/// The result of a confirmed action.
#[derive(Debug, Clone, PartialEq)]
pub struct Done {
    pub outcome: AuditOutcome,
    /// How to undo what was done (also after a partial outcome).
    pub undo: Option<Action>,
    pub message: String,
}

/// What the app asks of the runner.
#[derive(Debug)]
pub enum Request {
    Preview {
        action: Action,
        cluster: Arc<Cluster>,
        data_age: Duration,
        /// The analysis the screen shows (its verdicts, incidents and
        /// options, with the memory of the snapshots before): the preview
        /// reads it, so what the screen recommends and what the preview
        /// says come from one computation. Always given (issue 60: no
        /// analysis without its memory); `cluster` is its snapshot.
        base: Arc<Base>,
        /// A step is armed once this is confirmed: the key that seals it is
        /// checked now, before anything is sent (issue 59: an unusable key
        /// sent the plan's cordon, then failed "cannot seal").
        arming: bool,
    },
    /// Run a confirmed preview. `cluster` and `data_age` are the newest
    /// the app has when the operator confirms: the policies are checked
    /// again on them.
    Run {
        preview: Box<Preview>,
        typed: String,
        cluster: Arc<Cluster>,
        data_age: Duration,
    },
    /// Arm `action` to be sent when `when` is seen (the plan was confirmed).
    Arm {
        action: Action,
        when: crate::model::Trigger,
        /// Confirmed past the circuit breaker (`force NODE`): the step
        /// keeps that override when it fires.
        forced: bool,
        cluster: Arc<Cluster>,
    },
    /// Send each armed step of this cluster that is due on `cluster`.
    Fire {
        cluster: Arc<Cluster>,
        data_age: Duration,
        /// The screen's analysis, as for `Preview`.
        base: Arc<Base>,
    },
    /// Cancel armed steps: these ids (of the cluster named).
    Cancel { ids: Vec<String>, cluster: String },
    /// The steps armed in the audit log for the cluster named (at start:
    /// armed before this console, to be asked about).
    Armed { cluster: String },
    /// The autopilot of the cluster named, as consoles show it; with
    /// `switch`, paused (`true`) or resumed first, with why.
    Autopilot {
        cluster: String,
        switch: Option<(bool, String)>,
    },
}

/// What the runner answers.
#[derive(Debug, Clone)]
pub enum Reply {
    Preview(Box<Preview>),
    Done(Box<Done>),
    /// Refused, or could not be sent.
    Failed(String),
    /// The steps armed now (this cluster's), and what happened to others:
    /// a line each (fired, refused, cancelled, armed).
    Armed {
        armed: Vec<crate::model::Armed>,
        news: Vec<String>,
    },
    /// The autopilot now, and one line of news (paused, resumed, or why
    /// its status could not be read).
    Autopilot {
        status: crate::model::AutopilotStatus,
        news: Option<String>,
    },
}
