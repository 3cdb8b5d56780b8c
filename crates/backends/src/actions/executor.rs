//! Executors: how an action reaches its backend, the exact calls it will
//! make (for the preview), and what was seen afterwards (verify), step by
//! step: a drain is the node update and then one requeue per job, and a
//! failed requeue after a good drain is reported as exactly that. Each
//! backend is a `Scheduler` beside its own reading (Slurm's in
//! `sources::slurm::exec`, Kubernetes' in `sources::kube::exec`, the sim's
//! in `sources::sim`); this is the one handle the guard holds.

use super::Action;
pub use super::scheduler::{ObserveError, Pending, Scheduler};
use crate::model::{Cluster, Outcome, Step};

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
        crate::sources::sim::calls_as("(a recording: not sent)", a, jobs)
    }

    fn execute<'a>(&'a self, a: &'a Action) -> Pending<'a, Vec<Step>> {
        let what = format!("{} {}", a.verb(), a.target());
        Box::pin(async move { vec![Step::failed(what, "a recording cannot be acted on".into())] })
    }

    fn observe<'a>(&'a self, _a: &'a Action) -> Pending<'a, Result<Outcome, ObserveError>> {
        Box::pin(async { Err(ObserveError("a recording cannot be acted on".into())) })
    }
}
