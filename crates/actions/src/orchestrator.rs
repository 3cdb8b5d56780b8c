//! The one orchestration of a guarded action — prepare the executor,
//! preview, then check again and run — for the console's runner and the
//! command line alike: `nightshift drain` and `D` in the console reach the
//! guard through these same two calls, with the same settings.

use super::audit::AuditLog;
use super::executor::Executor;
use super::guard::{self, Check, Done, NotSent, Preview, Who};
use super::policy::Policy;
use crate::engine::SiteParams;
use crate::engine::analysis::Base;
use crate::engine::xid::XidCatalog;
use crate::model::{Action, Cluster};
use std::time::Duration;

/// The guard's settings for one cluster.
#[derive(Clone)]
pub struct Orchestrator {
    pub policy: Policy,
    pub site: SiteParams,
    pub catalog: XidCatalog,
    pub log: AuditLog,
    /// How long an action may take before its outcome is re-read.
    pub timeout: Duration,
    /// The cluster's name when it is one of several (`[[clusters]]`,
    /// `--context`): in the preview, the undo's command line and the audit.
    pub cluster: Option<String>,
    /// The typed confirmation names the cluster too (`prod/gpu07`): the
    /// console's, where several clusters share one screen. On the command
    /// line `--context NAME` was typed already.
    pub cluster_in_token: bool,
}

impl Orchestrator {
    /// Prepares the executor (what its calls depend on) and makes the
    /// guard's preview of `action` on this snapshot and its analysis.
    #[allow(clippy::too_many_arguments)]
    pub async fn preview(
        &self,
        executor: Result<&Executor, &str>,
        action: &Action,
        cluster: &Cluster,
        base: &Base,
        data_age: Duration,
        force: bool,
    ) -> Preview {
        if let Ok(x) = executor {
            x.prepare(action).await;
        }
        let make = || {
            guard::preview(
                action,
                cluster,
                base,
                data_age,
                &self.policy,
                &self.log,
                force,
                executor,
                &self.site,
            )
        };
        // The blast radius can take a while on a big cluster: off the
        // runtime's other tasks where it has other threads.
        let p = match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
            Ok(tokio::runtime::RuntimeFlavor::MultiThread) => tokio::task::block_in_place(make),
            _ => make(),
        };
        match (&self.cluster, self.cluster_in_token) {
            (Some(name), true) => p.in_cluster(name),
            (name, _) => Preview {
                cluster: name.clone(),
                ..p
            },
        }
    }

    /// Checks the preview again against the cluster now and, confirmed by
    /// `typed`, sends it: intent, steps, verification, outcome.
    pub async fn run(
        &self,
        executor: &Executor,
        preview: &Preview,
        typed: &str,
        who: &Who,
        cluster: &Cluster,
        data_age: Duration,
    ) -> Result<Done, NotSent> {
        let now = Check {
            cluster,
            data_age,
            policy: &self.policy,
        };
        guard::run(preview, typed, executor, &self.log, who, self.timeout, now).await
    }
}
