//! Helpers shared by the integration tests.
#![allow(dead_code)]

pub mod alertmanager;
pub mod fake;
pub mod kube;
pub mod pagerduty;
pub mod sent;
pub mod situation;
pub mod slurm;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// The binary under test: this build's, or the one `NIGHTSHIFT_TEST_BIN`
/// names (scripts/portable-build.sh runs the command-line tests on the
/// portable build with it).
pub fn bin() -> &'static str {
    static BIN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    BIN.get_or_init(|| {
        std::env::var("NIGHTSHIFT_TEST_BIN")
            .ok()
            .filter(|b| !b.is_empty())
            .unwrap_or_else(|| env!("CARGO_BIN_EXE_nightshift").to_string())
    })
}

/// The DCGM diagnostics stand-in the validation tests run as a node's
/// check (no GPUs here): tests/fixtures/validate/dcgmi.sh.
pub fn dcgmi_stand_in() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/validate/dcgmi.sh")
}

/// Runs nightshift with `args`, logging into `dir`.
pub fn nightshift(dir: &Path, args: &[&str]) -> Output {
    Command::new(bin())
        .args(args)
        .arg("--log-file")
        .arg(dir.join("nightshift.log"))
        .env_remove("NO_COLOR")
        .output()
        .expect("run nightshift")
}

/// Whether a tool the test needs is here. Without it the test is skipped
/// with an install hint, except under CI=true, where a skip is a failure.
pub fn require(tool: &str, install_hint: &str) -> bool {
    let found = Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {tool}"))
        .output()
        .is_ok_and(|o| o.status.success());
    if found {
        return true;
    }
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{tool} is missing and CI=true: a skipped test is a failure here ({install_hint})");
    }
    eprintln!("SKIPPED: {tool} not found; install it with: {install_hint}");
    false
}

/// A loopback port no one listens on, for a server a test starts. Taken
/// below the kernel's ephemeral range (32768+ here), so an outgoing
/// connection cannot take it between this check and the server's bind,
/// and never handed out twice in one test binary, so two labs started in
/// parallel do not pick the same one. (A port from `bind(:0)` is in the
/// ephemeral range: CI saw slurmrestd fail with "Address already in use".)
pub fn free_port() -> u16 {
    free_ports(1)
}

/// `n` consecutive free ports (see `free_port`); returns the first.
pub fn free_ports(n: u16) -> u16 {
    use std::net::TcpListener;
    use std::sync::atomic::{AtomicU16, Ordering};
    const LOW: u16 = 20_000;
    const HIGH: u16 = 32_000;
    // Each test binary starts at its own place in the range.
    static NEXT: AtomicU16 = AtomicU16::new(0);
    let span = HIGH - LOW;
    let _ = NEXT.compare_exchange(
        0,
        LOW + (std::process::id() % u32::from(span)) as u16,
        Ordering::SeqCst,
        Ordering::SeqCst,
    );
    for _ in 0..2_000 {
        let mut base = NEXT.fetch_add(n, Ordering::SeqCst);
        if base < LOW || base + n > HIGH {
            NEXT.store(LOW + n, Ordering::SeqCst);
            base = LOW;
        }
        if (0..n).all(|i| TcpListener::bind(("127.0.0.1", base + i)).is_ok()) {
            return base;
        }
    }
    panic!("no {n} free consecutive ports in {LOW}..{HIGH}");
}

