//! Armed steps in the console (issue 29): an option whose later step
//! waits ("cordon now, drain after the checkpoint") is confirmed once; when
//! its first step is done the later one is armed in the audit log, shown
//! in the header and on its node, sent by the runner when the engine says
//! it is due (its rules checked again then), and cancelled with `:disarm`.
//! Steps armed before this console started are listed once, and kept or
//! cancelled as the operator says.

use super::{App, Effect, Modal};
use crate::engine::armed::{Due, describe, due};
use crate::model::{Action, Armed, Cluster, Trigger};
use crate::protocol::action::Request;

/// Snapshots between two readings of the audit log's armed steps.
pub(crate) const ARMED_REFRESH: u32 = 5;

/// The armed steps, a component of its own: the audit log's steps for this
/// cluster as the runner last listed them, the step an option arms once
/// its first step is done or once it is confirmed, and when to ask the
/// runner (list them again, send those due).
#[derive(Debug, Clone, Default)]
pub struct Arming {
    /// The audit log's armed steps for this cluster.
    pub(crate) armed: Vec<Armed>,
    /// To arm once the option's first step is done (forced: `force NODE`
    /// was typed for it).
    after: Option<(Action, Trigger, bool)>,
    /// To arm when the confirmation is typed (the option's first step is
    /// the wait).
    pub(crate) on_confirm: Option<(Action, Trigger)>,
    /// The cluster whose steps were listed.
    loaded: Option<String>,
    /// Snapshots since the steps were last listed.
    age: u32,
    /// The steps from before this console: asked about once listed.
    rearm_pending: bool,
    /// A request to send the due steps is out.
    fire_in_flight: bool,
    /// `q` with steps armed was said once.
    quit_warned: bool,
}

/// What to ask the runner after a snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ask {
    /// The audit log's armed steps for the cluster.
    List,
    /// To send those due (their rules checked again).
    Fire,
}

impl Arming {
    /// The audit log's armed steps for this cluster.
    pub fn steps(&self) -> &[Armed] {
        &self.armed
    }

    /// The step confirming arms, if the dialog open arms one.
    pub fn on_confirm(&self) -> Option<&(Action, Trigger)> {
        self.on_confirm.as_ref()
    }

    /// `q`: what to say first when steps are armed (said once; the next
    /// `q` quits). `None`: quit now.
    fn quit_warning(&mut self) -> Option<String> {
        if self.armed.is_empty() || self.quit_warned {
            return None;
        }
        self.quit_warned = true;
        Some(format!(
            "{} step(s) armed: once this console is gone nobody sends them until a console or `nightshift follow` runs — q again to quit, :disarm to cancel",
            self.armed.len()
        ))
    }

    /// The step to arm once the option's first step is done.
    pub(crate) fn arm_when_done(&mut self, action: Action, when: Trigger) {
        self.after = Some((action, when, false));
    }

    /// The step to arm when the confirmation is typed.
    pub(crate) fn arm_on_confirm(&mut self, action: Action, when: Trigger) {
        self.on_confirm = Some((action, when));
    }

    /// A step is to be armed when the preview open now is confirmed.
    pub(crate) fn pending(&self) -> bool {
        self.after.is_some() || self.on_confirm.is_some()
    }

    /// The option was cancelled: nothing is armed.
    pub(crate) fn cancel(&mut self) {
        self.after = None;
        self.on_confirm = None;
    }

    /// `force NODE` was typed: the step armed later keeps the override.
    pub(crate) fn forced(&mut self, forced: bool) {
        if let Some(later) = self.after.as_mut() {
            later.2 = forced;
        }
    }

    /// The step confirming arms, taken.
    pub(crate) fn take_on_confirm(&mut self) -> Option<(Action, Trigger)> {
        self.on_confirm.take()
    }

    /// After a snapshot of `label`: list the steps once for a cluster (they
    /// may be from before this console) and every few snapshots, or send
    /// those due. `asking`: the question about the steps from before is
    /// open.
    fn after_snapshot(&mut self, label: &str, cluster: &Cluster, asking: bool) -> Option<Ask> {
        if self.loaded.as_deref() != Some(label) {
            self.loaded = Some(label.to_string());
            self.rearm_pending = true;
            self.age = 0;
            return Some(Ask::List);
        }
        self.age += 1;
        if self.age >= ARMED_REFRESH && !self.fire_in_flight && !self.rearm_pending {
            self.age = 0;
            return Some(Ask::List);
        }
        if self.armed.is_empty() || self.fire_in_flight || asking || self.rearm_pending {
            return None;
        }
        // Only when something is due: the runner re-reads the log then.
        if !self
            .armed
            .iter()
            .any(|a| matches!(due(a, cluster), Due::Fire(_)))
        {
            return None;
        }
        self.fire_in_flight = true;
        Some(Ask::Fire)
    }

    /// The runner's list: the steps from before this console to ask about,
    /// the first time.
    fn listed(&mut self, armed: Vec<Armed>) -> Option<Vec<Armed>> {
        self.fire_in_flight = false;
        let ask =
            (std::mem::take(&mut self.rearm_pending) && !armed.is_empty()).then(|| armed.clone());
        self.armed = armed;
        ask
    }

