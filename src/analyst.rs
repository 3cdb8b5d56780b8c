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
