//! Site policies (`[[policy]]` in the configuration): which incidents a
//! policy takes (a CEL predicate over the incident and its node), what it
//! does (the engine's recommended plan, a named option, or a page), in
//! which mode (shadow: say it; live: send it), how long the condition must
//! hold first, and its own limits. A policy with a typo is refused at
//! start with its line and the reason, and no policy is loaded then.

use serde::Deserialize;

/// One `[[policy]]` as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyFile {
    pub name: toml::Spanned<String>,
    /// A CEL expression over the incident's facts ([`crate::facts`]).
    pub when: toml::Spanned<String>,
    /// `recommended` (the default), an option's name (`drain_now`,
    /// `wait_checkpoint`, …), or `page`.
    #[serde(rename = "do")]
    pub act: Option<String>,
    /// `shadow` (the default) or `live`.
    pub mode: Option<String>,
    /// How long the incident must match before the policy acts (`0s`).
    pub hold: Option<String>,
    /// How many of the node's incidents must have matched within `within`,
    /// this one included (1): "a network alert seen twice in 5 minutes".
    pub seen: Option<u32>,
    /// The window `seen` and the escalation count over (`24h`).
    pub within: Option<String>,
    /// The most actions this policy sends in any hour (6).
    pub max_per_hour: Option<u32>,
    /// The most in any hour on one partition's nodes (unlimited).
    pub max_per_partition_per_hour: Option<u32>,
    /// The ladder: what the first, second, … failure of a node within
    /// `within` gets (option names, `recommended`); past its end the
    /// policy pages. Default: `[do]`.
    pub escalate: Option<Vec<String>>,
}

/// What a policy does with an incident it takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Do {
    /// The option the engine recommends.
    Recommended,
    /// The option of this name, when it is available.
    Option(String),
    /// Nothing sent: a person is paged.
    Page,
}

impl Do {
    pub fn as_str(&self) -> &str {
        match self {
            Do::Recommended => "recommended",
            Do::Option(n) => n,
            Do::Page => "page",
        }
    }
}

/// Shadow: what it would do is said and recorded, nothing sent. Live: sent
/// through the guard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    Shadow,
    Live,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Shadow => "shadow",
            Mode::Live => "live",
        }
    }
}

/// The options the engine offers by name: what `do` and `escalate` take.
pub const OPTION_NAMES: &[&str] = &[
    "drain_now",
    "wait_checkpoint",
    "reset_gpu",
    "drain_reboot",
    "validate_resume",
    "repair",
    "keep_out",
    "drain_broken",
    "domain_remedy",
    "drain_domain",
    "cordon_domain",
];

/// A policy, checked and compiled.
#[derive(Debug, Clone)]
pub struct Policy {
    pub name: String,
    /// The predicate as written.
    pub when: String,
    program: std::sync::Arc<cel::Program>,
    pub mode: Mode,
    /// The ladder's first rung is `do`.
    pub ladder: Vec<Do>,
    pub hold_s: i64,
    pub seen: u32,
    pub within_s: i64,
    pub max_per_hour: u32,
    pub max_per_partition_per_hour: Option<u32>,
    /// Its line in the configuration.
    pub line: usize,
}

impl Policy {
    /// What it does the first time.
    pub fn action(&self) -> &Do {
        self.ladder.first().unwrap_or(&Do::Page)
    }

    /// Whether the facts match; an expression that fails on them (a list
    /// where a number was meant) does not match, and says why.
    pub fn matches(&self, facts: &crate::facts::Facts) -> Result<bool, String> {
        let ctx = facts.context();
        match self.program.execute(&ctx) {
            Ok(cel::Value::Bool(b)) => Ok(b),
            Ok(other) => Err(format!(
                "policy {:?}: `when` gave {other:?}, not true or false",
                self.name
            )),
            Err(e) => Err(format!("policy {:?}: `when` failed: {e}", self.name)),
        }
    }
}

/// Why the policies were refused: the configuration's line and the reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}policy {name:?}: {why}", line.map_or(String::new(), |l| format!("line {l}: ")))]
pub struct PolicyError {
    pub line: Option<usize>,
    pub name: String,
    pub why: String,
}

/// The line (from 1) of byte `at` in `text`.
fn line_of(text: &str, at: usize) -> Option<usize> {
    text.get(..at).map(|t| t.matches('\n').count() + 1)
}