    /// The ids `:disarm ARG` names (`all`, an id's start; none: those on
    /// `open`, the node or job on screen).
    fn disarmed_by(&self, arg: &str, open: Option<&str>) -> Vec<String> {
        self.armed
            .iter()
            .filter(|a| {
                arg == "all"
                    || (!arg.is_empty() && a.id.starts_with(arg))
                    || (arg.is_empty() && open == Some(a.action.target()))
            })
            .map(|a| a.id.clone())
            .collect()
    }

    /// The steps `pick` keeps, each with what it waits for now.
    fn described(&self, cluster: &Cluster, pick: impl Fn(&Armed) -> bool) -> Vec<(String, String)> {
        self.armed
            .iter()
            .filter(|a| pick(a))
            .map(|a| {
                let status = match due(a, cluster) {
                    Due::Wait(w) => format!("waiting for {w}"),
                    Due::Fire(w) => format!("due: {w}"),
                };
                (describe(a), status)
            })
            .collect()
    }
}

impl App {
    /// `q` with steps armed: said once (nobody sends them once this
    /// console is gone, unless another console or `nightshift follow`
    /// runs); the next `q` quits. True when it is time to quit.
    pub(crate) fn quit_now(&mut self) -> bool {
        match self.arming.quit_warning() {
            Some(w) => {
                self.flash = Some(w);
                false
            }
            None => true,
        }
    }

    /// Remembers the step to arm once the option's first step is done.
    pub(super) fn arm_when_done(&mut self, action: Action, when: Trigger) {
        self.arming.arm_when_done(action, when);
    }

    /// After a snapshot: the audit log's armed steps asked for once (they
    /// may be from before this console), then those due sent.
    pub(super) fn armed_after_snapshot(&mut self) {
        if self.replay.on || self.read_only || self.cluster.name.is_empty() {
            return;
        }
        let label = self.cluster_label();
        let asking = matches!(self.dialog.modal, Some(Modal::Rearm { .. }));
        match self.arming.after_snapshot(&label, &self.cluster, asking) {
            Some(Ask::List) => self.emit(Effect::Run(Request::Armed { cluster: label })),
            Some(Ask::Fire) => {
                // The analysis and its snapshot, as one (issue 60); none
                // yet: the next snapshot asks again.
                match self.analysed() {
                    Some((cluster, base)) => self.emit(Effect::Run(Request::Fire {
                        cluster,
                        data_age: self.data_age().unwrap_or_default(),
                        base,
                    })),
                    None => self.arming.fire_in_flight = false,
                }
            }
            None => {}
        }
    }

    /// The cluster as the audit log names it.
    fn cluster_label(&self) -> String {
        self.cluster.name.clone()
    }

    /// The runner's list of armed steps, and what happened.
    pub(super) fn on_armed(&mut self, armed: Vec<Armed>, news: Vec<String>) {
        for n in news {
            self.flash = Some(n.clone());
            self.log(n);
        }
        if let Some(armed) = self.arming.listed(armed) {
            self.dialog.modal = Some(Modal::Rearm { armed });
        }
    }

    /// The option's first step is done: its later step is armed now.
    pub(super) fn arm_after_done(&mut self, ok: bool) {
        let Some((action, when, forced)) = self.arming.after.take() else {
            return;
        };
        if !ok {
            self.flash = Some(format!(
                "the first step failed: {} {} not armed",
                action.verb(),
                action.target()
            ));
            return;
        }
        self.emit(Effect::Run(Request::Arm {
            action,
            when,
            forced,
            cluster: self.cluster.clone(),
        }));
    }

    /// `y` keeps the steps armed before this console; `n` cancels them.
    pub(super) fn on_rearm_key(&mut self, key: crossterm::event::KeyEvent, armed: Vec<Armed>) {
        use crossterm::event::KeyCode;
        match key.code {
            KeyCode::Char('y') => {
                self.flash = Some(format!("{} armed step(s) kept", armed.len()));
            }
            KeyCode::Char('n') => self.emit(Effect::Run(Request::Cancel {
                ids: armed.iter().map(|a| a.id.clone()).collect(),
                cluster: self.cluster_label(),
            })),
            _ => self.dialog.modal = Some(Modal::Rearm { armed }),
        }
    }

    /// `:disarm` cancels the armed steps of the node or job on screen (all
    /// of them with `:disarm all`).
    pub(super) fn disarm_command(&mut self, arg: &str) {
        let ids = self
            .arming
            .disarmed_by(arg, self.screen().target.as_deref());
        if ids.is_empty() {
            self.flash = Some(
                ":disarm cancels the armed steps of the node or job open (:disarm all, :disarm ID): none here"
                    .into(),
            );
            return;
        }
        self.emit(Effect::Run(Request::Cancel {
            ids,
            cluster: self.cluster_label(),
        }));
    }

    /// The armed steps on `node`, each with what it waits for now.
    pub fn armed_on(&self, node: &str) -> Vec<(String, String)> {
        self.armed_where(|a| crate::engine::armed::on_node(a, node))
    }

    /// The armed steps acting on job `id` ("preempt after its checkpoint").
    pub fn armed_for_job(&self, id: &str) -> Vec<(String, String)> {
        self.armed_where(|a| !a.action.on_node() && a.action.target() == id)
    }

    fn armed_where(&self, pick: impl Fn(&Armed) -> bool) -> Vec<(String, String)> {
        self.arming.described(&self.cluster, pick)
    }

    /// The armed steps.
    pub fn arming(&self) -> &Arming {
        &self.arming
    }
}
