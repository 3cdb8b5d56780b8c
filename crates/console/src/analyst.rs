//! Runs the engine off the UI thread: each snapshot from the source goes
//! to the UI at once, then its analysis follows when computed. The UI says
//! what it is focused on through a watch channel, and a new focus is
//! answered without waiting for the next snapshot. Full analyses keep to a
//! CPU budget (`ANALYSIS_SHARE`): on a big cluster they follow the newest
//! snapshot every few seconds, not every snapshot.

use crate::engine::SiteParams;
use crate::engine::analysis::{Analysis, Base, Focus};
use crate::engine::memory::Memory;
use crate::engine::xid::XidCatalog;
use crate::model::Cluster;
use crate::protocol::source::{Audited, Update, audited_for};
use std::sync::Arc;
use std::time::{Duration, Instant};
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

/// The audit log's faults as they change (the program watches the log),
/// and the cluster's name in `[[clusters]]`: what nightshift was used to
/// act on here reaches the analysis as data beside the snapshots.
pub struct AuditFeed {
    pub faults: watch::Receiver<Arc<Audited>>,
    pub cluster: Option<String>,
}

/// Gives the memory this cluster's audited faults when the log's faults or
/// the snapshot's name changed since `seen`.
/// What the analyst takes in from the source: the memory it feeds (with
/// the audit's faults for the cluster), and the health numbers.
struct Intake {
    audit: Option<AuditFeed>,
    /// The audited faults last given to the memory, and for which name.
    seen: Option<(Arc<Audited>, String)>,
    /// What the analysis remembers between snapshots (error counters for
    /// rates, when jobs began to show the hung-collective signature, how
    /// jobs ended): observed on every snapshot, analysed or not, as
    /// `--replay --at` and the report observe them.
    memory: Arc<Memory>,
    site: SiteParams,
    kpis: crate::engine::kpis::SharedKpis,
}

impl Intake {
    /// A replay's jump: the memory of the snapshots before the one it
    /// jumped to.
    fn recall(&mut self, m: Arc<Memory>) {
        self.memory = m;
        self.seen = None;
    }

    /// A snapshot: the audit's faults for its cluster, then the memory and
    /// the health numbers fed.
    fn snapshot(&mut self, c: &Cluster) {
        audit_into(self.audit.as_ref(), &mut self.seen, &mut self.memory, c);
        Arc::make_mut(&mut self.memory).observe(c, &self.site);
        crate::engine::kpis::observe_shared(&self.kpis, c);
    }
}

fn audit_into(
    feed: Option<&AuditFeed>,
    seen: &mut Option<(Arc<Audited>, String)>,
    memory: &mut Arc<Memory>,
    c: &Cluster,
) {
    let Some(feed) = feed else { return };
    let now = feed.faults.borrow().clone();
    if seen
        .as_ref()
        .is_some_and(|(a, n)| Arc::ptr_eq(a, &now) && *n == c.name)
    {
        return;
    }
    let mine = audited_for(&now, feed.cluster.as_deref(), &c.name);
    Arc::make_mut(memory).set_audited(Arc::new(mine));
    *seen = Some((now, c.name.clone()));
}

/// The share of one core a full analysis may take on average: after an
/// analysis that took `d`, the next full one waits until `d / SHARE` has
/// passed since it began. At 16 nodes (well under a millisecond) that is
/// every snapshot; at 10,000 nodes (~200 ms) one every few seconds, where
/// planning every snapshot kept a fifth of a core busy (issue 14).
pub const ANALYSIS_SHARE: f64 = 0.03;

/// When the next full analysis may start, after one that began at `began`
/// and took `took`.
pub fn next_analysis(began: Instant, took: Duration) -> Instant {
    began + took.div_f64(ANALYSIS_SHARE)
}

