//! Carrying out a live policy's plan: each step through the same guard as
//! a person's — preview (the breaker, fresh data, the node taken
//! meanwhile), execute, verify, audit, under `policy:<name>` — and the
//! step that waits for a checkpoint armed, sealed like a person's. What
//! the guard refuses, and what fails or is only partly done, is not
//! pushed past: a person is paged.

use crate::actions::guard::{self, Check, How};
use crate::actions::policy::Refusal;
use crate::decide::Plan;

/// Everything sending needs besides the plan: what firing an armed step
/// needs (`follow::Firing`); its `who` names the policy (`policy:<name>`).
pub use crate::actions::follow::Firing as Acting;

/// What came of a plan.
#[derive(Debug, Clone, PartialEq)]
pub enum Carried {
    /// Sent (and armed): the guard's lines.
    Done(String),
    /// Not all of it: why a person must decide, and what was done before.
    Page(String),
}

/// Sends `plan`'s steps in order, stopping at the first the guard refuses
/// or that fails; then arms its last step when it waits for a checkpoint.
pub async fn carry_out(plan: &Plan, a: &Acting<'_>) -> Carried {
    let mut said: Vec<String> = Vec::new();
    let before = |said: &Vec<String>| {
        if said.is_empty() {
            "nothing sent".to_string()
        } else {
            format!("sent before: {}", said.join("; "))
        }
    };
    for step in &plan.now {
        a.executor.prepare(step).await;
        let p = guard::preview_as(
            step,
            a.cluster,
            a.base,
            a.data_age,
            a.policy,
            a.log,
            How {
                force: false,
                step_of: None,
            },
            Ok(a.executor),
            a.site,
        );
        match &p.refusal {
            Some(Refusal::Nothing(n)) => {
                said.push(format!("{}: {n}", step.command_line()));
                continue;
            }
            Some(r) => {
                return Carried::Page(format!(
                    "the guard refuses {}: {r} ({})",
                    step.command_line(),
                    before(&said)
                ));
            }
            None => {}
        }
        // The policy stands for the typed confirmation: the site confirmed
        // it when it turned the policy live.
        let typed = p.token.clone().unwrap_or_else(|| "y".into());
        let now = Check {
            cluster: a.cluster,
            data_age: a.data_age,
            policy: a.policy,
        };
        match guard::run(&p, &typed, a.executor, a.log, a.who, a.timeout, now).await {
            Ok(done) if done.outcome.ok && !done.outcome.partial => said.push(done.message),
            Ok(done) => {
                return Carried::Page(format!(
                    "{} did not all go: {} ({})",
                    step.command_line(),
                    done.message,
                    before(&said)
                ));
            }
            Err(e) => {
                return Carried::Page(format!(
                    "{} not sent: {e} ({})",
                    step.command_line(),
                    before(&said)
                ));
            }
        }
    }
    if let Some((action, when)) = &plan.armed {
        match crate::actions::follow::arm(
            a.log,
            a.who,
            action.clone(),
            when.clone(),
            a.cluster.time,
        ) {
            Ok(armed) => said.push(format!("armed: {}", crate::engine::armed::describe(&armed))),
            Err(e) => {
                return Carried::Page(format!(
                    "{} not armed: {e} ({})",
                    action.command_line(),
                    before(&said)
                ));
            }
        }
    }
    Carried::Done(said.join("; "))
}
