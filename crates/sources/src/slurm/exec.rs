//! The write side: what the guarded actions call. REST where the server's
//! API version has the endpoint, `scontrol` where it does not (22.05 answers
//! 405 to node updates and has no `hold` in a job update; no version up to
//! 24.11's v0.0.42 has a requeue endpoint). Slurm's error text is passed on verbatim. Each call re-reads
//! the state afterwards and says whether the change is visible.

use super::client::{ApiVersion, Client};
pub use super::error::CallError;
use super::{SlurmConfig, map, wire};
use crate::SourceError;
use crate::model::{JobState, NodeState};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

mod steps;
mod validate;

/// How long to wait for a change to become visible.
const VERIFY_FOR: Duration = Duration::from_secs(8);

pub use crate::model::Outcome;

pub struct Executor {
    client: Client,
    version: ApiVersion,
    cfg: SlurmConfig,
}

/// One call nightshift will make, shown in the preview before it is sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    Rest {
        method: &'static str,
        path: String,
        body: Value,
    },
    Scontrol(Vec<String>),
    Scancel(Vec<String>),
    Sbatch(Vec<String>),
}

/// `a` as a POSIX shell word that means `a`: bare when every character is
/// safe, else in single quotes with each `'` written `'\''` — a line of
/// the preview pasted into a shell sends what nightshift sends.
pub fn shell_quote(a: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "-_=.,:/@%+^".contains(c);
    if !a.is_empty() && a.chars().all(safe) {
        a.to_string()
    } else {
        format!("'{}'", a.replace('\'', "'\\''"))
    }
}

impl std::fmt::Display for Call {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Call::Rest {
                method,
                path,
                body: Value::Null,
            } => write!(f, "{method} {path}"),
            Call::Rest { method, path, body } => write!(f, "{method} {path} {body}"),
            Call::Scontrol(args) | Call::Scancel(args) | Call::Sbatch(args) => {
                let quoted: Vec<String> = args.iter().map(|a| shell_quote(a)).collect();
                let program = match self {
                    Call::Scancel(_) => "scancel",
                    Call::Sbatch(_) => "sbatch",
                    _ => "scontrol",
                };
                write!(f, "{program} {}", quoted.join(" "))
            }
        }
    }
}

/// `scancel` (or `sbatch`) from the same place as the configured `scontrol`.
pub(crate) fn beside(scontrol: &str, program: &str) -> String {
    match scontrol.rsplit_once('/') {
        Some((dir, _)) => format!("{dir}/{program}"),
        None => program.into(),
    }
}

impl Executor {
    pub async fn connect(cfg: &SlurmConfig) -> Result<Executor, CallError> {
        let client = Client::new(cfg)?;
        let version = client.discover().await?;
        Ok(Executor {
            client,
            version,
            cfg: cfg.clone(),
        })
    }

    fn numeric(job: &str) -> Option<u64> {
        job.parse().ok()
    }

    pub fn drain_call(&self, node: &str, reason: &str) -> Call {
        if self.version.can_update_nodes() {
            Call::Rest {
                method: "POST",
                path: format!("/slurm/{}/node/{node}", self.version),
                body: json!({"state": ["DRAIN"], "reason": reason}),
            }
        } else {
            Call::Scontrol(vec![
                "update".into(),
                format!("nodename={node}"),
                "state=drain".into(),
                format!("reason={reason}"),
            ])
        }
    }

    /// A new reason for a node out of service. Slurm keeps a reason only
    /// with a state, so the node is drained again with it: a no-op for a
    /// node that is drained (or, for nightshift, cordoned) already.
    pub fn reason_call(&self, node: &str, reason: &str) -> Call {
        self.drain_call(node, reason)
    }

    pub fn resume_call(&self, node: &str) -> Call {
        if self.version.can_update_nodes() {
            Call::Rest {
                method: "POST",
                path: format!("/slurm/{}/node/{node}", self.version),
                body: json!({"state": ["RESUME"]}),
            }
        } else {
            Call::Scontrol(vec![
                "update".into(),
                format!("nodename={node}"),
                "state=resume".into(),
            ])
        }
    }

