//! The Xid catalog: what an Xid means and what the on-call should do.
//! Shipped as config/xid.toml (compiled in); a user file may override it.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// What to do about a GPU, from mildest to most drastic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActionClass {
    /// Nothing is wrong.
    None,
    /// Keep running; watch the counters.
    Watch,
    /// Not known: look before acting.
    Investigate,
    /// The application faulted; restart the job, the GPU is fine.
    RestartJob,
    /// Keep running; reset the GPU at the next drain window.
    ResetNextDrain,
    /// The fabric failed under several nodes (a switch, its cables): keep
    /// the GPUs, stop new multi-node work there, page the network owner.
    CordonDomain,
    /// Drain the node and investigate (NVLink, fabric).
    DrainInvestigate,
    /// Drain the node, then reset the GPU.
    DrainResetGpu,
    /// Drain the node, then reboot it.
    DrainReboot,
}

impl ActionClass {
    pub fn as_str(self) -> &'static str {
        match self {
            ActionClass::None => "none",
            ActionClass::Watch => "watch",
            ActionClass::Investigate => "investigate",
            ActionClass::RestartJob => "restart_job",
            ActionClass::ResetNextDrain => "reset_next_drain",
            ActionClass::CordonDomain => "cordon_domain",
            ActionClass::DrainInvestigate => "drain_investigate",
            ActionClass::DrainResetGpu => "drain_reset_gpu",
            ActionClass::DrainReboot => "drain_reboot",
        }
    }

    /// What the on-call reads.
    pub fn advice(self) -> &'static str {
        match self {
            ActionClass::None => "no action",
            ActionClass::Watch => "watch the counters",
            ActionClass::Investigate => "investigate before acting",
            ActionClass::RestartJob => "restart the job; the GPU is fine",
            ActionClass::ResetNextDrain => "reset the GPU at the next drain window",
            ActionClass::CordonDomain => {
                "the fabric, not the GPUs: cordon the domain's nodes for new multi-node work and page its owner (network, power)"
            }
            ActionClass::DrainInvestigate => "drain the node and investigate",
            ActionClass::DrainResetGpu => "drain the node, then reset the GPU",
            ActionClass::DrainReboot => "drain the node, then reboot it",
        }
    }

    /// What fixes the hardware once the node is out of service.
    pub fn remedy(self) -> &'static str {
        match self {
            ActionClass::DrainReboot => "reboot the node",
            ActionClass::DrainResetGpu => "reset the GPU (replace it if the remap failed)",
            ActionClass::DrainInvestigate => "investigate (NVLink, fabric)",
            ActionClass::ResetNextDrain => "reset the GPU",
            ActionClass::CordonDomain => "the network owner fixes the switch or its cables",
            ActionClass::RestartJob => "restart the job",
            ActionClass::Investigate => "investigate",
            ActionClass::Watch | ActionClass::None => "nothing yet",
        }
    }

    /// What running on risks: the consequence of doing nothing for now.
    pub fn running_on(self) -> &'static str {
        match self {
            ActionClass::None => "nothing known",
            ActionClass::Watch => {
                "correctable errors can precede an uncorrectable one, which kills the jobs on the GPU"
            }
            ActionClass::Investigate => "unknown: the cause is not in the catalog",
            ActionClass::RestartJob => "none for the hardware: the GPU is fine",
            ActionClass::ResetNextDrain => {
                "the bad row stays in use until a reset; another error there can become uncorrectable"
            }
            ActionClass::CordonDomain => {
                "multi-node jobs under it stall and die on collective timeouts; draining its nodes takes good GPUs out and fixes nothing"
            }
            ActionClass::DrainInvestigate => {
                "NVLink or fabric errors slow or hang the collectives of every job on the node"
            }
            ActionClass::DrainResetGpu => {
                "more uncorrectable errors kill the jobs on the GPU, and a checkpoint written now may hold corrupt state"
            }
            ActionClass::DrainReboot => {
                "the GPU is gone: its jobs hang or die, and new work placed on the node fails"
            }
        }
    }

    /// A few characters for tables.
    pub fn short(self) -> &'static str {
        match self {
            ActionClass::None => "-",
            ActionClass::Watch => "watch",
            ActionClass::Investigate => "investigate",
            ActionClass::RestartJob => "restart job",
            ActionClass::ResetNextDrain => "reset@drain",
            ActionClass::CordonDomain => "cordon domain",
            ActionClass::DrainInvestigate => "drain+look",
            ActionClass::DrainResetGpu => "drain+reset",
            ActionClass::DrainReboot => "drain+reboot",
        }
    }

    /// Whether the node should stop taking work now.
    pub fn needs_drain(self) -> bool {
        self >= ActionClass::DrainInvestigate
    }

    /// How loudly to show it: anything that needs a drain is critical (and
    /// its node is not capacity for the engine), anything else to do is a
    /// warning. This is the only severity rule: a site's catalog override
    /// changes it everywhere.
    pub fn severity(self) -> crate::model::GpuHealth {
        use crate::model::GpuHealth;
        if self.needs_drain() {
            GpuHealth::Critical
        } else if self == ActionClass::None {
            GpuHealth::Ok
        } else {
            GpuHealth::Warn
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct XidEntry {
    pub code: u32,
    pub name: String,
    pub action: ActionClass,
    /// Only a consequence of another Xid when one is present (Xid 45).
    #[serde(default)]
    pub secondary: bool,
    /// The action when the driver's message says the error was fatal
    /// (Blackwell's NVLink Xids 144–150 say `Fatal` or `Nonfatal`);
    /// `action` is then for a reading without that word.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fatal: Option<ActionClass>,
    /// The action when the message says `Nonfatal`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nonfatal: Option<ActionClass>,
    /// Seconds after a node's boot during which this Xid alone is no
    /// fault: links still training raise it on healthy nodes (Blackwell's
    /// NVLink link-down, Xid 155).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quiet_after_boot_s: Option<i64>,
}

/// What an Xid's driver message says of its severity, where the catalog
/// tells the two apart: the word `Fatal` or `Nonfatal` (`Non-fatal`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Worded {
    Fatal,
    Nonfatal,
}

impl Worded {
    /// The word in a driver message (`…: 149, NETIR_LINK_EVT Fatal XC0 i0
    /// Link 14 (…)`), if it has one.
    pub fn of(message: &str) -> Option<Worded> {
        let words: Vec<&str> = message
            .split(|c: char| !c.is_ascii_alphanumeric())
            .filter(|w| !w.is_empty())
            .collect();
        for (i, w) in words.iter().enumerate() {
            if w.eq_ignore_ascii_case("nonfatal") {
                return Some(Worded::Nonfatal);
            }
            if w.eq_ignore_ascii_case("fatal") {
                let non = i > 0 && words[i - 1].eq_ignore_ascii_case("non");
                return Some(if non { Worded::Nonfatal } else { Worded::Fatal });
            }
        }
        None
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Worded::Fatal => "fatal",
            Worded::Nonfatal => "nonfatal",
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CatalogFile {
    xid: Vec<XidEntry>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XidCatalog {
    entries: BTreeMap<u32, XidEntry>,
}

const SHIPPED: &str = include_str!("../../../../config/xid.toml");

impl Default for XidCatalog {
    fn default() -> Self {
        // The shipped file is tested to parse (see tests below), so this
        // cannot fail at run time; fall back to empty rather than panic.
        XidCatalog::parse(SHIPPED).unwrap_or(XidCatalog {
            entries: BTreeMap::new(),
        })
    }
}

/// Why an Xid catalog could not be read.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    #[error("cannot read xid catalog {}: {source}", path.display())]
    Read {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("xid catalog: {0}")]
    Parse(toml::de::Error),
    #[error("{}: {error}", path.display())]
    In {
        path: std::path::PathBuf,
        error: Box<CatalogError>,
    },
}

impl From<CatalogError> for String {
    fn from(e: CatalogError) -> String {
        e.to_string()
    }
}

impl XidCatalog {
    pub fn parse(text: &str) -> Result<XidCatalog, CatalogError> {
        let file: CatalogFile = toml::from_str(text).map_err(CatalogError::Parse)?;
        Ok(XidCatalog {
            entries: file.xid.into_iter().map(|e| (e.code, e)).collect(),
        })
    }

    /// The shipped catalog with a user file's entries laid over it.
    pub fn with_overrides(path: &Path) -> Result<XidCatalog, CatalogError> {
        let text = std::fs::read_to_string(path).map_err(|e| CatalogError::Read {
            path: path.to_path_buf(),
            source: e,
        })?;
        let user = XidCatalog::parse(&text).map_err(|e| CatalogError::In {
            path: path.to_path_buf(),
            error: Box::new(e),
        })?;
        let mut cat = XidCatalog::default();
        cat.entries.extend(user.entries);
        Ok(cat)
    }

    pub fn get(&self, code: u32) -> Option<&XidEntry> {
        self.entries.get(&code)
    }

    /// The action for an Xid: unknown ones are `Investigate`, never ignored.
    pub fn action(&self, code: u32) -> ActionClass {
        self.get(code)
            .map_or(ActionClass::Investigate, |e| e.action)
    }

    /// The action for an Xid with its driver message, where the catalog
    /// tells fatal from nonfatal by the message's word; without the word
    /// (or a message), the entry's `action`.
    pub fn action_of(&self, code: u32, message: Option<&str>) -> ActionClass {
        let Some(e) = self.get(code) else {
            return ActionClass::Investigate;
        };
        match message.and_then(Worded::of) {
            Some(Worded::Fatal) => e.fatal.unwrap_or(e.action),
            Some(Worded::Nonfatal) => e.nonfatal.unwrap_or(e.action),
            None => e.action,
        }
    }

    /// The word that decided [`XidCatalog::action_of`], where the catalog
    /// tells the two apart for `code` (for the evidence line).
    pub fn worded(&self, code: u32, message: Option<&str>) -> Option<Worded> {
        let e = self.get(code)?;
        if e.fatal.is_none() && e.nonfatal.is_none() {
            return None;
        }
        message.and_then(Worded::of)
    }

    /// Whether this Xid at `time` is a freshly booted node's noise: within
    /// its entry's `quiet_after_boot_s` of the node's `boot`.
    pub fn boot_noise(&self, code: u32, time: i64, boot: Option<i64>) -> bool {
        match (self.get(code).and_then(|e| e.quiet_after_boot_s), boot) {
            (Some(q), Some(b)) => time >= b && time < b + q,
            _ => false,
        }
    }

    pub fn name(&self, code: u32) -> &str {
        self.get(code).map_or("unknown Xid", |e| e.name.as_str())
    }

    pub fn is_secondary(&self, code: u32) -> bool {
        self.get(code).is_some_and(|e| e.secondary)
    }
}

/// An Xid a freshly booted node raises on its own (an NVLink link down
/// while its links train: the catalog's `quiet_after_boot_s`): no fault,
/// no incident. `boot`: its node's boot time.
pub fn boot_noise(
    e: &crate::model::Event,
    boot: Option<crate::model::Timestamp>,
    cat: &XidCatalog,
) -> bool {
    match e.kind {
        crate::model::EventKind::Xid { code } => cat.boot_noise(code, e.time, boot),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_catalog_parses_and_covers_the_required_classes() {
        let cat = XidCatalog::parse(SHIPPED).expect("shipped catalog");
        for code in [13, 31, 43, 45, 68, 69, 94] {
            assert_eq!(cat.action(code), ActionClass::RestartJob, "xid {code}");
        }
        for code in [46, 62, 64, 95, 119, 120, 140, 143] {
            assert_eq!(cat.action(code), ActionClass::DrainResetGpu, "xid {code}");
        }
        assert_eq!(cat.action(79), ActionClass::DrainReboot);
        assert_eq!(cat.action(63), ActionClass::ResetNextDrain);
        assert_eq!(cat.action(92), ActionClass::Watch);
        for code in [74, 155] {
            assert_eq!(
                cat.action(code),
                ActionClass::DrainInvestigate,
                "NVLink xid {code}"
            );
        }
        assert_eq!(cat.action(9999), ActionClass::Investigate);
        assert!(cat.is_secondary(45));
    }

    #[test]
    fn the_message_word_decides_the_blackwell_nvlink_xids() {
        let cat = XidCatalog::default();
        for code in 144..=150 {
            assert!(cat.name(code).starts_with("NVLink "), "xid {code}");
            assert_eq!(cat.action_of(code, None), ActionClass::Investigate);
            assert_eq!(
                cat.action_of(code, Some("149, NETIR_LINK_EVT Fatal XC0 i0 Link 14")),
                ActionClass::DrainResetGpu
            );
            assert_eq!(
                cat.action_of(code, Some("145, RLW_REMAP Nonfatal XC0")),
                ActionClass::Watch
            );
            assert_eq!(
                cat.action_of(code, Some("a non-fatal error")),
                ActionClass::Watch
            );
        }
        // Elsewhere the word changes nothing.
        assert_eq!(
            cat.action_of(79, Some("Nonfatal")),
            ActionClass::DrainReboot
        );
        assert_eq!(Worded::of("FATALITY"), None);
        assert!(cat.boot_noise(155, 1_100, Some(1_000)));
        assert!(!cat.boot_noise(155, 1_700, Some(1_000)));
        assert!(!cat.boot_noise(79, 1_100, Some(1_000)));
    }

    #[test]
    fn a_user_file_overrides_and_extends() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("xid.toml");
        std::fs::write(&path, "[[xid]]\ncode = 13\nname = \"ours\"\naction = \"drain_reset_gpu\"\n[[xid]]\ncode = 999\nname = \"site\"\naction = \"watch\"\n").expect("write");
        let cat = XidCatalog::with_overrides(&path).expect("catalog");
        assert_eq!(cat.action(13), ActionClass::DrainResetGpu);
        assert_eq!(cat.action(999), ActionClass::Watch);
        assert_eq!(cat.action(79), ActionClass::DrainReboot);
        std::fs::write(&path, "[[xid]]\ncode = 1\naction = \"panic\"\n").expect("write");
        assert!(XidCatalog::with_overrides(&path).is_err());
    }
}
