//! The Prometheus text exposition format, as dcgm-exporter writes it.
//!
//! Hand-written on purpose: of the crates checked here (shared notes,
//! 2026-11), `prometheus-parse` 0.2.5 silently truncates label values that
//! contain `,` or `=`, `openmetrics-parser` 0.5.1 rejects a family whose
//! series carry different label sets (dcgm-exporter adds pod labels only to
//! GPUs assigned to pods) and `prom_text_format_parser` leaves `\"` escapes
//! raw. This one keeps going past a bad line (reporting it), unescapes
//! labels, and is measured against `prometheus-parse` in
//! `cargo bench --bench scrape`.
use crate::error::{Invalid, invalid};

/// One sample line.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: Vec<(String, String)>,
    pub value: f64,
    pub timestamp_ms: Option<i64>,
}

impl Sample {
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// A line that could not be read, with its 1-based number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineError {
    pub line: usize,
    pub message: String,
}

/// Parses a whole scrape. Bad lines are skipped and reported; the rest is
/// kept.
pub fn parse(text: &str) -> (Vec<Sample>, Vec<LineError>) {
    let mut samples = Vec::new();
    let mut errors = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        match parse_line(line) {
            Ok(s) => samples.push(s),
            Err(message) => errors.push(LineError {
                line: i + 1,
                message: message.to_string(),
            }),
        }
    }
    (samples, errors)
}

fn is_name_char(c: char, first: bool) -> bool {
    c.is_ascii_alphabetic() || c == '_' || c == ':' || (!first && c.is_ascii_digit())
}

pub fn parse_line(line: &str) -> Result<Sample, Invalid> {
    let mut chars = line.char_indices().peekable();
    let mut end = 0;
    while let Some(&(i, c)) = chars.peek() {
        if !is_name_char(c, i == 0) {
            break;
        }
        end = i + c.len_utf8();
        chars.next();
    }
    if end == 0 {
        return Err(invalid!("no metric name in {:?}", head(line)));
    }
    let name = line[..end].to_string();
    let mut rest = &line[end..];
    let mut labels = Vec::new();
    if let Some(after) = rest.strip_prefix('{') {
        let (l, remaining) = parse_labels(after)?;
        labels = l;
        rest = remaining;
    }
    let mut parts = rest.split_whitespace();
    let value_text = parts.next().ok_or_else(|| invalid!("{name}: no value"))?;
    let value =
        parse_value(value_text).ok_or_else(|| invalid!("{name}: bad value {value_text:?}"))?;
    let timestamp_ms = match parts.next() {
        Some(t) => Some(
            t.parse()
                .map_err(|_| invalid!("{name}: bad timestamp {t:?}"))?,
        ),
        None => None,
    };
    if parts.next().is_some() {
        return Err(invalid!("{name}: trailing text after the value"));
    }
    Ok(Sample {
        name,
        labels,
        value,
        timestamp_ms,
    })
}

fn parse_value(s: &str) -> Option<f64> {
    match s {
        "+Inf" | "Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        "NaN" => Some(f64::NAN),
        _ => s.parse().ok(),
    }
}

/// Parses `k="v",k2="v2"}` and returns the labels and what follows `}`.
type Labels = Vec<(String, String)>;

