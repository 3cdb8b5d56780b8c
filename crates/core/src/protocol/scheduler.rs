//! What every backend supplies to the guard: the exact calls an action
//! will make, its refusals and warnings, the steps that carry it out and
//! the re-reading that verifies them. Slurm, Kubernetes, the sim and a
//! replayed recording each implement it next to their own reading; the
//! guard, the runner and `follow` know none of them by name.

use crate::model::{Action, Cluster, Outcome, Step};
use crate::sim::Sim;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

/// A backend's answer still to come (the trait is used as `dyn`, so its
/// async methods return boxed futures).
pub type Pending<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Why the state an action should have left could not be re-read, in the
/// backend's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ObserveError(pub String);

impl ObserveError {
    pub fn new(e: impl std::fmt::Display) -> ObserveError {
        ObserveError(e.to_string())
    }
}

pub trait Scheduler: Send + Sync {
    /// Reads what the preview's calls depend on, where that takes I/O
    /// (Kubernetes: the pods a drain evicts, the workload a requeue names).
    fn prepare<'a>(&'a self, _a: &'a Action) -> Pending<'a, ()> {
        Box::pin(async {})
    }

    /// What the backend knows will go wrong (known once prepared: a
    /// PodDisruptionBudget that will refuse an eviction).
    fn warnings(&self, _a: &Action) -> Vec<String> {
        Vec::new()
    }

    /// Why the backend cannot carry `a` out at all (known once prepared),
    /// in one line.
    fn cannot(&self, _a: &Action) -> Option<String> {
        None
    }

    /// How much longer than the action timeout `a` may take (a
    /// validation waits for its check).
    fn extra_time(&self, _a: &Action) -> Duration {
        Duration::ZERO
    }

    /// The exact calls, in order, shown before anything is sent. `jobs`
    /// are the jobs a drain will end (from the preview's blast radius).
    fn calls(&self, a: &Action, jobs: &[String]) -> Vec<String>;

    /// Sends the action, step by step, re-reading the state after each.
    fn execute<'a>(&'a self, a: &'a Action) -> Pending<'a, Vec<Step>>;

    /// Re-reads the state an action should have left, changing nothing.
    fn observe<'a>(&'a self, a: &'a Action) -> Pending<'a, Result<Outcome, ObserveError>>;

    /// The cluster now where this scheduler holds it itself (a sim of this
    /// process's own), moved on by `secs` of its time; `None` where the
    /// cluster must be read anew from its source.
    fn advance(&mut self, _secs: u64) -> Option<Result<Cluster, String>> {
        None
    }
}

/// The scheduler an action is sent to.
pub struct Executor(Box<dyn Scheduler>);

impl Executor {
    pub fn new(s: impl Scheduler + 'static) -> Executor {
        Executor(Box::new(s))
    }

    /// A recording played back: what would be sent is shown, nothing is.
    pub fn replay() -> Executor {
        Executor::new(Replayed)
    }

    pub async fn prepare(&self, a: &Action) {
        self.0.prepare(a).await
    }

    pub fn warnings(&self, a: &Action) -> Vec<String> {
        self.0.warnings(a)
    }

    pub fn cannot(&self, a: &Action) -> Option<String> {
        self.0.cannot(a)
    }

    pub fn extra_time(&self, a: &Action) -> std::time::Duration {
        self.0.extra_time(a)
    }

    pub fn calls(&self, a: &Action, jobs: &[String]) -> Vec<String> {
        self.0.calls(a, jobs)
    }

    pub async fn execute(&self, a: &Action) -> Vec<Step> {
        self.0.execute(a).await
    }

    pub async fn observe(&self, a: &Action) -> Result<Outcome, ObserveError> {
        self.0.observe(a).await
    }

    /// See `Scheduler::advance`.
    pub fn advance(&mut self, secs: u64) -> Option<Result<Cluster, String>> {
        self.0.advance(secs)
    }
}

/// A recording played back: its calls are the sim's words, marked as not
/// sent, and nothing is ever executed.
struct Replayed;

impl Scheduler for Replayed {
    fn calls(&self, a: &Action, jobs: &[String]) -> Vec<String> {
        Sim::calls_as("(a recording: not sent)", a, jobs)
    }

    fn execute<'a>(&'a self, a: &'a Action) -> Pending<'a, Vec<Step>> {
        let what = format!("{} {}", a.verb(), a.target());
        Box::pin(async move { vec![Step::failed(what, "a recording cannot be acted on".into())] })
    }

    fn observe<'a>(&'a self, _a: &'a Action) -> Pending<'a, Result<Outcome, ObserveError>> {
        Box::pin(async { Err(ObserveError("a recording cannot be acted on".into())) })
    }
}

/// Why no executor could be had for an action.
#[derive(Debug, Clone, thiserror::Error)]
pub enum NoExecutor {
    #[error("no scheduler source: actions need --source sim, slurm or kube")]
    NoScheduler,
    /// The scheduler did not answer the connection, in its words.
    #[error("{0}")]
    Unreachable(String),
}
