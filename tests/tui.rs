//! End to end: the real binary in a real pty (tmux), driven by key presses,
//! read back from the screen; and the terminal restored afterwards.

mod common;

use common::{Tmux, assert_restored, bin, require, wait_for};
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

fn start(t: &Tmux, term: &str, extra: &str) {
    let log = t.dir.path().join("nightshift.log");
    // The operator, as the console and the audit name them.
    t.type_line(&format!(
        "TERM={term} USER=oncall {} --log-file {} {extra}; echo EXIT=$?",
        bin(),
        log.display()
    ));
    t.expect("│ sim-16 │");
}

/// The console with an audit log in the test's dir, `D` pressed on the
/// Xid 79 incident: the drain's preview, waiting for the typed name.
fn drain_preview_of_h100_03(t: &Tmux) -> std::path::PathBuf {
    let audit = t.dir.path().join("audit.jsonl");
    start(
        t,
        "tmux-256color",
        &format!("--audit-log {}", audit.display()),
    );
    t.keys(&[":"]);
    t.keys(&["-l", "incidents"]);
    t.keys(&["Enter"]);
    t.expect("GPU has fallen off the bus");
    // One key opens the preview with the blast radius and the exact call.
    t.keys(&["D"]);
    t.expect("type h100-03 and press enter to confirm");
    audit
}

#[test]
fn incident_to_node_to_job_with_keys_then_quit() {
    if !require("tmux", "apt-get install tmux") {
        return;
    }
    let t = Tmux::start(100, 30);
    start(&t, "tmux-256color", "");
    // The Xid 79 GPU is marked on the node grid, and the node too.
    t.expect("h100-03 ▁▁▁X▁▁▁▁ x79");
    assert_eq!(t.pane_flag("alternate_on"), "1");

    t.keys(&[":"]);
    t.keys(&["-l", "incidents"]);
    t.keys(&["Enter"]);
    t.expect("incidents (newest first");
    t.expect("GPU has fallen off the bus");
    t.keys(&["Enter"]);
    t.expect("node h100-03");
    t.keys(&["Enter"]);
    t.expect("h100-03 gpu 3");
    t.expect("79 at 2026-11-30 02:47:00Z");
    t.keys(&["Enter"]);
    t.expect("job 4700");
    t.expect("llm-pretrain-70b");
    t.expect("size 1.2 TB");

    // Filter, help, back.
    t.keys(&["Escape", "Escape", "Escape", "Escape"]);
    t.keys(&[":"]);
    t.keys(&["-l", "jobs"]);
    t.keys(&["Enter", "/"]);
    t.keys(&["-l", "vision"]);
    let s = t.expect("jobs /vision");
    assert!(!s.contains("llm-pretrain"), "filtered out:\n{s}");
    t.keys(&["Enter", "?"]);
    t.expect("any other key closes");
    t.escape();

    t.keys(&["q"]);
    t.expect("EXIT=0");
    assert_restored(&t);
}

#[test]
fn sigterm_and_sighup_restore_the_terminal() {
    if !require("tmux", "apt-get install tmux") {
        return;
    }
    for (signal, term) in [("TERM", "screen-256color"), ("HUP", "tmux-256color")] {
        let t = Tmux::start(90, 26);
        start(&t, term, "--read-only");
        t.expect("READ-ONLY");
        let log = t.dir.path().join("nightshift.log");
        let status = Command::new("pkill")
            .args([&format!("-{signal}"), "-f", &log.display().to_string()])
            .status()
            .expect("pkill");
        assert!(status.success(), "found the process to signal");
        t.expect("EXIT=0");
        assert_restored(&t);
        let logged = std::fs::read_to_string(&log).expect("log file");
        assert!(
            logged.contains(&format!("SIG{signal}")),
            "the log file got the log: {logged}"
        );
    }
}

#[test]
fn a_small_terminal_gets_a_notice_and_recovers() {
    if !require("tmux", "apt-get install tmux") {
        return;
    }
    let t = Tmux::start(100, 30);
    start(&t, "tmux-256color", "");
    t.resize(40, 10);
    t.expect("too small");
    t.resize(80, 24);
    t.expect("nodes 1-16 of 16");
    t.keys(&["C-c"]);
    t.expect("EXIT=0");
    assert_restored(&t);
}