fn parse_labels(s: &str) -> Result<(Labels, &str), Invalid> {
    let mut labels = Vec::new();
    let bytes = s.as_bytes();
    let mut i = 0;
    loop {
        while i < bytes.len() && (bytes[i] == b' ' || bytes[i] == b',') {
            i += 1;
        }
        if i >= bytes.len() {
            return Err("unclosed '{'".into());
        }
        if bytes[i] == b'}' {
            return Ok((labels, &s[i + 1..]));
        }
        let start = i;
        while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
            i += 1;
        }
        if i == start {
            return Err(invalid!("bad label name at {:?}", head(&s[start..])));
        }
        let key = s[start..i].to_string();
        while i < bytes.len() && bytes[i] == b' ' {
            i += 1;
        }
        if i >= bytes.len() || bytes[i] != b'=' {
            return Err(invalid!("label {key}: expected '='"));
        }
        i += 1;
        while i < bytes.len() && bytes[i] == b' ' {
            i += 1;
        }
        if i >= bytes.len() || bytes[i] != b'"' {
            return Err(invalid!("label {key}: expected a quoted value"));
        }
        i += 1;
        let mut value = String::new();
        let mut closed = false;
        let mut seg = i;
        while i < bytes.len() {
            match bytes[i] {
                b'\\' if i + 1 < bytes.len() => {
                    value.push_str(&s[seg..i]);
                    // Decode the escaped character as a character: it may
                    // be several bytes long (`\é`). `\` is ASCII, so i + 1
                    // is a character boundary.
                    let next = s[i + 1..].chars().next().unwrap_or('\\');
                    value.push(if next == 'n' { '\n' } else { next });
                    i += 1 + next.len_utf8();
                    seg = i;
                }
                b'"' => {
                    value.push_str(&s[seg..i]);
                    i += 1;
                    closed = true;
                    break;
                }
                _ => i += 1,
            }
        }
        if !closed {
            return Err(invalid!("label {key}: unclosed value"));
        }
        labels.push((key, value));
    }
}

fn head(s: &str) -> String {
    s.chars().take(40).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_with_labels_escapes_and_timestamps() {
        let s = parse_line(r#"DCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="GPU-1",err_msg="a, b=c \"quoted\" \\ end"} 44 1700000000000"#).expect("sample");
        assert_eq!(s.name, "DCGM_FI_DEV_GPU_TEMP");
        assert_eq!(s.label("gpu"), Some("0"));
        assert_eq!(s.label("err_msg"), Some(r#"a, b=c "quoted" \ end"#));
        assert_eq!(s.value, 44.0);
        assert_eq!(s.timestamp_ms, Some(1_700_000_000_000));
        let s = parse_line("up 1").expect("no labels");
        assert!(s.labels.is_empty());
        assert!(parse_line("x{} NaN").expect("nan").value.is_nan());
        assert_eq!(
            parse_line("x{a=\"1\",} +Inf")
                .expect("trailing comma")
                .value,
            f64::INFINITY
        );
    }

    #[test]
    fn bad_lines_are_reported_and_skipped() {
        let (samples, errors) = parse(
            "ok 1\n{gpu=\"0\"} 3\nbad{gpu=\"0\" 1\nalso_ok{a=\"b\"} 2\nnovalue\nx 1 notatime\n",
        );
        assert_eq!(
            samples.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
            ["ok", "also_ok"]
        );
        assert_eq!(
            errors.iter().map(|e| e.line).collect::<Vec<_>>(),
            [2, 3, 5, 6]
        );
    }

    proptest::proptest! {
        #[test]
        fn label_values_round_trip(v in "[ -~\n]{0,40}", x in -1e12f64..1e12) {
            let escaped = v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n");
            let line = format!("m{{k=\"{escaped}\",g=\"1\"}} {x}");
            let s = parse_line(&line).expect("parses");
            proptest::prop_assert_eq!(s.label("k"), Some(v.as_str()));
            proptest::prop_assert_eq!(s.label("g"), Some("1"));
            proptest::prop_assert_eq!(s.value, x);
        }

        #[test]
        fn never_panics_on_garbage(s in "\\PC{0,200}") {
            let _ = parse(&s);
        }

        /// Every escape, followed by any character at all (multi-byte ones
        /// included): never a panic, and the character survives.
        #[test]
        fn any_escape_followed_by_any_character(c in proptest::char::any(), tail in "\\PC{0,8}") {
            let tail = tail.replace(['"', '\\', '\n', '\r'], "");
            let line = format!("m{{k=\"a\\{c}{tail}\"}} 1");
            if let Ok(s) = parse_line(&line) {
                let want = format!("a{}{tail}", if c == 'n' { '\n' } else { c });
                proptest::prop_assert_eq!(s.label("k"), Some(want.as_str()));
            } else {
                // Only a character that ends the line or the value can fail.
                proptest::prop_assert!(c == '\n' || c == '\r' || c.is_whitespace() || c == '"' || c == '\\', "{line:?}");
            }
        }
    }
}
