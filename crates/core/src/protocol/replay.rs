//! What the console asks of a recording's playback, and the times it is
//! asked to go to.

use crate::model::Timestamp;

/// What the console asks of the playback.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ReplayCmd {
    /// Twice as fast, half as fast.
    Faster,
    Slower,
    /// Pause or go on.
    Pause,
    /// To the next event that can open an incident (`incidents::may_open`).
    NextIncident,
    /// To this time (the source's clock).
    Seek(Timestamp),
}

/// Why an `--at` time could not be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AtError {
    #[error(transparent)]
    Duration(#[from] crate::engine::units::UnitError),
    #[error("--at {0:?}: give HH:MM[:SS] (UTC), +DURATION from the start, or Unix seconds")]
    Unreadable(String),
}

/// A time on the command line: Unix seconds, `+90m` from the recording's
/// start, or `HH:MM[:SS]` (UTC) on the day the recording starts (the next
/// day when that is before the start).
pub fn parse_at(s: &str, started: Timestamp) -> Result<Timestamp, AtError> {
    let s = s.trim();
    if let Some(rest) = s.strip_prefix('+') {
        let d = crate::engine::units::parse_duration(rest)?;
        return Ok(started + d as i64);
    }
    if let Ok(t) = s.parse::<i64>() {
        return Ok(t);
    }
    let parts: Vec<&str> = s.split(':').collect();
    let num = |p: &str| p.parse::<i64>().map_err(|_| ());
    let hms = match parts.as_slice() {
        [h, m] => num(h).and_then(|h| num(m).map(|m| (h, m, 0))),
        [h, m, sec] => num(h).and_then(|h| num(m).and_then(|m| num(sec).map(|s| (h, m, s)))),
        _ => Err(()),
    };
    match hms {
        Ok((h, m, sec)) if h < 24 && m < 60 && sec < 60 => {
            let day = started.div_euclid(86_400) * 86_400;
            let t = day + h * 3600 + m * 60 + sec;
            Ok(if t < started - 12 * 3600 {
                t + 86_400
            } else {
                t
            })
        }
        _ => Err(AtError::Unreadable(s.to_string())),
    }
}
