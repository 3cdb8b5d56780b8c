//! Runs the guard for the TUI off its UI thread: previews (the blast
//! radius can take a while on a big cluster) and confirmed actions. It
//! answers on a channel of its own (`Reply`); the app wraps the replies in
//! its own message type.

use super::executor::Executor;
use super::guard::{self, Who};
pub use super::orchestrator::Orchestrator;
pub use crate::protocol::action::{Reply, Request};
use crate::sources::Control;

use tokio::sync::mpsc;

pub use crate::protocol::scheduler::NoExecutor;

pub struct Runner {
    pub control: Control,
    /// The one orchestration of an action (the command line's too).
    pub guard: Orchestrator,
}

impl Runner {
    async fn executor(&self) -> Result<Executor, NoExecutor> {
        self.control.connect().await
    }

    fn who(&self, cluster: &str) -> Who {
        let (source, user) = self.control.identity();
        Who {
            scheduler_user: user,
            cluster: guard::audited_name(self.guard.cluster.as_deref(), cluster),
            source: source.into(),
            operator: None,
        }
    }

    /// This cluster's armed steps in the audit log.
    fn armed_here(&self, cluster: &str) -> Vec<crate::model::Armed> {
        let who = self.who(cluster);
        self.guard
            .log
            .armed()
            .into_iter()
            .filter(|a| a.cluster == who.cluster)
            .collect()
    }

    /// Arming, firing, cancelling and listing armed steps (`follow`).
    async fn on_armed(&self, req: Request, x: Result<&Executor, &str>) -> Reply {
        use super::follow::{self, Fired, Firing};
        use crate::engine::armed::describe;
        let mut news = Vec::new();
        let name = match &req {
            Request::Arm { cluster, .. } | Request::Fire { cluster, .. } => cluster.name.clone(),
            Request::Cancel { cluster, .. } | Request::Armed { cluster } => cluster.clone(),
            _ => String::new(),
        };
        match req {
            Request::Arm {
                action,
                when,
                forced,
                cluster,
            } => match follow::arm_forced(
                &self.guard.log,
                &self.who(&cluster.name),
                action,
                when,
                cluster.time,
                forced,
            ) {
                Ok(a) => news.push(format!("armed: {}", describe(&a))),
                Err(e) => news.push(format!("not armed: {e}")),
            },
            Request::Fire {
                cluster,
                data_age,
                base,
            } => {
                let Ok(x) = x else {
                    return Reply::Armed {
                        armed: self.armed_here(&cluster.name),
                        news,
                    };
                };
                let who = self.who(&cluster.name);
                let f = Firing {
                    cluster: &cluster,
                    base: &base,
                    data_age,
                    policy: &self.guard.policy,
                    site: &self.guard.site,
                    log: &self.guard.log,
                    executor: x,
                    who: &who,
                    timeout: self.guard.timeout,
                };
                for a in self.armed_here(&cluster.name) {
                    match follow::fire_if_due(&a, &f).await {
                        Fired::Waiting(_) => {}
                        Fired::Sent { message, .. } => news.push(format!("fired: {message}")),
                        Fired::Refused(why) => news.push(format!("refused, disarmed: {why}")),
                    }
                }
            }
            Request::Cancel { ids, cluster } => {
                let who = self.who(&cluster);
                for id in ids {
                    match follow::cancel(&self.guard.log, &who, &id, "cancelled in the console") {
                        Ok(a) => news.push(format!("cancelled: {}", describe(&a))),
                        Err(e) => news.push(e),
                    }
                }
            }
            _ => {}
        }
        Reply::Armed {
            armed: self.armed_here(&name),
            news,
        }
    }

    /// The autopilot's status for a console, after pausing or resuming it
    /// when asked (recorded with the operating-system user's name).
    fn on_autopilot(&self, cluster: &str, switch: Option<(bool, String)>) -> Reply {
        let name = self.who(cluster).cluster;
        let log = &self.guard.log;
        let mut news = None;
        if let Some((pause, why)) = switch {
            news = Some(
                match super::autopilot_state::switch(log, pause, crate::audit::os_user(), &name, &why)
                {
                    Ok(()) if pause => {
                        "autopilot paused for every nightshift on this audit log (:autopilot resume ends it)"
                            .to_string()
                    }
                    Ok(()) => "autopilot resumed".to_string(),
                    Err(e) => format!("the autopilot was not switched: {e}"),
                },
            );
        }
        let (status, trouble) = super::autopilot_state::status(log, &name);
        Reply::Autopilot {
            status,
            news: news.or(trouble),
        }
    }

