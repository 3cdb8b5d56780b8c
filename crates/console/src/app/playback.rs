//! Playing a recording, a component of its own: whether the console plays
//! one, where it is and how it plays (the header's badge), the time `:at
//! +10m` counts from, and what its keys and `:at` ask of it. It asks the
//! loop (`Effect::Replay`); the recording's reader moves.

use crate::model::Timestamp;
use crate::protocol::replay::ReplayCmd;
use crate::protocol::source::Playback;
use crossterm::event::{KeyCode, KeyEvent};

#[derive(Debug, Clone, Default)]
pub struct Replay {
    /// Playing a recording: the keys steer it.
    pub(crate) on: bool,
    /// Where it is and how it plays, as the reader last said.
    state: Option<Playback>,
    /// The first replayed snapshot's time (`:at +10m` counts from it).
    pub(crate) start: Option<Timestamp>,
}

impl Replay {
    pub fn new(on: bool) -> Replay {
        Replay {
            on,
            ..Replay::default()
        }
    }

    /// Where it is and how it plays; `None` live (or before the reader
    /// said).
    pub fn state(&self) -> Option<&Playback> {
        self.state.as_ref()
    }

    /// The reader's news.
    pub(crate) fn said(&mut self, p: Playback) {
        self.state = Some(p);
    }

    /// A snapshot at `t` came after one at `shown`: true when the
    /// recording was sought back (the charts start over).
    pub(crate) fn snapshot(&mut self, t: Timestamp, shown: Timestamp) -> bool {
        if !self.on {
            return false;
        }
        self.start.get_or_insert(t);
        t < shown
    }

    /// Its keys: `>` faster, `<` slower, space pauses, `n` jumps to the
    /// next incident; with what to say. `None`: not one of its keys, or
    /// no recording plays.
    pub(crate) fn key(&self, key: KeyEvent) -> Option<(ReplayCmd, &'static str)> {
        if !self.on {
            return None;
        }
        Some(match key.code {
            KeyCode::Char('>' | '.') => (ReplayCmd::Faster, "faster"),
            KeyCode::Char('<' | ',') => (ReplayCmd::Slower, "slower"),
            KeyCode::Char(' ') => (ReplayCmd::Pause, "pause / play"),
            KeyCode::Char('n') => (ReplayCmd::NextIncident, "to the next incident"),
            _ => return None,
        })
    }

    /// `:at TIME` (`shown`: the snapshot on screen, the reference before
    /// the first came): the seek and what to say, or why not.
    pub(crate) fn at(&self, time: &str, shown: Timestamp) -> Result<(ReplayCmd, String), String> {
        if !self.on {
            return Err(
                ":at moves a replay (nightshift --replay FILE); a live console is always at now"
                    .into(),
            );
        }
        // The `--at` reference: the replay's first snapshot, as far as the
        // console saw it (else the current one).
        let start = self.start.unwrap_or(shown);
        let t = crate::protocol::replay::parse_at(time, start).map_err(|e| e.to_string())?;
        Ok((
            ReplayCmd::Seek(t),
            format!("replay: to {}", crate::text::clock(t)),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crossterm::event::KeyModifiers;

    #[test]
    fn its_keys_and_at_steer_a_recording_and_nothing_live() {
        let key = |c| KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE);
        let live = Replay::new(false);
        assert_eq!(live.key(key('>')), None);
        assert!(
            live.at("+10m", 1_000)
                .is_err_and(|e| e.contains("live console"))
        );
        let mut r = Replay::new(true);
        assert_eq!(r.key(key('>')), Some((ReplayCmd::Faster, "faster")));
        assert_eq!(r.key(key('x')), None);
        // `:at +10m` counts from the first snapshot played, not the shown.
        assert!(!r.snapshot(1_000, 0));
        assert!(!r.snapshot(1_300, 1_000));
        assert_eq!(r.at("+10m", 1_300).map(|a| a.0), Ok(ReplayCmd::Seek(1_600)));
        // Sought back: said, so that the charts start over.
        assert!(r.snapshot(1_100, 1_300));
        assert!(r.at("soon", 1_300).is_err());
    }
}