fn duration(s: &Option<String>, default: i64, key: &str) -> Result<i64, String> {
    match s {
        None => Ok(default),
        Some(s) => crate::engine::units::parse_duration(s)
            .map(|v| v as i64)
            .map_err(|e| format!("{key} = {s:?}: {e}")),
    }
}

fn rung(s: &str, key: &str) -> Result<Do, String> {
    match s {
        "recommended" => Ok(Do::Recommended),
        "page" => Ok(Do::Page),
        n if OPTION_NAMES.contains(&n) => Ok(Do::Option(n.to_string())),
        other => Err(format!(
            "{key} = {other:?} is not an option: recommended, page, or one of {}",
            OPTION_NAMES.join(", ")
        )),
    }
}

/// Compiles the CEL predicate: it must parse, name only the facts
/// nightshift gives, and give true or false on them.
fn compile_when(when: &str) -> Result<cel::Program, String> {
    let program = cel::Program::compile(when).map_err(|e| {
        let first = e.errors.first();
        match first {
            Some(p) => format!("`when` does not parse at column {}: {}", p.pos.1 + 1, p.msg),
            None => format!("`when` does not parse: {e}"),
        }
    })?;
    let known: Vec<&str> = crate::facts::VARIABLES.iter().map(|(n, _)| *n).collect();
    if let Some(bad) = program
        .references()
        .variables()
        .into_iter()
        .find(|v| !known.contains(v))
    {
        return Err(format!(
            "`when` names {bad:?}, which is not a fact of an incident (known: {})",
            known.join(", ")
        ));
    }
    match program.execute(&crate::facts::Facts::example().context()) {
        Ok(cel::Value::Bool(_)) => Ok(program),
        Ok(other) => Err(format!(
            "`when` must give true or false; it gives {other:?}"
        )),
        Err(e) => Err(format!("`when` fails on an incident: {e}")),
    }
}

/// Checks and compiles every policy; `text` is the configuration they were
/// read from (for their lines). The first error refuses them all.
pub fn compile(files: &[PolicyFile], text: &str) -> Result<Vec<Policy>, PolicyError> {
    let mut out: Vec<Policy> = Vec::new();
    for f in files {
        let name = f.name.get_ref().trim().to_string();
        let line = line_of(text, f.name.span().start);
        let err = |why: String| PolicyError {
            line,
            name: name.clone(),
            why,
        };
        if name.is_empty() || name.chars().any(|c| c.is_control() || c.is_whitespace()) {
            return Err(err("a name is one word, without spaces".into()));
        }
        if out.iter().any(|p| p.name == name) {
            return Err(err("a second policy of this name".into()));
        }
        let when_line = line_of(text, f.when.span().start).or(line);
        let program = compile_when(f.when.get_ref()).map_err(|why| PolicyError {
            line: when_line,
            name: name.clone(),
            why,
        })?;
        let mode = match f.mode.as_deref() {
            None | Some("shadow") => Mode::Shadow,
            Some("live") => Mode::Live,
            Some(m) => return Err(err(format!("mode = {m:?}: shadow or live"))),
        };
        let first = rung(f.act.as_deref().unwrap_or("recommended"), "do").map_err(err)?;
        let ladder = match &f.escalate {
            None => vec![first],
            Some(l) if l.is_empty() => return Err(err("escalate = []: name one rung".into())),
            Some(l) => l
                .iter()
                .map(|s| rung(s, "escalate"))
                .collect::<Result<Vec<_>, _>>()
                .map_err(err)?,
        };
        let seen = f.seen.unwrap_or(1);
        if seen == 0 {
            return Err(err("seen = 0: an incident is seen once at least".into()));
        }
        let max_per_hour = f.max_per_hour.unwrap_or(6);
        let hold_s = duration(&f.hold, 0, "hold").map_err(err)?;
        let within_s = duration(&f.within, 24 * 3600, "within").map_err(err)?;
        out.push(Policy {
            name,
            when: f.when.get_ref().clone(),
            program: std::sync::Arc::new(program),
            mode,
            ladder,
            hold_s,
            seen,
            within_s,
            max_per_hour,
            max_per_partition_per_hour: f.max_per_partition_per_hour,
            line: line.unwrap_or(0),
        });
    }
    Ok(out)
}
