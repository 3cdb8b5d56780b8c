//! Fault injection: hostile and broken peers (a fake slurmrestd,
//! dcgm-exporter, Prometheus on loopback — tests/common/fake.rs), bad
//! configs, flags and signals against the real binary. Each case must end
//! in a clear one-line error or a skipped record with a warning: never a
//! panic, an abort, a backtrace, a hang, or raw bytes on the terminal.
//! docs/reliability.md lists the cases and what each must show.

mod common;

use common::fake::{Behaviour, Fake};
use common::{bin, wait_for};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn run(dir: &std::path::Path, args: &[&str]) -> Output {
    Command::new(bin())
        .args(args)
        .arg("--log-file")
        .arg(dir.join("n.log"))
        .env_remove("SLURM_JWT")
        .output()
        .expect("run nightshift")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// No panic, no backtrace, no raw escape byte, at most a few lines.
fn clean_failure(out: &Output) -> String {
    let err = text(&out.stderr);
    assert!(!err.contains("panicked"), "a panic: {err}");
    assert!(!err.contains("RUST_BACKTRACE"), "a backtrace: {err}");
    assert!(!out.stderr.contains(&0x1b), "a raw ESC on stderr: {err:?}");
    assert!(!out.stdout.contains(&0x1b), "a raw ESC on stdout");
    assert!(
        err.lines().count() <= 8,
        "a few lines, not a dump ({} lines)",
        err.lines().count()
    );
    err
}

/// A fake slurmrestd v0.0.38 answering `nodes`, `jobs`, `partitions`.
fn slurmrestd(nodes: &str, jobs: &str, parts: &str) -> Fake {
    Fake::start(Behaviour::Routes(vec![
        (
            "/openapi",
            Behaviour::json(200, r#"{"paths": {"/slurm/v0.0.38/ping": {}}}"#),
        ),
        (
            "/slurm/v0.0.38/nodes",
            Behaviour::json(200, nodes.to_string()),
        ),
        (
            "/slurm/v0.0.38/jobs",
            Behaviour::json(200, jobs.to_string()),
        ),
        (
            "/slurm/v0.0.38/partitions",
            Behaviour::json(200, parts.to_string()),
        ),
    ]))
}

const NODES: &str = r#"{"nodes": [{"name": "gpu01", "state": "idle", "gres": "gpu:h100:8", "partitions": ["gpu"]}]}"#;
const JOBS: &str = r#"{"jobs": []}"#;
const PARTS: &str = r#"{"partitions": [{"name": "gpu", "nodes": "gpu01"}]}"#;

fn slurm_args(fake: &Fake) -> Vec<String> {
    vec![
        "--source".into(),
        "slurm".into(),
        "--slurm-url".into(),
        fake.url(""),
        "--slurm-user".into(),
        "root".into(),
    ]
}

fn run_slurm(dir: &std::path::Path, fake: &Fake, args: &[&str]) -> Output {
    let mut all = slurm_args(fake);
    all.extend(args.iter().map(|s| s.to_string()));
    let refs: Vec<&str> = all.iter().map(String::as_str).collect();
    run(dir, &refs)
}

#[test]
fn a_backslash_before_a_non_ascii_character_in_a_label_is_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let dcgm = Fake::start(Behaviour::text(
        200,
        "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",Hostname=\"n1\",err=\"caf\\é \\ü\"} 55\n",
    ));
    let out = run(
        dir.path(),
        &[
            "--source",
            "none",
            "--dcgm",
            &dcgm.url("/metrics"),
            "get",
            "gpus",
            "-o",
            "json",
        ],
    );
    clean_failure(&out);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["items"][0]["utilization"], 0.55);
}

#[test]
fn a_huge_gres_and_a_multiplying_hostlist_are_skipped_by_name() {
    let dir = tempfile::tempdir().expect("tempdir");
    let nodes = r#"{"nodes": [
        {"name": "gpu01", "state": "idle", "gres": "gpu:h100:8", "partitions": ["gpu"]},
        {"name": "evil", "state": "idle", "gres": "gpu:h100:4294967295", "partitions": ["gpu"]}]}"#;
    let jobs = r#"{"jobs": [
        {"job_id": 7, "name": "bomb", "job_state": "RUNNING", "nodes": "a[0-99999]b[0-99999]", "partition": "gpu"},
        {"job_id": 8, "name": "fine", "job_state": "PENDING", "partition": "gpu"}]}"#;
    let fake = slurmrestd(nodes, jobs, PARTS);
    let t = Instant::now();
    let out = run_slurm(dir.path(), &fake, &["get", "jobs", "-o", "json"]);
    let err = clean_failure(&out);
    assert!(out.status.success(), "{err}");
    assert!(
        t.elapsed() < Duration::from_secs(10),
        "no 10^10 names built"
    );
    assert!(
        err.contains("evil") && err.contains("limits.max_gpus_per_node"),
        "{err}"
    );
    assert!(
        err.contains("job 7") && err.contains("limits.max_hosts_per_list"),
        "{err}"
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let ids: Vec<&str> = v["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|j| j["id"].as_str())
        .collect();
    assert_eq!(ids, ["8"]);
}

#[test]
fn integers_that_would_wrap_and_a_null_job_id_skip_their_record() {
    let dir = tempfile::tempdir().expect("tempdir");
    let jobs = r#"{"jobs": [
        {"job_id": 9, "name": "wraps", "job_state": "PENDING", "node_count": 4294967297, "partition": "gpu"},
        {"job_id": 10, "name": "forever", "job_state": "PENDING", "time_limit": 9223372036854775000, "partition": "gpu"},
        {"job_id": null, "name": "nameless", "job_state": "PENDING", "partition": "gpu"},
        {"job_id": 11, "name": "ok", "job_state": "PENDING", "partition": "gpu"}]}"#;
    let fake = slurmrestd(NODES, jobs, PARTS);
    let out = run_slurm(dir.path(), &fake, &["get", "jobs", "-o", "json"]);
    let err = clean_failure(&out);
    assert!(out.status.success(), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let ids: Vec<&str> = v["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|j| j["id"].as_str())
        .collect();
    assert_eq!(ids, ["11"], "never job 0, never a wrapped count");
    for needle in ["job 9", "job 10", "\"nameless\""] {
        assert!(err.contains(needle), "{needle}: {err}");
    }
}

#[test]
fn an_empty_object_and_null_fields_from_slurmrestd() {
    let dir = tempfile::tempdir().expect("tempdir");
    // `{}`: no nodes list at all is an error, not an empty cluster.
    let fake = slurmrestd("{}", JOBS, PARTS);
    let out = run_slurm(dir.path(), &fake, &["get", "nodes", "-o", "json"]);
    let err = clean_failure(&out);
    assert!(!out.status.success());
    assert!(err.contains("no `nodes` list"), "{err}");
    // A null nested object is tolerated field by field.
    let parts = r#"{"partitions": [{"name": "gpu", "nodes": "gpu01", "maximums": null}]}"#;
    let fake = slurmrestd(NODES, JOBS, parts);
    let out = run_slurm(dir.path(), &fake, &["get", "nodes", "-o", "json"]);
    let err = clean_failure(&out);
    assert!(out.status.success(), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["items"][0]["partitions"][0], "gpu");
}

#[test]
fn a_slurmrestd_that_never_answers_fails_discovery_within_its_bound() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fake = Fake::start(Behaviour::Hang);
    let cfg = dir.path().join("c.toml");
    std::fs::write(
        &cfg,
        "[limits]\ndiscovery_timeout_s = 2\n[slurm]\ntimeout_s = 30\n",
    )
    .expect("config");
    let t = Instant::now();
    let out = run_slurm(
        dir.path(),
        &fake,
        &["--config", cfg.to_str().expect("path"), "get", "nodes"],
    );
    let err = clean_failure(&out);
    assert!(!out.status.success());
    assert!(
        t.elapsed() < Duration::from_secs(8),
        "took {:?}",
        t.elapsed()
    );
    assert!(err.contains("limits.discovery_timeout_s"), "{err}");
}

