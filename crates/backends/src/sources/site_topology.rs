//! `[topology]` in the config: failure domains the scheduler does not say
//! (a rack, a power feed, an NVLink domain), laid over every snapshot of
//! any source, after the source's own domains.

use super::Update;
use crate::model::{Cluster, Domain};
use std::sync::Arc;
use tokio::sync::mpsc;

/// Each configured domain with its nodes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SiteDomains(pub Vec<(Domain, Vec<String>)>);

impl SiteDomains {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Gives each named node its configured domains (a domain the source
    /// already gave it is not repeated).
    pub fn apply(&self, c: &mut Cluster) {
        if self.0.is_empty() {
            return;
        }
        for n in c.nodes.iter_mut() {
            let extra: Vec<&Domain> = self
                .0
                .iter()
                .filter(|(d, nodes)| nodes.contains(&n.name) && !n.domains.contains(d))
                .map(|(d, _)| d)
                .collect();
            if !extra.is_empty() {
                Arc::make_mut(n).domains.extend(extra.into_iter().cloned());
            }
        }
    }
}

/// Passes `rx`'s updates on, snapshots with the configured domains.
pub fn spawn(mut rx: mpsc::Receiver<Update>, site: SiteDomains) -> mpsc::Receiver<Update> {
    let (tx, out) = mpsc::channel(16);
    tokio::spawn(async move {
        while let Some(u) = rx.recv().await {
            let u = match u {
                Update::Snapshot(c) => {
                    let mut c = Arc::unwrap_or_clone(c);
                    site.apply(&mut c);
                    Update::Snapshot(Arc::new(c))
                }
                other => other,
            };
            if tx.send(u).await.is_err() {
                return;
            }
        }
    });
    out
}
