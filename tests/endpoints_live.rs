//! GPU health from node endpoints, end to end: fixture exporters served
//! here, a real Prometheus (Debian's package) scraping them on loopback,
//! and nightshift reading both ways — scraping the exporters directly
//! (`--dcgm`) and querying Prometheus (`--prometheus`).

mod common;

use common::{require, wait_for};
use serde_json::Value;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const SCRAPE: &str = include_str!("fixtures/dcgm/h100-node.txt");

/// Serves `body` at any path until the test ends; returns the port.
fn serve(body: String) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { continue };
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf);
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = s.write_all(head.as_bytes());
            let _ = s.write_all(body.as_bytes());
        }
    });
    port
}

struct Prom(Child);

impl Drop for Prom {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("port")
}

fn get_gpus(args: &[&str], dir: &std::path::Path) -> (Vec<Value>, String) {
    let (ok, items, stderr) = try_get_gpus(args, dir);
    assert!(ok, "{stderr}");
    (items, stderr)
}

/// `get gpus`, which fails (non-zero) while every source is failing.
fn try_get_gpus(args: &[&str], dir: &std::path::Path) -> (bool, Vec<Value>, String) {
    let out = Command::new(common::bin())
        .args(["--source", "none", "--log-file"])
        .arg(dir.join("ns.log"))
        .args(args)
        .args(["get", "gpus", "-o", "json"])
        .output()
        .expect("nightshift");
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    if !out.status.success() {
        return (false, Vec::new(), stderr);
    }
    let v: Value = serde_json::from_slice(&out.stdout).expect("json");
    (
        true,
        v["items"].as_array().cloned().unwrap_or_default(),
        stderr,
    )
}

fn check_fixture_gpus(items: &[Value], source: &str) {
    let of = |node: &str, i: u64| {
        items
            .iter()
            .find(|g| g["node"] == node && g["index"] == i)
            .cloned()
            .unwrap_or(Value::Null)
    };
    for node in ["gpu01", "gpu02"] {
        let g3 = of(node, 3);
        assert_eq!(g3["last_xid"]["code"], 79, "{node} gpu3: {g3}");
        assert!(g3["temperature_c"].is_null(), "blank sentinel is unknown");
        let g5 = of(node, 5);
        assert_eq!(g5["last_xid"]["code"], 48);
        assert_eq!(g5["ecc"]["dbe_volatile"], 1);
        assert_eq!(g5["ecc"]["dbe_aggregate"], 2);
        assert_eq!(g5["row_remap_pending"], true);
        assert_eq!(g5["sm_occupancy"], 0.774);
        assert_eq!(g5["health"], "critical");
        assert!(
            g5["reading_source"]
                .as_str()
                .is_some_and(|s| s.starts_with(source)),
            "{}",
            g5["reading_source"]
        );
        assert!(
            g5["age_s"].as_i64().is_some_and(|a| a < 120),
            "age {}",
            g5["age_s"]
        );
    }
}

