//! How messages change the app: the loop's one entry point, source
//! updates (snapshots, each origin's status), the engine's analyses and
//! the action runner's replies.

use super::freshness::Tell;
use super::{App, Effect, Index, Intent, Modal, Msg};
use crate::protocol::action::Done;
use crate::protocol::action::Reply;
use crate::protocol::source::Update;
use std::time::Instant;

impl App {
    pub fn tick(&mut self, now: Instant) {
        self.now = now;
    }

    /// The loop's one entry point: takes in what happened and says what the
    /// loop is to do about it.
    #[must_use = "the effects are the loop's to carry out"]
    pub fn update(&mut self, msg: Msg, now: Instant) -> Vec<Effect> {
        self.now = now;
        self.dispatch(msg, now);
        self.log_flash();
        std::mem::take(&mut self.effects)
    }

    /// A `:` command, as if typed (`nodes`, `job 4700`, `kpis 1h`): for
    /// scripts and tests; what it asks of the loop is returned as by
    /// `update`.
    #[must_use = "the effects are the loop's to carry out"]
    pub fn run_command(&mut self, cmd: &str) -> Vec<Effect> {
        self.command(cmd);
        self.log_flash();
        std::mem::take(&mut self.effects)
    }

    /// The guard's dialog for `action`, as its key opens it (the preview is
    /// asked of the runner): for scripts and tests.
    #[must_use = "the effects are the loop's to carry out"]
    pub fn open_action(&mut self, action: crate::model::Action) -> Vec<Effect> {
        self.preview_action(action);
        self.log_flash();
        std::mem::take(&mut self.effects)
    }

    /// A line in the message log (m), not on the status line.
    pub(crate) fn log(&mut self, m: String) {
        let wall = crate::host::now();
        let said = super::Said {
            // Before the first snapshot the source has no clock yet.
            source: if self.freshness.has_snapshot() {
                self.source_clock()
            } else {
                wall
            },
            wall,
        };
        self.messages.push_back((said, m));
        if self.messages.len() > 200 {
            self.messages.pop_front();
        }
    }

    /// Keeps the status line's message in the log (once).
    fn log_flash(&mut self) {
        if let Some(f) = self.flash.clone()
            && self.messages.back().is_none_or(|(_, m)| *m != f)
        {
            self.log(f);
        }
    }

    pub(crate) fn dispatch(&mut self, msg: Msg, now: Instant) {
        // What changes the `:kpis` panel's figures while it is open: the
        // book, fed with each snapshot (the analysis follows it). Opening
        // the panel computes them too.
        let figures_change = matches!(msg, Msg::Source(_) | Msg::Analysis(_));
        self.dispatch_one(msg, now);
        if figures_change {
            self.refresh_kpi_figures();
        }
    }

    /// The `:kpis` figures for its window, while it is open.
    pub(crate) fn refresh_kpi_figures(&mut self) {
        self.kpi_figures = match self.overlay {
            Some(super::Overlay::Kpis { window_s }) => {
                let mut k = self.kpis.lock().ok().and_then(|k| k.figures(window_s));
                // The hung gangs' unsaved work, from the analysis the
                // screens show (the report's definition).
                if let (Some(k), Some(a)) = (&mut k, &self.analysis) {
                    k.lost_gpu_hours_hung =
                        Some(crate::engine::kpis::hung_lost(&a.base, &self.cluster));
                }
                k
            }
            _ => None,
        };
    }

    fn dispatch_one(&mut self, msg: Msg, now: Instant) {
        match msg {
            Msg::Key(k) => self.on_key(k),
            Msg::Paste(text) => self.on_paste(&text),
            Msg::Resize(w, h) => {
                self.size = (w, h);
                self.refresh_rows();
            }
            Msg::Tick => self.ask_autopilot(now),
            Msg::Mouse(m) => self.on_mouse(m),
            Msg::Source(u) => self.on_update(u, now),
            Msg::Analysis(a) => {
                // A critical incident never seen before rings the bell (not
                // the ones there when the console opened).
                let first = self.known.is_empty() && self.analysis.is_none();
                for i in a.base.incidents.iter().filter(|i| i.is_open()) {
                    if self.known.insert(i.id.clone())
                        && !first
                        && self.bell_on_critical
                        && i.severity == crate::model::GpuHealth::Critical
                    {
                        self.emit(Effect::Bell);
                    }
                }
                self.analysis = Some(a);
                // Health and incidents order and filter the rows.
                self.refresh_rows();
            }
            Msg::Action(r) => self.on_reply(r),
            Msg::SourceStopped => self.freshness.source_stopped(),
            Msg::RunnerStopped => {
                self.flash = Some("the action runner stopped: actions are unavailable".into());
            }
            Msg::StopSignal => self.emit(Effect::Suspend),
        }
    }

