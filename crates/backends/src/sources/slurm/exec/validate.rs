//! Validate, then resume (issue 29): the node goes into a maintenance
//! reservation (nothing but the check can land on it), is resumed into it,
//! the site's check runs there as a job (`sbatch`, the whole node and its
//! GPUs), and then the reservation ends — the node back in service on a
//! pass, drained again with the failing tests as its reason otherwise. A
//! step that cannot be taken leaves the node out of service and says why.

use super::{Call, CallError, Executor, Outcome};
use crate::model::{JobState, NodeState, Step, VALIDATION_FAILED};
use crate::sources::validate::{Verdict, verdict};
use std::time::{Duration, Instant};

/// The most of a check's output read back.
const OUTPUT_MAX: u64 = 1 << 20;

impl Executor {
    /// The longest a check may take (`[validate] timeout`).
    pub fn validate_timeout(&self) -> Duration {
        self.cfg.validate.timeout
    }

    fn reservation(node: &str) -> String {
        format!("nightshift-validate-{node}")
    }

    fn reserve_call(&self, node: &str) -> Call {
        Call::Scontrol(vec![
            "create".into(),
            "reservation".into(),
            format!("reservationname={}", Self::reservation(node)),
            format!("nodes={node}"),
            "starttime=now".into(),
            "duration=unlimited".into(),
            format!("users={}", self.cfg.user),
            "flags=maint,ignore_jobs".into(),
        ])
    }

    fn unreserve_call(&self, node: &str) -> Call {
        Call::Scontrol(vec![
            "delete".into(),
            format!("reservationname={}", Self::reservation(node)),
        ])
    }

    fn output_path(&self, node: &str, job: &str) -> std::path::PathBuf {
        self.cfg
            .validate
            .output_dir
            .join(format!("nightshift-validate-{node}-{job}.out"))
    }

    /// The check's job: the whole node, and `gpus` of its GPUs (`None`:
    /// all of them, counted when it is sent).
    fn check_call(&self, node: &str, level: u8, gpus: Option<u32>) -> Call {
        let v = &self.cfg.validate;
        let mut args = vec![
            "--parsable".into(),
            format!("--reservation={}", Self::reservation(node)),
            format!("--nodelist={node}"),
            "--nodes=1".into(),
            "--exclusive".into(),
            "--job-name=nightshift-validate".into(),
            format!("--time={}", v.timeout.as_secs().div_ceil(60).max(1)),
            format!(
                "--output={}",
                v.output_dir
                    .join(format!("nightshift-validate-{node}-%j.out"))
                    .display()
            ),
        ];
        match gpus {
            Some(0) => {}
            Some(n) => args.push(format!("--gres=gpu:{n}")),
            None => args.push("--gres=gpu:<all of its GPUs>".into()),
        }
        args.push(format!("--wrap={}", v.command_for(level)));
        Call::Sbatch(args)
    }

    /// The calls of a validation, in order, as the preview shows them.
    pub fn validate_calls(&self, node: &str, level: u8) -> Vec<String> {
        vec![
            self.reserve_call(node).to_string(),
            self.resume_call(node).to_string(),
            self.check_call(node, level, None).to_string(),
            format!(
                "wait up to {} for the check; read {}",
                crate::text::duration(self.cfg.validate.timeout.as_secs() as i64),
                self.output_path(node, "JOBID").display()
            ),
            format!("on a pass: {}", self.unreserve_call(node)),
            format!(
                "on a failure: {}, then {}",
                self.drain_call(node, &format!("{VALIDATION_FAILED}: <the failing tests>")),
                self.unreserve_call(node)
            ),
        ]
    }

