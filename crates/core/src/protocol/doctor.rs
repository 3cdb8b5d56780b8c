//! `nightshift doctor`'s lines: what each check found and what to do. The
//! backends check their own scheduler (its token, its commands, its
//! rights); the program checks the rest and prints them all alike.

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Ok,
    /// nightshift works, with less than it could see.
    Warn,
    /// nightshift is blind (or cannot act) here until it is fixed.
    Fail,
}

#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub name: String,
    pub verdict: Verdict,
    pub detail: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

pub fn check(name: &str, verdict: Verdict, detail: String, fix: Option<&str>) -> Check {
    Check {
        name: name.into(),
        verdict,
        detail,
        fix: fix.map(str::to_string),
    }
}