#[test]
fn a_401_with_a_huge_body_and_escape_sequences_is_quoted_in_one_clean_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut body = String::from("\u{1b}]0;pwned\u{7}\u{1b}[31mAuthentication failure\n");
    body.push_str(&"x".repeat(5 << 20));
    let fake = Fake::start(Behaviour::text(401, body));
    let out = run_slurm(dir.path(), &fake, &["get", "nodes"]);
    let err = clean_failure(&out);
    assert!(!out.status.success());
    assert!(
        err.len() < 1000,
        "quoted at most a line: {} bytes",
        err.len()
    );
    assert!(err.contains("not authorized"), "{err}");
    assert!(err.contains("␛]0;pwned"), "shown, defused: {err}");
    let log = std::fs::read_to_string(dir.path().join("n.log")).unwrap_or_default();
    assert!(
        log.len() < 100_000,
        "the log is not flooded: {} bytes",
        log.len()
    );
    assert!(!log.contains('\u{1b}'), "the log is sanitised too");
}

#[test]
fn a_body_over_the_limit_is_refused_naming_the_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    let dcgm = Fake::start(Behaviour::text(200, "x 1\n".repeat(200_000)));
    let cfg = dir.path().join("c.toml");
    std::fs::write(&cfg, "[limits]\nmax_body_bytes = 100000\n").expect("config");
    let out = run(
        dir.path(),
        &[
            "--config",
            cfg.to_str().expect("path"),
            "--source",
            "none",
            "--dcgm",
            &dcgm.url("/metrics"),
            "get",
            "gpus",
        ],
    );
    let err = clean_failure(&out);
    assert!(!out.status.success(), "every source failed");
    assert!(err.contains("limits.max_body_bytes"), "{err}");
}

#[test]
fn dead_drippy_reset_and_garbage_endpoints_are_errors_not_hangs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cases = [
        ("down", Behaviour::Down),
        ("500", Behaviour::text(500, "internal error")),
        (
            "garbage",
            Behaviour::Garbage(b"\x00\x01 not http at all \xff".to_vec()),
        ),
        (
            "reset",
            Behaviour::ResetMidBody {
                body: "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\"} 1\n"
                    .repeat(1000)
                    .into_bytes(),
            },
        ),
        (
            "drip",
            Behaviour::Drip {
                body: b"DCGM_FI_DEV_GPU_UTIL{gpu=\"0\"} 1\n".to_vec(),
            },
        ),
    ];
    let cfg = dir.path().join("c.toml");
    std::fs::write(&cfg, "[endpoints]\ntimeout_s = 2\n").expect("config");
    for (name, b) in cases {
        let fake = Fake::start(b);
        let t = Instant::now();
        let out = run(
            dir.path(),
            &[
                "--config",
                cfg.to_str().expect("path"),
                "--source",
                "none",
                "--dcgm",
                &fake.url("/metrics"),
                "get",
                "gpus",
            ],
        );
        let err = clean_failure(&out);
        assert!(!out.status.success(), "{name}: every source failed: {err}");
        assert!(err.contains("every source failed"), "{name}: {err}");
        assert!(
            t.elapsed() < Duration::from_secs(8),
            "{name}: {:?}",
            t.elapsed()
        );
    }
}

#[test]
fn bad_numbers_in_the_config_and_the_flags_are_one_line_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = dir.path().join("c.toml");
    for (toml, key) in [
        ("[ui]\nstale_after_s = 1e308\n", "ui.stale_after_s"),
        (
            "[actions]\nmax_data_age_s = 1e308\n",
            "actions.max_data_age_s",
        ),
        ("[engine]\nstartup = \"1e18s\"\n", "engine.startup"),
        ("[limits]\nmax_body_bytes = 0\n", "limits.max_body_bytes"),
        // Thresholds the engine compares by (issue 43).
        (
            "[engine]\nnvlink_drain_per_hour = nan\n",
            "nvlink_drain_per_hour",
        ),
        (
            "[engine]\nnvlink_watch_per_hour = inf\n",
            "nvlink_watch_per_hour",
        ),
        (
            "[engine]\nsbe_watch_per_hour = -1.0\n",
            "sbe_watch_per_hour",
        ),
        // A window with no unit is refused, not read as seconds.
        ("[engine]\nrepeat_offender = \"3 in 30\"\n", "3 in 30d"),
        // A TOML error in one line, no U+FFFD where its drawing's
        // newlines were.
        ("[engine\nstartup = 1\n", "line 1, column 8: unclosed table"),
    ] {
        std::fs::write(&cfg, toml).expect("config");
        let out = run(
            dir.path(),
            &["--config", cfg.to_str().expect("path"), "get", "nodes"],
        );
        let err = clean_failure(&out);
        assert!(!out.status.success(), "{toml}");
        assert!(err.contains(key), "{key}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(!err.contains('\u{fffd}'), "{err}");
    }
    for (args, key) in [
        (vec!["--nodes", "100000000", "get", "nodes"], "--nodes"),
        (vec!["--jobs", "100000000", "get", "nodes"], "--jobs"),
        (vec!["--speed", "1e300"], "--speed"),
        (
            vec!["get", "nodes", "--sim-seconds", "18446744073709551615"],
            "--sim-seconds",
        ),
    ] {
        let t = Instant::now();
        let out = run(dir.path(), &args);
        let err = clean_failure(&out);
        assert!(!out.status.success(), "{args:?}");
        assert!(err.contains(key), "{key}: {err}");
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "{args:?}: {:?}",
            t.elapsed()
        );
    }
    // `source = "none"` in the file works like the flag.
    let dcgm = Fake::start(Behaviour::text(200, "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\"} 5\n"));
    std::fs::write(
        &cfg,
        format!(
            "source = \"none\"\n[endpoints]\ndcgm = [\"{}\"]\n",
            dcgm.url("/metrics")
        ),
    )
    .expect("config");
    let out = run(
        dir.path(),
        &["--config", cfg.to_str().expect("path"), "get", "gpus"],
    );
    let err = clean_failure(&out);
    assert!(out.status.success(), "{err}");
    // No scheduler: what runs on a node is unknown, not 0 (issue 43).
    let out = run(
        dir.path(),
        &[
            "--config",
            cfg.to_str().expect("path"),
            "get",
            "nodes",
            "-o",
            "json",
        ],
    );
    let err = clean_failure(&out);
    assert!(out.status.success(), "{err}");
    let nodes: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let n = &nodes["items"][0];
    assert_eq!(n["gpus_total"], 1, "{nodes:#}");
    assert!(
        n["gpus_allocated"].is_null() && n["gpus_free"].is_null(),
        "{nodes:#}"
    );
}

#[test]
fn a_closed_stdout_ends_the_program_quietly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "{} --nodes 256 get jobs -o json --log-file {} | head -1 >/dev/null; echo \"status=${{PIPESTATUS[0]}}\"",
            bin(),
            dir.path().join("n.log").display()
        ))
        .output()
        .expect("bash");
    let err = clean_failure(&out);
    assert!(err.is_empty(), "quiet: {err}");
    assert!(
        text(&out.stdout).contains("status=141"),
        "ended as SIGPIPE ends a Unix tool: {}",
        text(&out.stdout)
    );
}

#[test]
fn duplicate_series_do_not_hide_an_xid() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut scrape = String::new();
    for x in [0, 79, 0, 13, 0] {
        scrape.push_str(&format!(
            "DCGM_FI_DEV_XID_ERRORS{{gpu=\"0\",Hostname=\"n1\"}} {x}\n"
        ));
    }
    let dcgm = Fake::start(Behaviour::text(200, scrape));
    let out = run(
        dir.path(),
        &[
            "--source",
            "none",
            "--dcgm",
            &dcgm.url("/metrics"),
            "get",
            "incidents",
            "-o",
            "json",
        ],
    );
    let err = clean_failure(&out);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("duplicate series"), "warned: {err}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    // Both Xids are there: one GPU's failure, the 79 naming it and the 13
    // among its related events.
    let labels: Vec<String> = v["items"]
        .as_array()
        .expect("items")
        .iter()
        .flat_map(|i| {
            std::iter::once(i["label"].clone())
                .chain(i["related"].as_array().cloned().unwrap_or_default())
        })
        .filter_map(|l| l.as_str().map(str::to_string))
        .collect();
    assert!(
        labels.contains(&"XID 79".to_string()) && labels.contains(&"XID 13".to_string()),
        "{labels:?}"
    );
}