pub fn spawn(
    source: mpsc::Receiver<Update>,
    focus: watch::Receiver<Focus>,
    site: SiteParams,
    catalog: XidCatalog,
    kpis: crate::engine::kpis::SharedKpis,
) -> mpsc::Receiver<Out> {
    let (tx, rx) = mpsc::channel(16);
    spawn_into(source, focus, site, catalog, kpis, None, (tx, |o| o));
    rx
}

/// `spawn`, its output wrapped by `wrap` into a channel the caller owns
/// (the console's loop takes every cluster's messages from one channel,
/// tagged with the cluster: no task relays them).
pub fn spawn_into<T: Send + 'static>(
    mut source: mpsc::Receiver<Update>,
    focus: watch::Receiver<Focus>,
    site: SiteParams,
    catalog: XidCatalog,
    kpis: crate::engine::kpis::SharedKpis,
    audit: Option<AuditFeed>,
    (tx, wrap): (mpsc::Sender<T>, impl Fn(Out) -> T + Send + 'static),
) {
    tokio::spawn(async move {
        let mut focus = focus;
        let mut latest: Option<Arc<Cluster>> = None;
        let mut last = LastAnalysed::default();
        let mut source_open = true;
        let mut intake = Intake {
            audit,
            seen: None,
            memory: Arc::new(Memory::default()),
            site: site.clone(),
            kpis,
        };
        // No full analysis before this (the CPU budget).
        let mut earliest = Instant::now();
        let mut deferred = false;
        // A new focus with no snapshot kept: the newest is analysed now.
        let mut asked = false;
        loop {
            tokio::select! {
                up = source.recv(), if source_open => match up {
                    Some(Update::Recalled(m)) => {
                        intake.recall(m);
                        continue;
                    }
                    Some(Update::Snapshot(c)) => {
                        intake.snapshot(&c);
                        if tx.send(wrap(Out::Source(Update::Snapshot(c.clone())))).await.is_err() {
                            return;
                        }
                        latest = Some(c);
                    }
                    Some(other) => {
                        if tx.send(wrap(Out::Source(other))).await.is_err() {
                            return;
                        }
                        continue;
                    }
                    None => {
                        source_open = false;
                        if tx.send(wrap(Out::SourceStopped)).await.is_err() {
                            return;
                        }
                        continue;
                    }
                },
                changed = focus.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    last.moved = Some(Instant::now());
                    // A new focus is answered at once, on the last base.
                    if let Some((c, base)) = last.kept.clone() {
                        let f = focus.borrow().clone();
                        if let Some(a) = refocus(c, base, f, site.clone()).await
                            && tx.send(wrap(Out::Analysis(Arc::new(a)))).await.is_err()
                        {
                            return;
                        }
                        continue;
                    }
                    asked = true;
                }
                () = tokio::time::sleep_until(last.let_go_at().unwrap_or_else(Instant::now).into()), if last.kept.is_some() => {
                    last.kept = None;
                    continue;
                }
                () = tokio::time::sleep_until(earliest.into()), if deferred => {}
            }
            // Forward whatever queued up while we computed; analyse the newest.
            for up in take_queued(&mut source, &mut intake, &mut latest) {
                if tx.send(wrap(Out::Source(up))).await.is_err() {
                    return;
                }
            }
            let Some(c) = latest.clone() else { continue };
            if !asked && last.is_of(&c) {
                deferred = false;
                continue;
            }
            let began = Instant::now();
            if !asked && began < earliest {
                // Too soon after the last: analyse the newest when allowed.
                deferred = true;
                continue;
            }
            (deferred, asked) = (false, false);
            // The snapshot last analysed is let go before the next analysis
            // (no focus is answered while it runs).
            last.kept = None;
            let f = focus.borrow().clone();
            let analysis = analyse(
                c.clone(),
                intake.memory.clone(),
                f,
                (site.clone(), catalog.clone()),
            )
            .await;
            earliest = next_analysis(began, began.elapsed());
            match analysis {
                Ok(a) => {
                    last.analysed(c, a.base.clone(), Instant::now());
                    if tx.send(wrap(Out::Analysis(Arc::new(a)))).await.is_err() {
                        return;
                    }
                }
                Err(e) => tracing::error!("engine task failed: {e}"),
            }
        }
    });
}