    /// Runs the validation; a step each. The last step says where the
    /// node ended: in service (passed), or out with the reason.
    pub async fn validate(&self, node: &str, level: u8) -> Vec<Step> {
        let mut steps = Vec::new();
        let gpus = match self.node_now(node).await {
            Ok(n) if n.state == NodeState::Up => {
                steps.push(Step::failed(
                    format!("validate {node}"),
                    format!("{node} is in service: validate a node that is out"),
                ));
                return steps;
            }
            Ok(n) => n.gpu_count,
            Err(e) => {
                steps.push(Step::failed(format!("read {node}"), e.to_string()));
                return steps;
            }
        };
        let r = Self::reservation(node);
        let reserve = self.reserve_call(node);
        match self.send(&reserve).await {
            Ok(()) => steps.push(Step::sent(
                format!("reserve {node} ({r})"),
                Outcome {
                    verified: true,
                    observed: format!("{r}: {node}, maintenance, for {}", self.cfg.user),
                },
            )),
            Err(e) => {
                steps.push(Step::failed(format!("reserve {node} ({r})"), e.to_string()));
                return steps;
            }
        }
        match self.resume(node).await {
            Ok(o) => steps.push(Step::sent(format!("resume {node} into {r}"), o)),
            Err(e) => {
                steps.push(Step::failed(
                    format!("resume {node} into {r}"),
                    e.to_string(),
                ));
                steps.extend(
                    self.keep_out(node, &format!("could not resume it: {e}"))
                        .await,
                );
                return steps;
            }
        }
        let check = format!("check {node} ({})", self.cfg.validate.command_for(level));
        let ran = self.run_check(node, level, gpus).await;
        match ran {
            Ok((job, Verdict::Pass, seen)) => {
                steps.push(Step::sent(
                    check,
                    Outcome {
                        verified: true,
                        observed: format!("job {job} passed: {seen}"),
                    },
                ));
                steps.push(self.end_reservation(node, true).await);
            }
            Ok((job, Verdict::Fail(tests), _)) => {
                let why = tests.join("; ");
                let mut s = Step::failed(check, format!("job {job}: {why}"));
                s.observed = format!("{node} stays out of service");
                steps.push(s);
                steps.extend(self.keep_out(node, &why).await);
            }
            Err(e) => {
                steps.push(Step::failed(check, e.clone()));
                steps.extend(self.keep_out(node, &e).await);
            }
        }
        steps
    }

    /// Submits the check and waits for it: its job id, verdict and what
    /// was seen of it; an error when it could not run or did not end in
    /// time (then it is cancelled).
    async fn run_check(
        &self,
        node: &str,
        level: u8,
        gpus: u32,
    ) -> Result<(String, Verdict, String), String> {
        let submitted = self
            .run(&self.check_call(node, level, Some(gpus)))
            .await
            .map_err(|e| format!("the check could not be submitted: {e}"))?;
        // `--parsable`: `ID` or `ID;CLUSTER`.
        let job = submitted
            .trim()
            .split(';')
            .next()
            .filter(|id| !id.is_empty() && id.chars().all(|c| c.is_ascii_digit()))
            .ok_or_else(|| format!("sbatch said {submitted:?}, not a job id"))?
            .to_string();
        let deadline = Instant::now() + self.cfg.validate.timeout;
        let state = loop {
            match self.job_now(&job).await {
                Ok(j)
                    if !j.state.holds_resources()
                        && !j.state.is_pending()
                        && j.state != JobState::Unknown =>
                {
                    break j.state;
                }
                Ok(_) | Err(CallError::NoJob(_)) => {}
                Err(e) => tracing::warn!("validate {node}: job {job}: {e}"),
            }
            if Instant::now() > deadline {
                let _ = self.send(&self.cancel_call(&job)).await;
                return Err(format!(
                    "job {job} did not end within {}: cancelled",
                    crate::text::duration(self.cfg.validate.timeout.as_secs() as i64)
                ));
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        };
        let path = self.output_path(node, &job);
        let output = read_output(&path);
        let passed = state == JobState::Completed;
        let seen = format!("{} ({})", state.as_str(), path.display());
        match output {
            Ok(text) => Ok((job, verdict(passed, &text), seen)),
            Err(e) if passed => Ok((job, Verdict::Pass, format!("{seen}; output unread: {e}"))),
            Err(e) => Ok((
                job,
                Verdict::Fail(vec![format!(
                    "the check ended {}; its output {} is not readable here: {e}",
                    state.as_str(),
                    path.display()
                )]),
                seen,
            )),
        }
    }

    /// Ends the reservation: the node is in service when it passed.
    async fn end_reservation(&self, node: &str, passed: bool) -> Step {
        let what = format!("end {}", Self::reservation(node));
        if let Err(e) = self.send(&self.unreserve_call(node)).await {
            return Step::failed(what, e.to_string());
        }
        let o = self
            .verify(
                || self.node_now(node),
                |n| (n.state == NodeState::Up) == passed,
                Self::show_node,
            )
            .await;
        Step::sent(what, o)
    }

    /// A check that failed or could not run: the node drained again with
    /// why, then its reservation ended.
    async fn keep_out(&self, node: &str, why: &str) -> Vec<Step> {
        let reason = crate::text::one_line(&format!("{VALIDATION_FAILED}: {why}"), 250);
        let drained = match self.drain(node, &reason).await {
            Ok(o) => Step::sent(format!("drain {node}: {reason}"), o),
            Err(e) => Step::failed(format!("drain {node}: {reason}"), e.to_string()),
        };
        vec![drained, self.end_reservation(node, false).await]
    }
}

/// The check's output, at most `OUTPUT_MAX` bytes of it.
fn read_output(path: &std::path::Path) -> Result<String, String> {
    use std::io::Read;
    let f = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let mut buf = Vec::new();
    f.take(OUTPUT_MAX)
        .read_to_end(&mut buf)
        .map_err(|e| e.to_string())?;
    Ok(String::from_utf8_lossy(&buf).into_owned())
}