    /// REST's own requeue where the version has it (v0.0.45: a GET, as
    /// Slurm's OpenAPI document defines it), else scontrol.
    pub fn requeue_call(&self, job: &str) -> Call {
        match Self::numeric(job) {
            Some(id) if self.version.has_requeue() => Call::Rest {
                method: "GET",
                path: format!("/slurm/{}/job/{id}/requeue", self.version),
                body: Value::Null,
            },
            _ => Call::Scontrol(vec!["requeue".into(), job.into()]),
        }
    }

    /// A job update with `hold` where the version has it (24.11 on),
    /// else scontrol.
    fn hold_update(&self, job: &str, hold: bool) -> Call {
        match Self::numeric(job) {
            Some(id) if self.version.can_hold_jobs() => Call::Rest {
                method: "POST",
                path: format!("/slurm/{}/job/{id}", self.version),
                body: json!({ "hold": hold }),
            },
            _ => Call::Scontrol(vec![
                if hold { "hold" } else { "release" }.into(),
                job.into(),
            ]),
        }
    }

    pub fn hold_call(&self, job: &str) -> Call {
        self.hold_update(job, true)
    }

    pub fn release_call(&self, job: &str) -> Call {
        self.hold_update(job, false)
    }

    pub fn cancel_call(&self, job: &str) -> Call {
        match Self::numeric(job) {
            Some(id) => Call::Rest {
                method: "DELETE",
                path: format!("/slurm/{}/job/{id}", self.version),
                body: Value::Null,
            },
            None => Call::Scontrol(vec!["cancel".into(), job.into()]),
        }
    }

    /// `scancel --signal=USR1 JOB` as REST (v0.0.38 on: DELETE with a
    /// `signal`): the job is told to checkpoint and keeps running.
    pub fn signal_call(&self, job: &str, signal: &str) -> Call {
        match Self::numeric(job) {
            Some(id) => Call::Rest {
                method: "DELETE",
                path: format!("/slurm/{}/job/{id}?signal={signal}", self.version),
                body: Value::Null,
            },
            None => Call::Scancel(vec![format!("--signal={signal}"), job.into()]),
        }
    }

    pub fn priority_call(&self, job: &str, value: u64) -> Call {
        match Self::numeric(job) {
            Some(id) => {
                let body = if self.version.0 >= 40 {
                    json!({"priority": {"set": true, "number": value}})
                } else {
                    json!({"priority": value})
                };
                Call::Rest {
                    method: "POST",
                    path: format!("/slurm/{}/job/{id}", self.version),
                    body,
                }
            }
            // Array tasks (`12_3`) have no REST id of their own here.
            None => Call::Scontrol(vec![
                "update".into(),
                format!("jobid={job}"),
                format!("priority={value}"),
            ]),
        }
    }

    async fn send(&self, call: &Call) -> Result<(), CallError> {
        self.run(call).await.map(|_| ())
    }

    /// Sends a call; a command's output (what `sbatch --parsable` prints).
    async fn run(&self, call: &Call) -> Result<String, CallError> {
        match call {
            Call::Rest {
                method: "DELETE",
                path,
                ..
            } => self
                .client
                .delete(path)
                .await
                .map(|_| String::new())
                .map_err(CallError::from),
            Call::Rest {
                method: "GET",
                path,
                ..
            } => self
                .client
                .get(path)
                .await
                .map(|_| String::new())
                .map_err(CallError::from),
            Call::Rest { path, body, .. } => self
                .client
                .post(path, body)
                .await
                .map(|_| String::new())
                .map_err(CallError::from),
            Call::Scontrol(args) | Call::Scancel(args) | Call::Sbatch(args) => {
                let program = match call {
                    Call::Scancel(_) => beside(&self.cfg.scontrol, "scancel"),
                    Call::Sbatch(_) => beside(&self.cfg.scontrol, "sbatch"),
                    _ => self.cfg.scontrol.clone(),
                };
                let mut cmd = tokio::process::Command::new(&program);
                cmd.args(args).kill_on_drop(true);
                if let Some(conf) = &self.cfg.slurm_conf {
                    cmd.env("SLURM_CONF", conf);
                }
                let run = cmd.output();
                let out = tokio::time::timeout(self.cfg.timeout, run)
                    .await
                    .map_err(|_| CallError::Timeout {
                        call: call.to_string(),
                        after: self.cfg.timeout,
                    })?
                    .map_err(|e| CallError::Spawn {
                        program: program.clone(),
                        source: std::sync::Arc::new(e),
                    })?;
                if out.status.success() {
                    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
                } else {
                    let err = String::from_utf8_lossy(&out.stderr);
                    let msg = if err.trim().is_empty() {
                        String::from_utf8_lossy(&out.stdout).trim().to_string()
                    } else {
                        err.trim().to_string()
                    };
                    Err(CallError::Refused {
                        call: call.to_string(),
                        said: msg,
                    })
                }
            }
        }
    }