/// How long after the focus last changed the snapshot last analysed is
/// kept, to answer the next change at once on its base. An idle console
/// keeps none: at 10,000 nodes that snapshot held a generation of nodes
/// of its own (the sim re-makes each node every 10 s, a scheduler's poll
/// makes them anew) for the tens of seconds between analyses — 30-40 MB
/// of the console's 230 (docs/performance.md). A focus that finds none
/// kept has the newest snapshot analysed at once, past the CPU budget.
pub const KEEP_FOR_FOCUS: Duration = Duration::from_secs(30);

/// The snapshot analysed last, and what is kept of it.
#[derive(Default)]
struct LastAnalysed {
    /// That snapshot and its base, while the operator moves the focus.
    kept: Option<(Arc<Cluster>, Arc<Base>)>,
    /// That snapshot, kept or not: it is not analysed again unless a
    /// focus asks (a weak reference holds none of its nodes or jobs, and
    /// keeps its address from being another snapshot's).
    of: std::sync::Weak<Cluster>,
    /// When the focus last changed.
    moved: Option<Instant>,
}

impl LastAnalysed {
    /// An analysis of `c` done at `now`: kept while the focus moved within
    /// `KEEP_FOR_FOCUS`.
    fn analysed(&mut self, c: Arc<Cluster>, base: Arc<Base>, now: Instant) {
        self.of = Arc::downgrade(&c);
        self.kept = self
            .let_go_at()
            .is_some_and(|t| now < t)
            .then_some((c, base));
    }

    /// When what is kept is let go; none before the focus first moves.
    fn let_go_at(&self) -> Option<Instant> {
        self.moved.map(|t| t + KEEP_FOR_FOCUS)
    }

    fn is_of(&self, c: &Arc<Cluster>) -> bool {
        std::ptr::eq(self.of.as_ptr(), Arc::as_ptr(c))
    }
}

/// The updates that queued up while an analysis ran, to forward: their
/// snapshots taken in (the newest becomes `latest`), recalled memory
/// taken in and not forwarded.
fn take_queued(
    source: &mut mpsc::Receiver<Update>,
    intake: &mut Intake,
    latest: &mut Option<Arc<Cluster>>,
) -> Vec<Update> {
    let mut forward = Vec::new();
    while let Ok(up) = source.try_recv() {
        if let Update::Recalled(m) = up {
            intake.recall(m);
            continue;
        }
        if let Update::Snapshot(c) = &up {
            intake.snapshot(c);
            *latest = Some(c.clone());
        }
        forward.push(up);
    }
    forward
}

/// The focus's answers on the last base, off the async workers.
async fn refocus(c: Arc<Cluster>, base: Arc<Base>, f: Focus, s: SiteParams) -> Option<Analysis> {
    let answer = tokio::task::spawn_blocking(move || Analysis {
        cluster: Some(c.clone()),
        ..Analysis::with_base(base, &c, &f, &s)
    })
    .await;
    answer
        .map_err(|e| tracing::error!("engine task failed: {e}"))
        .ok()
}

