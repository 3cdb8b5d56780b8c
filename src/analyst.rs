//! Runs the engine off the UI thread: each snapshot from the source goes
//! to the UI at once, then its analysis follows when computed. The UI says
//! what it is focused on through a watch channel, and a new focus is
//! answered without waiting for the next snapshot.

use crate::engine::SiteParams;
use crate::engine::analysis::{Analysis, Base, Focus};
use crate::engine::xid::XidCatalog;
use crate::model::Cluster;
use crate::sources::Update;
use std::sync::Arc;
use tokio::sync::{mpsc, watch};

/// What the analyst passes on: every source update as it came, then the
/// engine's answers.
#[derive(Debug, Clone)]
pub enum Out {
    Source(Update),
    Analysis(Arc<Analysis>),
    /// The source's channel closed: nothing more will come.
    SourceStopped,
}

pub fn spawn(
    mut source: mpsc::Receiver<Update>,
    focus: watch::Receiver<Focus>,
    site: SiteParams,
    catalog: XidCatalog,
) -> mpsc::Receiver<Out> {
    let (tx, rx) = mpsc::channel(16);
    tokio::spawn(async move {
        let mut focus = focus;
        let mut latest: Option<Arc<Cluster>> = None;
        let mut prev: Option<Arc<Cluster>> = None;
        // The snapshot the last base was computed for, and that base.
        let mut done: Option<(Arc<Cluster>, Arc<Base>)> = None;
        let mut source_open = true;
        // When jobs began to show the hung-collective signature.
        let mut history = crate::engine::stall::StallHistory::default();
        loop {
            tokio::select! {
                up = source.recv(), if source_open => match up {
                    Some(Update::Snapshot(c)) => {
                        if tx.send(Out::Source(Update::Snapshot(c.clone()))).await.is_err() {
                            return;
                        }
                        prev = latest.replace(c);
                    }
                    Some(other) => {
                        if tx.send(Out::Source(other)).await.is_err() {
                            return;
                        }
                        continue;
                    }
                    None => {
                        source_open = false;
                        if tx.send(Out::SourceStopped).await.is_err() {
                            return;
                        }
                        continue;
                    }
                },
                changed = focus.changed() => {
                    if changed.is_err() {
                        return;
                    }
                }
            }
            // Forward whatever queued up while we computed; analyse the newest.
            while let Ok(up) = source.try_recv() {
                if let Update::Snapshot(c) = &up {
                    prev = latest.replace(c.clone());
                }
                if tx.send(Out::Source(up)).await.is_err() {
                    return;
                }
            }
            let Some(c) = latest.clone() else { continue };
            let (p, f, s, k) = (
                prev.clone(),
                focus.borrow().clone(),
                site.clone(),
                catalog.clone(),
            );
            // A focus change on the same snapshot reuses its plan and verdicts.
            let reuse = done
                .as_ref()
                .filter(|(d, _)| Arc::ptr_eq(d, &c))
                .map(|(_, b)| b.clone());
            if reuse.is_none() {
                history.observe(&c, &s);
            }
            let h = history.clone();
            let c2 = c.clone();
            let analysis = tokio::task::spawn_blocking(move || {
                let base = reuse
                    .unwrap_or_else(|| Arc::new(Base::compute_with(&c2, p.as_deref(), &s, &k, &h)));
                Analysis::with_base(base, &c2, &f, &s)
            })
            .await;
            if let Ok(a) = &analysis {
                done = Some((c, a.base.clone()));
            }
            match analysis {
                Ok(a) => {
                    if tx.send(Out::Analysis(Arc::new(a))).await.is_err() {
                        return;
                    }
                }
                Err(e) => tracing::error!("engine task failed: {e}"),
            }
        }
    });
    rx
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::fixture::{NOW, add_node, cluster, run};
    use crate::sources::{Origin, SourceError};

    /// Statuses pass through in order; snapshots that show the
    /// hung-collective signature for the whole window end in a stall.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_analyst_forwards_statuses_and_finds_a_sustained_stall() {
        let site = SiteParams::default();
        let (tx, rx) = mpsc::channel(64);
        let (_focus_tx, focus_rx) = watch::channel(Focus::None);
        let mut out = spawn(rx, focus_rx, site.clone(), XidCatalog::default());
        let mut c = cluster();
        add_node(&mut c, "n1", "p", 8);
        run(&mut c, "spin", &["n1"], 8, 600, 7200);
        for g in &mut c.nodes[0].gpus {
            g.utilization = Some(1.0);
            g.sm_occupancy = Some(0.01);
        }
        let err = SourceError::Other("slurmrestd hiccup".into());
        tx.send(Update::failed(Origin::Scheduler, err.clone()))
            .await
            .expect("send");
        let steps = 6;
        let dt = site.stall_window_s as i64 / (steps - 1);
        for k in 0..steps {
            c.time = NOW + k * dt;
            tx.send(Update::Snapshot(Arc::new(c.clone())))
                .await
                .expect("send");
            tx.send(Update::ok(Origin::Scheduler)).await.expect("send");
            // Let each one be analysed, as a live source's pace would.
            tokio::time::sleep(std::time::Duration::from_millis(30)).await;
        }
        let last = NOW + (steps - 1) * dt;
        let mut first_status: Option<Update> = None;
        let mut stalled = false;
        while let Ok(Some(o)) =
            tokio::time::timeout(std::time::Duration::from_secs(2), out.recv()).await
        {
            match o {
                Out::Source(u @ Update::Status { .. }) if first_status.is_none() => {
                    first_status = Some(u)
                }
                Out::Analysis(a) if a.base.time == last => {
                    stalled = a.base.stalls.iter().any(|s| s.job == "spin");
                    break;
                }
                _ => {}
            }
        }
        assert!(
            matches!(&first_status, Some(Update::Status { error: Some(e), .. }) if *e == err),
            "the first status, as sent: {first_status:?}"
        );
        assert!(stalled, "stalled after the window");
    }
}
