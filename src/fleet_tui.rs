//! `nightshift --all`: one console over every cluster of `[[clusters]]`.
//! Each cluster has what a one-cluster console has — its source, its
//! analyst, its action runner (with the cluster's name in the preview, the
//! typed confirmation and the audit record) — and its messages reach only
//! its own app: a cluster whose source stalls or dies leaves the others as
//! they are. The loop is the one-cluster loop's (`tui.rs`), over a `Fleet`.

use crate::app::{App, Effect, Msg};
use crate::config::Settings;
use crate::error::CommandError;
use crate::fleet::{Fleet, Member};
use crate::sources;
use crossterm::event::{Event, EventStream};
use futures_util::StreamExt;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, watch};

/// What the loop keeps of one cluster to talk to it.
struct Link {
    runner: mpsc::Sender<crate::actions::runner::Request>,
    focus: watch::Sender<crate::engine::analysis::Focus>,
    open: watch::Sender<Vec<String>>,
}

/// One cluster: its source, analyst and runner started, their messages
/// forwarded to `tx` tagged with `i`.
fn start(
    i: usize,
    s: &Settings,
    tx: &mpsc::Sender<(usize, Msg)>,
) -> Result<(Member, Link), CommandError> {
    let kpis: crate::engine::kpis::SharedKpis = std::sync::Arc::new(std::sync::Mutex::new(
        crate::engine::kpis::KpiBook::new(crate::app::KPI_KEEP_S),
    ));
    let (open_tx, open_rx) = watch::channel(Vec::<String>::new());
    let (source, control) = sources::spawn(s.source.clone(), &s.endpoints, &s.topology, open_rx)?;
    let source = crate::actions::audit::with_history(source, s.audit(), s.cluster.clone());
    let (focus_tx, focus_rx) = watch::channel(crate::engine::analysis::Focus::None);
    let (action_tx, mut action_rx) = mpsc::channel(8);
    let runner = crate::actions::runner::Runner {
        control,
        policy: s.policy.clone(),
        site: s.site.clone(),
        catalog: s.xid_catalog.clone(),
        log: s.audit(),
        timeout: s.action_timeout,
        cluster: s.cluster.clone(),
    }
    .spawn(action_tx);
    let mut updates = crate::analyst::spawn(
        source,
        focus_rx,
        s.site.clone(),
        s.xid_catalog.clone(),
        kpis.clone(),
    );
    let t = tx.clone();
    tokio::spawn(async move {
        while let Some(u) = updates.recv().await {
            if t.send((i, crate::tui::msg_of(u))).await.is_err() {
                return;
            }
        }
        let _ = t.send((i, Msg::SourceStopped)).await;
    });
    let t = tx.clone();
    tokio::spawn(async move {
        while let Some(r) = action_rx.recv().await {
            if t.send((i, Msg::Action(r))).await.is_err() {
                return;
            }
        }
        let _ = t.send((i, Msg::RunnerStopped)).await;
    });
    let app = App::new(s.source.name(), s.read_only, s.no_color, s.stale_after)
        .measured_by(crate::views::extent)
        .with_catalog(s.xid_catalog.clone())
        .with_kpis(kpis)
        .with_bell_on_critical(s.bell_on_critical);
    let name = s
        .cluster
        .clone()
        .unwrap_or_else(|| format!("cluster-{}", i + 1));
    Ok((
        Member { name, app },
        Link {
            runner,
            focus: focus_tx,
            open: open_tx,
        },
    ))
}

pub async fn run(all: Vec<Settings>) -> Result<(), CommandError> {
    let (tx, mut rx) = mpsc::channel::<(usize, Msg)>(256);
    let mut members = Vec::new();
    let mut links = Vec::new();
    for (i, s) in all.iter().enumerate() {
        // A cluster whose source cannot even start (a bad URL in its
        // section) is named: the fleet does not open half a fleet.
        let (m, l) = start(i, s, &tx).map_err(|e| {
            crate::config::ConfigError::Cluster(format!(
                "[[clusters]] {:?}: {e}",
                s.cluster.as_deref().unwrap_or("?")
            ))
        })?;
        members.push(m);
        links.push(l);
    }
    drop(tx);
    let mouse = all.first().is_some_and(|s| s.mouse);
    let mut fleet = Fleet::new(members);
    let mut signals = crate::tui::Signals::new()?;
    let mut terminal = crate::tui::setup(mouse).map_err(|e| CommandError::Terminal {
        what: "cannot set up the terminal",
        source: e,
    })?;
    let result = event_loop(
        &mut terminal,
        &mut fleet,
        &mut rx,
        &links,
        &mut signals,
        mouse,
    )
    .await;
    crate::tui::restore();
    result
}

