//! The autopilot on the console (issue 61): its state asked of the runner
//! every few seconds (the running autopilot's last round, and whether a
//! person paused it), shown in the header and on each incident it
//! handles; `P` pauses it for every process on the audit log, at once;
//! `:autopilot resume` resumes it (a deliberate command, not a key).

use super::{App, Effect};
use crate::protocol::action::Request;
use std::time::{Duration, Instant};

/// How often the console asks.
const EVERY: Duration = Duration::from_secs(5);

/// What the console holds of the autopilot.
#[derive(Debug, Clone, Default)]
pub struct Autopilot {
    pub status: Option<crate::model::AutopilotStatus>,
    asked: Option<Instant>,
}

impl App {
    /// Asks the runner for the autopilot's state when it is time (never
    /// while a recording plays: it has no autopilot).
    pub(super) fn ask_autopilot(&mut self, now: Instant) {
        if self.replay.state().is_some() || self.source_name == "replay" {
            return;
        }
        if self
            .autopilot
            .asked
            .is_some_and(|t| now.duration_since(t) < EVERY)
        {
            return;
        }
        self.autopilot.asked = Some(now);
        let cluster = self.cluster.name.clone();
        self.emit(Effect::Run(Request::Autopilot {
            cluster,
            switch: None,
        }));
    }

    /// Pauses (or resumes) the autopilot, recorded in the audit log with
    /// this operator's name.
    pub(super) fn switch_autopilot(&mut self, pause: bool, why: &str) {
        if self.source_name == "replay" {
            self.flash = Some("a recording has no autopilot".into());
            return;
        }
        if !pause && self.read_only {
            self.flash = Some("read-only mode: the autopilot is not resumed from here".into());
            return;
        }
        self.flash = Some(if pause {
            "pausing the autopilot…".into()
        } else {
            "resuming the autopilot…".into()
        });
        let cluster = self.cluster.name.clone();
        self.emit(Effect::Run(Request::Autopilot {
            cluster,
            switch: Some((pause, why.to_string())),
        }));
    }

    /// `:autopilot pause|resume [why]`.
    pub(super) fn autopilot_command(&mut self, rest: &str) {
        let (verb, why) = rest.split_once(' ').unwrap_or((rest, ""));
        match verb {
            "pause" => self.switch_autopilot(true, why.trim()),
            "resume" => self.switch_autopilot(false, why.trim()),
            _ => {
                self.flash =
                    Some(":autopilot pause [why] | :autopilot resume (P pauses it at once)".into())
            }
        }
    }

    /// The runner's answer.
    pub(super) fn on_autopilot(
        &mut self,
        status: crate::model::AutopilotStatus,
        news: Option<String>,
    ) {
        if let Some(n) = news {
            self.flash = Some(n.clone());
            self.log(n);
        }
        // What the running autopilot newly does, in the message log (m):
        // each automatic action is a message a person sees.
        let before = self
            .autopilot
            .status
            .as_ref()
            .and_then(|s| s.round.as_ref())
            .map(|r| r.handling.clone())
            .unwrap_or_default();
        if let Some(r) = &status.round {
            for (id, line) in &r.handling {
                if before.get(id) != Some(line) {
                    self.log(format!("autopilot: {id} {line}"));
                }
            }
        }
        self.autopilot.status = Some(status);
    }

    /// The header's word on the autopilot, and whether it alarms: paused,
    /// running (its modes), or stopped; `None` when none ever ran here.
    pub fn autopilot_badge(&self) -> Option<(String, bool)> {
        let s = self.autopilot.status.as_ref()?;
        if let Some(p) = &s.paused {
            return Some((format!("AUTOPILOT PAUSED by {}", p.by), true));
        }
        let r = s.round.as_ref()?;
        let now = crate::host::now();
        if !r.running_at(now) {
            return Some((
                format!(
                    "autopilot stopped {} ago",
                    crate::text::duration(now - r.at)
                ),
                true,
            ));
        }
        Some((
            match (r.live, r.shadow) {
                (0, s) => format!("autopilot shadow ({s})"),
                (l, 0) => format!("autopilot {l} live"),
                (l, s) => format!("autopilot {l} live, {s} shadow"),
            },
            false,
        ))
    }

    /// What the running autopilot does about incident `id`, when it
    /// handles it (and is running, not paused).
    pub fn autopilot_on(&self, id: &str) -> Option<String> {
        let s = self.autopilot.status.as_ref()?;
        let r = s.round.as_ref()?;
        if !r.running_at(crate::host::now()) {
            return None;
        }
        let line = r.handling.get(id)?;
        Some(match &s.paused {
            Some(p) => format!("paused by {}: {line}", p.by),
            None => line.clone(),
        })
    }
}
