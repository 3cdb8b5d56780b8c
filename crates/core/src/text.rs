//! Text helpers shared by the TUI and the CLI: making source strings safe to
//! draw, and formatting times, durations and sizes.

use crate::model::Timestamp;
use std::borrow::Cow;

/// Makes a string from a source safe to put on a terminal: control
/// characters (C0, DEL, C1) become visible stand-ins, so an escape sequence
/// in a job name is shown, never obeyed. ESC shows as `␛`, others as `�`.
pub fn sanitize(s: &str) -> Cow<'_, str> {
    if !s.chars().any(is_unsafe) {
        return Cow::Borrowed(s);
    }
    Cow::Owned(
        s.chars()
            .map(|c| match c {
                '\u{1b}' => '␛',
                c if is_unsafe(c) => '\u{fffd}',
                c => c,
            })
            .collect(),
    )
}

fn is_unsafe(c: char) -> bool {
    c.is_control()
        // Bidirectional overrides can reorder what is drawn around them.
        || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `2h05m`, `17m30s`, `45s`, `3d04h`; negative durations count as zero;
/// past a year, `over a year` (a count of thousands of days says nothing).
pub fn duration(secs: i64) -> String {
    let s = secs.max(0);
    let (d, h, m, sec) = (s / 86_400, s % 86_400 / 3600, s % 3600 / 60, s % 60);
    if d > 365 {
        "over a year".into()
    } else if d > 0 {
        format!("{d}d{h:02}h")
    } else if h > 0 {
        format!("{h}h{m:02}m")
    } else if m > 0 {
        format!("{m}m{sec:02}s")
    } else {
        format!("{sec}s")
    }
}

/// `02:47:30` (UTC).
pub fn clock(ts: Timestamp) -> String {
    chrono::DateTime::from_timestamp(ts, 0)
        .map(|t| t.format("%H:%M:%S").to_string())
        .unwrap_or_else(|| "--:--:--".into())
}

/// A moment as seen from `now`: `02:47:30` today, `12-04 02:47` another
/// day of this year, `2027-01-04 02:47:30Z` in another year — never a bare
/// time that is not today, nor a date without its year that is not this
/// year.
pub fn moment(ts: Timestamp, now: Timestamp) -> String {
    moment_as(ts, now, ["%H:%M:%S", "%m-%d %H:%M", "%Y-%m-%d %H:%M:%SZ"])
}

/// `ts` seen from `now` in one of three formats: today's, another day of
/// this year's, another year's.
fn moment_as(ts: Timestamp, now: Timestamp, formats: [&str; 3]) -> String {
    use chrono::Datelike;
    let (Some(t), Some(n)) = (
        chrono::DateTime::from_timestamp(ts, 0),
        chrono::DateTime::from_timestamp(now, 0),
    ) else {
        return "?".into();
    };
    let f = if t.date_naive() == n.date_naive() {
        formats[0]
    } else if t.year() == n.year() {
        formats[1]
    } else {
        formats[2]
    };
    t.format(f).to_string()
}

/// [`moment`] for a narrow column: `22:19` today, `12-04 02:47` another
/// day of this year, `2027-12-02` in another year (its year, never a
/// month and day a reader takes for this year's).
pub fn moment_short(ts: Timestamp, now: Timestamp) -> String {
    moment_as(ts, now, ["%H:%M", "%m-%d %H:%M", "%Y-%m-%d"])
}

/// `2026-11-30 02:47:30Z`.
pub fn datetime(ts: Timestamp) -> String {
    chrono::DateTime::from_timestamp(ts, 0)
        .map(|t| t.format("%Y-%m-%d %H:%M:%SZ").to_string())
        .unwrap_or_else(|| "?".into())
}

/// Decimal bytes: `1.2 TB`, `150 GB`.
pub fn bytes(b: u64) -> String {
    const UNITS: [&str; 6] = ["B", "kB", "MB", "GB", "TB", "PB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1000.0 && u < UNITS.len() - 1 {
        v /= 1000.0;
        u += 1;
    }
    if v >= 100.0 || u == 0 {
        format!("{v:.0} {}", UNITS[u])
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// A 0–1 fraction as a percentage, `-` when unknown.
pub fn percent(x: Option<f64>) -> String {
    x.map_or_else(|| "-".into(), |v| format!("{:.0}%", v * 100.0))
}

/// Any value or `-` when unknown.
pub fn opt<T: std::fmt::Display>(x: Option<T>) -> String {
    x.map_or_else(|| "-".into(), |v| v.to_string())
}

/// At most `max` characters of the first line of `s`, sanitised, with `…`
/// when cut: how an error body is quoted (never whole).
pub fn one_line(s: &str, max: usize) -> String {
    let first = s.trim().lines().next().unwrap_or("").trim();
    let clean = sanitize(first);
    let mut out: String = clean.chars().take(max).collect();
    if clean.chars().count() > max || s.trim().lines().nth(1).is_some() {
        out.push('…');
    }
    out
}

/// One warning line on stderr, sanitised.
pub fn warn(s: &str) {
    eprintln!("nightshift: warning: {}", sanitize(s));
}

/// `1 GPU`, `8 GPUs`, `? GPUs` when unknown.
pub fn count<T: std::fmt::Display + PartialEq + From<u8>>(n: Option<T>, what: &str) -> String {
    match n {
        Some(n) if n == T::from(1) => format!("1 {what}"),
        Some(n) => format!("{n} {what}s"),
        None => format!("? {what}s"),
    }
}

/// A quantity to one decimal, never `-0.0` (a loss rounds to `0.0`, not
/// to a negative zero).
pub fn tenths(v: f64) -> String {
    let v = if v.abs() < 0.05 { 0.0 } else { v };
    format!("{v:.1}")
}

/// A value that serde could not write as JSON.
#[derive(Debug, thiserror::Error)]
#[error("cannot write JSON: {0}")]
pub struct JsonError(#[from] serde_json::Error);

impl JsonError {
    /// The write's error kind, where writing (not the value) failed.
    pub fn io_kind(&self) -> Option<std::io::ErrorKind> {
        self.0.io_error_kind()
    }
}

impl From<JsonError> for String {
    fn from(e: JsonError) -> String {
        e.to_string()
    }
}

/// JSON for people's terminals and scripts: serde_json escapes the C0
/// controls, and this escapes what it leaves raw — DEL, the C1 controls
/// (U+0080–U+009F: U+009B is a CSI to many terminals) and the bidirectional
/// overrides — as `\uXXXX`. They can only stand inside strings, where the
/// escape means the same character.
pub fn json_pretty<T: serde::Serialize + ?Sized>(v: &T) -> Result<String, JsonError> {
    let mut out = Vec::new();
    json_pretty_to(&mut out, v)?;
    // Only whole characters are written (see `SafeJson`).
    Ok(String::from_utf8(out)
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()))
}

/// [`json_pretty`] written to `w` as it is made, never held whole: a
/// million GPUs' JSON is most of a gigabyte.
pub fn json_pretty_to<W: std::io::Write, T: serde::Serialize + ?Sized>(
    w: W,
    v: &T,
) -> Result<(), JsonError> {
    let mut safe = SafeJson {
        inner: w,
        pending: Vec::new(),
    };
    serde_json::to_writer_pretty(&mut safe, v)?;
    std::io::Write::flush(&mut safe).map_err(serde_json::Error::io)?;
    Ok(())
}

/// A writer that escapes [`json_unsafe`] characters on their way through;
/// a character cut between two writes waits for its rest.
struct SafeJson<W> {
    inner: W,
    pending: Vec<u8>,
}

impl<W: std::io::Write> std::io::Write for SafeJson<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.pending.extend_from_slice(buf);
        let mut rest: &[u8] = &self.pending;
        let mut out: Vec<u8> = Vec::with_capacity(rest.len() + 16);
        loop {
            match std::str::from_utf8(rest) {
                Ok(text) => {
                    escape_into(text, &mut out);
                    rest = &[];
                    break;
                }
                Err(e) => {
                    let (good, after) = rest.split_at(e.valid_up_to());
                    escape_into(std::str::from_utf8(good).unwrap_or_default(), &mut out);
                    match e.error_len() {
                        // Not UTF-8 at all: passed on as it is.
                        Some(n) => {
                            out.extend_from_slice(&after[..n]);
                            rest = &after[n..];
                        }
                        // A character's start: its rest comes next write.
                        None => {
                            rest = after;
                            break;
                        }
                    }
                }
            }
        }
        let keep = rest.to_vec();
        self.inner.write_all(&out)?;
        self.pending = keep;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let rest = std::mem::take(&mut self.pending);
        self.inner.write_all(&rest)?;
        self.inner.flush()
    }
}

fn escape_into(text: &str, out: &mut Vec<u8>) {
    if !text.chars().any(json_unsafe) {
        out.extend_from_slice(text.as_bytes());
        return;
    }
    for c in text.chars() {
        if json_unsafe(c) {
            out.extend_from_slice(format!("\\u{:04x}", c as u32).as_bytes());
        } else {
            let mut b = [0; 4];
            out.extend_from_slice(c.encode_utf8(&mut b).as_bytes());
        }
    }
}

fn json_unsafe(c: char) -> bool {
    matches!(c, '\u{7f}'..='\u{9f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// The columns `s` takes on a terminal (a CJK character two, a
/// combining mark none): what a table pads by, not its `char`s.
pub fn width(s: &str) -> usize {
    unicode_width::UnicodeWidthStr::width(s)
}

/// A cell cut to `max` columns with an ellipsis, for tables: a 10 KB
/// node name must not pad every row to 10 KB.
pub fn cut(s: &str, max: usize) -> Cow<'_, str> {
    if width(s) <= max {
        return Cow::Borrowed(s);
    }
    let mut out = String::new();
    let mut used = 0;
    for c in s.chars() {
        let w = unicode_width::UnicodeWidthChar::width(c).unwrap_or(0);
        if used + w > max.saturating_sub(1) {
            break;
        }
        used += w;
        out.push(c);
    }
    out.push('…');
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_moment_names_its_day_and_year_when_they_are_not_nows() {
        let now = 1_796_006_850; // 2026-11-30 02:47:30Z
        assert_eq!(moment(now + 60, now), "02:48:30");
        assert_eq!(moment(now + 23 * 3600, now), "12-01 01:47");
        assert_eq!(moment(now + 86_400 * 40, now), "2027-01-09 02:47:30Z");
        assert_eq!(duration(86_400 * 3_000), "over a year");
        assert_eq!(duration(86_400 * 3 + 3600), "3d01h");
        // The jobs table's ETA (issue 38): a start a year away, from jobs
        // ahead with no time limit, read as a date of this year before.
        assert_eq!(moment_short(now + 3600, now), "03:47");
        assert_eq!(moment_short(now + 23 * 3600, now), "12-01 01:47");
        assert_eq!(moment_short(now + 86_400 * 365, now), "2027-11-30");
    }

    /// JSON written as it is made is the same text as JSON made whole,
    /// the unsafe characters escaped even when a write cuts one in two.
    #[test]
    fn json_written_in_pieces_escapes_what_a_terminal_would_obey() {
        let v = serde_json::json!({"name": "a\u{9b}2J\u{202e}é\u{7f}\u{1b}", "n": [1, 2]});
        let whole = json_pretty(&v).expect("json");
        assert!(whole.contains(r"a\u009b2J\u202eé\u007f\u001b"), "{whole}");
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&whole).expect("still JSON"),
            v
        );
        // A writer that takes one byte a call: every character is cut.
        struct OneByte(Vec<u8>);
        impl std::io::Write for OneByte {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.0.extend_from_slice(&b[..b.len().min(1)]);
                Ok(b.len().min(1))
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let mut safe = SafeJson {
            inner: OneByte(Vec::new()),
            pending: Vec::new(),
        };
        let text = serde_json::to_string_pretty(&v).expect("raw");
        for b in text.as_bytes() {
            std::io::Write::write_all(&mut safe, &[*b]).expect("write");
        }
        std::io::Write::flush(&mut safe).expect("flush");
        assert_eq!(String::from_utf8(safe.inner.0).expect("utf-8"), whole);
    }

    #[test]
    fn escape_sequences_are_made_inert() {
        let s = sanitize("\u{1b}[31mpwn\u{1b}[0m\u{7}\r\n\u{9b}2J");
        assert_eq!(s, "␛[31mpwn␛[0m\u{fffd}\u{fffd}\u{fffd}\u{fffd}2J");
        assert!(!s.chars().any(|c| c.is_control()));
        assert!(matches!(sanitize("plain-name_1"), Cow::Borrowed(_)));
        assert_eq!(sanitize("a\u{202e}b"), "a\u{fffd}b");
    }

    #[test]
    fn durations_read_like_a_human_wrote_them() {
        assert_eq!(duration(45), "45s");
        assert_eq!(duration(1050), "17m30s");
        assert_eq!(duration(7500), "2h05m");
        assert_eq!(duration(3 * 86_400 + 4 * 3600), "3d04h");
        assert_eq!(duration(-5), "0s");
    }

    #[test]
    fn times_and_sizes() {
        assert_eq!(clock(1_796_006_850), "02:47:30");
        assert_eq!(datetime(1_796_006_850), "2026-11-30 02:47:30Z");
        assert_eq!(bytes(1_200_000_000_000), "1.2 TB");
        assert_eq!(bytes(150_000_000_000), "150 GB");
        assert_eq!(bytes(12), "12 B");
        assert_eq!(percent(Some(0.823)), "82%");
        assert_eq!(percent(None), "-");
    }
}