/// A full analysis of `c` (the last snapshot `memory` observed), off the
/// async workers: the base and the answers for the focus.
async fn analyse(
    c: Arc<Cluster>,
    memory: Arc<Memory>,
    f: Focus,
    (s, k): (SiteParams, XidCatalog),
) -> Result<Analysis, tokio::task::JoinError> {
    tokio::task::spawn_blocking(move || {
        let base = Arc::new(memory.base(&c, &s, &k));
        Analysis {
            cluster: Some(c.clone()),
            ..Analysis::with_base(base, &c, &f, &s)
        }
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::fixture::{NOW, add_node, cluster, run};
    use crate::protocol::source::{Origin, SourceError};

    /// An analyst running, with what a test feeds it and reads from it.
    struct Started {
        tx: mpsc::Sender<Update>,
        focus: watch::Sender<Focus>,
        kpis: crate::engine::kpis::SharedKpis,
        out: mpsc::Receiver<Out>,
    }

    fn started(site: &SiteParams) -> Started {
        let (tx, rx) = mpsc::channel(64);
        let (focus, focus_rx) = watch::channel(Focus::None);
        let kpis: crate::engine::kpis::SharedKpis = Arc::new(std::sync::Mutex::new(
            crate::engine::kpis::KpiBook::new(3600),
        ));
        let out = spawn(
            rx,
            focus_rx,
            site.clone(),
            XidCatalog::default(),
            kpis.clone(),
        );
        Started {
            tx,
            focus,
            kpis,
            out,
        }
    }

    /// Statuses pass through in order; snapshots that show the
    /// hung-collective signature for the whole window end in a stall.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_analyst_forwards_statuses_and_finds_a_sustained_stall() {
        let site = SiteParams::default();
        // The focus kept: the analyst ends when the console lets go of it.
        let Started {
            tx,
            focus: _focus,
            kpis,
            mut out,
        } = started(&site);
        let mut c = cluster();
        add_node(&mut c, "n1", "p", 8);
        run(&mut c, "spin", &["n1"], 8, 600, 7200);
        for g in &mut std::sync::Arc::make_mut(&mut c.nodes[0]).gpus {
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
        // Every snapshot fed the health numbers, off the console's thread.
        let k = kpis
            .lock()
            .ok()
            .and_then(|b| b.figures(3600))
            .expect("figures");
        assert_eq!((k.samples, k.to), (steps as usize, last));
    }

    /// The next analysis from `out` (the source's updates passed over).
    async fn next_analysis_of(out: &mut mpsc::Receiver<Out>) -> Arc<Analysis> {
        loop {
            match tokio::time::timeout(Duration::from_secs(5), out.recv()).await {
                Ok(Some(Out::Analysis(a))) => return a,
                Ok(Some(_)) => {}
                other => panic!("no analysis: {other:?}"),
            }
        }
    }

    /// An idle console keeps no snapshot but the newest (one it analysed
    /// and kept held a generation of nodes at 10,000 nodes); a focus that
    /// then moves is answered all the same, with no new snapshot, and the
    /// next move at once on what is now kept.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_idle_console_keeps_no_older_snapshot_and_a_new_focus_is_answered() {
        let Started {
            tx, focus, mut out, ..
        } = started(&SiteParams::default());
        let mut c = cluster();
        add_node(&mut c, "n1", "p", 8);
        add_node(&mut c, "n2", "p", 8);
        run(&mut c, "train", &["n1"], 8, 600, 7200);
        let first = Arc::new(c.clone());
        tx.send(Update::Snapshot(first.clone()))
            .await
            .expect("send");
        assert_eq!(next_analysis_of(&mut out).await.base.time, NOW);
        c.time = NOW + 1;
        let second = Arc::new(c.clone());
        tx.send(Update::Snapshot(second.clone()))
            .await
            .expect("send");
        assert_eq!(next_analysis_of(&mut out).await.base.time, NOW + 1);
        assert_eq!(Arc::strong_count(&first), 1, "the older snapshot is let go");
        // The newest: this test's, and the analyst's newest.
        assert_eq!(Arc::strong_count(&second), 2);
        for node in ["n1", "n2"] {
            focus.send(Focus::Node(node.into())).expect("focus");
            let a = next_analysis_of(&mut out).await;
            assert_eq!(a.base.time, NOW + 1, "no new snapshot was needed");
            match &a.focus {
                Some(crate::engine::analysis::FocusAnswer::Node { name, .. }) => {
                    assert_eq!(name, node)
                }
                other => panic!("the focus on {node}: {other:?}"),
            }
        }
        // While the focus moves, the snapshot analysed is kept to answer it.
        assert_eq!(Arc::strong_count(&second), 3);
    }
}