#[test]
fn the_agent_caps_its_connections_and_survives_a_huge_request() {
    use std::io::{Read, Write};
    let dir = tempfile::tempdir().expect("tempdir");
    let port = common::free_port();
    let fixture =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/agent/readings.json");
    let mut agent = Command::new(bin())
        .args([
            "agent",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--recorded",
        ])
        .arg(&fixture)
        .arg("--log-file")
        .arg(dir.path().join("agent.log"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("agent");
    let get = |path: &str| -> Option<String> {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(3))).ok()?;
        s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
            .ok()?;
        let mut out = String::new();
        s.read_to_string(&mut out).ok()?;
        (!out.is_empty()).then_some(out)
    };
    assert!(
        wait_for(Duration::from_secs(10), || get("/healthz")).is_some(),
        "the agent answers"
    );
    // 200 idle connections: the agent keeps a bounded number open and
    // closes the rest at once — one more is closed before it can say a word.
    let idle: Vec<std::net::TcpStream> = (0..200)
        .filter_map(|_| std::net::TcpStream::connect(("127.0.0.1", port)).ok())
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let mut extra = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    extra
        .set_read_timeout(Some(Duration::from_secs(2)))
        .expect("timeout");
    let t = Instant::now();
    let mut buf = [0u8; 16];
    let closed = matches!(extra.read(&mut buf), Ok(0));
    assert!(
        closed && t.elapsed() < Duration::from_secs(1),
        "over the cap: closed at once, not held open"
    );
    // A 1 MB request head is refused, not read into memory.
    if let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) {
        let _ = s.write_all(format!("GET /{} HTTP/1.1\r\n", "a".repeat(1 << 20)).as_bytes());
    }
    // Once the idle ones time out, it serves again.
    drop(idle);
    let back = wait_for(Duration::from_secs(15), || get("/metrics"));
    assert!(
        back.is_some_and(|m| m.contains("DCGM_FI_DEV_GPU_UTIL")),
        "serving again"
    );
    assert!(agent.try_wait().expect("wait").is_none(), "still running");
    let _ = agent.kill();
    let _ = agent.wait();
}

#[test]
fn an_endpoint_that_comes_back_is_read_again() {
    let dir = tempfile::tempdir().expect("tempdir");
    if !common::require("tmux", "apt-get install tmux") {
        return;
    }
    let dcgm = Fake::start(Behaviour::Down);
    let cfg = dir.path().join("c.toml");
    std::fs::write(&cfg, "[endpoints]\ninterval_s = 1\ntimeout_s = 1\n").expect("config");
    let t = common::Tmux::start(100, 30);
    t.type_line(&format!(
        "{} --source none --dcgm {} --config {} --log-file {}; echo EXIT=$?",
        bin(),
        dcgm.url("/metrics"),
        cfg.display(),
        dir.path().join("n.log").display()
    ));
    t.expect("/metrics: cannot");
    dcgm.set(Behaviour::text(
        200,
        "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",Hostname=\"back01\"} 42\n",
    ));
    t.expect("back01");
    t.keys(&["q"]);
    t.expect("EXIT=0");
}

#[test]
fn sigint_to_the_console_restores_the_terminal() {
    if !common::require("tmux", "apt-get install tmux") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let t = common::Tmux::start(100, 30);
    t.type_line(&format!(
        "{} --log-file {}; echo EXIT=$?",
        bin(),
        dir.path().join("n.log").display()
    ));
    t.expect("│ sim-16 │");
    let killed = Command::new("pkill")
        .args([
            "-INT",
            "-f",
            &format!(
                "{} --log-file {}",
                bin(),
                dir.path().join("n.log").display()
            ),
        ])
        .status()
        .expect("pkill");
    assert!(killed.success());
    t.expect("EXIT=0");
    common::assert_restored(&t);
}

#[test]
fn quitting_ends_the_process_within_two_seconds_whatever_a_worker_is_doing() {
    if !common::require("tmux", "apt-get install tmux") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    // 10^6 series, as in the attack that kept a core busy after `q`.
    let mut scrape = String::with_capacity(90 << 20);
    for h in 0..8_000 {
        for g in 0..64 {
            scrape.push_str(&format!(
                "DCGM_FI_DEV_GPU_UTIL{{gpu=\"{g}\",Hostname=\"h{h}\"}} 50\nDCGM_FI_DEV_GPU_TEMP{{gpu=\"{g}\",Hostname=\"h{h}\"}} 40\n"
            ));
        }
    }
    let dcgm = Fake::start(Behaviour::text(200, scrape));
    let cfg = dir.path().join("c.toml");
    std::fs::write(&cfg, "[endpoints]\ninterval_s = 1\ntimeout_s = 30\n").expect("config");
    let t = common::Tmux::start(100, 30);
    t.type_line(&format!(
        "date +%s%N > {d}/start; {} --source none --dcgm {} --config {} --log-file {d}/n.log; date +%s%N > {d}/end; echo EXIT=$?",
        bin(),
        dcgm.url("/metrics"),
        cfg.display(),
        d = dir.path().display()
    ));
    // The merge is linear: the 512,000 GPUs are on screen in seconds (the
    // quadratic merge never got there). Then `q` while the next round is
    // being read, parsed and merged.
    t.expect_within("GPUs 512000", Duration::from_secs(60));
    std::thread::sleep(Duration::from_millis(1200));
    let pressed = Instant::now();
    t.keys(&["q"]);
    t.expect("EXIT=");
    assert!(
        pressed.elapsed() < Duration::from_millis(2500),
        "q took {:?}",
        pressed.elapsed()
    );
    common::assert_restored(&t);
}

/// A kubeconfig pointing at `url`, written in `dir`.
/// A real TLS server (`openssl s_server`) with a self-signed certificate:
/// each HTTP client (slurmrestd's, dcgm-exporter's, Prometheus's) does the
/// handshake with the one crypto provider in the binary (ring) and refuses
/// the certificate, saying so — not a panic for a missing provider, and not
/// reqwest's bare "error sending request".
#[test]
fn every_https_client_does_the_handshake_and_says_why_it_refused_the_certificate() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (key, cert) = (dir.path().join("k.pem"), dir.path().join("c.pem"));
    let made = Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        ])
        .args(["-subj", "/CN=localhost", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stderr(Stdio::null())
        .status()
        .expect("openssl is needed for this test (.ci/run installs it)");
    assert!(made.success(), "openssl req");
    let port = common::free_port();
    let mut server = Command::new("openssl")
        .args(["s_server", "-quiet", "-www", "-accept"])
        .arg(format!("127.0.0.1:{port}"))
        .arg("-cert")
        .arg(&cert)
        .arg("-key")
        .arg(&key)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("openssl s_server");
    let up = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            up.elapsed() < Duration::from_secs(10),
            "s_server never listened"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let url = format!("https://127.0.0.1:{port}");
    let metrics = format!("{url}/metrics");
    let cases: [(&str, Vec<&str>); 3] = [
        (
            "slurmrestd",
            vec![
                "--source",
                "slurm",
                "--slurm-url",
                &url,
                "--slurm-user",
                "root",
                "get",
                "nodes",
            ],
        ),
        (
            "dcgm-exporter",
            vec!["--source", "none", "--dcgm", &metrics, "get", "gpus"],
        ),
        (
            "Prometheus",
            vec!["--source", "none", "--prometheus", &url, "get", "gpus"],
        ),
    ];
    for (name, args) in &cases {
        let out = run(dir.path(), args);
        let err = clean_failure(&out);
        assert!(!out.status.success(), "{name}: {err}");
        assert!(
            err.contains(&format!("127.0.0.1:{port}")),
            "{name}: names the address: {err}"
        );
        assert!(
            err.contains("invalid peer certificate"),
            "{name}: the reason is the certificate: {err}"
        );
        assert!(!err.contains("crypto provider"), "{name}: {err}");
    }
    // A host with no CA bundle (a minimal root, a container: issue 63):
    // plain HTTP works as ever, and each HTTPS source says there are no
    // CA certificates, where it looked, and how to point at a bundle —
    // not "cannot build the HTTP client: builder error" for all.
    let none = dir.path().join("no-certs");
    std::fs::create_dir_all(&none).expect("dir");
    let empty = none.join("empty.pem");
    std::fs::write(&empty, "").expect("empty bundle");
    let bare = |args: &[&str]| -> Output {
        Command::new(bin())
            .args(args)
            .arg("--log-file")
            .arg(dir.path().join("n.log"))
            .env_remove("SLURM_JWT")
            .env("SSL_CERT_FILE", &empty)
            .env("SSL_CERT_DIR", &none)
            .output()
            .expect("run nightshift")
    };
    for (name, args) in &cases {
        let out = bare(args);
        let err = clean_failure(&out);
        assert!(!out.status.success(), "{name}: {err}");
        assert!(
            err.contains("no CA certificates on this host") && err.contains("SSL_CERT_FILE"),
            "{name}: {err}"
        );
    }
    let scrape = include_str!("fixtures/dcgm/h100-node.txt");
    let plain = Fake::start(Behaviour::text(200, scrape));
    let out = bare(&[
        "--source",
        "none",
        "--dcgm",
        &plain.url("/metrics"),
        "get",
        "gpus",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).lines().count() > 1,
        "{}",
        text(&out.stdout)
    );
    let _ = server.kill();
    let _ = server.wait();
}

fn kubeconfig_for(dir: &std::path::Path, url: &str) -> String {
    let path = dir.join("kubeconfig");
    std::fs::write(&path, kubelab::kubeconfig(url, "faulty")).expect("kubeconfig");
    path.to_str().expect("utf-8 path").to_string()
}

#[test]
fn a_kubernetes_api_server_that_never_answers_fails_within_the_request_timeout() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fake = Fake::start(Behaviour::Hang);
    let kc = kubeconfig_for(dir.path(), &fake.url(""));
    let cfg = dir.path().join("c.toml");
    std::fs::write(&cfg, "[kube]\nrequest_timeout_s = 2\n").expect("config");
    let t = Instant::now();
    let out = run(
        dir.path(),
        &[
            "--source",
            "kube",
            "--kubeconfig",
            &kc,
            "--config",
            cfg.to_str().expect("path"),
            "get",
            "nodes",
        ],
    );
    let err = clean_failure(&out);
    assert!(!out.status.success());
    assert!(
        t.elapsed() < Duration::from_secs(10),
        "took {:?}",
        t.elapsed()
    );
    assert!(
        err.contains(&format!("127.0.0.1:{}", fake.port)),
        "names the address: {err}"
    );
}

