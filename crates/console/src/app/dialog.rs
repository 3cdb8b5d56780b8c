//! The action flow's state, a component of its own: the dialog open (an
//! action's confirmation, its run, its outcome, a node's or a job's
//! options, the steps armed before this console), how far its body is
//! scrolled, when its confirmation was last typed into, how to undo the
//! last action, and the option being stepped through. What the dialog
//! decides by itself is here: its scroll, what a key does to the text
//! being typed (and an `enter` that came with a paste), the option's next
//! step. The keys that act (a preview asked, a confirmation sent) are
//! `app/act.rs`'s: they need the selection, the analysis and the runner.

use super::Modal;
use crate::model::Action;
use crossterm::event::{KeyCode, KeyEvent};
use std::time::{Duration, Instant};

/// An `enter` this soon after the confirmation's last character came in
/// the same burst of input: a paste, not a hand (a key every ~50 ms at best).
const PASTED_ENTER: Duration = Duration::from_millis(15);

#[derive(Debug, Clone, Default)]
pub struct Dialog {
    /// An action being previewed, confirmed, run, or its result.
    pub(crate) modal: Option<Modal>,
    /// How far the dialog's body is scrolled (its prompt never scrolls).
    pub(crate) scroll: u16,
    /// When the confirmation's text last changed by a key: an `enter` right
    /// behind it came with a (plain, unbracketed) paste.
    typed_at: Option<Instant>,
    /// How to undo the last action.
    pub(crate) last_undo: Option<Action>,
    /// The option being stepped through.
    pub(crate) plan: Plan,
}

/// The option being carried out, step by step.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    /// Its later steps (a domain's cordon is one per node): `n` in the
    /// outcome's dialog previews the next, each behind the guard like any
    /// action.
    pub(crate) next: Vec<Action>,
    /// How many steps it has: the next is step `total - next.len() + 1`.
    pub(crate) total: usize,
    /// An armed option's cost as planned, for its confirmation (the
    /// preview there is of what is sent now).
    pub(crate) note: Option<String>,
}

impl Plan {
    /// An option of `total` steps whose first is previewed now.
    pub(crate) fn start(&mut self, rest: Vec<Action>, total: usize) {
        self.next = rest;
        self.total = total;
    }

    /// No more steps: cancelled, or the outcome closed.
    pub(crate) fn clear(&mut self) {
        self.next.clear();
    }

    /// The next step, with its number and the plan's length.
    pub(crate) fn take_next(&mut self) -> Option<(usize, usize, Action)> {
        if self.next.is_empty() {
            return None;
        }
        let k = self.upcoming();
        Some((k, self.total, self.next.remove(0)))
    }

    /// The number of the step `n` would preview.
    pub fn upcoming(&self) -> usize {
        self.total.saturating_sub(self.next.len()) + 1
    }
}

/// What a key did to the confirmation being typed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Typing {
    /// The text changed.
    Typed,
    /// `enter` (or `y` where a plain yes is asked): confirm the text.
    Confirm,
    /// `n` where a plain yes is asked: nothing is sent.
    Cancel,
    /// An `enter` right behind the last character: it came with a paste,
    /// nothing is sent.
    PastedEnter,
    /// Nothing to do.
    Ignored,
}

impl Dialog {
    /// A dialog opens with its body at the top.
    pub(crate) fn open(&mut self, modal: Modal) {
        self.scroll = 0;
        self.modal = Some(modal);
    }

    /// Arrows and pages scroll the dialog's body; they type nothing. True
    /// when `key` was one.
    pub(crate) fn scroll_key(&mut self, key: KeyEvent) -> bool {
        let by = match key.code {
            KeyCode::Down => 1i32,
            KeyCode::Up => -1,
            KeyCode::PageDown => 10,
            KeyCode::PageUp => -10,
            _ => return false,
        };
        self.scroll = (i32::from(self.scroll) + by).clamp(0, 500) as u16;
        true
    }

    /// `key` into the confirmation's text `typed` at `now`; `yes_no`: the
    /// preview asks a plain `y` (nothing to type).
    pub(crate) fn type_key(
        &mut self,
        typed: &mut String,
        yes_no: bool,
        key: KeyEvent,
        now: Instant,
    ) -> Typing {
        match key.code {
            KeyCode::Char('n') if yes_no => Typing::Cancel,
            KeyCode::Char(c) if yes_no && !c.eq_ignore_ascii_case(&'y') => Typing::Ignored,
            KeyCode::Char(c) if yes_no => {
                *typed = c.to_string();
                Typing::Confirm
            }
            KeyCode::Char(c) => {
                if typed.chars().count() < super::keys::MAX_INPUT {
                    typed.push(c);
                }
                self.typed_at = Some(now);
                Typing::Typed
            }
            KeyCode::Backspace => {
                typed.pop();
                self.typed_at = Some(now);
                Typing::Typed
            }
            KeyCode::Enter
                if self
                    .typed_at
                    .is_some_and(|t| now.saturating_duration_since(t) < PASTED_ENTER) =>
            {
                self.typed_at = None;
                Typing::PastedEnter
            }
            KeyCode::Enter => Typing::Confirm,
            _ => Typing::Ignored,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crossterm::event::KeyModifiers;

    fn key(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    #[test]
    fn an_enter_right_behind_the_typing_is_a_paste_and_a_later_one_confirms() {
        let mut d = Dialog::default();
        let (mut typed, t0) = (String::new(), Instant::now());
        for c in "h100-03".chars() {
            assert_eq!(
                d.type_key(&mut typed, false, key(KeyCode::Char(c)), t0),
                Typing::Typed
            );
        }
        assert_eq!(typed, "h100-03");
        let soon = t0 + Duration::from_millis(5);
        assert_eq!(
            d.type_key(&mut typed, false, key(KeyCode::Enter), soon),
            Typing::PastedEnter
        );
        assert_eq!(
            d.type_key(&mut typed, false, key(KeyCode::Enter), soon),
            Typing::Confirm
        );
        // A plain yes: `n` cancels, other letters do nothing, `y` is typed.
        let mut yn = String::new();
        assert_eq!(
            d.type_key(&mut yn, true, key(KeyCode::Char('n')), t0),
            Typing::Cancel
        );
        assert_eq!(
            d.type_key(&mut yn, true, key(KeyCode::Char('x')), t0),
            Typing::Ignored
        );
        assert_eq!(
            d.type_key(&mut yn, true, key(KeyCode::Char('Y')), t0),
            Typing::Confirm
        );
        assert_eq!(yn, "Y");
    }

    #[test]
    fn a_plan_numbers_its_steps_and_its_scroll_stays_in_bounds() {
        let mut p = Plan::default();
        let cordon = |n: &str| Action::Cordon {
            node: n.into(),
            reason: "leaf".into(),
        };
        p.start(vec![cordon("b"), cordon("c")], 3);
        assert_eq!(p.upcoming(), 2);
        assert_eq!(p.take_next().map(|s| (s.0, s.1)), Some((2, 3)));
        assert_eq!(p.take_next().map(|s| (s.0, s.2)), Some((3, cordon("c"))));
        assert_eq!(p.take_next(), None);
        let mut d = Dialog::default();
        assert!(d.scroll_key(key(KeyCode::PageUp)));
        assert_eq!(d.scroll, 0);
        for _ in 0..60 {
            d.scroll_key(key(KeyCode::PageDown));
        }
        assert_eq!(d.scroll, 500);
        assert!(!d.scroll_key(key(KeyCode::Char('j'))));
    }
}