#[test]
fn a_zero_by_zero_pty_does_not_panic() {
    if !require("script", "apt-get install bsdutils") {
        return;
    }
    // `script` runs nightshift in a fresh pty; with no terminal on our side
    // the pty keeps its initial 0x0 size.
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("nightshift.log");
    let cmd = format!("{} --log-file {}", bin(), log.display());
    let mut child = Command::new("script")
        .args(["-qfec", &cmd, "/dev/null"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("script");
    std::thread::sleep(Duration::from_millis(1500));
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(b"q").expect("send q");
    let status = wait_for(Duration::from_secs(10), || child.try_wait().ok().flatten());
    let Some(status) = status else {
        let _ = child.kill();
        panic!("nightshift did not quit in a 0x0 pty");
    };
    let out = child.wait_with_output().expect("output");
    let all =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(!all.contains("panicked"), "{all}");
    assert!(status.success(), "exit {status:?}: {all}");
}

#[test]
fn one_key_from_an_xid79_incident_to_a_drained_node() {
    if !require("tmux", "apt-get install tmux") {
        return;
    }
    let t = Tmux::start(110, 32);
    let audit = drain_preview_of_h100_03(&t);
    t.expect("drain h100-03 with reason `xid79 GPU3` and requeue its jobs");
    t.expect("dies: 4700 llm-pretrain-70b");
    t.expect("type h100-03 and press enter to confirm");
    // A wrong name sends nothing.
    t.type_confirmation("h100-3");
    t.expect("does not match");
    assert!(!audit.exists(), "nothing audited, nothing sent");
    // Esc cancels everything.
    t.keys(&["Escape"]);
    t.expect("cancelled: nothing sent");
    // The real thing: one key, the node's name, enter.
    t.keys(&["D"]);
    t.expect("type h100-03 and press enter to confirm");
    t.type_confirmation("h100-03");
    t.expect("done and verified: drain h100-03 ✓; requeue 4700 ✓");
    t.expect("undo: nightshift resume h100-03");
    // The incident follows: drained, awaiting its remedy.
    t.keys(&["Escape"]);
    t.expect("[awaiting remedy] drained by oncall");
    let log = std::fs::read_to_string(&audit).expect("audit log");
    assert_eq!(log.lines().count(), 2, "intent and outcome:\n{log}");
    // The drain is the incident's stage, not an incident of its own: the
    // overview shows no NODE DRAIN of h100-03 (a100-08's, from before the
    // night, is its own).
    t.keys(&["Escape"]);
    let screen = t.expect("awaiting remedy");
    assert!(
        !screen
            .lines()
            .any(|l| l.contains("h100-03") && l.contains("NODE DRAIN")),
        "{screen}"
    );
    t.keys(&["q"]);
    t.expect("EXIT=0");
    assert_restored(&t);
}

#[test]
fn options_side_by_side_then_the_chosen_ones_preview() {
    if !require("tmux", "apt-get install tmux") {
        return;
    }
    let t = Tmux::start(120, 40);
    let audit = t.dir.path().join("audit.jsonl");
    start(
        &t,
        "tmux-256color",
        &format!("--audit-log {}", audit.display()),
    );
    t.keys(&[":"]);
    t.keys(&["-l", "node h100-03"]);
    t.keys(&["Enter"]);
    // The node's answers carry the recommended option…
    t.expect("▶ drain now and requeue");
    // …and O compares them all, the hung gang's waiting without a number.
    t.keys(&["O"]);
    t.expect("hung: 4700");
    t.expect("terms unknown: job 4700 is hung: it will not checkpoint");
    // 2 opens the second option's guarded preview: its first step.
    t.keys(&["2"]);
    t.expect("cordon h100-03");
    t.expect("press y to confirm");
    t.keys(&["Escape"]);
    t.expect("cancelled: nothing sent");
    // enter on the options opens the recommended one: the drain.
    t.keys(&["O"]);
    t.expect("recommended: job(s) 4700 already hung");
    t.keys(&["Enter"]);
    t.expect("type h100-03 and press enter to confirm");
    // Wait for the escape to land before the next key: ESC then `q` at
    // once reads as alt-q.
    t.keys(&["Escape"]);
    t.expect("cancelled: nothing sent");
    assert!(!audit.exists(), "nothing sent");
    t.keys(&["q"]);
    t.expect("EXIT=0");
    assert_restored(&t);
}

#[test]
fn read_only_binds_no_action_key() {
    if !require("tmux", "apt-get install tmux") {
        return;
    }
    let t = Tmux::start(100, 30);
    let audit = t.dir.path().join("audit.jsonl");
    start(
        &t,
        "tmux-256color",
        &format!("--read-only --audit-log {}", audit.display()),
    );
    t.keys(&[":"]);
    t.keys(&["-l", "incidents"]);
    t.keys(&["Enter"]);
    t.expect("GPU has fallen off the bus");
    t.keys(&["D"]);
    t.expect("read-only mode: action keys are off");
    assert!(!audit.exists());
    t.keys(&["q"]);
    t.expect("EXIT=0");
}

/// The whole 3am path at 80×24, the size of a phone's SSH client: the
/// Xid 79 on the first screen, `D`, the preview, the node's name typed, the
/// outcome, and the undo — every prompt visible at every step.
#[test]
fn the_3am_path_at_80x24_with_every_prompt_visible() {
    if !require("tmux", "apt-get install tmux") {
        return;
    }
    let t = Tmux::start(80, 24);
    let audit = t.dir.path().join("audit.jsonl");
    start(
        &t,
        "tmux-256color",
        &format!("--audit-log {}", audit.display()),
    );
    // The first screen: the Xid 79 with what to do, selected.
    let s = t.expect("XID 79");
    assert!(s.contains("drain+reboot"), "{s}");
    assert!(footer_of(&s).contains("<D> drain"), "{s}");
    // One key: the preview, its prompt pinned, the footer the prompt too.
    t.keys(&["D"]);
    let s = t.expect("type h100-03 and press enter to confirm");
    assert!(s.contains("dies: 4700 llm-pretrain-70b"), "{s}");
    assert!(s.contains("esc cancels"), "{s}");
    let footer = footer_of(&s);
    assert!(
        footer.contains("type h100-03") && footer.contains("cancel"),
        "{footer}"
    );
    // A wrong name: said inside the dialog, nothing sent.
    t.type_confirmation("h100-3");
    t.expect("does not match");
    assert!(!audit.exists(), "nothing sent");
    // The right name.
    t.type_confirmation("h100-03");
    let s = t.expect("done and verified: drain h100-03 ✓; requeue 4700 ✓");
    // Wrapped in the dialog at 80 columns, whole.
    assert!(
        s.contains("undo: nightshift") && s.contains("resume h100-03"),
        "{s}"
    );
    assert!(footer_of(&s).contains("<u> undo"), "{s}");
    // The undo, through its own preview: the node's health is unresolved,
    // so it takes the name, and says why.
    t.keys(&["u"]);
    let s = t.expect("type h100-03 and press enter to confirm");
    assert!(s.contains("resume h100-03"), "{s}");
    assert!(s.contains("health is unresolved"), "{s}");
    t.keys(&["Escape"]);
    t.expect("cancelled: nothing sent");
    t.keys(&["q"]);
    t.expect("EXIT=0");
    assert_restored(&t);
    let log = std::fs::read_to_string(&audit).expect("audit");
    assert_eq!(log.lines().count(), 2, "one drain: intent and outcome");
}

/// The screen's last non-empty line: the footer.
fn footer_of(screen: &str) -> String {
    screen
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or_default()
        .to_string()
}

#[test]
fn a_night_recorded_in_the_console_reports_its_drain_and_replays() {
    if !require("tmux", "apt-get install tmux") {
        return;
    }
    let t = Tmux::start(120, 36);
    let audit = t.dir.path().join("audit.jsonl");
    let rec = t.dir.path().join("night.nsrec");
    start(
        &t,
        "tmux-256color",
        &format!(
            "--speed 10 --audit-log {} --record {}",
            audit.display(),
            rec.display()
        ),
    );
    t.keys(&[":"]);
    t.keys(&["-l", "node h100-03"]);
    t.keys(&["Enter"]);
    t.keys(&["D"]);
    t.expect("type h100-03 and press enter to confirm");
    t.type_confirmation("h100-03");
    t.expect("done and verified: drain h100-03 ✓; requeue 4700 ✓");
    // The recorder writes the audit with the next snapshots, flushed every
    // second.
    std::thread::sleep(Duration::from_secs(3));
    t.keys(&["Escape"]);
    // ESC then `q` at once reads as alt-q: let the escape land first.
    std::thread::sleep(Duration::from_millis(400));
    t.keys(&["q"]);
    t.expect("EXIT=0");
    let out = Command::new(bin())
        .args(["report", rec.to_str().expect("path"), "-o", "json"])
        .output()
        .expect("report");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let incidents = r["incidents"].as_array().expect("incidents");
    let xid79 = incidents
        .iter()
        .find(|i| i["xid"] == 79)
        .expect("the Xid 79 is named");
    assert_eq!(xid79["node"], "h100-03");
    assert_eq!(xid79["first_action"]["action"], "drain");
    // One name for who acted: the report's is the console's (`drained by oncall`).
    assert_eq!(xid79["first_action"]["operator"], "oncall", "{xid79:#}");
    assert!(
        xid79["first_action"]["outcome"]
            .as_str()
            .is_some_and(|o| o.starts_with("verified")),
        "{xid79:#}"
    );
    let to_action = xid79["time_to_action_s"].as_i64().expect("timed");
    assert!(to_action > 0, "{to_action}");
    assert_eq!(xid79["jobs"][0]["fate"], "requeued");
    // The gang it stalled is its evidence (the stall was seen before the
    // drain), not an incident of its own.
    assert!(!incidents.iter().any(|i| i["kind"] == "stall"), "{r:#}");
    assert_eq!(xid79["burning_gpu_hours_per_hour"], 32.0, "{xid79:#}");
    assert_eq!(xid79["jobs"][0]["id"], "4700");
    assert!(
        r["gpu_hours_lost"].as_f64().is_some_and(|h| h > 1.0),
        "{r:#}"
    );
    assert_eq!(r["actions"][0]["target"], "h100-03");

    // Played back: read-only, the playback keys, the drain happens again.
    t.type_line(&format!(
        "TERM=tmux-256color {} --log-file {} --replay {} --speed 4; echo EXIT=$?",
        bin(),
        t.dir.path().join("replay.log").display(),
        rec.display()
    ));
    t.expect("READ-ONLY");
    t.expect("replay");
    t.keys(&["D"]);
    t.expect("read-only mode: action keys are off");
    t.keys(&[":"]);
    t.keys(&["-l", "incidents"]);
    t.keys(&["Enter"]);
    t.keys(&["n"]);
    t.expect("replay: to the next incident");
    t.keys(&[">"]);
    t.expect("replay: faster");
    t.expect_within("drained by oncall", Duration::from_secs(20));
    // The night's health numbers, over the replayed part.
    t.keys(&[":"]);
    t.keys(&["-l", "kpis 1h"]);
    t.keys(&["Enter"]);
    t.expect("scheduler health, last 1h00m");
    t.expect("requeues:          1");
    t.keys(&["Escape"]);
    std::thread::sleep(Duration::from_millis(400));
    t.keys(&["q"]);
    t.expect("EXIT=0");
    assert_restored(&t);
}

/// The typed confirmation under a paste: bracketed (tmux's `paste-buffer
/// -p`, as a terminal pastes once the console asked for it) the newline is
/// text; plain (the name and a carriage return in one burst, as a terminal
/// without bracketed paste sends it) the enter is refused. Nothing is sent
/// either way; the operator's own enter then confirms.
#[test]
fn a_paste_into_the_confirmation_never_drains() {
    if !require("tmux", "apt-get install tmux") {
        return;
    }
    let t = Tmux::start(110, 32);
    let audit = drain_preview_of_h100_03(&t);
    t.cmd(&["set-buffer", "h100-03\n"]);
    t.cmd(&["paste-buffer", "-p", "-t", "t"]);
    t.expect("h100-03\u{fffd}▏");
    std::thread::sleep(Duration::from_millis(800));
    assert!(!audit.exists(), "a bracketed paste sent the drain");
    t.expect("type h100-03 and press enter to confirm");
    t.keys(&["Escape"]);
    t.expect("cancelled: nothing sent");
    t.keys(&["D"]);
    t.expect("type h100-03 and press enter to confirm");
    t.keys(&["-l", "h100-03\r"]);
    t.expect("that enter came with pasted text");
    assert!(!audit.exists(), "a plain paste sent the drain");
    t.keys(&["Enter"]);
    t.expect("done and verified: drain h100-03 ✓");
    t.escape();
    t.keys(&["q"]);
    t.expect("EXIT=0");
    assert_restored(&t);
}

/// ctrl-z (and SIGTSTP from outside) hands the terminal back cooked, as any
/// full-screen program does; `fg` takes it again and redraws.
#[test]
fn ctrl_z_and_sigtstp_suspend_and_fg_redraws() {
    if !require("tmux", "apt-get install tmux") {
        return;
    }
    for how in ["C-z", "TSTP"] {
        let t = Tmux::start(100, 30);
        let log = t.dir.path().join("nightshift.log");
        t.type_line(&format!(
            "TERM=tmux-256color {} --log-file {}",
            bin(),
            log.display()
        ));
        t.expect("│ sim-16 │");
        if how == "C-z" {
            t.keys(&["C-z"]);
        } else {
            let status = Command::new("pkill")
                .args(["-TSTP", "-f", &log.display().to_string()])
                .status()
                .expect("pkill");
            assert!(status.success(), "found the process to signal");
        }
        t.expect("Stopped");
        assert_restored(&t);
        // `; echo` on the same line: the shell says the exit status as the
        // console ends (a line typed after `q` could reach the console, in
        // raw mode until it has quit, and be lost under load).
        t.type_line("fg; echo DONE=$?");
        t.expect("│ sim-16 │");
        assert_eq!(
            t.pane_flag("alternate_on"),
            "1",
            "{how}: the screen taken again"
        );
        t.expect("h100-03");
        t.keys(&["q"]);
        t.expect("DONE=0");
        assert_restored(&t);
    }
}

/// Every way out of the console finishes its recording: `q`, `:q`, ctrl-c
/// and SIGTERM leave a whole zstd frame (it used to end with "premature
/// end" and `report` said "damaged block").
#[test]
fn every_way_out_of_the_console_finishes_its_recording() {
    if !require("tmux", "apt-get install tmux") {
        return;
    }
    for how in ["q", ":q", "C-c", "TERM"] {
        let t = Tmux::start(100, 30);
        let file = t.dir.path().join("night.nsrec");
        start(&t, "tmux-256color", &format!("--record {}", file.display()));
        // A few snapshots in.
        std::thread::sleep(Duration::from_secs(2));
        match how {
            ":q" => {
                t.keys(&[":"]);
                t.keys(&["-l", "q"]);
                t.keys(&["Enter"]);
            }
            "TERM" => {
                let status = Command::new("pkill")
                    .args(["-TERM", "-f", &file.display().to_string()])
                    .status()
                    .expect("pkill");
                assert!(status.success(), "found the process to signal");
            }
            key => t.keys(&[key]),
        }
        t.expect("EXIT=0");
        let rec = nightshift::recording::Recording::open(&file).expect("opens");
        assert_eq!(rec.truncated, None, "{how}: the file is finished");
        assert!(rec.marks.len() >= 2, "{how}: the snapshots are there");
    }
}

/// Replay you can see: the header says playing or paused, the speed, where
/// it is in the recording and when it has ended; `n` with no incident
/// ahead says so and stays; `:at` jumps; the hints name the replay's keys.
#[test]
fn a_replay_shows_its_state_through_play_pause_faster_next_at_and_the_end() {
    if !require("tmux", "apt-get install tmux") {
        return;
    }
    let t = Tmux::start(100, 30);
    let file = t.dir.path().join("night.nsrec");
    let out = Command::new(bin())
        .args(["record"])
        .arg(&file)
        .args(["--sim-seconds", "300", "--log-file"])
        .arg(t.dir.path().join("record.log"))
        .output()
        .expect("record");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    start(&t, "tmux-256color", &format!("--replay {}", file.display()));
    t.expect("▶ 1× 02:47");
    t.expect("/ 02:52:30");
    t.expect("<space> pause");
    t.keys(&["Space"]);
    t.expect("⏸ 02:47");
    t.keys(&["Space"]);
    t.keys(&[">"]);
    t.expect("▶ 2× ");
    // Past the last incident: said, and the replay stays where it was.
    t.keys(&[":"]);
    t.keys(&["-l", "at 02:52"]);
    t.keys(&["Enter"]);
    t.expect("▶ 2× 02:52:0");
    // The health numbers after the jump cover the recording from its
    // start (they covered only the time since the jump).
    t.keys(&[":"]);
    t.keys(&["-l", "kpis 1h"]);
    t.keys(&["Enter"]);
    t.expect_within("observed 4m", Duration::from_secs(15));
    t.keys(&["Escape"]);
    std::thread::sleep(Duration::from_millis(400));
    t.keys(&["n"]);
    t.expect("no incident after 02:52");
    let s = t.screen();
    assert!(!s.contains("■ end"), "n with nothing ahead stays:\n{s}");
    // On to the end.
    t.keys(&[">"]);
    t.keys(&[">"]);
    t.expect_within("■ end 02:52:30", Duration::from_secs(30));
    t.keys(&["q"]);
    t.expect("EXIT=0");
}

/// 100 KB pasted into the `/` filter in a real terminal: cut at once, the
/// console answers, and the first `esc` after it clears the filter (it was
/// lost behind the paste).
#[test]
fn a_huge_paste_into_the_filter_then_esc() {
    if !require("tmux", "apt-get install tmux") {
        return;
    }
    let t = Tmux::start(100, 30);
    start(&t, "tmux-256color", "");
    t.keys(&[":"]);
    t.keys(&["-l", "nodes"]);
    t.keys(&["Enter"]);
    t.expect("1-16 of 16");
    t.keys(&["/"]);
    let buf = t.dir.path().join("paste.txt");
    std::fs::write(&buf, "h".repeat(100_000)).expect("paste file");
    t.cmd(&["load-buffer", &buf.display().to_string()]);
    t.cmd(&["paste-buffer", "-p", "-t", "t"]);
    t.expect_within("a filter is at most 256 characters", Duration::from_secs(5));
    // ESC alone: let it land before anything else.
    t.keys(&["Escape"]);
    std::thread::sleep(Duration::from_millis(400));
    t.expect("1-16 of 16");
    let s = t.screen();
    assert!(!s.contains("/hhhh"), "the filter is cleared:\n{s}");
    t.keys(&["q"]);
    t.expect("EXIT=0");
}

/// Against a dead slurmrestd: no zero that was not read, no empty cluster
/// name; what it waits for, and why, on screen and in the message log.
#[test]
fn a_dead_slurmrestd_shows_no_made_up_zeros() {
    if !require("tmux", "apt-get install tmux") {
        return;
    }
    let port = common::free_port();
    let t = Tmux::start(100, 30);
    t.type_line(&format!(
        "TERM=tmux-256color {} --source slurm --slurm-url http://127.0.0.1:{port} --slurm-user root --log-file {}; echo EXIT=$?",
        bin(),
        t.dir.path().join("n.log").display()
    ));
    let s = t.expect("waiting for the first answer from the slurm source");
    t.expect(&format!("127.0.0.1:{port}"));
    let s = format!("{s}{}", t.screen());
    assert!(!s.contains("GPUs 0") && !s.contains("alloc 0"), "{s}");
    assert!(!s.contains("│  │"), "an empty cluster name:\n{s}");
    t.keys(&["m"]);
    t.expect("slurm: ");
    t.keys(&["q"]);
    t.keys(&["q"]);
    t.expect("EXIT=0");
}

/// Follow-ups that run themselves (issue 29), in the console: a drain
/// armed by the command line ("cordon now, drain after job 4701's
/// checkpoint") is found in the audit log when the console starts and
/// asked about; kept, it shows in the header and on its node, and the
/// console sends it when the simulated night's checkpoint comes (02:53:30,
/// the sim at 20× here), through the guard.
#[test]
fn an_armed_drain_survives_a_restart_and_the_console_sends_it_at_the_checkpoint() {
    if !require("tmux", "apt-get install tmux") {
        return;
    }
    let t = Tmux::start(130, 40);
    let audit = t.dir.path().join("audit.jsonl");
    let armed = Command::new(bin())
        .args(["--log-file"])
        .arg(t.dir.path().join("cli.log"))
        .arg("--audit-log")
        .arg(&audit)
        .args([
            "drain",
            "h100-05",
            "--reason",
            "remap pending",
            "--requeue",
            "--after-checkpoint",
            "--confirm",
            "h100-05",
        ])
        .output()
        .expect("nightshift");
    let said = String::from_utf8_lossy(&armed.stdout);
    assert!(armed.status.success(), "{said}");
    assert!(said.contains("armed "), "{said}");
    start(
        &t,
        "tmux-256color",
        &format!("--audit-log {} --speed 20", audit.display()),
    );
    t.expect("1 step(s) were armed before this console started");
    t.expect("drain h100-05 after the checkpoint of job 4701");
    t.keys(&["y"]);
    t.expect("armed 1");
    t.keys(&[":"]);
    t.keys(&["-l", "node h100-05"]);
    t.keys(&["Enter"]);
    t.expect("waiting for job 4701's checkpoint (next 02:53:30)");
    t.expect_within(
        "fired: job 4701 checkpointed at 02:53:30",
        Duration::from_secs(60),
    );
    let log = std::fs::read_to_string(&audit).expect("audit");
    assert!(log.contains("\"fired\""), "{log}");
    assert!(log.contains("requeue 4701"), "{log}");
    t.keys(&["q"]);
    t.expect("EXIT=0");
    assert_restored(&t);
}

/// Back to service in the console (issue 29), on the simulated night at
/// 60×: the Xid 79 node drained with `D` and its name; once the
/// technician's reboot has cleared its GPUs, its screen recommends
/// "validate, then resume", and `O`, enter and `y` put it back in service
/// through the check — nothing typed but the confirmations. The audit log
/// holds the drain and the validation.
#[test]
fn a_drained_node_goes_back_to_service_through_a_passing_check() {
    if !require("tmux", "apt-get install tmux") {
        return;
    }
    let t = Tmux::start(130, 40);
    let audit = t.dir.path().join("audit.jsonl");
    start(
        &t,
        "tmux-256color",
        &format!("--audit-log {} --speed 60", audit.display()),
    );
    t.command("node h100-03");
    t.expect("▶ drain now and requeue");
    t.keys(&["D"]);
    t.expect("type h100-03 and press enter to confirm");
    t.type_confirmation("h100-03");
    t.expect("done and verified: drain h100-03 ✓");
    t.keys(&["Escape"]);
    // The technician reboots it ten simulated minutes after the drain.
    t.expect_within(
        "▶ validate (DCGM level 2), then resume",
        Duration::from_secs(60),
    );
    t.keys(&["O"]);
    t.expect("validate (DCGM level 2), then resume");
    t.keys(&["Enter"]);
    t.expect("validate h100-03");
    t.expect("press y to confirm");
    t.keys(&["y"]);
    t.expect("h100-03 back in service ✓");
    // The outcome's dialog is up (its undo offered) before esc closes it:
    // an esc that came before it left `q` to close it instead of quitting.
    t.expect("undoes it");
    let log = std::fs::read_to_string(&audit).expect("audit");
    assert!(
        log.contains("\"action\":\"validate\"") && log.contains("\"action\":\"drain\""),
        "{log}"
    );
    t.keys(&["Escape"]);
    t.keys(&["q"]);
    t.expect("EXIT=0");
    assert_restored(&t);
}

/// `nightshift doctor` in a pty whose terminal the test plays: when the
/// doctor asks whether bracketed paste is known (DECRQM 2004), the test
/// answers `answer` (or nothing); returns what the doctor printed.
fn doctor_in_a_pty(answer: Option<&'static [u8]>) -> String {
    use std::io::Read;
    use std::os::fd::FromRawFd;
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut master, mut slave) = (0, 0);
    let size = libc::winsize {
        ws_row: 24,
        ws_col: 80,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: out-pointers to two ints and a winsize that outlive the call.
    let r = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            &size,
        )
    };
    assert_eq!(r, 0, "openpty");
    // SAFETY: openpty gave us both descriptors; each is owned once here.
    let (master, slave) = unsafe {
        (
            std::fs::File::from_raw_fd(master),
            std::fs::File::from_raw_fd(slave),
        )
    };
    let mut child = Command::new(bin())
        .args(["--audit-log"])
        .arg(dir.path().join("audit.jsonl"))
        .args(["--log-file"])
        .arg(dir.path().join("log"))
        .arg("doctor")
        .env_remove("COLORTERM")
        .stdin(slave.try_clone().expect("slave"))
        .stdout(slave.try_clone().expect("slave"))
        .stderr(slave)
        .spawn()
        .expect("nightshift doctor");
    let mut terminal = master.try_clone().expect("master");
    let reader = std::thread::spawn(move || {
        let mut master = master;
        let mut seen = Vec::new();
        let mut answered = false;
        let mut buf = [0u8; 4096];
        // EIO once the child is gone and the slave closed.
        while let Ok(n @ 1..) = master.read(&mut buf) {
            seen.extend_from_slice(&buf[..n]);
            if !answered && seen.windows(9).any(|w| w == b"\x1b[?2004$p") {
                answered = true;
                if let Some(a) = answer {
                    terminal.write_all(a).expect("answer");
                }
            }
        }
        String::from_utf8_lossy(&seen).to_string()
    });
    child.wait().expect("wait");
    reader.join().expect("reader")
}