#[test]
fn kubernetes_connection_errors_name_the_address_and_the_reason() {
    let dir = tempfile::tempdir().expect("tempdir");
    // A closed port: bound, then dropped.
    let port = common::free_port();
    // https to a plain-HTTP server.
    let plain = Fake::start(Behaviour::json(200, "{}"));
    for (url, why) in [
        (format!("http://127.0.0.1:{port}"), "refused"),
        (format!("https://127.0.0.1:{}", plain.port), "tls"),
    ] {
        let kc = kubeconfig_for(dir.path(), &url);
        let out = run(
            dir.path(),
            &["--source", "kube", "--kubeconfig", &kc, "get", "nodes"],
        );
        let err = clean_failure(&out);
        assert!(!out.status.success());
        let port_of = url.rsplit(':').next().unwrap_or_default();
        assert!(
            err.contains(&format!("127.0.0.1:{port_of}")),
            "{url}: {err}"
        );
        assert!(
            err.to_lowercase().contains(why),
            "{url}: the reason {why}: {err}"
        );
        assert!(
            !err.ends_with("client error (Connect)"),
            "more than kube's own words: {err}"
        );
    }
}

#[test]
fn a_kubeconfig_with_a_yaml_error_never_prints_its_secrets() {
    let dir = tempfile::tempdir().expect("tempdir");
    let kc = dir.path().join("kubeconfig");
    std::fs::write(
        &kc,
        "apiVersion: v1\nkind: Config\nusers:\n- name: admin\n  user:\n    token: s3cr3t-bearer-token-XYZ\n  : : broken: [\n",
    )
    .expect("kubeconfig");
    let out = run(
        dir.path(),
        &[
            "--source",
            "kube",
            "--kubeconfig",
            kc.to_str().expect("path"),
            "get",
            "nodes",
        ],
    );
    let err = clean_failure(&out);
    assert!(!out.status.success());
    assert!(!err.contains("s3cr3t"), "a secret printed: {err}");
    assert!(err.contains("kubeconfig") && err.contains("line"), "{err}");
    let log = std::fs::read_to_string(dir.path().join("n.log")).unwrap_or_default();
    assert!(!log.contains("s3cr3t"), "a secret logged: {log}");
}

#[test]
fn an_audit_log_torn_mid_character_is_read_and_a_directory_is_an_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let audit = dir.path().join("audit.jsonl");
    let rec = r#"{"id":"a","phase":"intent","time":1796006850,"operator":"oncall","scheduler_user":null,"host":"h","cluster":"sim-16","source":"sim","action":"drain","target":"h100-03","reason":"xid79","preview":"p","outcome":null}"#;
    let mut bytes = format!("{rec}\n").into_bytes();
    bytes.extend_from_slice(b"{\"id\":\"b\",\"target\":\"h\xC3");
    std::fs::write(&audit, bytes).expect("audit");
    let out = run(
        dir.path(),
        &["--audit-log", audit.to_str().expect("path"), "audit"],
    );
    let err = clean_failure(&out);
    assert!(out.status.success(), "{err}");
    assert!(
        text(&out.stdout).contains("h100-03"),
        "the whole record is read"
    );
    assert!(
        err.contains("line 2") && err.contains("skipped"),
        "names the torn line: {err}"
    );
    assert!(
        err.contains("interrupted"),
        "the interrupted intent is still said: {err}"
    );
    let out = run(
        dir.path(),
        &["--audit-log", dir.path().to_str().expect("path"), "audit"],
    );
    let err = clean_failure(&out);
    assert!(!out.status.success(), "a directory is an error");
    assert!(err.contains("not a regular file"), "{err}");
}

/// Writes the sim night's first `seconds` to a recording in `dir`.
fn record_sim(dir: &std::path::Path, seconds: u32) -> std::path::PathBuf {
    let path = dir.join("night.nsrec");
    let out = run(
        dir,
        &[
            "record",
            path.to_str().expect("path"),
            "--sim-seconds",
            &seconds.to_string(),
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    path
}

#[test]
fn a_recording_line_over_the_bound_is_skipped_naming_the_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = record_sim(dir.path(), 20);
    // A line of 3 MB in the middle of the stream (as 1 GiB would be; small
    // here, with the bound set below it).
    let raw = zstd::stream::decode_all(std::fs::File::open(&path).expect("open")).expect("decode");
    let mut lines: Vec<Vec<u8>> = raw.split(|b| *b == b'\n').map(<[u8]>::to_vec).collect();
    let mut long = br#"{"kind":"delta","time":1,"x":""#.to_vec();
    long.extend(std::iter::repeat_n(b'a', 3 << 20));
    long.extend_from_slice(b"\"}");
    lines.insert(10, long);
    std::fs::write(
        &path,
        zstd::stream::encode_all(&lines.join(&b'\n')[..], 3).expect("encode"),
    )
    .expect("write");
    let cfg = dir.path().join("c.toml");
    std::fs::write(&cfg, "[limits]\nmax_recording_line_bytes = 1000000\n").expect("config");
    let out = run(
        dir.path(),
        &[
            "--config",
            cfg.to_str().expect("path"),
            "report",
            path.to_str().expect("path"),
        ],
    );
    let err = clean_failure(&out);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("line 11") && err.contains("limits.max_recording_line_bytes"),
        "{err}"
    );
    assert!(text(&out.stdout).contains("XID 79"), "the report is whole");
}

