//! Action keys, away from navigation and filtering (capitals): `D` drain
//! and requeue, `C` cordon, `U` resume, `R` requeue, `T` top priority,
//! `H` hold, `E` release. Each opens the guard's preview; `esc` cancels.

use super::dialog::Typing;
use super::{App, Effect, Modal, Row, View};
use crate::model::Action;
use crate::protocol::action::Request;
use crossterm::event::{KeyCode, KeyEvent};

impl App {
    /// The node the selection points at, with a reason from its evidence
    /// (none for a healthy node: each action says its own default).
    fn selected_node(&self) -> Option<(String, Option<String>)> {
        let s = self.screen();
        let name = s.view.kind().node_acted_on(self, s)?;
        // One reason whichever way the node is reached: the engine's.
        let reason = self
            .analysis
            .as_ref()
            .and_then(|a| a.base.drain_reason(&name));
        Some((name, reason))
    }

    /// The job the selection points at.
    fn selected_job(&self) -> Option<String> {
        let s = self.screen();
        s.view.kind().job_acted_on(self, s)
    }

    /// Handles an action key in normal mode; false when the key is not one.
    pub(super) fn on_action_key(&mut self, key: KeyEvent) -> bool {
        if key.code == KeyCode::Char('P') {
            // A brake, never a risk: allowed read-only too.
            self.switch_autopilot(true, "paused from the console");
            return true;
        }
        if key.code == KeyCode::Char('O') {
            // Comparing is reading: allowed in read-only mode too.
            let target = match self.selected_job() {
                Some(j) if self.screen().view == View::JobDetail => Some(j),
                _ => self.selected_node().map(|(n, _)| n).or(self.selected_job()),
            };
            use crate::engine::analysis::Focus;
            match (target, self.focus()) {
                (Some(t), Focus::Node(f) | Focus::Job(f)) if t == f => {
                    self.dialog.open(Modal::Options { target: t });
                }
                _ => {
                    self.flash = Some(
                        "O: select an incident, or open a node or a running job (enter) first"
                            .into(),
                    )
                }
            }
            return true;
        }
        let KeyCode::Char(k @ ('D' | 'C' | 'U' | 'R' | 'T' | 'H' | 'E')) = key.code else {
            return false;
        };
        if self.read_only {
            self.flash = Some("read-only mode: action keys are off".into());
            return true;
        }
        let action = match k {
            'D' => self.selected_node().map(|(node, reason)| Action::Drain {
                node,
                reason: reason.unwrap_or_else(|| crate::model::PLAIN_REASON.into()),
                requeue: true,
            }),
            'C' => self.selected_node().map(|(node, reason)| Action::Cordon {
                node,
                reason: reason.unwrap_or_else(|| crate::model::PLAIN_REASON.into()),
            }),
            'U' => self
                .selected_node()
                .map(|(node, _)| Action::Resume { node }),
            'R' => self.selected_job().map(|job| Action::Requeue { job }),
            'T' => self.selected_job().and_then(|job| {
                crate::engine::action::top_priority(&self.cluster, &job)
                    .ok()
                    .map(|value| Action::Priority { job, value })
            }),
            'H' => self.selected_job().map(|job| Action::Hold { job }),
            _ => self.selected_job().map(|job| Action::Release { job }),
        };
        match action {
            Some(action) => self.preview_action(action),
            None => {
                self.flash = Some(format!(
                    "{k}: select a {} first",
                    if matches!(k, 'D' | 'C' | 'U') {
                        "node or incident"
                    } else {
                        "job"
                    }
                ))
            }
        }
        true
    }

    /// `:reason TEXT`: a new reason for the selected node, through the guard.
    pub(super) fn reason_command(&mut self, reason: &str) {
        if self.read_only {
            self.flash = Some("read-only mode: action keys are off".into());
            return;
        }
        if reason.is_empty() {
            self.flash =
                Some(":reason needs a text, e.g. :reason xid79 GPU3, RMA ticket 4411".into());
            return;
        }
        match self.selected_node() {
            Some((node, _)) => self.preview_action(Action::SetReason {
                node,
                reason: reason.to_string(),
            }),
            None => self.flash = Some(":reason: select a node or incident first".into()),
        }
    }

    /// The snapshot analysed and its base, where there is an analysis: the
    /// analyst's pair (its own snapshot), else the one on screen.
    pub(super) fn analysed(
        &self,
    ) -> Option<(
        std::sync::Arc<crate::model::Cluster>,
        std::sync::Arc<crate::engine::analysis::Base>,
    )> {
        let a = self.analysis.as_ref()?;
        let cluster = a.cluster.clone().unwrap_or_else(|| self.cluster.clone());
        Some((cluster, a.base.clone()))
    }

