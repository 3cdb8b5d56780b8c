//! Owns the terminal: raw mode and the alternate screen on the way in, and
//! always restored on the way out (quit, error, panic, SIGTERM, SIGHUP).
//! The loop waits on keys, source updates, a 1 s tick and signals; drawing
//! happens only when something changed, at most ~60 frames a second.

use crate::app::{App, Effect, Msg};
use crate::config::Settings;
use crate::error::CommandError;
use crate::sources;
use crossterm::event::{Event, EventStream};
use crossterm::{cursor, execute, terminal};
use futures_util::StreamExt;
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use std::io::{self, Stdout};
use std::time::{Duration, Instant};
use tokio::signal::unix::{SignalKind, signal};

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

pub async fn run(settings: Settings) -> Result<(), CommandError> {
    // The health numbers: fed by the analyst, rebuilt by a replay's jumps.
    let kpis: crate::engine::kpis::SharedKpis = std::sync::Arc::new(std::sync::Mutex::new(
        crate::engine::kpis::KpiBook::new(crate::app::KPI_KEEP_S),
    ));
    // The nodes the console has open: a fleet's Prometheus reads them in full.
    let (open_tx, open_rx) = tokio::sync::watch::channel(Vec::<String>::new());
    let (source, control, replay) = match &settings.replay {
        Some(path) => {
            let rec = crate::recording::Recording::open(path)?;
            let speed = settings.source.speed();
            let (rx, ctl) =
                crate::recording::replay::spawn(rec, speed, kpis.clone(), settings.site.clone())?;
            (rx, sources::Control::None, Some(ctl))
        }
        None => {
            let (rx, control) = sources::spawn(
                settings.source.clone(),
                &settings.endpoints,
                &settings.topology,
                open_rx,
            )?;
            (rx, control, None)
        }
    };
    let (source, tap) = match &settings.record {
        Some(path) => {
            let (rx, tap) =
                crate::recording::run::tap(source, path, settings.source.name(), settings.audit())?;
            (rx, Some(tap))
        }
        None => (source, None),
    };
    // The audit log's faults join each snapshot's history (after the
    // recording's tap: a recording keeps what the source said).
    let source = match &settings.replay {
        Some(_) => source,
        None => {
            crate::actions::audit::with_history(source, settings.audit(), settings.cluster.clone())
        }
    };
    let result = console(settings, source, control, replay, kpis, open_tx).await;
    // Every way out of the console finishes the recording.
    if let Some(tap) = tap {
        tap.finish().await;
    }
    result
}