#[test]
fn a_recording_must_be_a_regular_file() {
    if !common::require("mkfifo", "apt-get install coreutils") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let fifo = dir.path().join("fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(made.success());
    let t = Instant::now();
    for path in [fifo.to_str().expect("path"), "/dev/stdin"] {
        let mut child = Command::new(bin())
            .args(["report", path, "--log-file"])
            .arg(dir.path().join("n.log"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        let done = wait_for(Duration::from_secs(10), || child.try_wait().ok().flatten());
        if done.is_none() {
            let _ = child.kill();
        }
        let out = child.wait_with_output().expect("output");
        assert!(done.is_some(), "{path}: hung");
        let err = clean_failure(&out);
        assert!(!out.status.success());
        assert!(err.contains("regular file"), "{path}: {err}");
    }
    assert!(t.elapsed() < Duration::from_secs(20));
}

/// C1 controls (U+009B is a CSI to many terminals) in a job's name reach
/// JSON escaped like the C0 ones; a 10 KB node name is cut in tables, not
/// padded into every row.
#[test]
fn json_escapes_c1_controls_and_tables_cut_huge_names() {
    let dir = tempfile::tempdir().expect("tempdir");
    let long = "n".repeat(10_000);
    let nodes = format!(
        r#"{{"nodes": [{{"name": "gpu01", "state": "idle", "gres": "gpu:h100:8", "partitions": ["gpu"]}},
            {{"name": "{long}", "state": "idle", "gres": "gpu:h100:8", "partitions": ["gpu"]}}]}}"#
    );
    let jobs = r#"{"jobs": [{"job_id": 8, "name": "evil\u009b31m\u0085\u007f\u202e", "job_state": "PENDING", "partition": "gpu"}]}"#;
    let fake = slurmrestd(&nodes, jobs, PARTS);
    let out = run_slurm(dir.path(), &fake, &["get", "jobs", "-o", "json"]);
    clean_failure(&out);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let raw = text(&out.stdout);
    for c in ['\u{9b}', '\u{85}', '\u{7f}', '\u{202e}'] {
        assert!(!raw.contains(c), "{:?} raw in JSON", c);
    }
    assert!(raw.contains(r"evil\u009b31m\u0085\u007f\u202e"), "{raw}");
    let v: serde_json::Value = serde_json::from_str(&raw).expect("still JSON");
    assert_eq!(
        v["items"][0]["name"], "evil\u{9b}31m\u{85}\u{7f}\u{202e}",
        "the same text"
    );
    let out = run_slurm(dir.path(), &fake, &["get", "nodes"]);
    clean_failure(&out);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let table = text(&out.stdout);
    let widest = table.lines().map(|l| l.chars().count()).max().unwrap_or(0);
    assert!(widest < 400, "rows padded to {widest} characters");
    assert!(
        table.contains("nnn…"),
        "the long name cut with an ellipsis:\n{table}"
    );
}