/// Polls `f` until it returns Some or `timeout` passes.
pub fn wait_for<T>(timeout: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if start.elapsed() > timeout {
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A tmux server of the test's own (its own socket), with one window running
/// a plain shell, killed when dropped.
pub struct Tmux {
    socket: PathBuf,
    pub dir: tempfile::TempDir,
}

impl Tmux {
    pub fn start(width: u16, height: u16) -> Tmux {
        let dir = tempfile::tempdir().expect("tempdir");
        let socket = dir.path().join("tmux.sock");
        let t = Tmux { socket, dir };
        let status = Command::new("tmux")
            .arg("-S")
            .arg(&t.socket)
            .args(["-f", "/dev/null", "new-session", "-d", "-s", "t", "-x"])
            .arg(width.to_string())
            .arg("-y")
            .arg(height.to_string())
            .args([
                "env",
                "-u",
                "NO_COLOR",
                "PS1=$ ",
                "bash",
                "--norc",
                "--noprofile",
            ])
            .status()
            .expect("start tmux");
        assert!(status.success(), "tmux new-session failed");
        t
    }

    pub fn cmd(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("tmux");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Types a line into the shell and presses enter.
    pub fn type_line(&self, line: &str) {
        self.cmd(&["send-keys", "-t", "t", "-l", line]);
        self.cmd(&["send-keys", "-t", "t", "Enter"]);
    }

    /// Sends tmux key names (`Enter`, `Escape`, `Tab`, `q`, …).
    pub fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "t"];
        args.extend_from_slice(keys);
        self.cmd(&args);
    }

    pub fn screen(&self) -> String {
        self.cmd(&["capture-pane", "-p", "-t", "t"])
    }

    /// `esc`, landed before the next key (ESC and a key sent at once read
    /// as alt-key).
    pub fn escape(&self) {
        self.keys(&["Escape"]);
        std::thread::sleep(Duration::from_millis(400));
    }

    /// Types a confirmation as a hand does: the text, then — once it shows
    /// in the dialog — enter (an enter in the same burst is a paste, and a
    /// paste never confirms).
    pub fn type_confirmation(&self, text: &str) {
        self.keys(&["-l", text]);
        self.expect(&format!("{text}▏"));
        // A hand's pause: tmux can read the screen and send the enter
        // within the console's paste window (15 ms) of the last character.
        std::thread::sleep(Duration::from_millis(100));
        self.keys(&["Enter"]);
    }

    /// Types a `:` command as a hand does: the prompt, the text once the
    /// prompt shows, enter once the text shows (keys sent in one burst
    /// right after a resize were lost under load).
    pub fn command(&self, text: &str) {
        // The prompt's key again if it never showed (a key lost, or a
        // redraw late, under a loaded machine): sent again only while no
        // prompt shows. If the prompt was open after all, the second colon
        // lands in its text, which the console forgives (`::queue` runs
        // `queue`, as vim's `::q`).
        for _ in 0..3 {
            self.keys(&[":"]);
            let shown = wait_for(Duration::from_secs(5), || {
                self.screen().contains(":▏").then_some(())
            });
            if shown.is_some() {
                break;
            }
        }
        self.expect(":▏");
        self.keys(&["-l", text]);
        self.expect(&format!(":{text}▏"));
        self.keys(&["Enter"]);
    }

    /// Waits until the screen contains `text`; panics with the screen if not.
    pub fn expect(&self, text: &str) -> String {
        self.expect_within(text, Duration::from_secs(15))
    }

    /// `expect`, with a bound of the test's choosing.
    pub fn expect_within(&self, text: &str, within: Duration) -> String {
        wait_for(within, || {
            let s = self.screen();
            s.contains(text).then_some(s)
        })
        .unwrap_or_else(|| panic!("screen never showed {text:?}; it shows:\n{}", self.screen()))
    }

    pub fn pane_flag(&self, flag: &str) -> String {
        self.cmd(&["display", "-p", "-t", "t", &format!("#{{{flag}}}")])
            .trim()
            .to_string()
    }

    pub fn resize(&self, width: u16, height: u16) {
        self.cmd(&[
            "resize-window",
            "-t",
            "t",
            "-x",
            &width.to_string(),
            "-y",
            &height.to_string(),
        ]);
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .arg("kill-server")
            .status();
    }
}

/// The terminal is as a shell left it: main screen, cursor shown, cooked mode.
pub fn assert_restored(t: &Tmux) {
    assert_eq!(
        t.pane_flag("alternate_on"),
        "0",
        "left the alternate screen"
    );
    assert_eq!(t.pane_flag("cursor_flag"), "1", "cursor visible again");
    // MO""DE keeps the typed command from matching what we wait for.
    t.type_line("echo MO\"\"DE=$(stty -a | tr ' ;' '\\n\\n' | grep -x -e icanon -e -icanon -e echo -e -echo | tr '\\n' ,)");
    let s = t.expect("MODE=");
    assert!(
        s.contains("MODE=icanon,echo,"),
        "cooked mode restored:\n{s}"
    );
}