async fn event_loop(
    terminal: &mut crate::tui::Term,
    fleet: &mut Fleet,
    rx: &mut mpsc::Receiver<(usize, Msg)>,
    links: &[Link],
    sig: &mut crate::tui::Signals,
    mouse: bool,
) -> Result<(), CommandError> {
    let mut keys = EventStream::new();
    let mut effects = Vec::new();
    if let Ok(size) = terminal.size() {
        effects = fleet.to_all(&Msg::Resize(size.width, size.height), Instant::now());
    }
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let mut open = true;
    let mut frames = crate::tui::Frames::new();
    loop {
        let wait = frames.draw(terminal, |f| crate::views::fleet::render(f, fleet))?;
        // The time an event is taken in is when it arrived, not when the
        // loop began to wait for it: an enter typed 100 ms after a name read
        // as pasted with it (the typed confirmation's paste guard).
        tokio::select! {
            ev = keys.next() => {
                let now = Instant::now();
                match ev {
                Some(Ok(Event::Key(k))) => effects.extend(fleet.key(k, now)),
                Some(Ok(Event::Resize(w, h))) => effects.extend(fleet.to_all(&Msg::Resize(w, h), now)),
                Some(Ok(Event::Mouse(m))) => if let Some(a) = fleet.active {
                    effects.extend(fleet.to_member(a, Msg::Mouse(m), now));
                },
                Some(Ok(Event::Paste(text))) => if let Some(a) = fleet.active {
                    effects.extend(fleet.to_member(a, Msg::Paste(text), now));
                },
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(CommandError::Terminal { what: "terminal input failed", source: e }),
                None => return Ok(()),
                }
            },
            m = rx.recv(), if open => {
                let now = Instant::now();
                match m {
                Some((i, msg)) => {
                    effects.extend(fleet.to_member(i, msg, now));
                    for _ in 0..crate::tui::MAX_BATCH {
                        let Ok((i, more)) = rx.try_recv() else { break };
                        effects.extend(fleet.to_member(i, more, now));
                    }
                    effects.extend(fleet.to_all(&Msg::Tick, now));
                }
                None => open = false,
                }
            },
            _ = tick.tick() => effects.extend(fleet.to_all(&Msg::Tick, Instant::now())),
            _ = tokio::time::sleep(wait), if frames.dirty => {}
            _ = sig.term.recv() => return Ok(()),
            _ = sig.hup.recv() => return Ok(()),
            _ = sig.int.recv() => return Ok(()),
            _ = sig.tstp.recv() => effects.push((0, Effect::Suspend)),
        }
        frames.dirty = true;
        for (i, effect) in std::mem::take(&mut effects) {
            match effect {
                Effect::Quit => return Ok(()),
                Effect::Suspend => {
                    crate::tui::suspend(terminal, mouse).map_err(|e| CommandError::Terminal {
                        what: "cannot take the terminal back",
                        source: e,
                    })?;
                    frames.redraw_all();
                }
                Effect::Bell => crate::tui::ring_bell(),
                Effect::Run(req) => {
                    let sent = match links.get(i) {
                        Some(l) => l.runner.send(req).await.is_ok(),
                        None => false,
                    };
                    if !sent {
                        effects.extend(fleet.to_member(i, Msg::RunnerStopped, Instant::now()));
                    }
                }
                // A fleet replays nothing; switching is the fleet's own.
                Effect::Replay(_) | Effect::Context(_) => {}
            }
        }
        for (m, l) in fleet.members.iter().zip(links) {
            crate::tui::send_changed(&l.open, m.app.open_nodes());
            crate::tui::send_changed(&l.focus, m.app.focus());
        }
    }
}