/// Runs nightshift with `args` in `dir`, killed if it is still running
/// after `bound`: (its output, whether it ended by itself).
fn run_bounded(dir: &std::path::Path, args: &[&str], bound: Duration) -> (Output, bool) {
    let mut child = Command::new(bin())
        .args(args)
        .arg("--log-file")
        .arg(dir.join("n.log"))
        .env_remove("SLURM_JWT")
        .env("XDG_STATE_HOME", dir.join("state"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn nightshift");
    let ended = wait_for(bound, || child.try_wait().ok().flatten()).is_some();
    if !ended {
        let _ = child.kill();
    }
    (child.wait_with_output().expect("output"), ended)
}

fn mkfifo(path: &std::path::Path) {
    let status = Command::new("mkfifo").arg(path).status().expect("mkfifo");
    assert!(status.success());
}

/// A FIFO at any path of the audit log — the log, a rotated file, its lock
/// — is refused at once with a line naming it, never waited on: `audit`,
/// `armed`, `get nodes` and `cordon` all end by themselves (issue 43).
#[test]
fn a_fifo_at_any_audit_log_path_is_refused_not_waited_on() {
    let cordon = ["cordon", "h100-05", "--reason", "x", "--confirm", "h100-05"];
    let cases: [(&str, &[&str]); 5] = [
        ("audit.jsonl", &["audit"]),
        ("audit.jsonl", &["get", "nodes"]),
        ("audit.jsonl.1", &["armed"]),
        ("audit.jsonl.lock", &cordon),
        ("audit.jsonl", &cordon),
    ];
    for (fifo, args) in cases {
        let dir = tempfile::tempdir().expect("tempdir");
        let audit = dir.path().join("audit.jsonl");
        mkfifo(&dir.path().join(fifo));
        let mut all = vec!["--audit-log", audit.to_str().expect("path")];
        all.extend(args);
        let (out, ended) = run_bounded(dir.path(), &all, Duration::from_secs(20));
        assert!(ended, "{fifo} {args:?}: hung on the FIFO");
        let err = clean_failure(&out);
        if args[0] == "cordon" {
            assert!(!out.status.success(), "{fifo}: {err}");
            assert!(
                err.contains("not a regular file") || err.contains("lock"),
                "{fifo}: {err}"
            );
        } else if args[0] != "get" {
            assert!(err.contains("not a regular file"), "{fifo} {args:?}: {err}");
        }
    }
}

/// An armed step's id, target or cluster full of escape sequences (a line
/// written into the shared log by hand) reaches no terminal: `armed` and
/// `disarm` print them sanitised, and the step is not nightshift's to fire
/// — no seal — which `armed` says (issue 43).
#[test]
fn escape_sequences_in_an_armed_record_reach_no_terminal() {
    let dir = tempfile::tempdir().expect("tempdir");
    let audit = dir.path().join("audit.jsonl");
    let evil = "\u{1b}]0;pwned\u{7}\u{1b}[2J";
    let rec = serde_json::json!({
        "id": format!("1796006850-{evil}"), "phase": "armed", "time": 1796006850,
        "operator": "x", "scheduler_user": null, "host": "h", "cluster": "sim-16",
        "source": "sim", "action": "drain", "target": evil, "reason": null,
        "preview": evil, "outcome": null,
        "armed": {"id": format!("1796006850-{evil}"),
                  "action": {"action": "drain", "node": evil, "reason": evil, "requeue": false},
                  "when": {"kind": "checkpoints", "jobs": [{"job": "4700", "ckpt_last": null}]},
                  "armed_at": 1796006850, "cluster": evil, "tag": "00"}
    });
    std::fs::write(&audit, format!("{rec}\n")).expect("audit");
    let a = audit.to_str().expect("path");
    let (out, ended) = run_bounded(
        dir.path(),
        &["--audit-log", a, "armed"],
        Duration::from_secs(20),
    );
    assert!(ended);
    let err = clean_failure(&out);
    assert!(out.status.success(), "{err}");
    assert!(
        text(&out.stdout).contains("nothing armed"),
        "{}",
        text(&out.stdout)
    );
    assert!(err.contains("not sent"), "the forged step is said: {err}");
    let (out, ended) = run_bounded(
        dir.path(),
        &["--audit-log", a, "disarm", &format!("1796006850-{evil}")],
        Duration::from_secs(20),
    );
    assert!(ended);
    let err = clean_failure(&out);
    assert!(!out.status.success(), "{err}");
    // `disarm ""` names nothing.
    let (out, _) = run_bounded(
        dir.path(),
        &["--audit-log", a, "disarm", ""],
        Duration::from_secs(20),
    );
    let err = clean_failure(&out);
    assert!(!out.status.success() && err.contains("too short"), "{err}");
}

/// The highest resident size (VmHWM, kB) `pid` has reached, polled until
/// it ends; with its output.
fn peak_rss_kb(mut child: std::process::Child, bound: Duration) -> (Output, u64, bool) {
    let pid = child.id();
    let mut peak = 0u64;
    let start = Instant::now();
    let ended = loop {
        if let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/status")) {
            for l in s.lines() {
                if let Some(v) = l.strip_prefix("VmHWM:") {
                    let kb = v.trim().trim_end_matches("kB").trim().parse().unwrap_or(0);
                    peak = peak.max(kb);
                }
            }
        }
        if child.try_wait().ok().flatten().is_some() {
            break true;
        }
        if start.elapsed() > bound {
            let _ = child.kill();
            break false;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    (child.wait_with_output().expect("output"), peak, ended)
}

/// `get WHAT` against the Prometheus at `url` with `config` as the
/// configuration, its peak resident size watched for at most `bound`:
/// its output, peak (kB) and whether it ended.
fn get_from_prometheus_watched(
    url: &str,
    config: &str,
    what: &str,
    bound: Duration,
) -> (Output, u64, bool) {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = dir.path().join("limits.toml");
    std::fs::write(&cfg, config).expect("config");
    let child = Command::new(bin())
        .args(["--config", cfg.to_str().expect("path")])
        .args(["--source", "none", "--prometheus", url, "get", what])
        .arg("--log-file")
        .arg(dir.path().join("n.log"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    peak_rss_kb(child, bound)
}

/// Prometheus answers that never end, three asked at once: the bytes in
/// flight are bounded together (`limits.max_body_bytes`), not each — the
/// one-shot ends with a clear error and its peak memory stays near one
/// bound, not three (issue 43: `get nodes` died at 1.6 GB allocations).
#[test]
fn endless_prometheus_answers_are_bounded_together() {
    let prom = Fake::start(Behaviour::Endless {
        content_type: "application/json",
        prefix: r#"{"status":"success","data":"#,
        unit: " ",
    });
    // A request timeout long enough that the body bound, not the clock,
    // ends the read on a loaded machine (128 MiB in 5 s was a race).
    let (out, peak_kb, ended) = get_from_prometheus_watched(
        &prom.url(""),
        "[limits]\nmax_body_bytes = 134217728\n[endpoints]\ntimeout_s = 60\n",
        "nodes",
        Duration::from_secs(120),
    );
    assert!(ended, "an endless answer hung the one-shot");
    let err = clean_failure(&out);
    assert!(err.contains("max_body_bytes"), "{err}");
    // One bound (128 MiB) and the program itself, not three bounds.
    assert!(peak_kb < 300 * 1024, "peak {peak_kb} kB: {err}");
}

/// An endless Prometheus answer of *series* (issue 59's blocker): parsed,
/// each series was held at 20–25 times its text, so a bound on the text
/// read let the one-shot abort at 2–4 GB. The parse keeps what it reads
/// within `limits.max_answer_held_bytes` and stops there, naming the key:
/// the one-shot ends with that error and its peak stays near the bound.
#[test]
fn an_endless_prometheus_answer_of_series_stops_at_the_bound_on_what_is_kept() {
    let prom = Fake::start(Behaviour::Endless {
        content_type: "application/json",
        prefix: r#"{"status":"success","data":{"resultType":"vector","result":["#,
        unit: r#"{"metric":{"__name__":"DCGM_FI_DEV_GPU_TEMP","gpu":"0","Hostname":"gpu07","UUID":"GPU-1","modelName":"NVIDIA H100 80GB HBM3"},"value":[1796006000.5,"61"]},"#,
    });
    // Text far past the bound on what is kept: that one must end it.
    let (out, peak_kb, ended) = get_from_prometheus_watched(
        &prom.url(""),
        "[limits]\nmax_body_bytes = 4294967296\nmax_answer_held_bytes = 67108864\n[endpoints]\ntimeout_s = 120\n",
        "gpus",
        Duration::from_secs(150),
    );
    assert!(ended, "an endless answer hung the one-shot");
    let err = clean_failure(&out);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("more than 67108864 bytes once parsed")
            && err.contains("limits.max_answer_held_bytes"),
        "{err}"
    );
    // The bound (64 MiB) and the program itself, not 20 times the text.
    assert!(peak_kb < 300 * 1024, "peak {peak_kb} kB: {err}");
}

/// `[topology]` mistakes are said, never passed over (issue 43): a domain
/// given twice and a node in two domains of one level are errors naming
/// them; a node no source has is a warning naming it; ten million names
/// are refused at once.
#[test]
fn topology_mistakes_are_said_not_passed_over() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = dir.path().join("t.toml");
    let domain = |name: &str, nodes: &str| {
        format!("[[topology.domains]]\nlevel = \"rack\"\nname = \"{name}\"\nnodes = \"{nodes}\"\n")
    };
    for (text, want) in [
        (
            domain("r1", "h100-0[1-2]") + &domain("r1", "h100-0[3-4]"),
            "rack r1 is given twice",
        ),
        (
            domain("r1", "h100-0[1-2]") + &domain("r2", "h100-0[2-3]"),
            "h100-02 is in rack r1 and rack r2",
        ),
        (domain("r1", "n[0-9999999]"), "topology"),
    ] {
        std::fs::write(&cfg, &text).expect("config");
        let t = Instant::now();
        let out = run(
            dir.path(),
            &["--config", cfg.to_str().expect("path"), "get", "nodes"],
        );
        let err = clean_failure(&out);
        assert!(!out.status.success(), "{text}");
        assert!(err.contains(want), "{want}: {err}");
        assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    }
    std::fs::write(&cfg, domain("r1", "h100-01,no-such-node")).expect("config");
    let out = run(
        dir.path(),
        &["--config", cfg.to_str().expect("path"), "get", "nodes"],
    );
    let err = clean_failure(&out);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("no-such-node"), "{err}");
}

/// The audit log's lock held by another process (issue 43): `cordon` does
/// not wait without a word — after `audit::LOCK_WAIT` it says the lock is
/// held and sends nothing.
#[test]
fn a_held_audit_lock_is_waited_for_a_bounded_time_and_said() {
    if !common::require("flock", "apt-get install util-linux") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let audit = dir.path().join("audit.jsonl");
    let lock = dir.path().join("audit.jsonl.lock");
    std::fs::write(&lock, "").expect("lock file");
    let mut holder = Command::new("flock")
        .arg(&lock)
        .args(["sleep", "60"])
        .spawn()
        .expect("flock");
    std::thread::sleep(Duration::from_millis(300));
    let (out, ended) = run_bounded(
        dir.path(),
        &[
            "--audit-log",
            audit.to_str().expect("path"),
            "cordon",
            "h100-05",
            "--reason",
            "x",
        ],
        Duration::from_secs(40),
    );
    let _ = holder.kill();
    let _ = holder.wait();
    assert!(ended, "it waited on the lock with no bound");
    let err = clean_failure(&out);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("held by another process"), "{err}");
    let log = std::fs::read_to_string(&audit).unwrap_or_default();
    assert!(!log.contains("\"intent\""), "nothing sent: {log}");
}

/// `nightshift doctor` (issue 41): each thing that blinds nightshift is a
/// line with its fix, and the exit says whether something failed. On the
/// sim with a writable audit log: all well. Then an audit log that cannot
/// be written, a dead exporter, a real scrape without NVLink counters
/// (what that blinds), and an exporter whose names nightshift does not
/// read (a rename), each on its own line.
#[test]
fn doctor_names_what_blinds_nightshift_each_with_its_fix() {
    let dir = tempfile::tempdir().expect("tempdir");
    let audit = dir.path().join("audit.jsonl");
    let a = audit.to_str().expect("path");
    let out = run(dir.path(), &["--audit-log", a, "doctor", "-o", "json"]);
    let checks: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert!(out.status.success(), "{checks:#}");
    let verdict = |name: &str| {
        checks
            .as_array()
            .expect("checks")
            .iter()
            .find(|c| c["name"] == name)
            .map(|c| c["verdict"].as_str().unwrap_or_default().to_string())
    };
    assert_eq!(verdict("scheduler").as_deref(), Some("ok"), "{checks:#}");
    assert_eq!(verdict("audit log").as_deref(), Some("ok"), "{checks:#}");

    std::fs::write(dir.path().join("plain"), "a file, not a folder").expect("write");
    let unwritable = dir.path().join("plain").join("audit.jsonl");
    let dead = format!("http://127.0.0.1:{}/metrics", common::free_port());
    let dead_prometheus = format!("http://127.0.0.1:{}", common::free_port());
    let scrape = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/dcgm/h100-node.txt"),
    )
    .expect("fixture");
    let real = Fake::start(Behaviour::text(200, scrape.clone()));
    let real_url = real.url("/metrics");
    let out = run(
        dir.path(),
        &[
            "--audit-log",
            unwritable.to_str().expect("path"),
            "--dcgm",
            &dead,
            "--dcgm",
            &real_url,
            "--prometheus",
            &dead_prometheus,
            "doctor",
        ],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{text}");
    // A check's line and the lines under it (a long name's detail, the fix).
    let line = |start: &str| {
        let mut lines = text.lines().skip_while(|l| !l.starts_with(start));
        let first = lines
            .next()
            .unwrap_or_else(|| panic!("no line {start:?} in\n{text}"));
        let under: Vec<&str> = lines.take_while(|l| l.starts_with("      ")).collect();
        format!("{first}\n{}", under.join("\n"))
    };
    assert!(
        line("FAIL  audit log").contains("every action is refused"),
        "{text}"
    );
    assert!(
        line(&format!("FAIL  endpoint {dead}")).contains("cannot reach"),
        "{text}"
    );
    assert!(
        line(&format!("ok    endpoint {real_url}")).contains("answered"),
        "{text}"
    );
    assert!(
        line("warn  GPU readings").contains("no NVLink counters: link storms cannot be seen"),
        "{text}"
    );
    assert!(
        text.contains("→ --audit-log PATH"),
        "each failure says what to do: {text}"
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("check(s) failed"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Every name renamed to one nightshift does not read.
    let renamed = Fake::start(Behaviour::text(
        200,
        scrape.replace("DCGM_FI_", "DCGM_NEXT_"),
    ));
    let out = run(
        dir.path(),
        &[
            "--audit-log",
            a,
            "--dcgm",
            &renamed.url("/metrics"),
            "doctor",
        ],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{text}");
    assert!(
        text.lines().any(|l| l.starts_with("FAIL  GPU readings")
            && l.contains("no GPU reading nightshift knows")),
        "{text}"
    );
}

/// Nothing listens at `[slurm] url` and there is no token: the scheduler's
/// fix is about slurmrestd (is it running there?), never "slurmrestd
/// refuses the token" — it answered nothing — and no fix names a key the
/// config rejects (`[slurm] token`; the key is `token_file`). Issue 58.
#[test]
fn doctor_blames_a_closed_port_on_slurmrestd_not_on_the_token() {
    let dir = tempfile::tempdir().expect("tempdir");
    let audit = dir.path().join("audit.jsonl");
    let url = format!("http://127.0.0.1:{}", common::free_port());
    let out = run(
        dir.path(),
        &[
            "--audit-log",
            audit.to_str().expect("path"),
            "--source",
            "slurm",
            "--slurm-url",
            &url,
            "--slurm-user",
            "root",
            "doctor",
        ],
    );
    let said = text(&out.stdout);
    assert!(!out.status.success(), "{said}");
    let fix_of = |name: &str| -> String {
        let mut lines = said.lines().skip_while(|l| !l.contains(name));
        let first = lines.next().unwrap_or_default();
        let fix = lines
            .next()
            .filter(|l| l.trim_start().starts_with('→'))
            .unwrap_or_default();
        format!("{first}\n{fix}")
    };
    let scheduler = fix_of("FAIL  scheduler");
    assert!(scheduler.contains("is slurmrestd running"), "{said}");
    assert!(!scheduler.contains("refuses the token"), "{said}");
    assert!(said.contains("FAIL  slurm token"), "{said}");
    assert!(!said.contains("[slurm] token)"), "{said}");
    assert!(said.contains("[slurm] token_file"), "{said}");
}

/// Issue 59: `nightshift audit` lists an armed step by what its seal
/// covers (its inner step), never by the record's outer fields, which
/// anyone who can append a line can write ("resume a100-01" was listed
/// while drain h100-05 was what would fire).
#[test]
fn audit_lists_an_armed_step_by_its_sealed_step_not_its_outer_fields() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("audit.jsonl");
    let line = serde_json::json!({
        "id": "1796006850-1-1-1", "phase": "armed", "time": 1796006850,
        "operator": "mallory", "host": "h", "cluster": "sim-16", "source": "sim",
        "action": "resume", "target": "a100-01", "preview": "resume a100-01",
        "outcome": null,
        "armed": {
            "id": "1796006850-1-1-1",
            "action": {"action": "drain", "node": "h100-05", "reason": "x", "requeue": true},
            "when": {"kind": "checkpoints", "jobs": [{"job": "4701", "ckpt_last": 1}]},
            "armed_at": 1796006850, "cluster": "sim-16", "confirmed_by": "mallory",
            "preview_digest": "", "tag": ""
        }
    });
    std::fs::write(&log, format!("{line}\n")).expect("write");
    let out = run(
        dir.path(),
        &["--audit-log", log.to_str().expect("path"), "audit"],
    );
    let said = text(&out.stdout);
    assert!(out.status.success(), "{said}{}", text(&out.stderr));
    let row = said
        .lines()
        .find(|l| l.contains("armed"))
        .unwrap_or_else(|| panic!("{said}"));
    assert!(row.contains("drain") && row.contains("h100-05"), "{row}");
    assert!(!row.contains("a100-01"), "{row}");
}

/// Issue 59: an audit log another user owns or can write, a link at its
/// path, a FIFO among its rotations — each refused by the actions and by
/// `doctor`, with the reason and the fix; nothing is created through the
/// link; `doctor` never waits on the FIFO. (The tests run as root: uid
/// 65534 stands for the other user.)
#[test]
fn an_audit_log_others_can_change_is_refused_by_actions_and_doctor() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("audit.jsonl");
    let l = log.to_str().expect("path");
    let act = |extra: &[&str]| {
        let mut args = vec!["--audit-log", l, "--sim-seconds", "100"];
        args.extend_from_slice(extra);
        run(dir.path(), &args)
    };
    let doctor = || text(&act(&["doctor"]).stdout);
    let line = |said: &str| {
        said.lines()
            .find(|x| x.contains("audit log"))
            .unwrap_or_default()
            .to_string()
    };
    std::fs::write(&log, "").expect("log");
    // Writable by every user.
    std::fs::set_permissions(&log, std::fs::Permissions::from_mode(0o666)).expect("chmod");
    let out = act(&["cordon", "h100-01", "--reason", "x"]);
    let said = text(&out.stdout) + &text(&out.stderr);
    assert!(said.contains("is writable by every user"), "{said}");
    assert!(!said.contains("✓"), "nothing sent: {said}");
    let d = doctor();
    assert!(
        line(&d).starts_with("FAIL") && line(&d).contains("writable by every user"),
        "{d}"
    );
    // Owned by another user.
    std::fs::set_permissions(&log, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    std::os::unix::fs::chown(&log, Some(65534), None).expect("chown");
    let out = act(&["cordon", "h100-01", "--reason", "x"]);
    let said = text(&out.stdout) + &text(&out.stderr);
    assert!(said.contains("owned by uid 65534"), "{said}");
    let d = doctor();
    assert!(
        line(&d).starts_with("FAIL") && line(&d).contains("owned by uid 65534"),
        "{d}"
    );
    // A link at its path: nothing made where it points.
    std::fs::remove_file(&log).expect("rm");
    let target = dir.path().join("elsewhere");
    std::os::unix::fs::symlink(&target, &log).expect("link");
    let d = doctor();
    assert!(line(&d).starts_with("FAIL"), "{d}");
    assert!(!target.exists(), "doctor created a file through the link");
    // A FIFO among its rotations: no wait, a failure naming it.
    std::fs::remove_file(&log).expect("rm");
    let fifo = dir.path().join("audit.jsonl.3");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .expect("mkfifo")
            .success()
    );
    let started = Instant::now();
    let d = doctor();
    assert!(started.elapsed() < Duration::from_secs(20), "doctor waited");
    assert!(
        line(&d).starts_with("FAIL") && line(&d).contains("audit.jsonl.3"),
        "{d}"
    );
}

/// Issue 59: a Slurm token file that is a FIFO hung `doctor` and `get`;
/// `/dev/zero` as the token took 2 GB. Only a regular file is read, and
/// at most 64 KiB of it: each is a clear error at once.
#[test]
fn a_token_file_that_is_a_fifo_or_a_device_is_an_error_at_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fifo = dir.path().join("token.fifo");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .expect("mkfifo")
            .success()
    );
    let big = dir.path().join("token.big");
    std::fs::write(&big, vec![b'a'; 1 << 20]).expect("big");
    for token in [
        fifo.as_path(),
        std::path::Path::new("/dev/zero"),
        big.as_path(),
    ] {
        let started = Instant::now();
        let out = run(
            dir.path(),
            &[
                "--source",
                "slurm",
                "--slurm-url",
                "http://127.0.0.1:9",
                "--slurm-user",
                "root",
                "--slurm-token-file",
                token.to_str().expect("path"),
                "get",
                "nodes",
            ],
        );
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{token:?} waited"
        );
        assert!(!out.status.success());
        let said = clean_failure(&out);
        assert!(said.contains("token file"), "{token:?}: {said}");
    }
}

