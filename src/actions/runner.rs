//! Runs the guard for the TUI off its UI thread: previews (the blast
//! radius can take a while on a big cluster) and confirmed actions.

use super::Action;
use super::audit::AuditLog;
use super::executor::Executor;
use super::guard::{self, Preview, Who};
use super::policy::Policy;
use crate::engine::SiteParams;
use crate::model::Cluster;
use crate::sources::{Control, Update};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

pub enum Request {
    Preview {
        action: Action,
        cluster: Arc<Cluster>,
        data_age: Duration,
    },
    Run {
        preview: Box<Preview>,
        typed: String,
    },
}

pub struct Runner {
    pub control: Control,
    pub policy: Policy,
    pub site: SiteParams,
    pub catalog: crate::engine::xid::XidCatalog,
    pub log: AuditLog,
}

impl Runner {
    async fn executor(&self) -> Result<Executor, String> {
        Ok(match &self.control {
            Control::Sim(tx) => Executor::Sim(tx.clone()),
            Control::Slurm(cfg) => Executor::Slurm(Box::new(
                crate::sources::slurm::exec::Executor::connect(cfg).await?,
            )),
            Control::None => {
                return Err("no scheduler source: actions need --source sim or slurm".into());
            }
        })
    }

    fn who(&self, cluster: &str) -> Who {
        let (source, user) = match &self.control {
            Control::Sim(_) => ("sim", None),
            Control::Slurm(cfg) => ("slurm", Some(cfg.user.clone())),
            Control::None => ("none", None),
        };
        Who {
            scheduler_user: user,
            cluster: cluster.to_string(),
            source: source.into(),
        }
    }

    /// Serves requests until the UI goes away; answers arrive as updates.
    pub fn spawn(self, tx: mpsc::Sender<Update>) -> mpsc::Sender<Request> {
        let (req_tx, mut req_rx) = mpsc::channel::<Request>(4);
        tokio::spawn(async move {
            let mut executor: Option<Executor> = None;
            let mut cluster_name = String::new();
            while let Some(req) = req_rx.recv().await {
                if executor.is_none() {
                    match self.executor().await {
                        Ok(x) => executor = Some(x),
                        Err(e) => {
                            let _ = tx
                                .send(Update::ActionFailed(format!(
                                    "cannot reach the scheduler to act: {e}"
                                )))
                                .await;
                            continue;
                        }
                    }
                }
                let Some(x) = executor.as_ref() else { continue };
                let update = match req {
                    Request::Preview {
                        action,
                        cluster,
                        data_age,
                    } => {
                        cluster_name = cluster.name.clone();
                        let since = super::audit::now() - self.policy.window.as_secs() as i64;
                        let recent = self.log.nodes_taken_out_since(since);
                        let (policy, site) = (self.policy.clone(), self.site.clone());
                        let p = tokio::task::block_in_place(|| {
                            let base = crate::engine::analysis::Base::compute(
                                &cluster,
                                None,
                                &site,
                                &self.catalog,
                            );
                            guard::preview(
                                &action, &cluster, &base, data_age, &policy, recent, false, x,
                                &site,
                            )
                        });
                        Update::Preview(Box::new(p))
                    }
                    Request::Run { preview, typed } => {
                        let who = self.who(&cluster_name);
                        match guard::run(
                            &preview,
                            &typed,
                            x,
                            &self.log,
                            &who,
                            Duration::from_secs(60),
                        )
                        .await
                        {
                            Ok(done) => Update::ActionDone(Box::new(done)),
                            Err(e) => Update::ActionFailed(e),
                        }
                    }
                };
                if tx.send(update).await.is_err() {
                    return;
                }
            }
        });
        req_tx
    }
}

/// What the TUI shows while an action is in hand.
#[derive(Debug, Clone)]
pub enum Modal {
    /// Waiting for the preview, then for the confirmation.
    Confirm {
        action: Action,
        preview: Option<Box<Preview>>,
        typed: String,
    },
    Running {
        action: Action,
    },
    Done {
        message: String,
        ok: bool,
    },
}