    /// Serves requests until the app goes away; answers arrive on `tx`.
    pub fn spawn(self, tx: mpsc::Sender<Reply>) -> mpsc::Sender<Request> {
        let (req_tx, mut req_rx) = mpsc::channel::<Request>(4);
        tokio::spawn(async move {
            let mut executor: Option<Executor> = None;
            while let Some(req) = req_rx.recv().await {
                let mut unreachable = String::new();
                if executor.is_none() {
                    match self.executor().await {
                        Ok(x) => executor = Some(x),
                        Err(e) => unreachable = e.to_string(),
                    }
                }
                let x = executor.as_ref().ok_or(unreachable.as_str());
                let reply = match req {
                    Request::Preview {
                        action,
                        cluster,
                        data_age,
                        base,
                        arming,
                    } => {
                        let mut p = self
                            .guard
                            .preview(x, &action, &cluster, &base, data_age, false)
                            .await;
                        if arming
                            && p.refusal.is_none()
                            && let Err(e) = self.guard.log.seal_key_for_arming()
                        {
                            p.refusal = Some(crate::policy::Refusal::Unknown(format!(
                                "cannot seal the armed step: {e}; nothing sent, nothing armed"
                            )));
                        }
                        Reply::Preview(Box::new(p))
                    }
                    Request::Arm { .. }
                    | Request::Fire { .. }
                    | Request::Cancel { .. }
                    | Request::Armed { .. } => self.on_armed(req, x).await,
                    Request::Autopilot { cluster, switch } => self.on_autopilot(&cluster, switch),
                    Request::Run { .. } if x.is_err() => Reply::Failed(format!(
                        "cannot reach the scheduler to act: {unreachable}; nothing sent"
                    )),
                    Request::Run {
                        preview,
                        typed,
                        cluster,
                        data_age,
                    } => {
                        let Ok(x) = x else { continue };
                        let who = self.who(&cluster.name);
                        match self
                            .guard
                            .run(x, &preview, &typed, &who, &cluster, data_age)
                            .await
                        {
                            Ok(done) => Reply::Done(Box::new(done)),
                            Err(e) => Reply::Failed(e.to_string()),
                        }
                    }
                };
                if tx.send(reply).await.is_err() {
                    return;
                }
            }
        });
        req_tx
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::AuditLog;
    use crate::engine::SiteParams;
    use crate::engine::analysis::Base;
    use crate::engine::xid::XidCatalog;
    use crate::model::Action;
    use crate::policy::Policy;
    use crate::sources::sim::{Sim, SimConfig};
    use std::time::Duration;

    use std::sync::Arc;

    /// The analysis a request carries: of `c`, with its memory.
    fn base_of(c: &crate::model::Cluster) -> Arc<Base> {
        Arc::new(Base::compute(
            c,
            None,
            &SiteParams::default(),
            &XidCatalog::default(),
        ))
    }

    /// A runner on the sim `sim` (running on its own task), its audit log
    /// in `dir`: where requests go, where replies come, and the sim's
    /// updates (kept by the caller: the sim stops when they are dropped).
    fn runner_on(
        sim: Sim,
        dir: &std::path::Path,
    ) -> (
        mpsc::Sender<Request>,
        mpsc::Receiver<Reply>,
        mpsc::Receiver<crate::sources::Update>,
    ) {
        let (ctx, crx) = mpsc::channel(4);
        let (utx, urx) = mpsc::channel(64);
        tokio::spawn(crate::sources::sim::run(sim, 0.0, utx, crx));
        let (rtx, rrx) = mpsc::channel(8);
        let requests = Runner {
            control: Control::Sim(ctx),
            guard: Orchestrator {
                policy: Policy::default(),
                site: SiteParams::default(),
                catalog: XidCatalog::default(),
                log: AuditLog::new(dir.join("audit.jsonl")).with_key(Some(dir.join("armed.key"))),
                timeout: Duration::from_secs(5),
                cluster: None,
                cluster_in_token: true,
            },
        }
        .spawn(rtx);
        (requests, rrx, urx)
    }

    /// Issue 59: the console's plan that arms a step after its first (the
    /// cordon) asks its preview to check the sealing key: with no usable
    /// key the preview refuses, so nothing is sent before "cannot seal".
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_plan_that_arms_is_refused_at_preview_when_its_key_is_unusable() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        // A key every user can read: unusable.
        let key = dir.path().join("armed.key");
        std::fs::write(&key, [7u8; 32]).expect("key");
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let sim = Sim::new(SimConfig::default()).expect("sim");
        let cluster = Arc::new(sim.snapshot());
        let (requests, mut rrx, _updates) = runner_on(sim, dir.path());
        for arming in [false, true] {
            requests
                .send(Request::Preview {
                    action: Action::Cordon {
                        node: "h100-07".into(),
                        reason: "x: drain after checkpoint".into(),
                    },
                    cluster: cluster.clone(),
                    data_age: Duration::from_secs(1),
                    base: base_of(&cluster),
                    arming,
                })
                .await
                .map_err(|_| ())
                .expect("send");
            let Some(Reply::Preview(p)) = rrx.recv().await else {
                panic!("no preview");
            };
            match arming {
                false => assert!(p.refusal.is_none(), "{:?}", p.refusal),
                true => assert!(
                    p.refusal
                        .as_ref()
                        .is_some_and(|r| r.to_string().contains("cannot seal the armed step")),
                    "{:?}",
                    p.refusal
                ),
            }
        }
    }

