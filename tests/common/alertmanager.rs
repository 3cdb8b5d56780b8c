//! Debian's Alertmanager (`prometheus-alertmanager`), started on a loopback
//! port of the test's own with a receiver that sends nowhere, its data in
//! the test's directory; killed on drop. What nightshift posts to it is
//! read back through its own API v2 and its metrics.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub const BIN: &str = "prometheus-alertmanager";

pub struct Alertmanager {
    child: Child,
    pub port: u16,
}

impl Drop for Alertmanager {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Alertmanager {
    /// Started and ready, or `None` (said) when Debian's package is not
    /// here and CI is not true.
    pub fn start(dir: &std::path::Path) -> Option<Alertmanager> {
        if !super::require(BIN, "apt-get install prometheus-alertmanager") {
            return None;
        }
        let conf = dir.join("alertmanager.yml");
        std::fs::write(
            &conf,
            "route:\n  receiver: \"null\"\nreceivers:\n  - name: \"null\"\n",
        )
        .expect("alertmanager.yml");
        let port = super::free_port();
        let child = Command::new(BIN)
            .arg(format!("--config.file={}", conf.display()))
            .arg(format!("--storage.path={}", dir.join("am-data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            // No gossip: one Alertmanager, no port of the cluster's.
            .arg("--cluster.listen-address=")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("alertmanager.log")).expect("log"))
            .spawn()
            .expect("start alertmanager");
        let am = Alertmanager { child, port };
        super::wait_for(Duration::from_secs(20), || {
            (am.get("/-/ready").as_deref() == Some("OK")).then_some(())
        })
        .expect("alertmanager ready");
        Some(am)
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// `GET path`'s body, `None` when it cannot be had.
    pub fn get(&self, path: &str) -> Option<String> {
        let out = Command::new("curl")
            .args(["-sf", "--max-time", "5"])
            .arg(format!("{}{path}", self.url()))
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    /// The alerts it holds as firing (resolved ones it no longer lists).
    pub fn alerts(&self) -> Vec<serde_json::Value> {
        self.get("/api/v2/alerts")
            .and_then(|b| serde_json::from_str(&b).ok())
            .unwrap_or_default()
    }

    /// How many firing alerts it has been sent through API v2 (its
    /// `alertmanager_alerts_received_total`).
    pub fn received_firing(&self) -> u64 {
        self.get("/metrics")
            .unwrap_or_default()
            .lines()
            .filter(|l| {
                l.starts_with("alertmanager_alerts_received_total")
                    && l.contains("status=\"firing\"")
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .sum()
    }
}
