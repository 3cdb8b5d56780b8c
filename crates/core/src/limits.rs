//! Bounds on what nightshift accepts from the outside: generous defaults,
//! each a key of the `[limits]` table, each named in the one-line error
//! that says it was hit. Set once at start-up from the configuration;
//! read anywhere (parsers are deep in the sources and stay pure).

use std::sync::OnceLock;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    /// `limits.max_body_bytes`: the most bytes read of any HTTP answer.
    pub max_body_bytes: u64,
    /// `limits.max_hosts_per_list`: names one Slurm hostlist may expand to.
    pub max_hosts_per_list: u64,
    /// `limits.max_gpus_per_node`: GPUs a node's GRES may claim.
    pub max_gpus_per_node: u32,
    /// `limits.max_series_per_scrape`: samples one endpoint scrape may hold.
    pub max_series_per_scrape: u64,
    /// `limits.max_answer_held_bytes`: what one parsed Prometheus answer
    /// may keep (its labels and samples), checked as it is parsed.
    pub max_answer_held_bytes: u64,
    /// `limits.discovery_timeout_s`: the whole API-version discovery.
    pub discovery_timeout_s: f64,
    /// `limits.max_recording_line_bytes`: the longest line of a recording
    /// read back (a keyframe of the whole cluster is the longest).
    pub max_recording_line_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            // 100,000 jobs from slurmrestd are ~320 MB of JSON.
            max_body_bytes: 1 << 30,
            max_hosts_per_list: 1 << 20,
            max_gpus_per_node: 1024,
            // 10,000 hosts × 8 GPUs × ~40 families is 3.2 M.
            max_series_per_scrape: 5_000_000,
            // 10^6 GPU series (151 MB of JSON) keep about 190 MB.
            max_answer_held_bytes: 512 << 20,
            discovery_timeout_s: 30.0,
            // A keyframe of the 10,000-node, 100,000-job sim is 84 MB of JSON.
            max_recording_line_bytes: 256 << 20,
        }
    }
}

static LIMITS: OnceLock<Limits> = OnceLock::new();

/// Sets the limits for this process; the first call wins.
pub fn set(l: Limits) {
    let _ = LIMITS.set(l);
}

pub fn get() -> Limits {
    LIMITS.get().copied().unwrap_or_default()
}
