//! Why a command of the program did not do what it was asked: the errors
//! of the layers below, and the program's own, one line each for the
//! terminal.

use crate::actions::audit::AuditError;

#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error(transparent)]
    Output(#[from] crate::output::OutputError),
    #[error(transparent)]
    Json(#[from] crate::text::JsonError),
    #[error(transparent)]
    Engine(#[from] crate::engine::error::EngineError),
    #[error(transparent)]
    Sim(#[from] crate::sources::sim::SimError),
    #[error(transparent)]
    Source(#[from] crate::sources::SourceError),
    #[error(transparent)]
    Start(#[from] crate::sources::error::StartError),
    #[error(transparent)]
    Slurm(#[from] crate::sources::slurm::exec::CallError),
    #[error(transparent)]
    Kube(#[from] crate::sources::kube::exec::CallError),
    #[error(transparent)]
    Recording(#[from] crate::recording::RecordingError),
    #[error(transparent)]
    Once(#[from] crate::sources::once::OnceError),
    #[error(transparent)]
    NotSent(#[from] crate::actions::guard::NotSent),
    #[error("cannot start the runtime: {0}")]
    Runtime(std::io::Error),
    /// The terminal: setting it up, a signal's handler, drawing, input,
    /// taking it back after ctrl-z.
    #[error("{what}: {source}")]
    Terminal {
        what: &'static str,
        source: std::io::Error,
    },
    /// The node endpoints laid over the scheduler's data (`one_shot`).
    #[error("{0}")]
    Endpoints(String),
    #[error("--replay plays a recording: nothing in it can be acted on")]
    Replay,
    #[error("not an action")]
    NotAnAction,
    #[error("say what happens to the node's jobs: --requeue or --kill")]
    JobsFate,
    #[error("--grace: {0}")]
    Grace(crate::engine::units::UnitError),
    #[error("priority must be a number or `top`, got {0:?}")]
    Priority(String),
    #[error(
        "{node} has unresolved critical health (see the warnings): add --confirm {token} to resume it anyway"
    )]
    ResumeBroken { node: String, token: String },
    #[error("{verb} is destructive: add --confirm {token} to send it")]
    Destructive { verb: &'static str, token: String },
    #[error("only part of it was done: {0}")]
    Partial(String),
    /// The action failed, in the scheduler's words.
    #[error("{0}")]
    Failed(String),
    #[error("sent, but the change is not visible in the scheduler's state")]
    NotVisible,
    #[error("no scheduler source: actions need --source sim, slurm or kube")]
    NoScheduler,
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    AuditUnreadable(Vec<AuditError>),
    #[error("recording the sim needs its length: --sim-seconds S (e.g. 28800 for a night)")]
    SimLength,
    #[error(
        "kpis need history: record the source (nightshift record FILE) and use --replay FILE, or open the console's :kpis"
    )]
    KpisNeedHistory,
    #[error("no snapshot to compute figures from")]
    NoSnapshot,
}

impl From<CommandError> for String {
    fn from(e: CommandError) -> String {
        e.to_string()
    }
}
