//! The sim as a scheduler for the guard: the sim the console runs (reached
//! through its command channel) and a sim of this process's own (the
//! command line's), both speaking the sim's calls.

use super::{CommandRequest, Sim};
use crate::model::{Action, Cluster, Outcome, Step};
use crate::protocol::scheduler::{ObserveError, Pending, Scheduler};
use std::sync::{Arc, Mutex};
use tokio::sync::{mpsc, oneshot};

const SIMULATED: &str = "simulated scheduler:";

fn what(a: &Action) -> String {
    format!("{} {}", a.verb(), a.target())
}

/// The sim running in the console, through its command channel.
pub struct Channel(pub mpsc::Sender<CommandRequest>);

impl Scheduler for Channel {
    fn calls(&self, a: &Action, jobs: &[String]) -> Vec<String> {
        Sim::calls_as(SIMULATED, a, jobs)
    }

    fn execute<'a>(&'a self, a: &'a Action) -> Pending<'a, Vec<Step>> {
        Box::pin(async move {
            let (reply, rx) = oneshot::channel();
            if self.0.send((a.clone(), reply)).await.is_err() {
                return vec![Step::failed(
                    what(a),
                    "the simulated cluster has stopped".into(),
                )];
            }
            match rx.await {
                Ok(Ok(steps)) => steps,
                Ok(Err(e)) => vec![Step::failed(what(a), e.to_string())],
                Err(_) => vec![Step::failed(
                    what(a),
                    "the simulated cluster did not answer".into(),
                )],
            }
        })
    }

    fn observe<'a>(&'a self, _a: &'a Action) -> Pending<'a, Result<Outcome, ObserveError>> {
        Box::pin(async { Err(ObserveError("the simulated cluster is busy".into())) })
    }
}

/// A sim owned by this process (the command line's).
/// Shared so that a test can look at the sim as another operator would.
pub struct Own(pub Arc<Mutex<Sim>>);

impl Scheduler for Own {
    fn calls(&self, a: &Action, jobs: &[String]) -> Vec<String> {
        Sim::calls_as(SIMULATED, a, jobs)
    }

    fn execute<'a>(&'a self, a: &'a Action) -> Pending<'a, Vec<Step>> {
        let steps = match self.0.lock() {
            Ok(mut s) => s
                .apply(a)
                .unwrap_or_else(|e| vec![Step::failed(what(a), e.to_string())]),
            Err(_) => vec![Step::failed(
                what(a),
                "the simulated cluster is unusable".into(),
            )],
        };
        Box::pin(async move { steps })
    }

    fn observe<'a>(&'a self, a: &'a Action) -> Pending<'a, Result<Outcome, ObserveError>> {
        let seen = match self.0.lock() {
            Ok(s) => {
                let (verified, observed) = s.observe(a);
                Ok(Outcome { verified, observed })
            }
            Err(_) => Err(ObserveError("the simulated cluster is unusable".into())),
        };
        Box::pin(async move { seen })
    }

    fn advance(&mut self, secs: u64) -> Option<Result<Cluster, String>> {
        Some(match self.0.lock() {
            Ok(mut s) => {
                s.advance(secs);
                Ok(s.snapshot())
            }
            Err(_) => Err("the simulated cluster is unusable".into()),
        })
    }
}
