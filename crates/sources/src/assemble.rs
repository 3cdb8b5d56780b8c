//! Where a snapshot is finished, in the one task that makes it: the
//! scheduler's poller when it is the only source, the endpoints' merge
//! when node endpoints are laid over it. Finishing lays `[topology]`'s
//! domains on it and hands it to the recording, if one is written, before
//! it goes on to the analysis. No task between the sources and the
//! analysis rewrites a snapshot or passes it on.

use super::Update;
use super::site_topology::SiteDomains;
use crate::model::Cluster;
use std::sync::Arc;
use tokio::sync::mpsc;

/// Takes each finished snapshot besides the analysis (the console's
/// recording). It never waits: a sink that cannot keep up drops the
/// snapshot and says so.
pub trait Sink: Send + 'static {
    /// `c` as it goes to the analysis; a line to show, if any.
    fn offer(&mut self, c: &Arc<Cluster>) -> Option<String>;
}

/// What finishing a snapshot does: the configured domains, the sink.
#[derive(Default)]
pub struct Assembly {
    site: SiteDomains,
    /// The unknown names said last: each set is said once.
    said: Vec<String>,
    sink: Option<Box<dyn Sink>>,
}

impl Assembly {
    pub fn new(site: SiteDomains) -> Assembly {
        Assembly {
            site,
            ..Assembly::default()
        }
    }

    /// Each finished snapshot also goes to `sink`.
    pub fn with_sink(mut self, sink: Box<dyn Sink>) -> Assembly {
        self.sink = Some(sink);
        self
    }

    /// Nothing to do: the snapshot goes on as the source made it.
    pub fn is_empty(&self) -> bool {
        self.site.is_empty() && self.sink.is_none()
    }

    /// `c` finished, with the lines to show before it: the one finishing
    /// of a snapshot, for the console's and the recorder's loops (through
    /// [`Outlet`]) and for the command line's moment alike.
    pub fn finish(&mut self, c: Arc<Cluster>) -> (Arc<Cluster>, Vec<String>) {
        let mut notes = Vec::new();
        let c = if self.site.is_empty() {
            c
        } else {
            // The source kept no copy (or the merge just made it): no clone.
            let mut c = Arc::unwrap_or_clone(c);
            let unknown = self.site.apply(&mut c);
            // Said once for each set of unknown names: a node of
            // `[topology]` that no source knows is a typo to fix.
            if unknown != self.said
                && let Some(note) = super::site_topology::unknown_note(&unknown)
            {
                notes.push(note);
                self.said = unknown;
            }
            Arc::new(c)
        };
        if let Some(s) = &mut self.sink {
            notes.extend(s.offer(&c));
        }
        (c, notes)
    }
}

/// The receiver of the updates is gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Closed;

/// Where a source sends its updates: a channel, with the snapshot finished
/// on the way when this source is the one that makes it.
pub struct Outlet {
    tx: mpsc::Sender<Update>,
    assembly: Assembly,
}

impl Outlet {
    pub fn new(tx: mpsc::Sender<Update>, assembly: Assembly) -> Outlet {
        Outlet { tx, assembly }
    }

    /// Sends `u`; a snapshot finished first (its notes sent before it).
    pub async fn send(&mut self, u: Update) -> Result<(), Closed> {
        let u = match u {
            Update::Snapshot(c) if !self.assembly.is_empty() => {
                let (c, notes) = self.assembly.finish(c);
                for n in notes {
                    self.tx.send(Update::Notice(n)).await.map_err(|_| Closed)?;
                }
                Update::Snapshot(c)
            }
            other => other,
        };
        self.tx.send(u).await.map_err(|_| Closed)
    }
}

impl From<mpsc::Sender<Update>> for Outlet {
    /// The updates sent as they are made.
    fn from(tx: mpsc::Sender<Update>) -> Outlet {
        Outlet::new(tx, Assembly::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dcgm::merge::endpoint_only_node;
    use crate::model::Domain;

    /// Counts what it was offered, and says so on the second.
    struct Counting(Arc<std::sync::Mutex<Vec<usize>>>);

    impl Sink for Counting {
        fn offer(&mut self, c: &Arc<Cluster>) -> Option<String> {
            let mut seen = self.0.lock().ok()?;
            seen.push(c.nodes.iter().map(|n| n.domains.len()).sum());
            (seen.len() == 2).then(|| "second".to_string())
        }
    }

    fn cluster(names: &[&str]) -> Arc<Cluster> {
        Arc::new(Cluster {
            nodes: names
                .iter()
                .map(|n| Arc::new(endpoint_only_node(n, None)))
                .collect(),
            ..Cluster::default()
        })
    }

    #[tokio::test]
    async fn a_snapshot_is_finished_once_on_its_way_with_its_notes_before_it() {
        let rack = Domain {
            level: "rack".into(),
            name: "r1".into(),
        };
        let site = SiteDomains(vec![(rack.clone(), vec!["a".into(), "typo".into()])]);
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (tx, mut rx) = mpsc::channel(16);
        let mut out = Outlet::new(
            tx,
            Assembly::new(site).with_sink(Box::new(Counting(seen.clone()))),
        );
        for _ in 0..2 {
            out.send(Update::Snapshot(cluster(&["a", "b"])))
                .await
                .expect("open");
        }
        out.send(Update::Notice("passes".into()))
            .await
            .expect("open");
        drop(out);
        let mut got = Vec::new();
        while let Some(u) = rx.recv().await {
            got.push(match u {
                Update::Snapshot(c) => format!(
                    "snapshot {}",
                    c.nodes
                        .iter()
                        .map(|n| format!("{}:{}", n.name, n.domains.len()))
                        .collect::<Vec<_>>()
                        .join(",")
                ),
                Update::Notice(n) => n,
                other => format!("{other:?}"),
            });
        }
        assert_eq!(
            got,
            [
                "[topology] names 1 node(s) this cluster does not have: typo",
                "snapshot a:1,b:0",
                "second",
                "snapshot a:1,b:0",
                "passes",
            ]
        );
        // The sink saw the snapshot with its domains, as the analysis does.
        assert_eq!(*seen.lock().expect("lock"), [1, 1]);
    }

    #[tokio::test]
    async fn with_nothing_to_do_the_source_s_snapshot_goes_on_as_it_is() {
        let (tx, mut rx) = mpsc::channel(4);
        let mut out = Outlet::from(tx);
        let c = cluster(&["a"]);
        out.send(Update::Snapshot(c.clone())).await.expect("open");
        let Some(Update::Snapshot(got)) = rx.recv().await else {
            panic!("a snapshot");
        };
        assert!(Arc::ptr_eq(&c, &got), "not copied");
        drop(rx);
        assert_eq!(out.send(Update::Notice("x".into())).await, Err(Closed));
    }
}
