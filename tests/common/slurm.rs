//! A private Slurm cluster for the live tests, started from Debian's
//! packages by tests/slurm-lab/up.sh in a temp dir on free loopback ports,
//! and stopped by pid (down.sh) when dropped.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;

pub struct Lab {
    pub dir: tempfile::TempDir,
    pub url: String,
    pub token: String,
    script_dir: PathBuf,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// Four consecutive free ports for the four slurmd.
fn free_block() -> u16 {
    for _ in 0..200 {
        let base = free_port();
        if base > 60_000 {
            continue;
        }
        if (0..4).all(|i| TcpListener::bind(("127.0.0.1", base + i)).is_ok()) {
            return base;
        }
    }
    panic!("no block of 4 free ports");
}

impl Lab {
    pub fn start() -> Lab {
        let dir = tempfile::Builder::new()
            .prefix("ns-slurm-")
            .tempdir()
            .expect("tempdir");
        let script_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/slurm-lab");
        let (ctld, rest, nodes) = (free_port(), free_port(), free_block());
        let out = Command::new("bash")
            .arg(script_dir.join("up.sh"))
            .env("LAB", dir.path())
            .env("CTLD_PORT", ctld.to_string())
            .env("REST_PORT", rest.to_string())
            .env("NODE_PORT0", nodes.to_string())
            .output()
            .expect("run up.sh");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let lab = Lab {
            url: format!("http://127.0.0.1:{rest}"),
            token: stdout
                .lines()
                .last()
                .and_then(|l| l.strip_prefix("SLURM_JWT="))
                .unwrap_or_default()
                .trim()
                .to_string(),
            dir,
            script_dir,
        };
        assert!(
            out.status.success() && !lab.token.is_empty(),
            "up.sh failed: {}\n{}",
            stdout,
            String::from_utf8_lossy(&out.stderr)
        );
        lab
    }

    pub fn conf(&self) -> PathBuf {
        self.dir.path().join("etc/slurm.conf")
    }

    /// Runs a Slurm client command against this cluster; returns stdout.
    pub fn run(&self, cmd: &str, args: &[&str]) -> String {
        let out = Command::new(cmd)
            .args(args)
            .env("SLURM_CONF", self.conf())
            .current_dir(self.dir.path().join("jobs"))
            .output()
            .unwrap_or_else(|e| panic!("run {cmd}: {e}"));
        assert!(
            out.status.success(),
            "{cmd} {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// sbatch; returns the job id.
    pub fn sbatch(&self, args: &[&str]) -> String {
        let mut all = vec!["--parsable", "--wrap", "sleep 600"];
        all.extend_from_slice(args);
        self.run("sbatch", &all).trim().to_string()
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(self.script_dir.join("down.sh"))
            .env("LAB", self.dir.path())
            .status();
    }
}

/// Whether Slurm's packages are here and we are root. Without them the
/// live tests skip with an install hint, except under CI=true.
pub fn available() -> bool {
    let hint =
        "apt-get install slurmctld slurmd slurm-client slurmrestd slurm-wlm-jwt-plugin munge curl";
    let tools = [
        "slurmctld",
        "slurmd",
        "slurmrestd",
        "scontrol",
        "sbatch",
        "curl",
    ];
    if !tools.iter().all(|t| super::require(t, hint)) {
        return false;
    }
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    if !root {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!(
                "the live Slurm tests need root (slurmd runs jobs as other users) and CI=true forbids skipping"
            );
        }
        eprintln!("SKIPPED: the live Slurm tests need root");
    }
    root
}