/// Issue 59: arming with a key that cannot be used (readable by every
/// user) sent the cordon, then failed "cannot seal". The key is checked
/// first: nothing is sent, nothing armed, nothing audited.
#[test]
fn an_unusable_key_sends_nothing_before_the_plan_cannot_be_sealed() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let key = dir.path().join("site.key");
    std::fs::write(&key, [7u8; 32]).expect("key");
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let cfg = dir.path().join("c.toml");
    std::fs::write(
        &cfg,
        format!("[actions]\narmed_key = {:?}\n", key.display().to_string()),
    )
    .expect("config");
    let log = dir.path().join("audit.jsonl");
    let out = run(
        dir.path(),
        &[
            "--config",
            cfg.to_str().expect("path"),
            "--audit-log",
            log.to_str().expect("path"),
            "--sim-seconds",
            "100",
            "drain",
            "h100-05",
            "--reason",
            "x",
            "--requeue",
            "--after-checkpoint",
            "--confirm",
            "h100-05",
        ],
    );
    let said = text(&out.stdout) + &text(&out.stderr);
    assert!(!out.status.success(), "{said}");
    assert!(said.contains("cannot seal"), "{said}");
    assert!(said.contains("readable by every user"), "{said}");
    assert!(!said.contains("✓"), "nothing sent: {said}");
    let audit = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(audit.trim().is_empty(), "nothing audited: {audit}");
}

