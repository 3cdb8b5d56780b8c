//! A private Slurm cluster for the live tests, on free loopback ports in a
//! fresh temp dir, stopped by pid when dropped: Slurm 22.05 from this
//! machine's Debian 12 packages (tests/slurm-lab/up.sh), or Slurm 24.11
//! from Debian 13's inside a chroot made once per machine
//! (chroot-24.11.sh, up-24.11.sh), or Slurm 26.05 from Debian testing's
//! the same way (chroot-26.05.sh, up-24.11.sh with SLURM=26.05).

use std::path::{Path, PathBuf};
use std::process::Command;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slurm {
    /// Debian 12's, on the host: REST v0.0.38.
    V22_05,
    /// Debian 13's, in a chroot: REST v0.0.40, v0.0.41, v0.0.42.
    V24_11,
    /// Debian testing's (forky), in a chroot: REST v0.0.42–v0.0.45.
    V26_05,
}

pub struct Lab {
    pub dir: tempfile::TempDir,
    pub url: String,
    pub token: String,
    pub version: Slurm,
    script_dir: PathBuf,
}

impl Lab {
    /// Slurm 22.05 on the host.
    pub fn start() -> Lab {
        Lab::start_version(Slurm::V22_05)
    }

    pub fn start_version(version: Slurm) -> Lab {
        let script_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/slurm-lab");
        let mut builder = tempfile::Builder::new();
        builder.prefix("ns-slurm-");
        let (dir, script, root) = match version {
            Slurm::V22_05 => (builder.tempdir().expect("tempdir"), "up.sh", None),
            Slurm::V24_11 | Slurm::V26_05 => {
                // The lab lives inside the chroot, so one path names it for both.
                let root = match version {
                    Slurm::V26_05 => chroot_of("26.05"),
                    _ => chroot_of("24.11"),
                }
                .expect("the Slurm chroot");
                let tmp = root.join("tmp");
                (
                    builder.tempdir_in(&tmp).expect("tempdir"),
                    "up-24.11.sh",
                    Some(root),
                )
            }
        };
        let (ctld, rest, nodes) = (super::free_port(), super::free_port(), super::free_ports(4));
        let mut cmd = Command::new("bash");
        cmd.arg(script_dir.join(script))
            .env("LAB", dir.path())
            .env("CTLD_PORT", ctld.to_string())
            .env("REST_PORT", rest.to_string())
            .env("NODE_PORT0", nodes.to_string());
        if let Some(root) = &root {
            cmd.env("ROOT", root);
        }
        if version == Slurm::V26_05 {
            cmd.env("SLURM", "26.05");
        }
        let out = cmd.output().expect("run the lab's up script");
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
            version,
            script_dir,
        };
        assert!(
            out.status.success() && !lab.token.is_empty(),
            "{script} failed: {}\n{}",
            stdout,
            String::from_utf8_lossy(&out.stderr)
        );
        lab
    }

    /// ClusterName in its slurm.conf.
    pub fn cluster_name(&self) -> &'static str {
        match self.version {
            Slurm::V22_05 => "lab",
            Slurm::V24_11 => "lab24",
            Slurm::V26_05 => "lab26",
        }
    }

    /// slurmrestd's unix socket (24.11 labs listen on both).
    pub fn socket_url(&self) -> String {
        format!("unix:{}", self.dir.path().join("run/rest.sock").display())
    }

    /// The scontrol nightshift's executors run: the chroot's, through the
    /// lab's wrapper, on 24.11 (22.05's scontrol cannot talk to it).
    pub fn scontrol(&self) -> String {
        match self.version {
            Slurm::V22_05 => "scontrol".into(),
            Slurm::V24_11 | Slurm::V26_05 => {
                self.dir.path().join("bin/scontrol").display().to_string()
            }
        }
    }

    pub fn conf(&self) -> PathBuf {
        self.dir.path().join("etc/slurm.conf")
    }

    /// Runs a Slurm client command against this cluster; returns stdout.
    pub fn run(&self, cmd: &str, args: &[&str]) -> String {
        let out = self.output(cmd, args);
        assert!(
            out.status.success(),
            "{cmd} {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// [`Lab::run`] whose failure is the caller's to judge (a resume of a
    /// node slurmctld put back already): whether it succeeded.
    #[allow(dead_code)]
    pub fn run_ok(&self, cmd: &str, args: &[&str]) -> bool {
        self.output(cmd, args).status.success()
    }

    fn output(&self, cmd: &str, args: &[&str]) -> std::process::Output {
        match self.version {
            Slurm::V22_05 => Command::new(cmd)
                .args(args)
                .env("SLURM_CONF", self.conf())
                .current_dir(self.dir.path().join("jobs"))
                .output(),
            Slurm::V24_11 | Slurm::V26_05 => Command::new(self.dir.path().join("bin/lab"))
                .arg(cmd)
                .args(args)
                .output(),
        }
        .unwrap_or_else(|e| panic!("run {cmd}: {e}"))
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
        let script = match self.version {
            Slurm::V22_05 => "down.sh",
            Slurm::V24_11 | Slurm::V26_05 => "down-24.11.sh",
        };
        let _ = Command::new("bash")
            .arg(self.script_dir.join(script))
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

/// A Slurm chroot (`version` 24.11 or 26.05), made once per machine by
/// its chroot script (about 20 s and 200 MB from deb.debian.org the first
/// time); its path.
fn chroot_of(version: &str) -> Result<PathBuf, String> {
    static ROOTS: std::sync::Mutex<Vec<(String, Result<PathBuf, String>)>> =
        std::sync::Mutex::new(Vec::new());
    let mut roots = ROOTS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, r)) = roots.iter().find(|(v, _)| v == version) {
        return r.clone();
    }
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/slurm-lab/chroot-{version}.sh"));
    let made = Command::new("bash")
        .arg(script)
        .output()
        .map_err(|e| format!("chroot-{version}.sh: {e}"))
        .and_then(|out| {
            if out.status.success() {
                Ok(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
            } else {
                Err(format!(
                    "chroot-{version}.sh failed: {}",
                    String::from_utf8_lossy(&out.stderr)
                ))
            }
        });
    roots.push((version.to_string(), made.clone()));
    made
}

/// Whether Slurm `version` (24.11, 26.05) can run here: root, and its
/// chroot made or makable (mmdebstrap and the network the first time).
/// Without, its tests skip with the reason, except under CI=true.
fn available_in_chroot(version: &str) -> bool {
    if !available() {
        return false;
    }
    match chroot_of(version) {
        Ok(_) => true,
        Err(e) => {
            if std::env::var("CI").is_ok_and(|v| v == "true") {
                panic!(
                    "the Slurm {version} live tests cannot run and CI=true forbids skipping: {e}"
                );
            }
            eprintln!("SKIPPED: Slurm {version} live tests: {e}");
            false
        }
    }
}

/// Prometheus 3 (Debian testing's 3.5), from the Slurm 26.05 chroot.
pub fn prometheus_3() -> Result<PathBuf, String> {
    let bin = chroot_of("26.05")?.join("usr/bin/prometheus");
    if bin.exists() {
        Ok(bin)
    } else {
        Err(format!("{} is not there", bin.display()))
    }
}

pub fn available_24_11() -> bool {
    available_in_chroot("24.11")
}

pub fn available_26_05() -> bool {
    available_in_chroot("26.05")
}

/// What nightshift sent to a Slurm lab, recorded on the way (issue 37's
/// "sent = previewed"): an HTTP proxy in front of slurmrestd that logs
/// every write request (its path with its query), and wrappers for scontrol, sbatch and scancel that
/// log their arguments before they run the real ones. Point nightshift's
/// `--slurm-url` at `url` and its `[slurm] scontrol` at `scontrol`.
pub struct Recorder {
    pub url: String,
    pub scontrol: String,
    http: std::sync::Arc<std::sync::Mutex<Vec<super::sent::Sent>>>,
    commands: PathBuf,
}

impl Recorder {
    pub fn start(lab: &Lab) -> Recorder {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("proxy port");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let upstream = lab
            .url
            .strip_prefix("http://")
            .expect("an http lab")
            .to_string();
        let http = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = http.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let (upstream, log) = (upstream.clone(), log.clone());
                std::thread::spawn(move || proxy_one(conn, &upstream, &log));
            }
        });
        let bin = lab.dir.path().join("recorded-bin");
        std::fs::create_dir_all(&bin).expect("recorder dir");
        let commands = lab.dir.path().join("recorded-commands");
        let real_dir = match lab.version {
            Slurm::V22_05 => None,
            _ => Some(lab.dir.path().join("bin")),
        };
        for tool in ["scontrol", "sbatch", "scancel"] {
            let real = real_dir.as_ref().map_or(format!("/usr/bin/{tool}"), |d| {
                d.join(tool).display().to_string()
            });
            let script = format!(
                "#!/usr/bin/env bash\n{{ printf '%s' {tool}; for a in \"$@\"; do printf '\\037%s' \"$a\"; done; printf '\\n'; }} >> {log:?}\nexec {real:?} \"$@\"\n",
                log = commands.display().to_string(),
            );
            let path = bin.join(tool);
            std::fs::write(&path, script).expect("wrapper");
            let _ = Command::new("chmod").arg("+x").arg(&path).status();
        }
        Recorder {
            url,
            scontrol: bin.join("scontrol").display().to_string(),
            http,
            commands,
        }
    }

    /// Everything recorded so far: the HTTP writes and the commands, each
    /// in its order. Commands and HTTP calls are kept apart: their order
    /// relative to each other is not recorded here.
    pub fn sent(&self) -> (Vec<super::sent::Sent>, Vec<super::sent::Sent>) {
        let http = self.http.lock().map(|h| h.clone()).unwrap_or_default();
        let commands = std::fs::read_to_string(&self.commands)
            .unwrap_or_default()
            .lines()
            .map(|l| super::sent::Sent::Command(l.split('\x1f').map(str::to_string).collect()))
            .collect();
        (http, commands)
    }
}

