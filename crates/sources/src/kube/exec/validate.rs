//! Validate, then uncordon (issue 29), on Kubernetes: the site's check
//! runs as a Job pinned to the node (`nodeName`, so the cordon does not
//! keep it off; tolerating every taint, nightshift's and NVIDIA's), asking
//! for all of its GPUs. On a pass the node is uncordoned; on a failure it
//! stays cordoned with the failing tests as its reason. The check's output
//! is its pod's log, else its container's termination message (the Job
//! asks for `FallbackToLogsOnError`: the log's tail when it fails).

use super::calls::{Call, node_path, reason_call, uncordon_call};
use super::{CallError, Executor, Outcome};
use crate::model::{Action, Step, VALIDATION_FAILED};
use crate::validate::{Verdict, verdict};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// The lines of the check pod's log asked for: its end, where a check
/// says what failed.
const LOG_TAIL_LINES: u32 = 500;

/// The check Job's name for one run: `nightshift-validate-NODE-RUN`, RUN
/// the run's start in base 36 — each run its own Job, so that a node
/// validated again (after a failed check, within the finished Job's TTL of
/// a day) is not refused as AlreadyExists, and the pods read are this
/// run's. A Job's name is a DNS label (its pods' `job-name` label): at most
/// 63 characters, the node's part cut to fit.
fn job_name(node: &str, run: &str) -> String {
    let mut n = format!("nightshift-validate-{node}");
    n.truncate(63usize.saturating_sub(run.len() + 1));
    format!("{}-{run}", n.trim_end_matches(['-', '.']))
}

/// Now in base 36 (`tkx0f2`): short, and later runs sort later.
fn run_id() -> String {
    let mut t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut out = Vec::new();
    loop {
        let d = (t % 36) as u8;
        out.push(if d < 10 { b'0' + d } else { b'a' + d - 10 });
        t /= 36;
        if t == 0 {
            break;
        }
    }
    out.reverse();
    String::from_utf8_lossy(&out).into_owned()
}

/// A node's name as a label value (at most 63 characters, alphanumeric at
/// both ends).
fn label_value(node: &str) -> String {
    let mut v = node.to_string();
    v.truncate(63);
    v.trim_matches(|c: char| !c.is_ascii_alphanumeric())
        .to_string()
}

impl Executor {
    fn jobs_path(&self) -> String {
        format!("/apis/batch/v1/namespaces/{}/jobs", self.validate.namespace)
    }

    /// The check's Job: pinned to `node`, every taint tolerated, its
    /// `gpus` GPUs asked for (`None`: all of them, counted when sent).
    fn check_job(&self, node: &str, name: &str, level: u8, gpus: Option<u64>) -> Call {
        let v = &self.validate;
        let gpus = gpus.map_or(json!("<all of its GPUs>"), |g| json!(g.to_string()));
        Call {
            method: "POST",
            path: self.jobs_path(),
            body: Some(json!({
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {"name": name, "namespace": v.namespace,
                    "labels": {"app.kubernetes.io/managed-by": "nightshift",
                        "nightshift.io/validate": label_value(node)}},
                "spec": {
                    "backoffLimit": 0,
                    "activeDeadlineSeconds": v.timeout.as_secs(),
                    "ttlSecondsAfterFinished": 86_400,
                    "template": {"spec": {
                        "nodeName": node,
                        "restartPolicy": "Never",
                        "tolerations": [{"operator": "Exists"}],
                        "containers": [{
                            "name": "check",
                            "image": v.image,
                            "command": ["sh", "-c", v.command_for(level)],
                            "resources": {"limits": {"nvidia.com/gpu": gpus}},
                            "terminationMessagePolicy": "FallbackToLogsOnError"
                        }]
                    }}
                }
            })),
        }
    }

    /// The calls of a validation, in order, as the preview shows them.
    pub fn validate_calls(&self, node: &str, level: u8) -> Vec<String> {
        let name = job_name(node, "<run>");
        vec![
            self.check_job(node, &name, level, None).to_string(),
            format!(
                "wait up to {} for Job {}/{name} to succeed or fail; read its pod's log",
                crate::text::duration(self.validate.timeout.as_secs() as i64),
                self.validate.namespace,
            ),
            format!("on a pass: {}", uncordon_call(node)),
            format!(
                "on a failure: {}",
                reason_call(node, &format!("{VALIDATION_FAILED}: <the failing tests>"))
            ),
        ]
    }

