//! Owns the terminal: raw mode and the alternate screen on the way in, and
//! always restored on the way out (quit, error, panic, SIGTERM, SIGHUP).
//! The loop waits on keys, source updates, a 1 s tick and signals; drawing
//! happens only when something changed, at most ~60 frames a second. One
//! loop for one cluster (a fleet of one) and for `--all`'s fleet.

use crate::app::{App, Effect, Msg};
use crate::config::Settings;
use crate::error::CommandError;
use crate::fleet::{Fleet, Member};
use crate::sources;
use crossterm::event::{Event, EventStream};
use crossterm::{cursor, execute, terminal};
use futures_util::StreamExt;
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use std::io::{self, Stdout};
use std::time::{Duration, Instant};
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::{mpsc, watch};

pub(crate) const FRAME: Duration = Duration::from_millis(16);
/// Updates taken in one turn of the loop before keys get their turn.
pub(crate) const MAX_BATCH: usize = 64;

pub(crate) type Term = Terminal<CrosstermBackend<Stdout>>;

/// Puts the terminal back as we found it. Safe to call more than once.
pub fn restore() {
    let _ = terminal::disable_raw_mode();
    let _ = execute!(
        io::stdout(),
        crossterm::event::DisableBracketedPaste,
        crossterm::event::DisableMouseCapture,
        terminal::LeaveAlternateScreen,
        cursor::Show
    );
}

/// Raw mode, the alternate screen, bracketed paste (a paste arrives as
/// one text, never as keys), the mouse when asked for.
fn enter(mouse: bool) -> io::Result<()> {
    terminal::enable_raw_mode()?;
    execute!(
        io::stdout(),
        terminal::EnterAlternateScreen,
        cursor::Hide,
        crossterm::event::EnableBracketedPaste
    )?;
    if mouse {
        execute!(io::stdout(), crossterm::event::EnableMouseCapture)?;
    }
    Ok(())
}

/// ctrl-z or SIGTSTP: gives the terminal back as it was, stops until the
/// shell's `fg`, then takes it again and redraws everything.
pub(crate) fn suspend(terminal: &mut Term, mouse: bool) -> io::Result<()> {
    tracing::info!("suspended (ctrl-z / SIGTSTP)");
    restore();
    // SAFETY: kill(2) on our own pid with a constant signal touches no
    // memory. SIGSTOP, not SIGTSTP: our SIGTSTP handler would catch that.
    let stopped = unsafe { libc::kill(libc::getpid(), libc::SIGSTOP) };
    if stopped != 0 {
        tracing::warn!("could not stop: {}", io::Error::last_os_error());
    }
    // Running again (SIGCONT).
    tracing::info!("resumed");
    enter(mouse)?;
    // A blank screen, and nothing taken as already drawn: the next frame is
    // drawn whole. (Terminal::clear would ask the terminal where its cursor
    // is, an answer the input reader may swallow.)
    execute!(io::stdout(), terminal::Clear(terminal::ClearType::All))?;
    terminal.swap_buffers();
    Ok(())
}

pub(crate) fn setup(mouse: bool) -> io::Result<Term> {
    if let Err(e) = enter(mouse) {
        restore();
        return Err(e);
    }
    let prev = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        restore();
        prev(info);
    }));
    match Terminal::new(CrosstermBackend::new(io::stdout())) {
        Ok(t) => Ok(t),
        Err(e) => {
            restore();
            Err(e)
        }
    }
}

/// What the loop keeps of one cluster to talk to it.
pub(crate) struct Link {
    runner: mpsc::Sender<crate::actions::runner::Request>,
    focus: watch::Sender<crate::engine::analysis::Focus>,
    /// The nodes open on screen, for the source.
    open: watch::Sender<Vec<String>>,
    /// Playing a recording: its controls.
    replay: Option<mpsc::Sender<crate::recording::replay::ReplayCmd>>,
}

/// One cluster started: its app, its link, and the recording it writes.
pub(crate) struct Started {
    pub(crate) member: Member,
    pub(crate) link: Link,
    pub(crate) tap: Option<crate::recording::run::Tap>,
}

