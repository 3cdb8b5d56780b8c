//! Armed steps in the console (issue 29): an option whose later step
//! waits ("cordon now, drain after the checkpoint") is confirmed once; when
//! its first step is done the later one is armed in the audit log, shown
//! in the header and on its node, sent by the runner when the engine says
//! it is due (its rules checked again then), and cancelled with `:disarm`.
//! Steps armed before this console started are listed once, and kept or
//! cancelled as the operator says.

use super::{App, Effect, Modal};
use crate::engine::armed::{Due, describe, due};
use crate::model::{Action, Armed, Trigger};
use crate::protocol::action::Request;

/// Snapshots between two readings of the audit log's armed steps.
pub(crate) const ARMED_REFRESH: u32 = 5;

impl App {
    /// `q` with steps armed: said once (nobody sends them once this
    /// console is gone, unless another console or `nightshift follow`
    /// runs); the next `q` quits. True when it is time to quit.
    pub(crate) fn quit_now(&mut self) -> bool {
        if self.armed.is_empty() || self.quit_warned {
            return true;
        }
        self.quit_warned = true;
        self.flash = Some(format!(
            "{} step(s) armed: once this console is gone nobody sends them until a console or `nightshift follow` runs — q again to quit, :disarm to cancel",
            self.armed.len()
        ));
        false
    }

    /// Remembers the step to arm once the option's first step is done.
    pub(super) fn arm_when_done(&mut self, action: Action, when: Trigger) {
        self.arm_after = Some((action, when, false));
    }

    /// After a snapshot: the audit log's armed steps asked for once (they
    /// may be from before this console), then those due sent.
    pub(super) fn armed_after_snapshot(&mut self) {
        if self.replay.on || self.read_only || self.cluster.name.is_empty() {
            return;
        }
        let label = self.cluster_label();
        if self.armed_loaded.as_deref() != Some(label.as_str()) {
            self.armed_loaded = Some(label.clone());
            self.rearm_pending = true;
            self.armed_age = 0;
            self.emit(Effect::Run(Request::Armed { cluster: label }));
            return;
        }
        self.armed_age += 1;
        if self.armed_age >= ARMED_REFRESH && !self.fire_in_flight && !self.rearm_pending {
            self.armed_age = 0;
            self.emit(Effect::Run(Request::Armed { cluster: label }));
            return;
        }
        let asking = matches!(self.modal, Some(Modal::Rearm { .. }));
        if self.armed.is_empty() || self.fire_in_flight || asking || self.rearm_pending {
            return;
        }
        // Only when something is due: the runner re-reads the log then.
        if !self
            .armed
            .iter()
            .any(|a| matches!(due(a, &self.cluster), Due::Fire(_)))
        {
            return;
        }
        self.fire_in_flight = true;
        self.emit(Effect::Run(Request::Fire {
            cluster: self.cluster.clone(),
            data_age: self.data_age().unwrap_or_default(),
            base: self.analysis.as_ref().map(|a| a.base.clone()),
        }));
    }

    /// The cluster as the audit log names it.
    fn cluster_label(&self) -> String {
        self.cluster.name.clone()
    }

    /// The runner's list of armed steps, and what happened.
    pub(super) fn on_armed(&mut self, armed: Vec<Armed>, news: Vec<String>) {
        self.fire_in_flight = false;
        for n in news {
            self.flash = Some(n.clone());
            self.log(n);
        }
        if std::mem::take(&mut self.rearm_pending) && !armed.is_empty() {
            self.modal = Some(Modal::Rearm {
                armed: armed.clone(),
            });
        }
        self.armed = armed;
    }

    /// The option's first step is done: its later step is armed now.
    pub(super) fn arm_after_done(&mut self, ok: bool) {
        let Some((action, when, forced)) = self.arm_after.take() else {
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
            _ => self.modal = Some(Modal::Rearm { armed }),
        }
    }

    /// `:disarm` cancels the armed steps of the node or job on screen (all
    /// of them with `:disarm all`).
    pub(super) fn disarm_command(&mut self, arg: &str) {
        let node = self.screen().target.clone();
        let ids: Vec<String> = self
            .armed
            .iter()
            .filter(|a| {
                arg == "all"
                    || (!arg.is_empty() && a.id.starts_with(arg))
                    || (arg.is_empty() && node.as_deref() == Some(a.action.target()))
            })
            .map(|a| a.id.clone())
            .collect();
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
        self.armed
            .iter()
            .filter(|a| pick(a))
            .map(|a| {
                let status = match due(a, &self.cluster) {
                    Due::Wait(w) => format!("waiting for {w}"),
                    Due::Fire(w) => format!("due: {w}"),
                };
                (describe(a), status)
            })
            .collect()
    }
}