#[test]
fn exporters_directly_and_through_a_real_prometheus() {
    if !require("prometheus", "apt-get install prometheus") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let a = serve(SCRAPE.to_string());
    // A second node with the older exporter's capital `Hostname` label.
    let b = serve(SCRAPE.replace("hostname=\"gpu01\"", "Hostname=\"gpu02\""));

    // 1. Scraping the exporters directly.
    let ua = format!("http://127.0.0.1:{a}/metrics");
    let ub = format!("http://127.0.0.1:{b}/metrics");
    let (items, _) = get_gpus(&["--dcgm", &ua, "--dcgm", &ub], dir.path());
    check_fixture_gpus(&items, "dcgm");

    // A dead endpoint is a warning, not a failure; the live one still counts.
    let (items, stderr) = get_gpus(
        &["--dcgm", &ua, "--dcgm", "http://127.0.0.1:1/metrics"],
        dir.path(),
    );
    assert!(
        stderr.contains("cannot reach http://127.0.0.1:1/metrics"),
        "{stderr}"
    );
    assert_eq!(items.len(), 3);

    // 2. Through Prometheus, which scrapes them every second.
    let port = free_port();
    let cfg = dir.path().join("prometheus.yml");
    std::fs::write(
        &cfg,
        format!("global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: dcgm\n    static_configs:\n      - targets: ['127.0.0.1:{a}', '127.0.0.1:{b}']\n"),
    )
    .expect("config");
    let child = Command::new("prometheus")
        .arg(format!("--config.file={}", cfg.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.path().join("tsdb").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start prometheus");
    let _prom = Prom(child);
    let url = format!("http://127.0.0.1:{port}");
    let ready = wait_for(Duration::from_secs(40), || {
        // Until Prometheus is up, every source fails: not yet.
        let (_, items, _) = try_get_gpus(&["--prometheus", &url], dir.path());
        (items.len() == 6 && items.iter().all(|g| !g["reading_source"].is_null())).then_some(items)
    });
    let items = ready.expect("Prometheus never served both exporters' GPUs");
    check_fixture_gpus(&items, "prometheus");

    // 3. The charts' back-fill: the same two range queries the TUI sends
    // at start, answered by the real Prometheus's query engine.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let p = nightshift::sources::prometheus::Prometheus::new(&url, Duration::from_secs(10))
        .expect("client");
    // Whole seconds: wait until a scrape is older than the second `now`
    // names, or the range ends before the first sample.
    std::thread::sleep(Duration::from_secs(2));
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs() as i64;
    let b = rt.block_on(p.backfill(now, 30, 120));
    assert!(b.notes.is_empty(), "{:?}", b.notes);
    let gpu = |g: u32| &b.gpus[&("gpu01".to_string(), g)];
    // Scraping began seconds ago: the newest slot has the fixture's value,
    // the hour before it nothing (not zero).
    assert_eq!(
        gpu(0).occupancy.last(),
        Some(&Some(81)),
        "{:?}",
        gpu(0).occupancy
    );
    assert_eq!(gpu(0).utilization.last(), Some(&Some(97)));
    assert_eq!(gpu(0).occupancy.first(), Some(&None));
    assert_eq!(gpu(0).occupancy.len(), 120);
    let codes = |g: u32| gpu(g).xids.iter().map(|x| x.code).collect::<Vec<_>>();
    assert_eq!(codes(3), [79]);
    assert!(
        !gpu(3).xids[0].at_window_start,
        "first seen when scraping began, not an hour ago"
    );
    assert_eq!(codes(5), [48]);
    assert!(gpu(0).xids.is_empty(), "Xid 0 is no Xid");
    assert!(
        b.gpus.contains_key(&("gpu02".to_string(), 3)),
        "the capital Hostname label names the second exporter's GPUs"
    );

    // A query Prometheus rejects is a clear error, not a crash.
    let err = Command::new(common::bin())
        .args([
            "--source",
            "none",
            "--prometheus",
            "http://127.0.0.1:1",
            "get",
            "gpus",
        ])
        .output()
        .expect("nightshift");
    assert!(String::from_utf8_lossy(&err.stderr).contains("cannot reach Prometheus"));
}

/// HTTP GET with std only; returns the body.
fn http_get(port: u16, path: &str) -> Option<String> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
        .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    out.split_once("\r\n\r\n").map(|(_, b)| b.to_string())
}

#[test]
fn the_agent_serves_recorded_readings_like_an_exporter() {
    let dir = tempfile::tempdir().expect("tempdir");
    let port = free_port();
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/agent/readings.json"
    );
    let child = Command::new(common::bin())
        .args(["--log-file"])
        .arg(dir.path().join("agent.log"))
        .args([
            "agent",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--host",
            "gpu07",
            "--recorded",
            fixture,
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("agent");
    let _agent = Prom(child);
    let health = wait_for(Duration::from_secs(10), || {
        http_get(port, "/healthz").filter(|b| b.starts_with("ok"))
    });
    assert!(health.is_some_and(|h| h.contains("3 GPUs")));
    // Every event with its sequence number; a reconnect asks for the rest.
    let events = http_get(port, "/events?since=0").expect("events");
    let seqs: Vec<u64> = events
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|e| e["seq"].as_u64())
        .collect();
    assert_eq!(seqs, [1, 2, 3]);
    let rest = http_get(port, "/events?since=2").expect("events");
    assert_eq!(rest.lines().count(), 1);
    assert!(rest.contains("\"xid\":48"));
    // Scraped by nightshift as any dcgm-exporter would be.
    let (items, stderr) = get_gpus(
        &["--dcgm", &format!("http://127.0.0.1:{port}/metrics")],
        dir.path(),
    );
    assert!(stderr.is_empty(), "{stderr}");
    let g = |i: u64| {
        items
            .iter()
            .find(|x| x["node"] == "gpu07" && x["index"] == i)
            .cloned()
            .expect("gpu")
    };
    assert_eq!(g(3)["last_xid"]["code"], 79);
    assert!(g(3)["temperature_c"].is_null());
    assert_eq!(g(5)["ecc"]["dbe_volatile"], 1);
    assert_eq!(g(5)["row_remap_pending"], true);
    assert_eq!(g(0)["sm_occupancy"], 0.81);
    assert_eq!(
        http_get(port, "/nope").map(|b| b.contains("try /metrics")),
        Some(true)
    );
}

#[test]
fn the_agent_without_a_gpu_says_so_in_one_line() {
    // On every host, a driver or none: the agent is pointed at an NVML
    // library that is not there (it used to return early where a driver
    // was installed, a skip that CI counts as a failure).
    let dir = tempfile::tempdir().expect("tempdir");
    let out = Command::new(common::bin())
        .args(["--log-file"])
        .arg(dir.path().join("agent.log"))
        .args(["agent", "--listen", "127.0.0.1:0", "--nvml-lib"])
        .arg(dir.path().join("libnvidia-ml.so.1"))
        .output()
        .expect("agent");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("NVML library not found") && !err.contains("panicked"),
        "{err}"
    );
}

#[test]
fn the_tui_shows_exporter_gpus_with_no_scheduler() {
    if !require("tmux", "apt-get install tmux") {
        return;
    }
    let port = serve(SCRAPE.to_string());
    let t = common::Tmux::start(110, 32);
    let log = t.dir.path().join("ns.log");
    t.type_line(&format!(
        "{} --source none --dcgm http://127.0.0.1:{port}/metrics --log-file {}; echo EXIT=$?",
        common::bin(),
        log.display()
    ));
    t.expect("endpoints │ node endpoints │");
    // GPU 3 (Xid 79) and GPU 5 (DBE) are critical on the grid.
    t.expect("gpu01 ");
    t.expect("x48");
    t.keys(&[":"]);
    t.keys(&["-l", "incidents"]);
    t.keys(&["Enter"]);
    t.expect("XID 79");
    t.expect("drain+reboot");
    t.keys(&["Enter"]);
    t.expect("known only to a node endpoint");
    t.keys(&["q"]);
    t.expect("EXIT=0");
}
