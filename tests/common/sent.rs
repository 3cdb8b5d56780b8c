//! "The calls sent are the calls previewed" (issue 37): a preview's
//! `will send:` lines against what a backend received, as the backend's
//! side recorded it — kube-lab's log of write requests, a recording proxy
//! in front of slurmrestd, a wrapper that logs scontrol's arguments — so a
//! preview cannot promise what its executor does not do.

use serde_json::Value;

/// The `will send:` lines of a command's output, in order.
pub fn previewed(out: &str) -> Vec<String> {
    out.lines()
        .filter_map(|l| l.strip_prefix("will send: "))
        .map(str::to_string)
        .collect()
}

/// One call in a comparable form: an HTTP call with its body parsed and
/// written back by this process (so key order and spacing cannot differ),
/// or a command's arguments as a shell would split them.
#[derive(Debug, Clone, PartialEq)]
pub enum Sent {
    Http {
        method: String,
        path: String,
        body: Option<Value>,
    },
    Command(Vec<String>),
}

impl std::fmt::Display for Sent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Sent::Http {
                method,
                path,
                body: Some(b),
            } => write!(f, "{method} {path} {b}"),
            Sent::Http { method, path, .. } => write!(f, "{method} {path}"),
            Sent::Command(args) => write!(f, "{}", args.join(" ")),
        }
    }
}

const METHODS: [&str; 5] = ["GET", "POST", "PUT", "PATCH", "DELETE"];
const PROGRAMS: [&str; 3] = ["scontrol", "scancel", "sbatch"];

/// A preview line read as a call, or None for a line that says what
/// nightshift will do between calls (a wait, a read).
pub fn call_of(line: &str) -> Option<Sent> {
    let (first, rest) = line.split_once(' ')?;
    if METHODS.contains(&first) && rest.starts_with('/') {
        let (path, body) = match rest.split_once(' ') {
            Some((p, b)) => (p, Some(b)),
            None => (rest, None),
        };
        let body = match body {
            Some(b) => Some(serde_json::from_str(b).ok()?),
            None => None,
        };
        return Some(Sent::Http {
            method: first.into(),
            path: path.into(),
            body,
        });
    }
    let program = first.rsplit('/').next().unwrap_or(first);
    PROGRAMS.contains(&program).then(|| {
        Sent::Command(
            std::iter::once(program.to_string())
                .chain(shell_words(rest))
                .collect(),
        )
    })
}

/// Splits a line as sh would, for the quoting nightshift writes: words
/// apart by spaces, `'…'` quoted, `'\''` a quote inside.
pub fn shell_words(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut quoted = false;
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                quoted = !quoted;
                in_word = true;
            }
            '\\' if !quoted => {
                if let Some(n) = chars.next() {
                    word.push(n);
                }
                in_word = true;
            }
            ' ' if !quoted => {
                if in_word {
                    out.push(std::mem::take(&mut word));
                }
                in_word = false;
            }
            c => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        out.push(word);
    }
    out
}

/// Whether `sent` is what `previewed` says, where the preview writes a
/// placeholder `<…>` for what is only known when sent (a run's name): it
/// stands for one or more characters other than a quote, a slash or a
/// space.
fn matches(previewed: &Sent, sent: &Sent) -> bool {
    let (p, s) = (previewed.to_string(), sent.to_string());
    if !p.contains('<') {
        return previewed == sent;
    }
    glob(p.as_bytes(), s.as_bytes())
}

fn glob(p: &[u8], s: &[u8]) -> bool {
    match p.first() {
        None => s.is_empty(),
        Some(b'<') => {
            let Some(end) = p.iter().position(|&c| c == b'>') else {
                return p == s;
            };
            let rest = &p[end + 1..];
            (1..=s.len())
                .take_while(|&n| !matches!(s[n - 1], b'"' | b'/' | b' '))
                .any(|n| glob(rest, &s[n..]))
        }
        Some(&c) => s.first() == Some(&c) && glob(&p[1..], &s[1..]),
    }
}

/// Asserts that `sent` is exactly the calls `previewed` lists, in order:
/// every call line sent once, nothing else sent; `on a pass: …` and `on a
/// failure: …` lines in a row are alternatives of which exactly one is
/// sent; lines that are not calls (a wait) are skipped.
pub fn assert_sent_as_previewed(what: &str, previewed: &[String], sent: &[Sent]) {
    let mut want: Vec<Vec<Sent>> = Vec::new();
    let mut alternatives = false;
    for line in previewed {
        let (alt, call) = match line.split_once(": ") {
            Some((cond, c)) if cond.starts_with("on a ") => (true, c),
            _ => (false, line.as_str()),
        };
        let Some(call) = call_of(call) else {
            alternatives = false;
            continue;
        };
        match want.last_mut() {
            Some(group) if alt && alternatives => group.push(call),
            _ => want.push(vec![call]),
        }
        alternatives = alt;
    }
    assert!(
        !want.is_empty(),
        "{what}: the preview lists no call:\n{}",
        previewed.join("\n")
    );
    let shown = |v: &[Sent]| {
        v.iter()
            .map(|s| format!("  {s}"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let mismatch = || {
        format!(
            "{what}: sent is not what the preview said\npreviewed:\n  {}\nsent:\n{}",
            previewed.join("\n  "),
            shown(sent)
        )
    };
    assert_eq!(want.len(), sent.len(), "{}", mismatch());
    for (group, s) in want.iter().zip(sent) {
        assert!(group.iter().any(|p| matches(p, s)), "{}", mismatch());
    }
}

/// kube-lab's writes as calls.
pub fn of_kube(writes: &[kubelab::Write]) -> Vec<Sent> {
    writes
        .iter()
        .map(|w| Sent::Http {
            method: w.method.clone(),
            path: w.path.clone(),
            body: w.body.clone(),
        })
        .collect()
}
