//! `nightshift doctor` for the configured scheduler: read once (how fast,
//! how much, or why not, with the fix for its kind of source), then the
//! backend's own checks (Slurm's token, API and commands; Kubernetes'
//! context and rights).

use super::SourceConfig;
use super::SourceError;
use super::once::OnceError;
use crate::protocol::doctor::{Check, Verdict, check};
use std::time::Instant;

/// The scheduler's checks, and the cluster it read (for the endpoints'
/// checks). `read_only`: rights to act are not asked for.
pub async fn scheduler(
    cfg: &SourceConfig,
    sim_seconds: u64,
    read_only: bool,
) -> (Vec<Check>, Option<crate::model::Cluster>) {
    let mut out = Vec::new();
    let started = Instant::now();
    let read = super::once::read(cfg, sim_seconds, &crate::engine::SiteParams::default()).await;
    let took = started.elapsed();
    // Nothing answered at all: the token is not why (issue 58: a closed
    // port was blamed on the token).
    let unanswered = matches!(
        &read,
        Err(OnceError::Source(
            SourceError::Unreachable { .. } | SourceError::Timeout { .. }
        ))
    );
    let cluster = reading(&mut out, cfg, read, took);
    match cfg {
        SourceConfig::Slurm(c) => {
            let reached = cluster.is_some();
            let more = super::slurm::doctor::checks(c, crate::host::now(), reached).await;
            // A refused request with a token that is no good: that is why
            // (slurmrestd 22.05 says only "Unspecified error", HTTP 500).
            if !unanswered
                && let Some(t) = more
                    .iter()
                    .find(|t| t.name == "slurm token" && t.verdict == Verdict::Fail)
                && let Some(s) = out
                    .iter_mut()
                    .find(|c| c.name == "scheduler" && c.verdict == Verdict::Fail)
            {
                s.fix = Some(format!("slurmrestd refuses the token: {}", t.detail));
            }
            out.extend(more);
        }
        SourceConfig::Kube(c) => out.extend(super::kube::doctor::checks(c, read_only).await),
        SourceConfig::Sim { .. } | SourceConfig::None => {}
    }
    (out, cluster)
}

/// The scheduler read once: how fast, how much, or why not.
fn reading(
    out: &mut Vec<Check>,
    cfg: &SourceConfig,
    read: Result<Option<crate::once::Reading>, OnceError>,
    took: std::time::Duration,
) -> Option<crate::model::Cluster> {
    match read {
        Ok(Some(r)) => {
            let c = &r.cluster;
            let gpus: usize = c.nodes.iter().map(|n| n.gpus.len()).sum();
            let slow = took.as_secs_f64() > 5.0;
            out.push(check(
                "scheduler",
                if slow { Verdict::Warn } else { Verdict::Ok },
                format!(
                    "{} answered in {} ms: {} nodes, {} GPUs, {} jobs{}",
                    r.source,
                    took.as_millis(),
                    c.nodes.len(),
                    gpus,
                    c.jobs.len(),
                    if r.warnings.is_empty() {
                        String::new()
                    } else {
                        format!(
                            "; {} record(s) skipped: {}",
                            r.warnings.len(),
                            crate::text::sanitize(&r.warnings[0])
                        )
                    }
                ),
                slow.then_some("a slow scheduler ages the console's data: raise [slurm] interval, or look at slurmrestd's load"),
            ));
            Some(r.cluster)
        }
        Ok(None) => {
            out.push(check(
                "scheduler",
                Verdict::Warn,
                "none configured (--source none): no jobs, no queue, no actions".into(),
                Some("--source slurm|kube|sim, or `source = \"slurm\"` at the top of the config"),
            ));
            None
        }
        Err(e) => {
            let fix = match (&e, cfg) {
                (OnceError::Source(SourceError::Auth { .. }), SourceConfig::Slurm(_)) => {
                    "a new token: `scontrol token lifespan=86400`, then SLURM_JWT=… (or [slurm] token_file)"
                }
                (OnceError::Source(SourceError::Auth { .. }), _) => {
                    "the kubeconfig's credentials are refused: `kubectl auth whoami`, renew them"
                }
                (OnceError::Source(SourceError::Unreachable { .. }), SourceConfig::Slurm(_)) => {
                    "is slurmrestd running and listening there? (`systemctl status slurmrestd`, [slurm] url)"
                }
                (OnceError::Source(SourceError::Unreachable { .. }), _) => {
                    "is the API server reachable from here? (`kubectl cluster-info`, --context)"
                }
                (OnceError::Source(SourceError::Timeout { .. }), _) => {
                    "it did not answer in time: raise [slurm] timeout, or look at its load"
                }
                (OnceError::Source(SourceError::Other(m)), SourceConfig::Kube(_))
                    if m.starts_with("no kubeconfig") =>
                {
                    "point at a kubeconfig: KUBECONFIG=FILE, --kubeconfig FILE or [kube] kubeconfig (`kubectl config view` shows what kubectl reads); in a pod, mount its service account"
                }
                _ => "see the error; `nightshift --log-file F` logs more",
            };
            out.push(check("scheduler", Verdict::Fail, e.to_string(), Some(fix)));
            None
        }
    }
}