    pub async fn node_now(&self, node: &str) -> Result<crate::model::Node, CallError> {
        let v = self
            .client
            .get(&format!("/slurm/{}/node/{node}", self.version))
            .await?;
        let (nodes, _) =
            wire::list::<wire::Node>(v, "nodes", "node").map_err(|why| CallError::Read {
                what: format!("node {node}"),
                why,
            })?;
        // Its partitions from the partitions' own node lists, right on
        // every version: slurmrestd 22.05's `/node/NAME` names the first
        // partition for every node (issue 58: validate sent
        // `--partition=a100` for an H100 node and sbatch refused it).
        let parts = match self
            .client
            .get(&format!("/slurm/{}/partitions", self.version))
            .await
        {
            Ok(v) => wire::list::<wire::Partition>(v, "partitions", "partition")
                .map(|(p, _)| p)
                .unwrap_or_default(),
            Err(_) => Vec::new(),
        };
        let c = map::cluster(&self.cfg.fallback_name(), 0, &nodes, &[], &parts).cluster;
        c.nodes
            .into_iter()
            .find(|n| n.name == node)
            .map(std::sync::Arc::unwrap_or_clone)
            .ok_or_else(|| CallError::NoNode(node.to_string()))
    }

    async fn jobs_now(&self) -> Result<Vec<crate::model::Job>, CallError> {
        let v = self
            .client
            .get(&format!("/slurm/{}/jobs", self.version))
            .await?;
        let (jobs, _) =
            wire::list::<wire::Job>(v, "jobs", "job").map_err(|why| CallError::Read {
                what: "jobs".into(),
                why,
            })?;
        Ok(map::cluster(&self.cfg.fallback_name(), 0, &[], &jobs, &[])
            .cluster
            .jobs
            .into_iter()
            .map(std::sync::Arc::unwrap_or_clone)
            .collect())
    }

    /// One job as Slurm has it now: its own record (`GET /job/ID`) for a
    /// plain id — verifying re-reads it every 250 ms, and every job's
    /// record costs slurmrestd seconds on a big queue — else from the list.
    async fn job_now(&self, job: &str) -> Result<crate::model::Job, CallError> {
        let jobs = match Self::numeric(job) {
            Some(id) => {
                let v = self
                    .client
                    .get(&format!("/slurm/{}/job/{id}", self.version))
                    .await?;
                let (jobs, _) =
                    wire::list::<wire::Job>(v, "jobs", "job").map_err(|why| CallError::Read {
                        what: format!("job {job}"),
                        why,
                    })?;
                map::cluster(&self.cfg.fallback_name(), 0, &[], &jobs, &[])
                    .cluster
                    .jobs
                    .into_iter()
                    .map(std::sync::Arc::unwrap_or_clone)
                    .collect()
            }
            None => self.jobs_now().await?,
        };
        jobs.into_iter()
            .find(|j| j.id == job)
            .ok_or_else(|| CallError::NoJob(job.to_string()))
    }

    /// Sends a call about `job`, then re-reads until `check` holds.
    async fn act_on_job(
        &self,
        call: Call,
        job: &str,
        check: impl Fn(&crate::model::Job) -> bool,
    ) -> Result<Outcome, CallError> {
        self.send(&call).await?;
        Ok(self
            .verify(|| self.job_now(job), check, Self::show_job)
            .await)
    }