    /// The runner previews on fresh data, then refuses to run when the
    /// data has gone stale by the time the operator confirms.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_runner_checks_the_data_age_again_at_execute_time() {
        let dir = tempfile::tempdir().expect("tempdir");
        let sim = Sim::new(SimConfig::default()).expect("sim");
        let cluster = Arc::new(sim.snapshot());
        let (requests, mut rrx, _updates) = runner_on(sim, dir.path());
        let action = Action::Cordon {
            node: "h100-07".into(),
            reason: "watch".into(),
        };
        requests
            .send(Request::Preview {
                action,
                cluster: cluster.clone(),
                data_age: Duration::from_secs(1),
                base: base_of(&cluster),
                arming: false,
            })
            .await
            .map_err(|_| ())
            .expect("send");
        let Some(Reply::Preview(p)) = rrx.recv().await else {
            panic!("no preview");
        };
        assert!(p.refusal.is_none(), "fresh: {:?}", p.refusal);
        requests
            .send(Request::Run {
                preview: p.clone(),
                typed: "y".into(),
                cluster: cluster.clone(),
                data_age: Duration::from_secs(45),
            })
            .await
            .map_err(|_| ())
            .expect("send");
        match rrx.recv().await {
            Some(Reply::Failed(e)) => assert!(e.contains("refused at execute time"), "{e}"),
            other => panic!("ran on stale data: {other:?}"),
        }
        // Fresh again: it runs, and the sim was changed.
        requests
            .send(Request::Run {
                preview: p,
                typed: "y".into(),
                cluster,
                data_age: Duration::from_secs(2),
            })
            .await
            .map_err(|_| ())
            .expect("send");
        match rrx.recv().await {
            Some(Reply::Done(d)) => assert!(d.outcome.ok && d.outcome.verified, "{d:?}"),
            other => panic!("not run: {other:?}"),
        }
    }

    /// The preview reads the analysis the screen shows (issue 39): a node
    /// out of service whose GPU is critical only by its NVLink error rate
    /// (two readings apart: no single snapshot has it) makes its resume
    /// preview warn and ask for the node's name; previewed on the snapshot
    /// alone, as the runner did, it read healthy.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_preview_reads_the_screens_analysis_with_its_rates() {
        use crate::engine::health::EccBaseline;
        let dir = tempfile::tempdir().expect("tempdir");
        let sim = Sim::new(SimConfig::default()).expect("sim");
        let mut before = sim.snapshot();
        let node = "a100-08";
        let mut now = before.clone();
        now.time += 60;
        for (c, flits) in [(&mut before, 0), (&mut now, 3_000_000)] {
            let n = c.nodes.iter_mut().find(|n| n.name == node).expect("node");
            let n = Arc::make_mut(n);
            assert_eq!(n.state, crate::model::NodeState::Drain, "out of service");
            n.gpus[0].nvlink.crc_flit = Some(flits).into();
            n.gpus[0].reading_time = Some(c.time);
        }
        let screen = Arc::new(Base::compute_on(
            &now,
            Some(&EccBaseline::of(&before)),
            &SiteParams::default(),
            &XidCatalog::default(),
            &Default::default(),
        ));
        assert!(screen.unusable.contains(node), "critical by its rate");
        let (requests, mut rrx, _updates) = runner_on(sim, dir.path());
        let now = Arc::new(now);
        // The screen's base, and one of the snapshot alone (what the
        // runner computed when none was sent): only the first has the rate.
        for (base, read) in [(screen, true), (base_of(&now), false)] {
            requests
                .send(Request::Preview {
                    action: Action::Resume { node: node.into() },
                    cluster: now.clone(),
                    data_age: Duration::from_secs(1),
                    base,
                    arming: false,
                })
                .await
                .map_err(|_| ())
                .expect("send");
            let Some(Reply::Preview(p)) = rrx.recv().await else {
                panic!("no preview");
            };
            let warned = p
                .warnings
                .iter()
                .any(|w| w.contains("health is unresolved"));
            assert_eq!(warned, read, "{:?}", p.warnings);
            assert_eq!(p.token.as_deref() == Some(node), read, "{:?}", p.token);
        }
    }
}
