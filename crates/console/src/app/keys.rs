//! Keys, k9s style: `:view` to switch, `/` to filter, `enter` to drill down,
//! `esc` to go back, `j`/`k` to move, `?` for help, `q` to quit.

use super::{App, Effect, Input, Modal, Overlay, Row, Screen, View};
use crate::engine::incidents::IncidentKind;
use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

/// Rows moved by page keys.
const PAGE: usize = 10;

/// The longest filter, command or typed confirmation, in characters: a
/// 100 KB paste is cut here (filtering on it froze the console for 17 s).
pub const MAX_INPUT: usize = 256;

/// `text` with `more` appended, up to [`MAX_INPUT`] characters; whether
/// anything was cut.
fn append_bounded(text: &mut String, more: &str) -> bool {
    let room = MAX_INPUT.saturating_sub(text.chars().count());
    let mut taken = 0;
    for c in more.chars().take(room) {
        text.push(c);
        taken += 1;
    }
    taken < more.chars().count()
}

impl App {
    pub(crate) fn on_key(&mut self, key: KeyEvent) {
        if key.kind == KeyEventKind::Release {
            return;
        }
        if key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c') {
            self.emit(Effect::Quit);
            return;
        }
        if key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('z') {
            self.emit(Effect::Suspend);
            return;
        }
        self.flash = None;
        if self.dialog.modal.is_some() {
            return self.on_modal_key(key);
        }
        match self.input.clone() {
            Input::Command(text) => self.on_command_key(key, text),
            Input::Filter(text) => self.on_filter_key(key, text),
            Input::Normal => self.on_normal_key(key),
        }
    }

    fn on_command_key(&mut self, key: KeyEvent, mut text: String) {
        match key.code {
            KeyCode::Esc => self.input = Input::Normal,
            KeyCode::Enter => {
                self.input = Input::Normal;
                self.command(&text);
            }
            KeyCode::Backspace => {
                if text.pop().is_none() {
                    self.input = Input::Normal;
                } else {
                    self.input = Input::Command(text);
                }
            }
            KeyCode::Char(c) => {
                if append_bounded(&mut text, &c.to_string()) {
                    self.flash = Some(format!("a command is at most {MAX_INPUT} characters"));
                }
                self.input = Input::Command(text);
            }
            KeyCode::Tab => {
                let done = self.complete(&text);
                // Nothing more to complete: several names fit; say which.
                if done == text {
                    let hits = self.candidates(&text);
                    if hits.len() > 1 {
                        let more = hits.len().saturating_sub(12);
                        self.flash = Some(format!(
                            "{} fit: {}{}",
                            hits.len(),
                            hits.iter().take(12).cloned().collect::<Vec<_>>().join(" "),
                            if more > 0 {
                                format!(" … and {more} more")
                            } else {
                                String::new()
                            }
                        ));
                    }
                }
                self.input = Input::Command(done);
            }
            _ => {}
        }
    }

    /// Tab after `:`: completes a view's name, or an object's after `job `,
    /// `node `, `gpu ` — to the longest prefix the candidates share, which
    /// is the whole name when only one is left.
    pub fn complete(&self, text: &str) -> String {
        let (head, _) = self.completion_of(text);
        let hits = self.candidates(text);
        let Some(first) = hits.first() else {
            return text.to_string();
        };
        let mut common = first.to_string();
        for h in &hits[1..] {
            let n = common
                .chars()
                .zip(h.chars())
                .take_while(|(a, b)| a == b)
                .count();
            common = common.chars().take(n).collect();
        }
        format!("{head}{common}")
    }

    /// The names that complete `text` after `:` (views, or objects after
    /// `job `, `node `, `gpu `).
    pub fn candidates(&self, text: &str) -> Vec<String> {
        let (_, Some((word, all))) = self.completion_of(text) else {
            return Vec::new();
        };
        all.into_iter().filter(|c| c.starts_with(word)).collect()
    }

    /// What is being completed: the command's head, and the word typed with
    /// every name it could become.
    fn completion_of<'t>(&self, text: &'t str) -> (String, Option<(&'t str, Vec<String>)>) {
        // The screens' names, the objects' words, then the other commands.
        let commands = || {
            let kinds = View::ALL.into_iter().map(View::kind);
            let names = kinds
                .clone()
                .filter_map(|k| k.commands().first().map(|c| c.to_string()));
            let objects = kinds.filter_map(|k| k.object().map(|w| format!("{w} ")));
            names
                .chain(objects)
                .chain(["reason ".to_string(), "quit".to_string()])
        };
        let (head, word, candidates): (String, &str, Vec<String>) = match text.split_once(' ') {
            Some(("ctx", w)) => ("ctx ".into(), w, self.contexts.clone()),
            Some((w, typed)) => match View::of_object(w) {
                Some(v) => (format!("{w} "), typed, v.kind().names(self)),
                None => return (String::new(), None),
            },
            None => (
                String::new(),
                text,
                commands()
                    .chain((!self.contexts.is_empty()).then(|| "ctx ".to_string()))
                    .collect(),
            ),
        };
        (head, Some((word, candidates)))
    }

    fn on_filter_key(&mut self, key: KeyEvent, mut text: String) {
        match key.code {
            KeyCode::Esc => {
                self.input = Input::Normal;
                self.set_filter(String::new());
            }
            KeyCode::Enter => self.input = Input::Normal,
            KeyCode::Backspace => {
                text.pop();
                self.set_filter(text.clone());
                self.input = Input::Filter(text);
            }
            KeyCode::Char(c) => {
                if append_bounded(&mut text, &c.to_string()) {
                    self.flash = Some(format!("a filter is at most {MAX_INPUT} characters"));
                    return;
                }
                self.set_filter(text.clone());
                self.input = Input::Filter(text);
            }
            _ => {}
        }
    }

    /// A bracketed paste: text for the input at hand (the filter, a
    /// command, a typed confirmation), applied once and bounded; a newline
    /// in it is text, never `enter`. Elsewhere it is ignored: pasted text is
    /// never taken for keys (a `D` in it would start a drain).
    pub fn on_paste(&mut self, pasted: &str) {
        self.flash = None;
        if let Some(Modal::Confirm {
            action,
            preview,
            typed,
        }) = self.dialog.modal.take()
        {
            let mut typed = typed;
            let yes_no = preview
                .as_ref()
                .is_some_and(|p| p.token.is_none() && p.force_token().is_none());
            if yes_no {
                self.flash = Some("a paste never confirms: press y yourself".into());
            } else if append_bounded(&mut typed, pasted) {
                self.flash = Some(format!("cut to {MAX_INPUT} characters"));
            }
            self.dialog.modal = Some(Modal::Confirm {
                action,
                preview,
                typed,
            });
            return;
        }
        if self.dialog.modal.is_some() {
            return;
        }
        match self.input.clone() {
            Input::Filter(mut text) => {
                // A filter is one line: the first of the paste.
                let line = pasted.lines().next().unwrap_or_default();
                if append_bounded(&mut text, line) {
                    self.flash = Some(format!("a filter is at most {MAX_INPUT} characters: cut"));
                }
                self.set_filter(text.clone());
                self.input = Input::Filter(text);
            }
            Input::Command(mut text) => {
                let line = pasted.lines().next().unwrap_or_default();
                if append_bounded(&mut text, line) {
                    self.flash = Some(format!("a command is at most {MAX_INPUT} characters: cut"));
                }
                self.input = Input::Command(text);
            }
            Input::Normal => {
                self.flash = Some("pasted text is ignored here (paste after / or :)".into());
            }
        }
    }

    pub(crate) fn command(&mut self, cmd: &str) {
        // A colon pressed twice (or typed from habit) is forgiven, as vim
        // forgives `::q`: the prompt's own colon is not part of the command.
        let cmd = cmd.trim().trim_start_matches(':').trim_start();
        match cmd {
            "" => {}
            "q!" => self.emit(Effect::Quit),
            "q" | "quit" => {
                if self.quit_now() {
                    self.emit(Effect::Quit);
                }
            }
            "help" | "?" => self.open_overlay(Overlay::Help),
            "kpis" | "kpi" => {
                self.open_overlay(Overlay::Kpis { window_s: 3600 });
            }
            _ if cmd.starts_with("kpis ") => {
                match crate::engine::units::parse_duration(&cmd["kpis ".len()..]) {
                    Ok(w) if w > 0 => {
                        self.open_overlay(Overlay::Kpis { window_s: w as i64 });
                    }
                    Ok(_) => self.flash = Some(":kpis WINDOW: a window above zero".into()),
                    Err(e) => self.flash = Some(format!(":kpis WINDOW: {e}")),
                }
            }
            "messages" | "msg" | "log" => self.open_overlay(Overlay::Messages),
            "ctx" | "context" => self.context(""),
            _ if cmd.starts_with("ctx ") => self.context(cmd["ctx ".len()..].trim()),
            _ if cmd.starts_with("reason ") => self.reason_command(cmd["reason ".len()..].trim()),
            "disarm" => self.disarm_command(""),
            "autopilot" => self.autopilot_command(""),
            _ if cmd.starts_with("autopilot ") => {
                self.autopilot_command(cmd["autopilot ".len()..].trim())
            }
            _ if cmd.starts_with("disarm ") => self.disarm_command(cmd["disarm ".len()..].trim()),
            _ if cmd == "at" || cmd.starts_with("at ") => {
                match self.replay.at(cmd["at".len()..].trim(), self.cluster.time) {
                    Ok((seek, say)) => {
                        self.emit(Effect::Replay(seek));
                        self.flash = Some(say);
                    }
                    Err(e) => self.flash = Some(e),
                }
            }
            _ if cmd
                .split_once(' ')
                .is_some_and(|(w, _)| View::of_object(w).is_some()) =>
            {
                self.jump(cmd)
            }
            _ => match View::from_command(cmd) {
                Some(v) => self.open(v),
                None => {
                    self.flash = Some(format!(
                        "unknown view {:?}: try nodes, gpus, jobs, queue, incidents, overview",
                        crate::text::sanitize(cmd)
                    ))
                }
            },
        }
    }

    /// `:job 4700`, `:node h100-03`, `:gpu h100-03/3`: open that object.
    fn jump(&mut self, cmd: &str) {
        let (word, what) = cmd.split_once(' ').unwrap_or((cmd, ""));
        let what = what.trim();
        let Some(view) = View::of_object(word) else {
            return;
        };
        if !view.kind().has(self, what) {
            self.flash = Some(format!(
                "no {word} {:?} in the current data (tab completes names)",
                crate::text::sanitize(what)
            ));
            return;
        }
        self.push(Screen::new(view, Some(what.to_string())));
    }

    fn on_normal_key(&mut self, key: KeyEvent) {
        if self.overlay.is_some() {
            return self.on_overlay_key(key);
        }
        if self.on_action_key(key) {
            return;
        }
        if let Some((cmd, say)) = self.replay.key(key) {
            self.emit(Effect::Replay(cmd));
            self.flash = Some(format!("replay: {say}"));
            return;
        }
        // What this screen gives its own meaning to.
        if let Some(intent) = super::screens::on_key(self, key) {
            return self.carry_out(intent);
        }
        let sel = self.screen().selected;
        let last = self.nav.rows.len().saturating_sub(1);
        match key.code {
            KeyCode::Char('q') if self.quit_now() => self.emit(Effect::Quit),
            KeyCode::Char('q') => {}
            KeyCode::Char(':') => self.input = Input::Command(String::new()),
            KeyCode::Char('/') => {
                let current = self.screen().filter.clone();
                self.input = Input::Filter(current);
            }
            KeyCode::Char('?') => self.open_overlay(Overlay::Help),
            KeyCode::Char('m') => self.open_overlay(Overlay::Messages),
            KeyCode::Esc => {
                if !self.screen().filter.is_empty() {
                    self.set_filter(String::new());
                } else {
                    self.back();
                }
            }
            KeyCode::Down | KeyCode::Char('j') => self.select(sel.saturating_add(1)),
            KeyCode::Up | KeyCode::Char('k') => self.select(sel.saturating_sub(1)),
            KeyCode::PageDown => self.select(sel.saturating_add(PAGE)),
            KeyCode::PageUp => self.select(sel.saturating_sub(PAGE)),
            KeyCode::Char('d') if key.modifiers.contains(KeyModifiers::CONTROL) => {
                self.select(sel.saturating_add(PAGE))
            }
            KeyCode::Char('u') if key.modifiers.contains(KeyModifiers::CONTROL) => {
                self.select(sel.saturating_sub(PAGE))
            }
            KeyCode::Home | KeyCode::Char('g') => self.select(0),
            KeyCode::End | KeyCode::Char('G') => self.select(last),
            _ => {}
        }
    }

    /// The wheel moves the selection; a click on a row of a list selects
    /// it (and a click on the selected row opens it, as `enter`).
    pub fn on_mouse(&mut self, m: crossterm::event::MouseEvent) {
        use crossterm::event::{MouseButton, MouseEventKind};
        if self.dialog.modal.is_some() || self.overlay.is_some() {
            return;
        }
        let sel = self.screen().selected;
        let step = if self.on_grid() {
            self.grid_columns()
        } else {
            3
        };
        match m.kind {
            MouseEventKind::ScrollDown => self.select(sel.saturating_add(step)),
            MouseEventKind::ScrollUp => self.select(sel.saturating_sub(step)),
            MouseEventKind::Down(MouseButton::Left) => {
                // Lists that fill the body: border and header above row 0.
                let Some(top) = self.screen().view.kind().list_top() else {
                    return;
                };
                if m.row < top || m.row >= self.size.1.saturating_sub(2) {
                    return;
                }
                let height = self.size.1.saturating_sub(top + 2) as usize;
                let first = super::rows::first_shown(sel, height);
                let row = first + usize::from(m.row - top);
                if row == sel {
                    self.drill_down();
                } else if row < self.nav.rows.len() {
                    self.select(row);
                }
            }
            _ => {}
        }
    }

    /// Whether the overview's node grid has the keys.
    fn on_grid(&self) -> bool {
        self.screen().view.kind().shows_grid() && self.screen().pane == super::Pane::Second
    }

    /// `enter` (or a second click): open what the selected row points at.
    pub fn drill_down(&mut self) {
        let intent = match self.drill_target() {
            Some(s) => super::Intent::Open(s),
            None => super::Intent::Flash("nothing to open here".into()),
        };
        self.carry_out(intent);
    }

    /// The screen the selected row points at.
    pub fn drill_target(&self) -> Option<Screen> {
        let view = self.screen().view;
        match (view, self.selected_row()) {
            (View::GpuDetail, _) => self
                .gpu_detail_job()
                .map(|id| Screen::new(View::JobDetail, Some(id))),
            (_, None) => None,
            (View::NodeDetail | View::Gpus, Some(Row::Gpu(n, g))) => self
                .cluster
                .nodes
                .get(n)
                .and_then(|node| node.gpus.get(g).map(|gpu| (node, gpu)))
                .map(|(node, gpu)| {
                    Screen::new(
                        View::GpuDetail,
                        Some(format!("{}/{}", node.name, gpu.index)),
                    )
                }),
            (_, Some(Row::Node(n))) => self
                .cluster
                .nodes
                .get(n)
                .map(|node| Screen::new(View::NodeDetail, Some(node.name.clone()))),
            (_, Some(Row::Job(j))) => self
                .cluster
                .jobs
                .get(j)
                .map(|job| Screen::new(View::JobDetail, Some(job.id.clone()))),
            (_, Some(Row::Incident(i))) => self.incident(i).map(incident_screen),
            (_, Some(Row::Gpu(..))) => None,
        }
    }

    /// `:ctx NAME`: another cluster of the fleet; `:ctx`: the fleet.
    fn context(&mut self, name: &str) {
        if self.contexts.is_empty() {
            self.flash = Some(
                ":ctx switches between the clusters of [[clusters]] in the config: open them with --all".into(),
            );
        } else if name.is_empty() {
            self.emit(Effect::Context(None));
        } else if self.contexts.iter().any(|c| c == name) {
            self.emit(Effect::Context(Some(name.to_string())));
        } else {
            self.flash = Some(format!(
                "no cluster {:?}: {} (tab completes)",
                crate::text::sanitize(name),
                self.contexts.join(", ")
            ));
        }
    }

    /// The job on the GPU a GPU detail screen shows.
    pub fn gpu_detail_job(&self) -> Option<String> {
        let (n, g) = self.gpu_target()?;
        self.cluster.nodes[n].gpus[g].job.clone()
    }

    /// Node and GPU positions of a GPU detail screen's `node/gpu` target.
    pub fn gpu_target(&self) -> Option<(usize, usize)> {
        let t = self.screen().target.as_deref()?;
        let (node, gpu) = t.rsplit_once('/')?;
        let n = self.index.node(&self.cluster, node)?;
        let index: u32 = gpu.parse().ok()?;
        let g = self.cluster.nodes[n]
            .gpus
            .iter()
            .position(|g| g.index == index)?;
        Some((n, g))
    }
}

/// An incident's screen: its node (a domain's incident, its first node:
/// that screen shows the domain, its verdict and the incident), its GPU
/// selected.
pub(crate) fn incident_screen(inc: &crate::engine::incidents::Incident) -> Screen {
    // A domain's incident opens the domain: its nodes, their state (issue
    // 39: it opened its alphabetically first node).
    if inc.kind == IncidentKind::Domain {
        let mut s = Screen::new(View::Nodes, None);
        s.filter = format!("domain:{}", inc.node);
        return s;
    }
    let node = inc.nodes.first().unwrap_or(&inc.node);
    let mut s = Screen::new(View::NodeDetail, Some(node.clone()));
    if let Some(g) = inc.gpu {
        s.selected_key = Some(format!("{node}/{g}"));
    }
    s
}