    pub(crate) fn preview_action(&mut self, action: Action) {
        self.dialog.plan.note = None;
        // Acting on an incident reads it.
        if let Some(Row::Incident(i)) = self.selected_row()
            && let Some(id) = self.incident(i).map(|x| x.id.clone())
        {
            self.seen.insert(id);
        }
        // The analysis and its snapshot, as one (issue 60): no preview is
        // asked of a snapshot without its analysis.
        let Some((cluster, base)) = self.analysed() else {
            self.flash = Some("the first analysis is not ready yet: try again in a moment".into());
            return;
        };
        let data_age = self.data_age().unwrap_or(std::time::Duration::MAX);
        self.emit(Effect::Run(Request::Preview {
            action: action.clone(),
            cluster,
            data_age,
            base,
            arming: self.arming.pending(),
        }));
        self.dialog.open(Modal::Confirm {
            action,
            preview: None,
            typed: String::new(),
        });
    }

    /// The options the analyst computed for `target` (a node or a job), when
    /// it is what the screen is focused on.
    pub fn options_of(&self, target: &str) -> Option<&crate::engine::options::Options> {
        use crate::engine::analysis::FocusAnswer;
        match &self.analysis.as_ref()?.focus {
            Some(FocusAnswer::Node {
                name,
                options: Some(o),
                ..
            }) if name == target => Some(o),
            Some(FocusAnswer::Job {
                id,
                options: Some(o),
                ..
            }) if id == target => Some(o),
            _ => None,
        }
    }

    /// Keys while a modal is open. `esc` always cancels.
    /// A key in the options dialog: a digit (or enter: the recommended one)
    /// opens that option's first step's guarded preview.
    fn on_options_key(&mut self, key: KeyEvent, target: String) {
        let n = match key.code {
            KeyCode::Char(c @ '1'..='9') => c as usize - '1' as usize,
            KeyCode::Enter => match self.options_of(&target) {
                Some(o) => o.options.iter().position(|c| c.recommended).unwrap_or(0),
                None => 0,
            },
            _ => return self.dialog.modal = Some(Modal::Options { target }),
        };
        let Some(choice) = self.options_of(&target).and_then(|o| o.options.get(n)) else {
            self.flash = Some("the options are not computed yet".into());
            return self.dialog.modal = Some(Modal::Options { target });
        };
        if self.read_only {
            self.flash = Some("read-only mode: action keys are off".into());
            return self.dialog.modal = Some(Modal::Options { target });
        }
        // What the guard would refuse is not opened (issue 58).
        if let Some(r) = &choice.refused {
            self.flash = Some(format!("{}: unavailable — {r}", choice.title));
            return self.dialog.modal = Some(Modal::Options { target });
        }
        // A step that waits for the checkpoint ("cordon now, drain after
        // it"; "preempt after it"): the plan is confirmed once — its first
        // step's preview — and that step armed, sent when the checkpoint is
        // seen (by this console, or `nightshift follow`); the step before
        // it, if any, is sent now.
        if let Some(k) = choice.armed_step
            && let Some(later) = choice.steps.get(k).cloned()
        {
            let jobs = self
                .options_of(&target)
                .map(|o| o.target.jobs.clone())
                .unwrap_or_default();
            let when = crate::engine::armed::after_checkpoints(&self.cluster, &jobs);
            let plan = crate::engine::armed::plan_cost(choice);
            let first = choice
                .steps
                .first()
                .cloned()
                .unwrap_or_else(|| later.clone());
            self.flash = Some(match k {
                0 => format!(
                    "{}: confirming arms {} {}; nothing is sent now",
                    choice.title,
                    later.verb(),
                    later.target()
                ),
                _ => format!(
                    "{}: {} now; then {} {} is armed, sent when the checkpoint is seen",
                    choice.title,
                    first.verb(),
                    later.verb(),
                    later.target()
                ),
            });
            self.dialog.plan.clear();
            match k {
                0 => self.arming.arm_on_confirm(later, when),
                _ => self.arm_when_done(later, when),
            }
            self.preview_action(first);
            self.dialog.plan.note = plan;
            return;
        }
        let rest: Vec<Action> = choice.steps.iter().skip(1).cloned().collect();
        let total = choice.steps.len();
        let said = (choice.steps.len() > 1).then(|| {
            format!(
                "{}: step 1 of {}; then {} (n after each)",
                choice.title,
                choice.steps.len(),
                choice.actions.get(1..).unwrap_or(&[]).join(", then ")
            )
        });
        match choice.steps.first().cloned() {
            Some(first) => {
                if said.is_some() {
                    self.flash = said;
                }
                self.dialog.plan.start(rest, total);
                self.preview_action(first);
            }
            None => self.flash = Some(format!("{}: nothing to send", choice.title)),
        }
    }