/// An HTTP head with its `Connection` header replaced by `close`.
fn closing(head: &str) -> String {
    head.split("\r\n")
        .filter(|l| !l.to_ascii_lowercase().starts_with("connection:"))
        .filter(|l| !l.is_empty())
        .map(|l| format!("{l}\r\n"))
        .collect::<String>()
        + "Connection: close\r\n\r\n"
}

/// Serves one client connection: each request is logged (a write's method,
/// path and body), sent to `upstream` on a connection of its own, and its
/// answer passed back; then the client's connection is closed.
fn proxy_one(
    mut client: std::net::TcpStream,
    upstream: &str,
    log: &std::sync::Mutex<Vec<super::sent::Sent>>,
) {
    use std::io::{Read, Write};
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        match client.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let length: usize = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().ok())?
        })
        .unwrap_or(0);
    while buf.len() < head_end + length {
        match client.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let body = &buf[head_end..head_end + length];
    let mut words = head.split_whitespace();
    let (method, target) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    // Writes, and v0.0.45's requeue, which Slurm defines as a GET.
    if (method != "GET" || target.contains("/requeue"))
        && let Ok(mut l) = log.lock()
    {
        l.push(super::sent::Sent::Http {
            method: method.into(),
            path: target.into(),
            body: serde_json::from_slice(body).ok(),
        });
    }
    // One request per upstream connection, and the client is told so.
    let head = closing(&head);
    let Ok(mut up) = std::net::TcpStream::connect(upstream) else {
        return;
    };
    if up.write_all(head.as_bytes()).is_err() || up.write_all(body).is_err() {
        return;
    }
    let mut answer = Vec::new();
    let _ = up.read_to_end(&mut answer);
    let split = answer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map_or(answer.len(), |i| i + 4);
    let answer_head = closing(&String::from_utf8_lossy(&answer[..split]));
    let _ = client.write_all(answer_head.as_bytes());
    let _ = client.write_all(&answer[split..]);
}