/// One cluster: its source (or a recording's playback), analyst and
/// runner started, their messages sent to `tx` tagged with `i`. The same
/// for one cluster and for each of a fleet's.
pub(crate) fn start(
    i: usize,
    s: &Settings,
    tx: &mpsc::Sender<(usize, Msg)>,
) -> Result<Started, CommandError> {
    // The health numbers: fed by the analyst, rebuilt by a replay's jumps.
    let kpis: crate::engine::kpis::SharedKpis = std::sync::Arc::new(std::sync::Mutex::new(
        crate::engine::kpis::KpiBook::new(crate::app::KPI_KEEP_S),
    ));
    // The nodes the console has open: a fleet's Prometheus reads them in full.
    let (open_tx, open_rx) = watch::channel(Vec::<String>::new());
    // The console's recording: the source offers it each snapshot it
    // finishes (`--record` and `--replay` exclude each other).
    let (sink, tap) = match &s.record {
        Some(path) => {
            let (sink, tap) =
                crate::recording::run::tap(path, (s.source.name(), &s.site), s.audit())?;
            (Some(sink), Some(tap))
        }
        None => (None, None),
    };
    let (source, control, replay) = match &s.replay {
        Some(path) => {
            let rec = crate::recording::Recording::open(path)?;
            let (rx, ctl) = crate::recording::replay::spawn(
                rec,
                s.source.speed(),
                kpis.clone(),
                s.site.clone(),
            )?;
            (rx, sources::Control::None, Some(ctl))
        }
        None => {
            let mut assembly = sources::assemble::Assembly::new(s.topology.clone());
            if let Some(sink) = sink {
                assembly = assembly.with_sink(sink);
            }
            let (rx, control) = sources::spawn(s.source.clone(), &s.endpoints, assembly, open_rx)?;
            (rx, control, None)
        }
    };
    // The audit log's faults reach the analysis beside each snapshot (a
    // recording keeps what the source said; a replay reads its own).
    let audit = s.replay.is_none().then(|| crate::analyst::AuditFeed {
        faults: crate::actions::audit::watch_faults(s.audit()),
        cluster: s.cluster.clone(),
    });
    let (focus_tx, focus_rx) = watch::channel(crate::engine::analysis::Focus::None);
    let (action_tx, mut action_rx) = mpsc::channel(8);
    let runner = crate::actions::runner::Runner {
        control,
        guard: s.orchestrator(true),
    }
    .spawn(action_tx);
    crate::analyst::spawn_into(
        source,
        focus_rx,
        s.site.clone(),
        s.xid_catalog.clone(),
        kpis.clone(),
        audit,
        (tx.clone(), move |o| (i, msg_of(o))),
    );
    let t = tx.clone();
    tokio::spawn(async move {
        while let Some(r) = action_rx.recv().await {
            if t.send((i, Msg::Action(r))).await.is_err() {
                return;
            }
        }
        let _ = t.send((i, Msg::RunnerStopped)).await;
    });
    let mut app = App::new(
        if replay.is_some() {
            "replay"
        } else {
            s.source.name()
        },
        s.read_only,
        s.no_color,
        s.stale_after,
    )
    .measured_by(crate::views::extent)
    .with_catalog(s.xid_catalog.clone())
    .with_kpis(kpis)
    .with_bell_on_critical(s.bell_on_critical);
    let warnings = crate::actions::audit::warn_unfinished(&s.audit());
    if let Some(w) = warnings.first() {
        tracing::warn!("{w}");
        app = app.with_warning(format!("WARNING: {w}"));
    }
    let name = s
        .cluster
        .clone()
        .unwrap_or_else(|| format!("cluster-{}", i + 1));
    Ok(Started {
        member: Member { name, app },
        link: Link {
            runner,
            focus: focus_tx,
            open: open_tx,
            replay,
        },
        tap,
    })
}

/// The console on one cluster: a fleet of one.
pub async fn run(settings: Settings) -> Result<(), CommandError> {
    let (tx, rx) = mpsc::channel::<(usize, Msg)>(256);
    let started = start(0, &settings, &tx)?;
    drop(tx);
    let fleet = Fleet::alone(started.member.name, started.member.app);
    let result = console(fleet, rx, vec![started.link], settings.mouse).await;
    // Every way out of the console finishes the recording.
    if let Some(tap) = started.tap {
        tap.finish().await;
    }
    result
}