/// The console on its source, until it is quit.
async fn console(
    settings: Settings,
    source: tokio::sync::mpsc::Receiver<sources::Update>,
    control: sources::Control,
    replay: Option<tokio::sync::mpsc::Sender<crate::recording::replay::ReplayCmd>>,
    kpis: crate::engine::kpis::SharedKpis,
    open: tokio::sync::watch::Sender<Vec<String>>,
) -> Result<(), CommandError> {
    let (focus_tx, focus_rx) = tokio::sync::watch::channel(crate::engine::analysis::Focus::None);
    let (action_tx, action_rx) = tokio::sync::mpsc::channel(8);
    let runner = crate::actions::runner::Runner {
        control,
        policy: settings.policy.clone(),
        site: settings.site.clone(),
        catalog: settings.xid_catalog.clone(),
        log: settings.audit(),
        timeout: settings.action_timeout,
        cluster: settings.cluster.clone(),
    }
    .spawn(action_tx);
    let updates = crate::analyst::spawn(
        source,
        focus_rx,
        settings.site.clone(),
        settings.xid_catalog.clone(),
        kpis.clone(),
    );
    let mut signals = Signals::new()?;
    let mut terminal = setup(settings.mouse).map_err(|e| CommandError::Terminal {
        what: "cannot set up the terminal",
        source: e,
    })?;
    let warnings = crate::actions::audit::warn_unfinished(&crate::actions::audit::AuditLog::new(
        settings.audit_log.clone(),
    ));
    let mut app = App::new(
        if replay.is_some() {
            "replay"
        } else {
            settings.source.name()
        },
        settings.read_only,
        settings.no_color,
        settings.stale_after,
    )
    .measured_by(crate::views::extent)
    .with_catalog(settings.xid_catalog.clone())
    .with_kpis(kpis)
    .with_bell_on_critical(settings.bell_on_critical);
    if let Some(w) = warnings.first() {
        tracing::warn!("{w}");
        app = app.with_warning(format!("WARNING: {w}"));
    }
    let mut channels = Channels {
        updates,
        actions: action_rx,
        runner,
        focus: focus_tx,
        open,
        replay,
    };
    let result = event_loop(
        &mut terminal,
        &mut app,
        &mut channels,
        &mut signals,
        settings.mouse,
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

/// The loop's connections to the tasks around it.
struct Channels {
    updates: tokio::sync::mpsc::Receiver<crate::analyst::Out>,
    actions: tokio::sync::mpsc::Receiver<crate::actions::runner::Reply>,
    runner: tokio::sync::mpsc::Sender<crate::actions::runner::Request>,
    focus: tokio::sync::watch::Sender<crate::engine::analysis::Focus>,
    /// The nodes open on screen, for the source.
    open: tokio::sync::watch::Sender<Vec<String>>,
    /// Playing a recording: its controls.
    replay: Option<tokio::sync::mpsc::Sender<crate::recording::replay::ReplayCmd>>,
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

async fn event_loop(
    terminal: &mut Term,
    app: &mut App,
    ch: &mut Channels,
    sig: &mut Signals,
    mouse: bool,
) -> Result<(), CommandError> {
    let mut keys = EventStream::new();
    // What the app asked for, carried out after each message.
    let mut effects = Vec::new();
    if let Ok(size) = terminal.size() {
        effects = app.update(Msg::Resize(size.width, size.height), Instant::now());
    }
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let mut updates_open = true;
    let mut actions_open = true;
    let mut frames = Frames::new();
    loop {
        let wait = frames.draw(terminal, |f| crate::views::render(f, app))?;
        // Every arm that reads a channel is off once the channel closed:
        // a closed channel answers at once, and would spin the loop.
        let msg: Option<Msg> = tokio::select! {
            ev = keys.next() => match ev {
                Some(Ok(Event::Key(k))) => Some(Msg::Key(k)),
                Some(Ok(Event::Resize(w, h))) => Some(Msg::Resize(w, h)),
                Some(Ok(Event::Mouse(m))) => Some(Msg::Mouse(m)),
                Some(Ok(Event::Paste(text))) => Some(Msg::Paste(text)),
                Some(Ok(_)) => None,
                Some(Err(e)) => { tracing::error!("terminal input: {e}"); return Err(CommandError::Terminal { what: "terminal input failed", source: e }); }
                None => return Ok(()),
            },
            done = ch.actions.recv(), if actions_open => match done {
                Some(r) => Some(Msg::Action(r)),
                None => {
                    actions_open = false;
                    Some(Msg::RunnerStopped)
                }
            },
            up = ch.updates.recv(), if updates_open => match up {
                Some(u) => {
                    // Take in what queued up, in order, then draw once; a
                    // bounded batch, so that a source that never pauses
                    // cannot keep keys (q) from being read.
                    effects.extend(app.update(msg_of(u), Instant::now()));
                    for _ in 0..MAX_BATCH {
                        let Ok(more) = ch.updates.try_recv() else { break };
                        effects.extend(app.update(msg_of(more), Instant::now()));
                    }
                    Some(Msg::Tick)
                }
                None => {
                    updates_open = false;
                    Some(Msg::SourceStopped)
                }
            },
            _ = tick.tick() => Some(Msg::Tick),
            _ = tokio::time::sleep(wait), if frames.dirty => None,
            _ = sig.term.recv() => { tracing::info!("SIGTERM: restoring the terminal"); return Ok(()); }
            _ = sig.hup.recv() => { tracing::info!("SIGHUP: restoring the terminal"); return Ok(()); }
            _ = sig.int.recv() => { tracing::info!("SIGINT: restoring the terminal"); return Ok(()); }
            _ = sig.tstp.recv() => Some(Msg::StopSignal),
        };
        if let Some(m) = msg {
            effects.extend(app.update(m, Instant::now()));
            frames.dirty = true;
        }
        for effect in std::mem::take(&mut effects) {
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
                // One cluster: nothing to switch to (the app says so).
                Effect::Context(_) => {}
                Effect::Replay(cmd) => {
                    if let Some(r) = &ch.replay {
                        let _ = r.send(cmd).await;
                    }
                }
                Effect::Run(req) => {
                    if ch.runner.send(req).await.is_err() {
                        effects.extend(app.update(Msg::RunnerStopped, Instant::now()));
                    }
                }
            }
        }
        send_changed(&ch.open, app.open_nodes());
        send_changed(&ch.focus, app.focus());
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