    /// Runs the validation; a step each, the last saying where the node
    /// ended.
    pub async fn validate(&self, node: &str, level: u8) -> Vec<Step> {
        let n = match self.get(&node_path(node)).await {
            Ok(n) => n,
            Err(e) => return vec![Step::failed(format!("read {node}"), e.to_string())],
        };
        if n["spec"]["unschedulable"] != true {
            return vec![Step::failed(
                format!("validate {node}"),
                format!("{node} is not cordoned: validate a node that is out"),
            )];
        }
        let gpus = crate::kube::map::count_of(&n["status"]["allocatable"]["nvidia.com/gpu"]);
        if let Some(running) = self.check_running(node).await {
            return vec![Step::failed(
                format!("validate {node}"),
                format!("a check of {node} is already running: Job {running}"),
            )];
        }
        let name = job_name(node, &run_id());
        let job = format!("{}/{name}", self.validate.namespace);
        let what = format!(
            "check {node} (Job {job}: {})",
            self.validate.command_for(level)
        );
        let mut steps = Vec::new();
        if let Err(e) = self
            .send(&self.check_job(node, &name, level, Some(gpus)))
            .await
        {
            steps.push(Step::failed(what, super::err_text(&e)));
            steps.push(
                self.keep_out(
                    node,
                    &format!("the check could not start: {}", super::err_text(&e)),
                )
                .await,
            );
            return steps;
        }
        match self.wait_for_check(&name).await {
            Ok((Verdict::Pass, seen)) => {
                steps.push(Step::sent(
                    what,
                    Outcome {
                        verified: true,
                        observed: format!("passed: {seen}"),
                    },
                ));
                let r = match self.send(&uncordon_call(node)).await {
                    Ok(_) => self.observe(&Action::Resume { node: node.into() }).await,
                    Err(e) => Err(CallError::Api(super::err_text(&e))),
                };
                steps.push(Step::of(format!("uncordon {node}"), r));
            }
            Ok((Verdict::Fail(tests), _)) => {
                let why = tests.join("; ");
                let mut s = Step::failed(what, why.clone());
                s.observed = format!("{node} stays cordoned");
                steps.push(s);
                steps.push(self.keep_out(node, &why).await);
            }
            Err(e) => {
                steps.push(Step::failed(what, e.clone()));
                steps.push(self.keep_out(node, &e).await);
            }
        }
        steps
    }

    /// A check Job of `node` not ended yet (another operator's, or one
    /// whose console went away), by its label.
    async fn check_running(&self, node: &str) -> Option<String> {
        let jobs = self
            .get(&format!(
                "{}?labelSelector=nightshift.io%2Fvalidate%3D{}",
                self.jobs_path(),
                label_value(node)
            ))
            .await
            .ok()?;
        jobs["items"].as_array()?.iter().find_map(|j| {
            let ended = ["succeeded", "failed"]
                .iter()
                .any(|k| j["status"][k].as_u64().unwrap_or(0) > 0);
            (!ended).then(|| j["metadata"]["name"].as_str().unwrap_or("?").to_string())
        })
    }

    /// Waits for the Job to end: its verdict and what was seen; an error
    /// when it did not end in time (then it is deleted).
    async fn wait_for_check(&self, name: &str) -> Result<(Verdict, String), String> {
        let path = format!("{}/{name}", self.jobs_path());
        let deadline = Instant::now() + self.validate.timeout;
        let passed = loop {
            if let Ok(j) = self.get(&path).await {
                let count = |k: &str| j["status"][k].as_u64().unwrap_or(0);
                if count("succeeded") > 0 {
                    break true;
                }
                if count("failed") > 0 {
                    break false;
                }
            }
            if Instant::now() > deadline {
                let delete = Call {
                    method: "DELETE",
                    path: format!("{path}?propagationPolicy=Background"),
                    body: None,
                };
                let _ = self.send(&delete).await;
                return Err(format!(
                    "Job {name} did not end within {}: deleted",
                    crate::text::duration(self.validate.timeout.as_secs() as i64)
                ));
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        };
        let (output, seen) = self.check_output(name).await;
        Ok((verdict(passed, &output), seen))
    }

    /// The check pod's log — its tail, bounded (`tailLines`, `limitBytes`,
    /// and the read itself) — else its container's termination message.
    async fn check_output(&self, job: &str) -> (String, String) {
        let ns = &self.validate.namespace;
        let pods = self
            .get(&format!(
                "/api/v1/namespaces/{ns}/pods?labelSelector=job-name%3D{job}"
            ))
            .await
            .unwrap_or(Value::Null);
        let Some(pod) = pods["items"].as_array().and_then(|p| p.first()) else {
            return (String::new(), "no pod of the check found".into());
        };
        let name = pod["metadata"]["name"].as_str().unwrap_or_default();
        if let Ok(log) = self
            .get_text(&format!(
                "/api/v1/namespaces/{ns}/pods/{name}/log?tailLines={LOG_TAIL_LINES}&limitBytes={}",
                super::TEXT_KEEP
            ))
            .await
            && !log.trim().is_empty()
        {
            return (log, format!("pod {ns}/{name}'s log"));
        }
        let message = pod["status"]["containerStatuses"]
            .as_array()
            .into_iter()
            .flatten()
            .find_map(|c| c["state"]["terminated"]["message"].as_str())
            .unwrap_or_default();
        (
            message.to_string(),
            format!("pod {ns}/{name}'s termination message"),
        )
    }

    /// A failed check: the node stays cordoned, the failure its reason.
    async fn keep_out(&self, node: &str, why: &str) -> Step {
        let reason = crate::text::one_line(&format!("{VALIDATION_FAILED}: {why}"), 250);
        let r = match self.send(&reason_call(node, &reason)).await {
            Ok(_) => {
                self.observe(&Action::SetReason {
                    node: node.into(),
                    reason: reason.clone(),
                })
                .await
            }
            Err(e) => Err(CallError::Api(super::err_text(&e))),
        };
        Step::of(format!("keep {node} cordoned: {reason}"), r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_run_has_its_own_job_of_at_most_63_characters() {
        assert_eq!(
            job_name("gpu-05", "tkx0f2"),
            "nightshift-validate-gpu-05-tkx0f2"
        );
        let long = format!("{}.example.internal", "a".repeat(60));
        let n = job_name(&long, "tkx0f2");
        assert!(n.len() <= 63 && n.ends_with("a-tkx0f2"), "{n}");
        assert_eq!(label_value(&long).len(), 63);
        assert!(label_value("-x-").eq("x"));
        let (a, b) = (run_id(), run_id());
        assert!(a.len() >= 6 && a <= b && a.chars().all(|c| c.is_ascii_alphanumeric()));
    }
}