    /// Re-reads until `check` holds or the time is up.
    async fn verify<T, F, Fut>(
        &self,
        read: F,
        check: impl Fn(&T) -> bool,
        show: impl Fn(&T) -> String,
    ) -> Outcome
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = Result<T, CallError>>,
    {
        let start = Instant::now();
        loop {
            let observed = match read().await {
                Ok(t) if check(&t) => {
                    return Outcome {
                        verified: true,
                        observed: show(&t),
                    };
                }
                Ok(t) => show(&t),
                Err(e) => e.to_string(),
            };
            if start.elapsed() > VERIFY_FOR {
                return Outcome {
                    verified: false,
                    observed,
                };
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    fn show_node(n: &crate::model::Node) -> String {
        format!(
            "{} is {} (reason: {})",
            n.name,
            n.state.as_str(),
            n.reason.as_deref().unwrap_or("-")
        )
    }

    fn show_job(j: &crate::model::Job) -> String {
        format!(
            "job {} is {} (priority {}, reason {}, restarts {})",
            j.id,
            j.state.as_str(),
            j.priority.get().map_or("-".into(), |p| p.to_string()),
            j.reason.as_deref().unwrap_or("-"),
            j.restarts.map_or("-".into(), |r| r.to_string())
        )
    }

    pub async fn drain(&self, node: &str, reason: &str) -> Result<Outcome, CallError> {
        self.send(&self.drain_call(node, reason)).await?;
        Ok(self
            .verify(
                || self.node_now(node),
                |n| {
                    matches!(n.state, NodeState::Drain | NodeState::Draining)
                        && n.reason.as_deref() == Some(reason)
                },
                Self::show_node,
            )
            .await)
    }

    /// Reads back what an action should have left, changing nothing: for
    /// re-reading after a call that failed or timed out.
    pub async fn observe(&self, a: &crate::model::Action) -> Result<Outcome, CallError> {
        use crate::model::Action;
        let node_is = |n: &crate::model::Node| match a {
            Action::Cordon { reason, .. } => {
                n.state != NodeState::Up
                    && n.reason.as_deref() == Some(&format!("cordon: {reason}"))
            }
            Action::Drain { reason, .. } | Action::SetReason { reason, .. } => {
                n.state != NodeState::Up && n.reason.as_deref() == Some(reason.as_str())
            }
            // Passed (in service) or failed (out, with the check's words).
            Action::Validate { .. } => {
                n.state == NodeState::Up
                    || n.reason
                        .as_deref()
                        .is_some_and(|r| r.starts_with(crate::model::VALIDATION_FAILED))
            }
            _ => n.state == NodeState::Up,
        };
        let job_is = |j: &crate::model::Job| match a {
            Action::Priority { value, .. } => j.priority == Some(*value),
            Action::Hold { .. } => j
                .reason
                .as_deref()
                .is_some_and(|r| r.starts_with("JobHeld")),
            Action::Release { .. } => !j
                .reason
                .as_deref()
                .is_some_and(|r| r.starts_with("JobHeld")),
            _ => j.state.is_pending(),
        };
        if a.on_node() {
            let n = self.node_now(a.target()).await?;
            Ok(Outcome {
                verified: node_is(&n),
                observed: Self::show_node(&n),
            })
        } else {
            let j = self.job_now(a.target()).await?;
            Ok(Outcome {
                verified: job_is(&j),
                observed: Self::show_job(&j),
            })
        }
    }

    pub async fn set_reason(&self, node: &str, reason: &str) -> Result<Outcome, CallError> {
        self.send(&self.reason_call(node, reason)).await?;
        Ok(self
            .verify(
                || self.node_now(node),
                |n| n.reason.as_deref() == Some(reason),
                Self::show_node,
            )
            .await)
    }

    pub async fn resume(&self, node: &str) -> Result<Outcome, CallError> {
        self.resume_as(node, |n| n.state == NodeState::Up).await
    }

    /// Resumes a node into the maintenance reservation made for its check:
    /// in service there is "in a maintenance reservation" (`MAINT`) as soon
    /// as Slurm marks it so, which it does within a poll or two — either
    /// is the resume seen (a validate on 24.11 and 26.05 said "not visible
    /// yet" when the flag came first).
    pub async fn resume_reserved(&self, node: &str) -> Result<Outcome, CallError> {
        self.resume_as(node, |n| {
            matches!(n.state, NodeState::Up | NodeState::Reserved)
        })
        .await
    }

    async fn resume_as(
        &self,
        node: &str,
        seen: impl Fn(&crate::model::Node) -> bool,
    ) -> Result<Outcome, CallError> {
        self.send(&self.resume_call(node)).await?;
        Ok(self
            .verify(|| self.node_now(node), seen, Self::show_node)
            .await)
    }

    /// Requeues a job; verified when it is pending again and its restart
    /// count went up.
    pub async fn requeue(&self, job: &str) -> Result<Outcome, CallError> {
        let before = self
            .job_now(job)
            .await
            .ok()
            .and_then(|j| j.restarts)
            .unwrap_or(0);
        self.act_on_job(self.requeue_call(job), job, |j| {
            j.state.is_pending() && j.restarts.unwrap_or(0) > before
        })
        .await
    }

    /// The job's last checkpoint as Slurm shows it (its comment's
    /// `ckpt_last`), and whether it still holds resources.
    pub async fn checkpoint_of(&self, job: &str) -> Result<(Option<i64>, bool), CallError> {
        let j = self.job_now(job).await?;
        Ok((j.checkpoint.last.get(), j.state.holds_resources()))
    }

    /// The signal that tells a job to checkpoint (`[slurm] checkpoint_signal`).
    pub fn checkpoint_signal(&self) -> &str {
        &self.cfg.checkpoint_signal
    }

    /// Tells a running job to checkpoint: verified when Slurm accepted it
    /// (the job keeps running; its checkpoint shows later).
    pub async fn signal(&self, job: &str, signal: &str) -> Result<Outcome, CallError> {
        self.send(&self.signal_call(job, signal)).await?;
        Ok(Outcome {
            verified: true,
            observed: format!("{signal} sent to job {job}"),
        })
    }

    pub async fn set_priority(&self, job: &str, value: u64) -> Result<Outcome, CallError> {
        self.act_on_job(self.priority_call(job, value), job, |j| {
            j.priority == Some(value)
        })
        .await
    }

    /// Cancels a job; verified when Slurm no longer runs or queues it.
    pub async fn cancel(&self, job: &str) -> Result<Outcome, CallError> {
        self.act_on_job(self.cancel_call(job), job, |j| {
            !j.state.holds_resources() && !j.state.is_pending()
        })
        .await
    }

    /// Jobs holding resources on `node` now, by id.
    /// The jobs holding resources on `node`, each with whether it may be
    /// requeued (`false`: submitted with --no-requeue).
    pub async fn jobs_on(&self, node: &str) -> Result<Vec<(String, bool)>, CallError> {
        Ok(self
            .jobs_now()
            .await?
            .into_iter()
            .filter(|j| j.state.holds_resources() && j.nodes.iter().any(|n| n == node))
            .map(|j| (j.id, j.requeueable != Some(false)))
            .collect())
    }

    pub async fn hold(&self, job: &str) -> Result<Outcome, CallError> {
        self.act_on_job(self.hold_call(job), job, |j| {
            j.reason
                .as_deref()
                .is_some_and(|r| r.starts_with("JobHeld"))
        })
        .await
    }

    pub async fn release(&self, job: &str) -> Result<Outcome, CallError> {
        let held = |j: &crate::model::Job| {
            j.reason
                .as_deref()
                .is_some_and(|r| r.starts_with("JobHeld"))
        };
        self.act_on_job(self.release_call(job), job, move |j| {
            !held(j) || j.state != JobState::Pending
        })
        .await
    }
}

/// What Slurm's answer to a refused call means, where nightshift knows:
/// a requeue of a job submitted with --no-requeue is answered "Requested
/// operation is presently disabled for job N" (scontrol and slurmrestd
/// alike, seen on the 22.05 and 24.11 labs). Read here, where Slurm's text
/// is parsed, so that nothing above matches it.
pub fn refusal(error: &CallError) -> Option<crate::model::Refused> {
    match error {
        CallError::Refused { said, .. } if said.contains("presently disabled") => {
            Some(crate::model::Refused::NoRequeue)
        }
        CallError::Source(SourceError::Api { errors, .. })
            if errors.iter().any(|e| e.contains("presently disabled")) =>
        {
            Some(crate::model::Refused::NoRequeue)
        }
        _ => None,
    }
}

#[cfg(test)]
mod quote_tests {
    use super::shell_quote;

    /// A quoted argument read back by a real shell is the argument: a
    /// preview's line pasted into a shell sends what nightshift sends.
    #[test]
    fn a_quoted_argument_is_read_back_by_sh_as_itself() {
        for a in [
            "plain",
            "two words",
            "it's \"x\" $HOME `id` \\ ; |",
            "",
            "reason=a'b",
        ] {
            let out = std::process::Command::new("sh")
                .arg("-c")
                .arg(format!("printf %s {}", shell_quote(a)))
                .output()
                .expect("sh");
            assert_eq!(
                String::from_utf8_lossy(&out.stdout),
                a,
                "{}",
                shell_quote(a)
            );
        }
    }
}