    /// `esc` on a dialog: cancels what is not sent yet.
    fn on_modal_escape(&mut self, modal: Modal) {
        match modal {
            Modal::Running { .. } => {
                // It was sent: the outcome will still arrive and be shown.
                self.flash = Some("the action was already sent; its outcome will be shown".into());
                self.dialog.modal = Some(modal);
            }
            Modal::Confirm { .. } => {
                self.flash = Some("cancelled: nothing sent".into());
                self.dialog.plan.clear();
                self.arming.cancel();
            }
            Modal::Rearm { .. } => self.flash = Some("kept armed (:disarm cancels)".into()),
            Modal::Done { .. } | Modal::Options { .. } => {}
        }
    }

    pub(super) fn on_modal_key(&mut self, key: KeyEvent) {
        let Some(modal) = self.dialog.modal.take() else {
            return;
        };
        if self.dialog.scroll_key(key) {
            self.dialog.modal = Some(modal);
            return;
        }
        if key.code == KeyCode::Esc {
            return self.on_modal_escape(modal);
        }
        self.dialog.modal = Some(match modal {
            Modal::Confirm {
                action,
                preview,
                mut typed,
            } => {
                // A plain `y` only where nothing must be typed.
                let yes_no = preview
                    .as_ref()
                    .is_some_and(|p| p.token.is_none() && p.force_token().is_none());
                match self.dialog.type_key(&mut typed, yes_no, key, self.now) {
                    Typing::Cancel => {
                        self.flash = Some("cancelled: nothing sent".into());
                        self.dialog.plan.clear();
                        self.arming.cancel();
                        return;
                    }
                    Typing::Confirm => return self.confirm(action, preview, typed),
                    // An enter right behind the last character came with a
                    // plain paste (no hand types that fast): nothing is sent.
                    Typing::PastedEnter => {
                        self.flash = Some(
                            "that enter came with pasted text: nothing sent; check what is typed, then press enter".into(),
                        );
                        Modal::Confirm {
                            action,
                            preview,
                            typed,
                        }
                    }
                    Typing::Typed | Typing::Ignored => Modal::Confirm {
                        action,
                        preview,
                        typed,
                    },
                }
            }
            Modal::Running { action } => Modal::Running { action },
            Modal::Options { target } => return self.on_options_key(key, target),
            Modal::Rearm { armed } => return self.on_rearm_key(key, armed),
            Modal::Done { ok, .. } => return self.on_done_key(key, ok),
        });
    }

    /// A key on an outcome: `n` previews the option's next step (after a
    /// step that went through); `u` opens the undo's own guarded preview;
    /// any other key closes, and ends the option's steps.
    fn on_done_key(&mut self, key: KeyEvent, ok: bool) {
        if key.code == KeyCode::Char('n')
            && ok
            && let Some((k, total, next)) = self.dialog.plan.take_next()
        {
            // Every step numbered, as the first was (issue 39).
            self.flash = Some(format!("step {k} of {total}: {}", next.describe()));
            self.preview_action(next);
            return;
        }
        self.dialog.plan.clear();
        if key.code == KeyCode::Char('u')
            && let Some(undo) = self.dialog.last_undo.clone()
        {
            self.preview_action(undo);
        }
    }

    fn confirm(
        &mut self,
        action: Action,
        preview: Option<Box<crate::protocol::action::Preview>>,
        typed: String,
    ) {
        let Some(p) = preview else {
            self.flash = Some("the preview is not ready yet".into());
            self.dialog.modal = Some(Modal::Confirm {
                action,
                preview: None,
                typed,
            });
            return;
        };
        if let Some(r) = &p.refusal
            && p.force_token().is_none()
        {
            self.flash = Some(format!("refused: {r}"));
            self.dialog.modal = Some(Modal::Confirm {
                action,
                preview: Some(p),
                typed: String::new(),
            });
            return;
        }
        if !p.accepts(&typed) {
            self.flash = Some(match &p.refusal {
                Some(r) => format!("refused: {r}"),
                None => format!("does not match: {}", p.confirm_prompt()),
            });
            self.dialog.modal = Some(Modal::Confirm {
                action,
                preview: Some(p),
                typed: String::new(),
            });
            return;
        }
        // `force NODE` typed: the plan keeps the override for its armed
        // step, sealed with it.
        let forced = p.answer(&typed) == crate::protocol::action::Answer::Force;
        self.arming.forced(forced);
        if let Some((a, when)) = self.arming.take_on_confirm()
            && a == action
        {
            self.flash = Some(format!(
                "arming {} {}: sent when the checkpoint is seen",
                a.verb(),
                a.target()
            ));
            self.emit(Effect::Run(Request::Arm {
                action: a,
                when,
                forced,
                cluster: self.cluster.clone(),
            }));
            return;
        }
        // The newest data goes with it: the guard checks it again.
        let data_age = self.data_age().unwrap_or(std::time::Duration::MAX);
        self.emit(Effect::Run(Request::Run {
            preview: p,
            typed,
            cluster: self.cluster.clone(),
            data_age,
        }));
        self.dialog.modal = Some(Modal::Running { action });
    }
}