/// The console on its clusters, until it is quit: the terminal set up,
/// the loop, the terminal restored.
pub(crate) async fn console(
    mut fleet: Fleet,
    mut rx: mpsc::Receiver<(usize, Msg)>,
    links: Vec<Link>,
    mouse: bool,
) -> Result<(), CommandError> {
    let mut signals = Signals::new()?;
    let mut terminal = setup(mouse).map_err(|e| CommandError::Terminal {
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
    restore();
    result
}

pub(crate) struct Signals {
    pub(crate) term: tokio::signal::unix::Signal,
    pub(crate) hup: tokio::signal::unix::Signal,
    pub(crate) int: tokio::signal::unix::Signal,
    pub(crate) tstp: tokio::signal::unix::Signal,
}

impl Signals {
    /// The signals the console answers: TERM, HUP, INT restore the
    /// terminal and leave; TSTP suspends.
    pub(crate) fn new() -> Result<Signals, CommandError> {
        let on = |kind: SignalKind, what: &'static str| {
            signal(kind).map_err(|e| CommandError::Terminal { what, source: e })
        };
        Ok(Signals {
            term: on(SignalKind::terminate(), "SIGTERM handler")?,
            hup: on(SignalKind::hangup(), "SIGHUP handler")?,
            int: on(SignalKind::interrupt(), "SIGINT handler")?,
            tstp: on(SignalKind::from_raw(libc::SIGTSTP), "SIGTSTP handler")?,
        })
    }
}

/// The terminal bell (a new critical incident); a terminal that cannot
/// ring is no error.
pub(crate) fn ring_bell() {
    use std::io::Write;
    let mut out = io::stdout();
    let _ = out.write_all(b"\x07").and_then(|()| out.flush());
}

pub(crate) fn msg_of(out: crate::analyst::Out) -> Msg {
    match out {
        crate::analyst::Out::Source(u) => Msg::Source(u),
        crate::analyst::Out::Analysis(a) => Msg::Analysis(a),
        crate::analyst::Out::SourceStopped => Msg::SourceStopped,
    }
}

/// The one loop, for one cluster and for a fleet: keys to the cluster on
/// screen (or the fleet's overview), each cluster's messages to its own
/// app, the effects carried out on that cluster's link.
async fn event_loop(
    terminal: &mut Term,
    fleet: &mut Fleet,
    rx: &mut mpsc::Receiver<(usize, Msg)>,
    links: &[Link],
    sig: &mut Signals,
    mouse: bool,
) -> Result<(), CommandError> {
    let mut keys = EventStream::new();
    // What the apps asked for, carried out after each turn.
    let mut effects = Vec::new();
    if let Ok(size) = terminal.size() {
        effects = fleet.to_all(&Msg::Resize(size.width, size.height), Instant::now());
    }
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let mut open = true;
    let mut frames = Frames::new();
    loop {
        let wait = frames.draw(terminal, |f| crate::views::fleet::render(f, fleet))?;
        // The time an event is taken in is when it arrived, not when the
        // loop began to wait for it: an enter typed 100 ms after a name read
        // as pasted with it (the typed confirmation's paste guard).
        let changed = tokio::select! {
            ev = keys.next() => {
                let now = Instant::now();
                let active = fleet.active;
                match ev {
                    Some(Ok(Event::Key(k))) => effects.extend(fleet.key(k, now)),
                    Some(Ok(Event::Resize(w, h))) => effects.extend(fleet.to_all(&Msg::Resize(w, h), now)),
                    Some(Ok(Event::Mouse(m))) => if let Some(a) = active {
                        effects.extend(fleet.to_member(a, Msg::Mouse(m), now));
                    },
                    Some(Ok(Event::Paste(text))) => if let Some(a) = active {
                        effects.extend(fleet.to_member(a, Msg::Paste(text), now));
                    },
                    Some(Ok(_)) => {}
                    Some(Err(e)) => { tracing::error!("terminal input: {e}"); return Err(CommandError::Terminal { what: "terminal input failed", source: e }); }
                    None => return Ok(()),
                }
                true
            },
            // Every arm that reads a channel is off once it closed: a
            // closed channel answers at once, and would spin the loop.
            m = rx.recv(), if open => match m {
                Some((i, msg)) => {
                    // Take in what queued up, in order, then draw once; a
                    // bounded batch, so that a source that never pauses
                    // cannot keep keys (q) from being read.
                    let now = Instant::now();
                    effects.extend(fleet.to_member(i, msg, now));
                    for _ in 0..MAX_BATCH {
                        let Ok((i, more)) = rx.try_recv() else { break };
                        effects.extend(fleet.to_member(i, more, now));
                    }
                    effects.extend(fleet.to_all(&Msg::Tick, now));
                    true
                }
                None => {
                    open = false;
                    false
                }
            },
            _ = tick.tick() => {
                effects.extend(fleet.to_all(&Msg::Tick, Instant::now()));
                true
            },
            _ = tokio::time::sleep(wait), if frames.dirty => false,
            _ = sig.term.recv() => { tracing::info!("SIGTERM: restoring the terminal"); return Ok(()); }
            _ = sig.hup.recv() => { tracing::info!("SIGHUP: restoring the terminal"); return Ok(()); }
            _ = sig.int.recv() => { tracing::info!("SIGINT: restoring the terminal"); return Ok(()); }
            _ = sig.tstp.recv() => {
                match fleet.active {
                    Some(a) => effects.extend(fleet.to_member(a, Msg::StopSignal, Instant::now())),
                    None => effects.push((0, Effect::Suspend)),
                }
                true
            },
        };
        if changed {
            frames.dirty = true;
        }
        for (i, effect) in std::mem::take(&mut effects) {
            match effect {
                Effect::Quit => return Ok(()),
                Effect::Suspend => {
                    suspend(terminal, mouse).map_err(|e| CommandError::Terminal {
                        what: "cannot take the terminal back",
                        source: e,
                    })?;
                    frames.redraw_all();
                }
                Effect::Bell => ring_bell(),
                Effect::Run(req) => {
                    let sent = match links.get(i) {
                        Some(l) => l.runner.send(req).await.is_ok(),
                        None => false,
                    };
                    if !sent {
                        effects.extend(fleet.to_member(i, Msg::RunnerStopped, Instant::now()));
                    }
                }
                Effect::Replay(cmd) => {
                    if let Some(r) = links.get(i).and_then(|l| l.replay.as_ref()) {
                        let _ = r.send(cmd).await;
                    }
                }
                // Switching clusters is the fleet's own (`Fleet::take`).
                Effect::Context(_) => {}
            }
        }
        for (m, l) in fleet.members.iter().zip(links) {
            send_changed(&l.open, m.app.open_nodes());
            send_changed(&l.focus, m.app.focus());
        }
    }
}

/// Tells a watcher the new value only when it changed.
pub(crate) fn send_changed<T: PartialEq>(tx: &tokio::sync::watch::Sender<T>, now: T) {
    tx.send_if_modified(|v| {
        let changed = *v != now;
        if changed {
            *v = now;
        }
        changed
    });
}

/// Drawing at most once a frame, and only when something changed.
pub(crate) struct Frames {
    /// Something changed since the last frame.
    pub(crate) dirty: bool,
    last: Option<Instant>,
}

impl Frames {
    pub(crate) fn new() -> Frames {
        Frames {
            dirty: true,
            last: None,
        }
    }

    /// Draws when a frame is due; returns how long the loop may wait for
    /// its next event before the next frame is due.
    pub(crate) fn draw(
        &mut self,
        terminal: &mut Term,
        render: impl FnOnce(&mut ratatui::Frame),
    ) -> Result<Duration, CommandError> {
        let since = self.last.map_or(FRAME, |t| t.elapsed());
        if self.dirty && since >= FRAME {
            terminal.draw(render).map_err(|e| CommandError::Terminal {
                what: "drawing failed",
                source: e,
            })?;
            self.dirty = false;
            self.last = Some(Instant::now());
        }
        Ok(if self.dirty {
            FRAME.saturating_sub(since)
        } else {
            Duration::from_secs(3600)
        })
    }

    /// After the terminal was given back: everything, at once.
    pub(crate) fn redraw_all(&mut self) {
        self.dirty = true;
        self.last = None;
    }
}
