//! Kubernetes as a scheduler for the guard: its preview (the pods a drain
//! evicts and the workload a requeue names, read when the preview is
//! made), its refusals, its steps and its re-reading.

use super::Executor;
use crate::model::{Action, Outcome, Step};
use crate::protocol::scheduler::{ObserveError, Pending, Scheduler};

impl Scheduler for Executor {
    fn prepare<'a>(&'a self, a: &'a Action) -> Pending<'a, ()> {
        Box::pin(Executor::prepare(self, a))
    }

    fn warnings(&self, a: &Action) -> Vec<String> {
        Executor::warnings(self, a)
    }

    fn cannot(&self, a: &Action) -> Option<String> {
        Executor::cannot(self, a).map(|c| c.to_string())
    }

    fn extra_time(&self, a: &Action) -> std::time::Duration {
        match a {
            Action::Validate { .. } => self.validate.timeout + std::time::Duration::from_secs(60),
            _ => std::time::Duration::ZERO,
        }
    }

    fn calls(&self, a: &Action, _jobs: &[String]) -> Vec<String> {
        Executor::calls(self, a)
    }

    fn execute<'a>(&'a self, a: &'a Action) -> Pending<'a, Vec<Step>> {
        Box::pin(Executor::execute(self, a))
    }

    fn observe<'a>(&'a self, a: &'a Action) -> Pending<'a, Result<Outcome, ObserveError>> {
        Box::pin(async move { Executor::observe(self, a).await.map_err(ObserveError::new) })
    }
}