    /// Carries out what a screen made of a key.
    pub(crate) fn carry_out(&mut self, intent: Intent) {
        match intent {
            Intent::Open(screen) => {
                // An incident opened is read.
                if let Some(crate::app::Row::Incident(i)) = self.selected_row()
                    && let Some(id) = self.incident(i).map(|x| x.id.clone())
                {
                    self.seen.insert(id);
                }
                self.push(screen);
            }
            Intent::Select(i) => self.select(i),
            Intent::Scroll(by) => {
                let max = i32::from(self.extent().screen);
                let s = self.screen_mut();
                s.scroll = (i32::from(s.scroll) + by).clamp(0, max) as u16;
            }
            Intent::SwitchPane => {
                let s = self.screen_mut();
                s.pane = s.pane.other();
                s.selected = 0;
                s.selected_key = None;
                self.refresh_rows();
            }
            Intent::SortBy(k) => self.sort_by_column(k),
            Intent::Flash(m) => self.flash = Some(m),
        }
    }

    pub(crate) fn on_update(&mut self, update: Update, now: Instant) {
        self.now = now;
        match update {
            Update::Snapshot(cluster) => {
                // Sought back in the recording: the charts start over.
                if self.replay.snapshot(cluster.time, self.cluster.time) {
                    self.history = Default::default();
                }
                self.history.record(&cluster);
                self.index = Index::build(&cluster);
                self.cluster = cluster;
                self.freshness.snapshot_came(now);
                self.refresh_rows();
                self.armed_after_snapshot();
            }
            Update::Backfill(b) => {
                let gpus = b.gpus.len();
                let notes = b.notes.clone();
                self.history.backfill(b);
                for n in notes {
                    tracing::warn!("history back-fill: {n}");
                    self.flash = Some(format!("history: {n}"));
                    self.log_flash();
                }
                if gpus > 0 {
                    self.flash = Some(format!(
                        "history: the charts' last hour for {gpus} GPUs read from Prometheus"
                    ));
                }
            }
            Update::Refresh { .. } | Update::Quality { .. } | Update::Status { .. } => {
                match self.freshness.observe(&update, now, &self.source_name) {
                    Some(Tell::Flash(m)) => {
                        self.flash = Some(m);
                        self.log_flash();
                    }
                    Some(Tell::Log(m)) => self.log(m),
                    None => {}
                }
            }
            Update::Playback(p) => self.replay.said(p),
            // The analyst's alone (it does not pass it on).
            Update::Recalled(_) => {}
            Update::Notice(text) => {
                tracing::warn!("{text}");
                self.flash = Some(text);
                self.log_flash();
            }
        }
    }

    fn on_reply(&mut self, reply: Reply) {
        match reply {
            Reply::Preview(p) => {
                if let Some(Modal::Confirm {
                    action, preview, ..
                }) = &mut self.dialog.modal
                    && *action == p.action
                {
                    *preview = Some(p);
                }
            }
            Reply::Done(d) => self.on_done(&d),
            Reply::Armed { armed, news } => self.on_armed(armed, news),
            Reply::Autopilot { status, news } => self.on_autopilot(status, news),
            Reply::Failed(e) => {
                self.arm_after_done(false);
                self.flash = Some(e.clone());
                self.dialog.modal = Some(Modal::Done {
                    message: e,
                    ok: false,
                });
            }
        }
    }

    fn on_done(&mut self, d: &Done) {
        self.flash = Some(d.message.clone());
        self.arm_after_done(d.outcome.ok);
        self.dialog.last_undo = d.undo.clone();
        self.dialog.modal = Some(Modal::Done {
            message: d.message.clone(),
            ok: d.outcome.ok && (d.outcome.verified || d.outcome.no_op),
        });
    }
}