/// Issue 59: with the key unusable (readable by every user), `armed` and
/// `follow` said "nothing armed" and exited 0 though a step was armed.
/// They say the steps cannot be verified, and fail.
#[test]
fn armed_and_follow_fail_when_the_armed_steps_cannot_be_verified() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let state = dir.path().join("state");
    let log = dir.path().join("audit.jsonl");
    let ns = |args: &[&str]| {
        Command::new(bin())
            .args([
                "--audit-log",
                log.to_str().expect("path"),
                "--sim-seconds",
                "100",
            ])
            .args(args)
            .arg("--log-file")
            .arg(dir.path().join("n.log"))
            .env("XDG_STATE_HOME", &state)
            .output()
            .expect("run")
    };
    let out = ns(&[
        "drain",
        "h100-05",
        "--reason",
        "x",
        "--requeue",
        "--after-checkpoint",
        "--confirm",
        "h100-05",
    ]);
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let out = ns(&["armed"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("drain h100-05"),
        "{}",
        text(&out.stdout)
    );
    let key = state.join("nightshift/armed.key");
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    for args in [&["armed"][..], &["follow", "--for", "1s"][..]] {
        let out = ns(args);
        let said = text(&out.stdout) + &text(&out.stderr);
        assert!(!out.status.success(), "{args:?}: {said}");
        assert!(said.contains("cannot be verified"), "{args:?}: {said}");
        assert!(!said.contains("nothing armed"), "{args:?}: {said}");
    }
}

/// Issue 59: a SIGTERM between an action's intent and its outcome exited
/// at once, with only the intent audited while the `scontrol` child ran
/// on. The step in flight is finished (its child waited for, within the
/// action's timeout), its outcome written, and the exit is 128 + 15.
/// (slurmrestd 22.05 is a stand-in here; its node updates go through
/// `scontrol`, a script that takes two seconds and leaves a mark.)
#[test]
fn a_sigterm_during_an_action_finishes_it_and_writes_its_outcome() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fake = slurmrestd(NODES, JOBS, PARTS);
    let mark = dir.path().join("scontrol-ran");
    let scontrol = dir.path().join("scontrol");
    std::fs::write(
        &scontrol,
        format!("#!/bin/sh\nsleep 2\necho \"$@\" > {}\n", mark.display()),
    )
    .expect("script");
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&scontrol, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let cfg = dir.path().join("c.toml");
    std::fs::write(
        &cfg,
        format!("[slurm]\nscontrol = {:?}\n", scontrol.display().to_string()),
    )
    .expect("config");
    let log = dir.path().join("audit.jsonl");
    let mut args = slurm_args(&fake);
    args.extend(
        [
            "--config",
            cfg.to_str().expect("path"),
            "--audit-log",
            log.to_str().expect("path"),
            "--log-file",
            dir.path().join("n.log").to_str().expect("path"),
            "cordon",
            "gpu01",
            "--reason",
            "x",
        ]
        .map(String::from),
    );
    let mut child = Command::new(bin())
        .args(&args)
        .env("SLURM_JWT", "t")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    // The intent is on disk: the action is in flight.
    let intent = wait_for(Duration::from_secs(10), || {
        std::fs::read_to_string(&log)
            .ok()
            .filter(|t| t.contains("\"intent\""))
    });
    assert!(intent.is_some(), "no intent written");
    // SAFETY: a valid pid of our own child; kill has no other precondition.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let started = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "never exited");
        std::thread::sleep(Duration::from_millis(50));
    };
    let out = child.wait_with_output().expect("output");
    let said = text(&out.stdout) + &text(&out.stderr);
    assert_eq!(status.code(), Some(143), "{said}");
    assert!(mark.exists(), "the scontrol child was finished: {said}");
    let audit = std::fs::read_to_string(&log).expect("audit");
    assert!(
        audit.contains("\"outcome\""),
        "the outcome is written: {audit}"
    );
    assert!(said.contains("SIGTERM"), "{said}");
}

/// Issue 59: a kubeconfig whose `exec` plugin hangs hung `doctor` and
/// `get` (the request timeout does not cover it); one with endless output
/// aborted them. The plugin is run bounded in time and output first: each
/// is a clear error within the request timeout.
#[test]
fn a_kubeconfig_exec_plugin_that_hangs_or_floods_is_an_error_in_time() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (name, command, args, said) in [
        ("hangs", "sleep", vec!["600"], "did not answer within"),
        ("floods", "yes", vec![], "printed more than"),
    ] {
        let kc = dir.path().join(format!("kubeconfig-{name}"));
        let args: Vec<String> = args.iter().map(|a| format!("\"{a}\"")).collect();
        std::fs::write(
            &kc,
            format!(
                "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters:\n- name: k\n  cluster:\n    server: http://127.0.0.1:9\ncontexts:\n- name: c\n  context:\n    cluster: k\n    user: u\nusers:\n- name: u\n  user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: {command}\n      args: [{}]\n      interactiveMode: Never\n",
                args.join(", ")
            ),
        )
        .expect("kubeconfig");
        let cfg = dir.path().join("kube.toml");
        std::fs::write(&cfg, "[kube]\nrequest_timeout_s = 3\n").expect("config");
        for what in [&["get", "nodes"][..], &["doctor"][..]] {
            let started = Instant::now();
            let mut all = vec![
                "--config",
                cfg.to_str().expect("path"),
                "--source",
                "kube",
                "--kubeconfig",
                kc.to_str().expect("path"),
                "--audit-log",
            ];
            let audit = dir.path().join("audit.jsonl");
            all.push(audit.to_str().expect("path"));
            all.extend_from_slice(what);
            let out = run(dir.path(), &all);
            let text = text(&out.stdout) + &text(&out.stderr);
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "{name} {what:?} took {:?}",
                started.elapsed()
            );
            assert!(!out.status.success(), "{name} {what:?}: {text}");
            assert!(text.contains(said), "{name} {what:?}: {text}");
        }
    }
}

/// Issue 59: a SIGTERM to `follow` between its rounds ends it at once
/// (once an action has run, the signals are the runtime's to hear: a
/// loop that only slept would never end), with what is still armed said,
/// and the exit 128 + 15.
#[test]
fn follow_ends_on_a_sigterm_between_rounds() {
    let dir = tempfile::tempdir().expect("tempdir");
    let state = dir.path().join("state");
    let log = dir.path().join("audit.jsonl");
    let ns = |args: &[&str]| {
        let mut c = Command::new(bin());
        c.args([
            "--audit-log",
            log.to_str().expect("path"),
            "--sim-seconds",
            "100",
        ])
        .args(args)
        .arg("--log-file")
        .arg(dir.path().join("n.log"))
        .env("XDG_STATE_HOME", &state);
        c
    };
    let out = ns(&[
        "drain",
        "h100-05",
        "--reason",
        "x",
        "--requeue",
        "--after-checkpoint",
        "--confirm",
        "h100-05",
    ])
    .output()
    .expect("arm");
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let mut child = ns(&["follow", "--interval", "60s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("follow");
    std::thread::sleep(Duration::from_secs(2));
    // SAFETY: a valid pid of our own child; kill has no other precondition.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let started = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "follow never ended"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let out = child.wait_with_output().expect("output");
    assert_eq!(
        status.code(),
        Some(143),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    assert!(
        text(&out.stdout).contains("stopped by a signal"),
        "{}",
        text(&out.stdout)
    );
}