#[test]
fn doctor_asks_the_terminal_whether_it_brackets_pastes() {
    let line = |said: &str| {
        said.lines()
            .find(|l| l.contains("terminal "))
            .unwrap_or_else(|| panic!("{said}"))
            .to_string()
    };
    // DECRPM: 2 — known, reset (the console sets it when it starts).
    let said = doctor_in_a_pty(Some(b"\x1b[?2004;2$y"));
    assert!(
        line(&said).contains("80×24, 256 colours or fewer, bracketed paste supported"),
        "{said:?}"
    );
    // 0 — not recognized.
    let said = doctor_in_a_pty(Some(b"\x1b[?2004;0$y"));
    assert!(line(&said).contains("no bracketed paste"), "{said:?}");
    // No answer at all (tmux 3.3 says nothing).
    let said = doctor_in_a_pty(None);
    assert!(line(&said).contains("did not say"), "{said:?}");
}

/// The autopilot on the console (issue 61): `nightshift autopilot` runs
/// the starting policies live on the sim beside a console on the same
/// audit log. The console's header says the autopilot is on and how many
/// policies are live; the Xid 79 incident says what the autopilot sent
/// for it; `P` pauses it for every process on the log — the header says
/// who paused it, the audit log records it, and the autopilot sends
/// nothing more (the Xid 48 that comes after is "paused by oncall: would
/// drain").
#[test]
fn the_console_shows_the_autopilot_and_p_pauses_it_everywhere() {
    if !require("tmux", "apt-get install tmux") {
        return;
    }
    let t = Tmux::start(140, 36);
    let dir = t.dir.path();
    let audit = dir.join("audit.jsonl");
    let cfg = dir.join("policies.toml");
    std::fs::write(
        &cfg,
        include_str!("../config/policies.example.toml")
            .replace("mode = \"shadow\"", "mode = \"live\""),
    )
    .expect("config");
    // 10 s of the night each second: the Xid 48 comes 10 s in.
    let out = dir.join("autopilot.out");
    let mut autopilot = Command::new(bin())
        .arg("--config")
        .arg(&cfg)
        .arg("--audit-log")
        .arg(&audit)
        .arg("--log-file")
        .arg(dir.join("autopilot.log"))
        .args([
            "--speed",
            "10",
            "autopilot",
            "--interval",
            "1s",
            "--for",
            "40s",
        ])
        .stdout(std::fs::File::create(&out).expect("out"))
        .stderr(Stdio::inherit())
        .spawn()
        .expect("autopilot");
    let said = || std::fs::read_to_string(&out).unwrap_or_default();
    assert!(
        wait_for(Duration::from_secs(15), || said()
            .contains("drain h100-03 ✓")
            .then_some(()))
        .is_some(),
        "{}",
        said()
    );
    start(
        &t,
        "tmux-256color",
        &format!("--audit-log {}", audit.display()),
    );
    t.expect("autopilot 2 live");
    t.command("incidents");
    t.expect("GPU has fallen off the bus");
    // The Xid 79 is the oldest GPU incident: the last row but the drained node's.
    t.keys(&["G", "k"]);
    t.expect("autopilot: [gpu-faults] sent drain h100-03");
    // In the message log, and on the node's screen.
    t.keys(&["m"]);
    t.expect("autopilot: e1 [gpu-faults] sent drain h100-03");
    t.escape();
    t.keys(&["Enter"]);
    t.expect("node h100-03");
    t.expect("[gpu-faults] sent drain h100-03");
    t.escape();
    t.keys(&["P"]);
    t.expect("AUTOPILOT PAUSED by oncall");
    let records = std::fs::read_to_string(&audit).expect("audit");
    assert!(
        records
            .lines()
            .any(|l| l.contains("\"phase\":\"paused\"") && l.contains("\"operator\":\"oncall\"")),
        "{records}"
    );
    assert!(
        wait_for(Duration::from_secs(25), || said()
            .contains("XID 48 on h100-06")
            .then_some(()))
        .is_some(),
        "{}",
        said()
    );
    let _ = autopilot.kill();
    let _ = autopilot.wait();
    let s = said();
    let line = s
        .lines()
        .find(|l| l.contains("XID 48 on h100-06"))
        .unwrap_or_default();
    assert!(line.contains("paused by oncall: would"), "{s}");
    let records = std::fs::read_to_string(&audit).expect("audit");
    assert!(
        !records
            .lines()
            .any(|l| l.contains("\"intent\"") && l.contains("\"target\":\"h100-06\"")),
        "nothing sent after the pause: {records}"
    );
    t.keys(&["q"]);
    t.expect("EXIT=0");
}
