//! GPU health from node endpoints, end to end: fixture exporters served
//! here, a real Prometheus (Debian's package) scraping them on loopback,
//! and nightshift reading both ways — scraping the exporters directly
//! (`--dcgm`) and querying Prometheus (`--prometheus`).

mod common;

use common::{free_port, require, wait_for};
use nightshift::engine::incidents::IncidentKind;
use serde_json::Value;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const SCRAPE: &str = include_str!("fixtures/dcgm/h100-node.txt");
/// The same node in dcgm-exporter 4.9's names and units.
const SCRAPE_4_9: &str = include_str!("fixtures/dcgm/h100-node-4.9.txt");

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

/// Debian's Prometheus scraping `targets` (loopback ports) every second,
/// its data in `dir`; killed on drop. Returns it and its URL.
fn prometheus(dir: &std::path::Path, targets: &[u16]) -> (Prom, String) {
    prometheus_with("prometheus", dir, targets)
}

/// The Prometheus servers the endpoint tests run against: Debian 12's
/// (2.42, on this machine) and Debian testing's (3.5, from the Slurm 26.05
/// chroot: a static binary run from here). Without the chroot, 2.42 alone,
/// said — except under CI=true, where a skip is a failure.
fn prometheus_servers() -> Vec<String> {
    let mut out = vec!["prometheus".to_string()];
    match common::slurm::prometheus_3() {
        Ok(p) => out.push(p.display().to_string()),
        Err(e) => {
            if std::env::var("CI").is_ok_and(|v| v == "true") {
                panic!("Prometheus 3 is missing and CI=true forbids skipping: {e}");
            }
            eprintln!("SKIPPED: the Prometheus 3 runs: {e}");
        }
    }
    out
}

/// The fleet's servers: Prometheus 2 and 3, and VictoriaMetrics (Debian's
/// `victoria-metrics`), which many sites grow into and which speaks
/// Prometheus's HTTP API (issue 63). Without it, said — except under
/// CI=true, where a skip is a failure.
fn fleet_servers() -> Vec<String> {
    let mut out = prometheus_servers();
    if require("victoria-metrics", "apt-get install victoria-metrics") {
        out.push("victoria-metrics".to_string());
    }
    out
}

/// The Prometheus at `bin` scraping `targets`, as [`prometheus`];
/// VictoriaMetrics for `victoria-metrics`, with the same scrape config.
fn prometheus_with(bin: &str, dir: &std::path::Path, targets: &[u16]) -> (Prom, String) {
    if bin == "victoria-metrics" {
        return victoria_metrics(dir, targets);
    }
    let port = free_port();
    let cfg = scrape_config(dir, targets);
    let child = Command::new(bin)
        .arg(format!("--config.file={}", cfg.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("tsdb").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        // Back-filled weeks (the repeat-offender test) outlive the default 15 days.
        .arg("--storage.tsdb.retention.time=60d")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start prometheus");
    (Prom(child), format!("http://127.0.0.1:{port}"))
}

/// A scrape configuration (Prometheus's format, which VictoriaMetrics
/// reads too) for `targets` every second, written in `dir`.
fn scrape_config(dir: &std::path::Path, targets: &[u16]) -> std::path::PathBuf {
    let cfg = dir.join("prometheus.yml");
    let list: Vec<String> = targets.iter().map(|t| format!("'127.0.0.1:{t}'")).collect();
    std::fs::write(
        &cfg,
        format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: lab\n    static_configs:\n      - targets: [{}]\n",
            list.join(", ")
        ),
    )
    .expect("config");
    cfg
}

/// VictoriaMetrics single-node scraping `targets` every second, its data
/// in `dir`: its query API at the root, as Prometheus's; points visible
/// at once (`-search.latencyOffset=0s`: the default hides the last 30 s).
fn victoria_metrics(dir: &std::path::Path, targets: &[u16]) -> (Prom, String) {
    let port = free_port();
    let cfg = scrape_config(dir, targets);
    let child = Command::new("victoria-metrics")
        .arg(format!("-promscrape.config={}", cfg.display()))
        .arg(format!("-storageDataPath={}", dir.join("vm").display()))
        .arg(format!("-httpListenAddr=127.0.0.1:{port}"))
        .arg("-retentionPeriod=2")
        .arg("-search.latencyOffset=0s")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start victoria-metrics");
    (Prom(child), format!("http://127.0.0.1:{port}"))
}

/// A runtime for a test that drives the endpoints' loop as the console does.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

/// The endpoints' loop's next snapshot, as the console gets them (each
/// after one round); the loop stopping, or 10 s without one, fails.
async fn next_snapshot(
    out: &mut tokio::sync::mpsc::Receiver<nightshift::sources::Update>,
) -> std::sync::Arc<nightshift::model::Cluster> {
    loop {
        match tokio::time::timeout(Duration::from_secs(10), out.recv()).await {
            Ok(Some(nightshift::sources::Update::Snapshot(c))) => return c,
            Ok(Some(_)) => {}
            Ok(None) | Err(_) => panic!("the endpoint loop stopped"),
        }
    }
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

fn check_fixture_gpus(items: &[Value], source: &str, nodes: &[&str]) {
    let of = |node: &str, i: u64| {
        items
            .iter()
            .find(|g| g["node"] == node && g["index"] == i)
            .cloned()
            .unwrap_or(Value::Null)
    };
    for &node in nodes {
        let g0 = of(node, 0);
        assert_eq!(g0["utilization"], 0.97, "{node} gpu0: {g0}");
        assert_eq!(g0["memory_used_mib"], 71234, "{node} gpu0: {g0}");
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
fn exporters_directly_and_through_a_real_prometheus_2_and_3() {
    if !require("prometheus", "apt-get install prometheus") {
        return;
    }
    for bin in prometheus_servers() {
        exporters_directly_and_through(&bin);
    }
}

fn exporters_directly_and_through(prometheus_bin: &str) {
    let dir = tempfile::tempdir().expect("tempdir");
    let a = serve(SCRAPE.to_string());
    // A second node with the older exporter's capital `Hostname` label.
    let b = serve(SCRAPE.replace("hostname=\"gpu01\"", "Hostname=\"gpu02\""));
    // A third with dcgm-exporter 4.9's names and units (issue 38).
    let c = serve(SCRAPE_4_9.replace("hostname=\"gpu01\"", "hostname=\"gpu03\""));
    let nodes = ["gpu01", "gpu02", "gpu03"];

    // 1. Scraping the exporters directly.
    let ua = format!("http://127.0.0.1:{a}/metrics");
    let ub = format!("http://127.0.0.1:{b}/metrics");
    let uc = format!("http://127.0.0.1:{c}/metrics");
    let (items, _) = get_gpus(&["--dcgm", &ua, "--dcgm", &ub, "--dcgm", &uc], dir.path());
    check_fixture_gpus(&items, "dcgm", &nodes);
    let names = |node: &str| {
        items
            .iter()
            .find(|g| g["node"] == node && g["index"] == 0)
            .map(|g| g["metric_names"].clone())
    };
    assert_eq!(
        names("gpu03"),
        Some(Value::from("dcgm-exporter 4.9 and later (DCGM 4.7 names)"))
    );
    assert_eq!(
        names("gpu01"),
        Some(Value::from("dcgm-exporter 4.8 and before"))
    );

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
    let (_prom, url) = prometheus_with(prometheus_bin, dir.path(), &[a, b, c]);
    let ready = wait_for(Duration::from_secs(40), || {
        // Until Prometheus is up, every source fails: not yet.
        let (_, items, _) = try_get_gpus(&["--prometheus", &url], dir.path());
        (items.len() == 9 && items.iter().all(|g| !g["reading_source"].is_null())).then_some(items)
    });
    let items = ready.expect("Prometheus never served the three exporters' GPUs");
    check_fixture_gpus(&items, "prometheus", &nodes);
    doctor_on_prometheus(dir.path(), &url, &uc);

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
    let b = rt.block_on(p.backfill(now, 30, 120, true));
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
    // dcgm-exporter 4.9's names: the same history (utilization a ratio there).
    let new = |g: u32| &b.gpus[&("gpu03".to_string(), g)];
    assert_eq!(new(0).occupancy.last(), Some(&Some(81)), "{:?}", new(0));
    assert_eq!(new(0).utilization.last(), Some(&Some(97)), "{:?}", new(0));
    assert_eq!(new(3).xids.iter().map(|x| x.code).collect::<Vec<_>>(), [79]);

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
/// `nightshift doctor` on this real Prometheus (issue 41): answering, the
/// exporters' name generations, and the same Prometheus behind a proxy
/// that holds each request 2.5 s — slow, said with what to do.
fn doctor_on_prometheus(dir: &std::path::Path, url: &str, new_names: &str) {
    let audit = dir.join("audit.jsonl");
    let audit = audit.to_str().expect("path");
    let doctor = |args: &[&str]| {
        let out = common::nightshift(dir, &[args, &["--audit-log", audit, "doctor"]].concat());
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    // A check's line and the lines under it (a long name's detail, the fix).
    let line = |said: &str, start: &str| {
        let mut lines = said.lines().skip_while(|l| !l.starts_with(start));
        let first = lines
            .next()
            .unwrap_or_else(|| panic!("no {start:?} in\n{said}"));
        let under: Vec<&str> = lines.take_while(|l| l.starts_with("      ")).collect();
        format!("{first}\n{}", under.join("\n"))
    };
    let said = doctor(&["--prometheus", url]);
    assert!(
        line(&said, "ok    endpoint").contains("answered in"),
        "{said}"
    );
    assert!(
        line(&said, "warn  GPU readings").contains("9 GPUs on 3 hosts, named as both generations"),
        "{said}"
    );
    let said = doctor(&["--dcgm", new_names]);
    assert!(
        line(&said, "warn  GPU readings").contains("named as dcgm-exporter 4.9 and later"),
        "{said}"
    );
    let port: u16 = url
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("port");
    let slow = common::fake::slow_proxy(port, Duration::from_millis(2500));
    let said = doctor(&["--prometheus", &format!("http://127.0.0.1:{slow}")]);
    let l = line(&said, "warn  endpoint");
    assert!(l.contains("answered, slowly"), "{said}");
    assert!(said.contains("→ look at its load"), "{said}");
}

fn http_get(port: u16, path: &str) -> Option<String> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes())
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
    // Scraped by Prometheus 2 and 3: Prometheus 3 refuses a target whose
    // Content-Type is not a Prometheus format (issue 38), so the agent's
    // readings reaching nightshift through it say the agent names its format.
    if !require("prometheus", "apt-get install prometheus") {
        return;
    }
    for bin in prometheus_servers() {
        let pdir = tempfile::tempdir().expect("tempdir");
        let (_prom, url) = prometheus_with(&bin, pdir.path(), &[port]);
        let through = wait_for(Duration::from_secs(40), || {
            let (_, items, _) = try_get_gpus(&["--prometheus", &url], dir.path());
            items
                .iter()
                .find(|x| x["node"] == "gpu07" && x["index"] == 3)
                .filter(|x| x["last_xid"]["code"] == 79)
                .cloned()
        });
        assert!(through.is_some(), "{bin} never served the agent's GPUs");
    }
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
    // GPU 3 (Xid 79) and GPU 5 (DBE) are critical on the grid; the node
    // is marked by its most drastic incident's Xid (the one enter opens).
    t.expect("gpu01 ");
    t.expect("x79");
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

/// A generated sysfs tree of HCA ports for the real node exporter's
/// infiniband collector (`--path.sysfs`): the test changes its counters.
struct Sysfs(tempfile::TempDir);

impl Sysfs {
    fn new() -> Sysfs {
        let s = Sysfs(tempfile::tempdir().expect("tempdir"));
        for dev in ["mlx5_0", "mlx5_1"] {
            let d = s.0.path().join("class/infiniband").join(dev);
            std::fs::create_dir_all(d.join("ports/1/counters")).expect("mkdir");
            for (f, v) in [
                ("hca_type", "MT4129"),
                ("fw_ver", "28.39.1002"),
                ("board_id", "MT_0000000838"),
            ] {
                std::fs::write(d.join(f), format!("{v}\n")).expect("write");
            }
            for c in [
                "link_downed",
                "link_error_recovery",
                "symbol_error",
                "port_rcv_errors",
                "port_xmit_discards",
                "port_rcv_data",
                "port_xmit_data",
                "port_rcv_packets",
                "port_xmit_packets",
                "local_link_integrity_errors",
                "excessive_buffer_overrun_errors",
            ] {
                std::fs::write(d.join("ports/1/counters").join(c), "0\n").expect("write");
            }
            std::fs::write(d.join("ports/1/rate"), "400 Gb/sec (4X NDR)\n").expect("write");
        }
        s.set("mlx5_0", true, 0);
        s.set("mlx5_1", true, 0);
        s
    }

    /// Port 1 of `dev` up (ACTIVE, LinkUp) or down (DOWN, Polling), with
    /// its link-downed counter at `downed`.
    fn set(&self, dev: &str, up: bool, downed: u64) {
        let p = self
            .0
            .path()
            .join("class/infiniband")
            .join(dev)
            .join("ports/1");
        let (state, phys) = if up {
            ("4: ACTIVE", "5: LinkUp")
        } else {
            ("1: DOWN", "2: Polling")
        };
        std::fs::write(p.join("state"), format!("{state}\n")).expect("write");
        std::fs::write(p.join("phys_state"), format!("{phys}\n")).expect("write");
        std::fs::write(p.join("counters/link_downed"), format!("{downed}\n")).expect("write");
    }
}

/// The node exporter serving `sysfs` on a free port (killed on drop).
fn node_exporter(sysfs: &Sysfs) -> (Prom, u16) {
    let port = free_port();
    let child = Command::new("prometheus-node-exporter")
        .arg(format!("--path.sysfs={}", sysfs.0.path().display()))
        .args(["--collector.disable-defaults", "--collector.infiniband"])
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start prometheus-node-exporter");
    let up = wait_for(Duration::from_secs(20), || {
        http_get(port, "/metrics").filter(|b| b.contains("node_infiniband_state_id"))
    });
    assert!(up.is_some(), "the node exporter never served its ports");
    (Prom(child), port)
}

fn get_nodes(args: &[&str], dir: &std::path::Path) -> Vec<Value> {
    let out = Command::new(common::bin())
        .args(["--source", "none", "--log-file"])
        .arg(dir.join("ns.log"))
        .args(args)
        .args(["get", "nodes", "-o", "json"])
        .output()
        .expect("nightshift");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("json");
    v["items"].as_array().cloned().unwrap_or_default()
}

/// The real node exporter (Debian's prometheus-node-exporter) reading a
/// generated sysfs: its ports reach `get nodes` directly and through the
/// real Prometheus; in the console's own endpoint loop a port that goes
/// down, and one that flaps between two scrapes, each become the node's
/// incident within two scrapes.
#[test]
fn an_ib_port_flapping_in_the_real_node_exporter_is_an_incident_within_two_scrapes() {
    if !require(
        "prometheus-node-exporter",
        "apt-get install prometheus-node-exporter",
    ) || !require("prometheus", "apt-get install prometheus")
    {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let sysfs = Sysfs::new();
    sysfs.set("mlx5_1", false, 3);
    let (_exporter, port) = node_exporter(&sysfs);
    let url = format!("http://127.0.0.1:{port}/metrics");

    // 1. Scraped directly: no scheduler names the host, so the node is
    // the endpoint's own; its two ports as the exporter read them.
    let nodes = get_nodes(&["--node-exporter", &url], dir.path());
    assert_eq!(nodes.len(), 1, "{nodes:?}");
    let ports = nodes[0]["ib_ports"].as_array().cloned().unwrap_or_default();
    assert_eq!(ports.len(), 2, "{nodes:?}");
    assert_eq!(ports[0]["device"], "mlx5_0");
    assert_eq!(ports[0]["state"], 4);
    assert_eq!(ports[0]["physical_state"], 5);
    assert_eq!(ports[0]["rate_bytes_per_second"], 50_000_000_000.0);
    assert_eq!(ports[1]["state"], 1);
    assert_eq!(ports[1]["link_downed"], 3);

    // 2. Through the real Prometheus scraping it every second.
    let (_prom, purl) = prometheus(dir.path(), &[port]);
    let through = wait_for(Duration::from_secs(40), || {
        let out = Command::new(common::bin())
            .args([
                "--source",
                "none",
                "--prometheus",
                &purl,
                "get",
                "nodes",
                "-o",
                "json",
            ])
            .output()
            .ok()?;
        let v: Value = serde_json::from_slice(&out.stdout).ok()?;
        let items = v["items"].as_array()?.clone();
        (items.len() == 1
            && items[0]["ib_ports"]
                .as_array()
                .is_some_and(|p| p.len() == 2))
        .then_some(items)
    })
    .expect("Prometheus never served the exporter's ports");
    assert_eq!(through[0]["name"], "127.0.0.1", "the instance's host");
    assert_eq!(through[0]["ib_ports"][1]["state"], 1);

    // 3. The console's endpoint loop beside a scheduler that names the
    // host gpu01 ([endpoints] hosts by the exporter's address).
    use nightshift::sources::Update;
    sysfs.set("mlx5_1", true, 3);
    let rt = runtime();
    rt.block_on(async {
        let (stx, srx) = tokio::sync::mpsc::channel(8);
        let mut hosts = std::collections::BTreeMap::new();
        hosts.insert(format!("127.0.0.1:{port}"), "gpu01".to_string());
        let e = nightshift::sources::endpoints::Endpoints {
            dcgm: Vec::new(),
            node_exporter: vec![url.clone()],
            prometheus: None,
            interval: Duration::from_millis(300),
            timeout: Duration::from_secs(2),
            hosts: nightshift::sources::dcgm::merge::HostMap(hosts),
            ..nightshift::sources::endpoints::Endpoints::default()
        };
        let mut out = nightshift::sources::endpoints::spawn(
            Some(srx),
            e,
            nightshift::sources::nothing_open(),
        )
        .expect("spawn");
        let mut c = nightshift::model::Cluster {
            name: "t".into(),
            source: "slurm".into(),
            time: nightshift::host::now(),
            ..Default::default()
        };
        nightshift::engine::fixture::add_node(&mut c, "gpu01", "p", 8);
        stx.send(Update::Snapshot(std::sync::Arc::new(c)))
            .await
            .expect("send");
        // Analysed as the console's analyst does: every snapshot observed
        // into one memory (a port's going down and its flap are derived
        // from its readings there, as for every source).
        let mut memory = nightshift::engine::memory::Memory::default();
        let mut incidents = |c: &nightshift::model::Cluster| {
            memory.observe(c, &Default::default());
            memory
                .base(c, &Default::default(), &Default::default())
                .incidents
        };
        // Both ports up first.
        let mut seen = None;
        for _ in 0..20 {
            let c = next_snapshot(&mut out).await;
            let n = c.node("gpu01").expect("gpu01");
            if n.ib_ports.len() == 2 && n.ib_ports.iter().all(|p| p.state == Some(4)) {
                seen = Some(c);
                break;
            }
        }
        let c = seen.expect("gpu01's two ports up");
        let first = incidents(&c);
        assert!(first.is_empty(), "{first:?}");

        // mlx5_0 goes down: an incident of gpu01 within two scrapes.
        sysfs.set("mlx5_0", false, 1);
        let mut found = None;
        for _ in 0..2 {
            let c = next_snapshot(&mut out).await;
            if let Some(i) = incidents(&c)
                .into_iter()
                .find(|i| i.kind == IncidentKind::Link)
            {
                found = Some(i);
                break;
            }
        }
        let i = found.expect("the port's incident within two scrapes");
        assert_eq!((i.node.as_str(), i.label.as_str()), ("gpu01", "IB DOWN"));
        assert!(
            i.message
                .contains("IB port mlx5_0/1 is DOWN (physical Polling)"),
            "{}",
            i.message
        );
        assert_eq!(
            i.action,
            nightshift::engine::xid::ActionClass::DrainInvestigate
        );

        // mlx5_1 flaps between two scrapes (never seen down): its
        // link-downed counter moved.
        sysfs.set("mlx5_0", true, 1);
        sysfs.set("mlx5_1", true, 4);
        let mut flap = None;
        for _ in 0..2 {
            let c = next_snapshot(&mut out).await;
            if let Some(i) = incidents(&c).into_iter().find(|i| {
                i.kind == IncidentKind::Link && i.evidence.iter().any(|e| e.contains("mlx5_1/1"))
            }) {
                flap = Some(i);
                break;
            }
        }
        let i = flap.expect("the flap's incident within two scrapes");
        assert!(
            i.evidence
                .iter()
                .any(|e| e.contains("mlx5_1/1 lost its link and got it back: link downed 4 times")),
            "{:?}",
            i.evidence
        );
    });
}

/// A dcgm-exporter-shaped page for `hosts` nodes of 8 GPUs each, every
/// node under its own `Hostname` label (as one federation-style target
/// serves a fleet): `gpu-007` GPU 3 has Xid 79; every GPU of `gpu-010`
/// and `gpu-011` spins (full utilization, no SM occupancy). Odd nodes
/// speak dcgm-exporter 4.9's names and units (utilization a ratio), even
/// ones the names before it: the Xid node and one spinning node are of
/// the new generation.
fn fleet_page(hosts: usize) -> String {
    let mut out = String::new();
    for f in [
        "DCGM_FI_DEV_GPU_UTIL",
        "DCGM_FI_PROF_SM_OCCUPANCY",
        "DCGM_FI_DEV_GPU_TEMP",
        "DCGM_FI_DEV_XID_ERRORS",
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
    ] {
        let renamed = match f {
            "DCGM_FI_DEV_GPU_UTIL" => "DCGM_FI_DEV_GPU_UTIL_RATIO",
            "DCGM_FI_PROF_SM_OCCUPANCY" => "DCGM_FI_PROF_SM_OCCUPANCY_RATIO",
            "DCGM_FI_DEV_GPU_TEMP" => "DCGM_FI_DEV_GPU_TEMP_CELSIUS",
            "DCGM_FI_DEV_XID_ERRORS" => "DCGM_FI_DEV_XID_ERROR",
            other => other,
        };
        out.push_str(&format!("# TYPE {f} gauge\n"));
        if renamed != f {
            out.push_str(&format!("# TYPE {renamed} gauge\n"));
        }
        for h in 0..hosts {
            let new = h % 2 == 1;
            for g in 0..8 {
                let spinning = h == 10 || h == 11;
                let v = match f {
                    "DCGM_FI_DEV_GPU_UTIL" => if spinning { "100" } else { "60" }.to_string(),
                    "DCGM_FI_PROF_SM_OCCUPANCY" => {
                        if spinning { "0.01" } else { "0.5" }.to_string()
                    }
                    "DCGM_FI_DEV_GPU_TEMP" => "55".to_string(),
                    "DCGM_FI_DEV_XID_ERRORS" => {
                        if h == 7 && g == 3 { "79" } else { "0" }.to_string()
                    }
                    _ => "0".to_string(),
                };
                let (f, v) = match (new, f) {
                    (true, "DCGM_FI_DEV_GPU_UTIL") => (
                        renamed,
                        (v.parse::<f64>().unwrap_or(0.0) / 100.0).to_string(),
                    ),
                    (true, _) => (renamed, v),
                    (false, _) => (f, v),
                };
                out.push_str(&format!(
                    "{f}{{gpu=\"{g}\",UUID=\"GPU-{h:04}-{g}\",modelName=\"NVIDIA H100 80GB HBM3\",Hostname=\"gpu-{h:03}\"}} {v}\n"
                ));
            }
        }
    }
    out
}

/// The fleet path against the real Prometheus: with more GPUs than
/// `--prometheus-every-gpu-max`, healthy nodes come as per-node
/// aggregates, the node with an Xid and the spinning nodes in full, and
/// the incident is the same one the every-series path finds; a node the
/// console opens is read in full at once.
#[test]
fn a_fleet_through_the_real_prometheus_2_and_3_and_victoria_metrics_is_read_in_aggregate_and_problems_in_full()
 {
    if !require("prometheus", "apt-get install prometheus") {
        return;
    }
    for bin in fleet_servers() {
        a_fleet_through(&bin);
    }
}

fn a_fleet_through(prometheus_bin: &str) {
    let dir = tempfile::tempdir().expect("tempdir");
    let target = serve(fleet_page(24));
    let (_prom, url) = prometheus_with(prometheus_bin, dir.path(), &[target]);
    // The server holds the whole fleet before nightshift asks: a one-shot
    // racing the first scrape may find no aggregates (nothing counted yet,
    // so read as a small cluster, every series) and then the scrape's
    // every series a moment later — right for a small cluster, not what
    // this test is about.
    let port: u16 = url
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("port");
    wait_for(Duration::from_secs(40), || {
        // Both generations of names: half the fleet each.
        let body = http_get(
            port,
            "/api/v1/query?query=count(DCGM_FI_DEV_GPU_UTIL)%2Bcount(DCGM_FI_DEV_GPU_UTIL_RATIO)",
        )?;
        body.contains("\"192\"").then_some(())
    })
    .expect("Prometheus never held the fleet's 192 GPUs");
    let nodes = wait_for(Duration::from_secs(40), || {
        let out = Command::new(common::bin())
            .args(["--source", "none", "--log-file"])
            .arg(dir.path().join("ns.log"))
            .args(["--prometheus", &url, "--prometheus-every-gpu-max", "100"])
            .args(["get", "nodes", "-o", "json"])
            .output()
            .ok()?;
        let v: Value = serde_json::from_slice(&out.stdout).ok()?;
        let items = v["items"].as_array().cloned().unwrap_or_default();
        (items.len() == 24).then_some(items)
    })
    .expect("Prometheus never served the fleet's 24 nodes");
    let node = |name: &str| {
        nodes
            .iter()
            .find(|n| n["name"] == name)
            .unwrap_or_else(|| panic!("{name} in {nodes:?}"))
            .clone()
    };
    let healthy = node("gpu-003");
    assert_eq!(healthy["gpu_summary"]["gpus"], 8, "{healthy}");
    assert_eq!(healthy["gpu_summary"]["utilization"], 0.6, "{healthy}");
    assert_eq!(healthy["mean_sm_occupancy"], 0.5, "{healthy}");
    for name in ["gpu-007", "gpu-010", "gpu-011"] {
        assert!(
            node(name).get("gpu_summary").is_none(),
            "{name} read in full"
        );
    }
    let (gpus, _) = get_gpus(
        &["--prometheus", &url, "--prometheus-every-gpu-max", "100"],
        dir.path(),
    );
    let mut hosts: Vec<&str> = gpus.iter().filter_map(|g| g["node"].as_str()).collect();
    hosts.dedup();
    assert_eq!(
        hosts,
        ["gpu-007", "gpu-010", "gpu-011"],
        "only problem nodes per GPU"
    );
    let xid = gpus
        .iter()
        .find(|g| g["node"] == "gpu-007" && g["index"] == 3)
        .expect("gpu-007 GPU 3");
    assert_eq!(xid["last_xid"]["code"], 79);
    // The same story both ways: one Xid 79 incident on gpu-007.
    let incidents = |max: &str| {
        let out = common::nightshift(
            dir.path(),
            &[
                "--source",
                "none",
                "--prometheus",
                &url,
                "--prometheus-every-gpu-max",
                max,
                "get",
                "incidents",
                "-o",
                "json",
            ],
        );
        let v: Value = serde_json::from_slice(&out.stdout).expect("json");
        v["items"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .map(|i| {
                format!(
                    "{} {} {}",
                    i["node"].as_str().unwrap_or(""),
                    i["gpu"],
                    i["label"].as_str().unwrap_or("")
                )
            })
            .collect::<Vec<_>>()
    };
    let fleet = incidents("100");
    assert_eq!(fleet, ["gpu-007 3 XID 79"]);
    assert_eq!(
        fleet,
        incidents("100000"),
        "the fleet path tells what the every-series path does"
    );

    // The console's loop: an opened node is read in full in one query.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let e = nightshift::sources::endpoints::Endpoints {
        prometheus: Some(url.clone()),
        prometheus_every_gpu_max: 100,
        ..nightshift::sources::endpoints::Endpoints::default()
    };
    let base = nightshift::model::Cluster::default();
    rt.block_on(async {
        let mut p = nightshift::sources::endpoints::Poller::new(&e).expect("poller");
        // The console's first refresh: the broken GPUs' node in full, the
        // rest in aggregate (the spinning GPUs come on the second).
        let round = p.poll(&base, &[], &e.hosts).await;
        assert_eq!(round.aggregates.len(), 23, "the others in aggregate");
        assert_eq!(round.readings.len(), 8, "gpu-007's 8 GPUs in full");
        let opened = vec!["gpu-003".to_string()];
        let t = std::time::Instant::now();
        let open = p
            .poll_open(&base, &opened, &e.hosts)
            .await
            .expect("read in full");
        let took = t.elapsed();
        assert_eq!(
            open.readings.iter().filter(|r| r.host == "gpu-003").count(),
            8,
            "the opened node's every GPU"
        );
        assert_eq!(open.aggregates.len(), 22, "no longer an aggregate");
        assert!(took < Duration::from_secs(1), "opened in {took:?}");
        // Already read: nothing more to ask.
        assert!(p.poll_open(&base, &opened, &e.hosts).await.is_none());
        // The next refresh keeps the opened node in full and adds the
        // spinning nodes.
        let round = p.poll(&base, &opened, &e.hosts).await;
        assert_eq!(round.readings.len(), 32);
        assert_eq!(round.aggregates.len(), 20);
        // The second refresh also asked the broken and opened hosts'
        // weeks of faults, and the real server took the queries.
        assert!(
            !round.notes.iter().any(|n| n.contains("no fault history")),
            "{:?}",
            round.notes
        );
        // A fleet's hour of history: the Xids alone, of the hosts that had
        // one, found by one pass over the hour.
        let client =
            nightshift::sources::prometheus::Prometheus::new(&url, Duration::from_secs(10))
                .expect("client");
        // Whole seconds: a range ending at `now` sees the scrapes before
        // it; the server may not have committed the newest yet, so ask
        // again before calling it empty. VictoriaMetrics aligns a range's
        // points to its step (30 s here): data younger than the last one
        // shows once a grid point passes it, so up to 45 s.
        let mut b = nightshift::model::Backfill::default();
        for _ in 0..45 {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .expect("clock")
                .as_secs() as i64;
            b = client.backfill(now, 30, 120, false).await;
            if !b.gpus.is_empty() {
                break;
            }
        }
        let hosts: std::collections::BTreeSet<&str> =
            b.gpus.keys().map(|(h, _)| h.as_str()).collect();
        assert_eq!(
            hosts.into_iter().collect::<Vec<_>>(),
            ["gpu-007"],
            "{:?}",
            b.notes
        );
        let x = &b.gpus[&("gpu-007".to_string(), 3)].xids;
        assert_eq!(x.iter().map(|x| x.code).collect::<Vec<_>>(), [79]);
        assert!(
            b.gpus[&("gpu-007".to_string(), 3)]
                .occupancy
                .iter()
                .all(Option::is_none)
        );
        // `get incidents`' one poll (issue 42): the GPU count says it is
        // a fleet, and only the broken GPU's node is read, in full, with
        // its weeks of faults; no healthy node's aggregate and no spinning
        // node, which one reading cannot call stalled. `get nodes`' poll
        // reads all three.
        let mut lean = nightshift::sources::endpoints::Poller::new(&e)
            .expect("poller")
            .problems();
        let round = lean.poll(&base, &[], &e.hosts).await;
        assert!(round.aggregates.is_empty(), "{:?}", round.aggregates);
        let hosts: std::collections::BTreeSet<&str> =
            round.readings.iter().map(|r| r.host.as_str()).collect();
        assert_eq!(hosts.into_iter().collect::<Vec<_>>(), ["gpu-007"]);
        assert_eq!(round.readings.len(), 8);
        // Its weeks of faults were asked at once (the history test below
        // reads them back through `get incidents`).
        assert!(
            !round.notes.iter().any(|n| n.contains("no fault history")),
            "{:?}",
            round.notes
        );
        let mut whole = nightshift::sources::endpoints::Poller::new(&e)
            .expect("poller")
            .whole();
        let round = whole.poll(&base, &[], &e.hosts).await;
        assert_eq!(round.aggregates.len(), 21, "the healthy nodes in aggregate");
        assert_eq!(
            round.readings.len(),
            24,
            "gpu-007, gpu-010, gpu-011 in full"
        );
    });
}

/// Nodes that keep failing, from the real Prometheus's history (issue 29):
/// weeks of `DCGM_FI_DEV_XID_ERRORS` back-filled with Debian's promtool
/// (`tsdb create-blocks-from openmetrics`) — gpu-007 GPU 3 fell off the
/// bus 25 and 12 days ago, gpu-008 GPU 1 once 5 days ago — and the live
/// scrape shows gpu-007's GPU 3 at Xid 79 again now. `get nodes` counts
/// three for gpu-007, a repeat offender; gpu-008 has one. (What its
/// options recommend is the engine's, tested on a recording in cli.rs:
/// `--source none` has no scheduler to act through.)
#[test]
fn the_real_prometheus_history_makes_a_node_with_three_xid_79s_a_repeat_offender() {
    if !require("prometheus", "apt-get install prometheus")
        || !require("promtool", "apt-get install prometheus")
    {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs() as i64;
    let mut om = String::from("# TYPE DCGM_FI_DEV_XID_ERRORS gauge\n");
    for (host, gpu, runs) in [
        ("gpu-007", 3, vec![(25 * 86_400, 3600), (12 * 86_400, 2400)]),
        ("gpu-008", 1, vec![(5 * 86_400, 1800)]),
    ] {
        let mut t = now - 28 * 86_400;
        while t < now - 3 * 3600 {
            let on = runs
                .iter()
                .any(|&(ago, len)| now - ago <= t && t < now - ago + len);
            let v = if on { 79 } else { 0 };
            om.push_str(&format!(
                "DCGM_FI_DEV_XID_ERRORS{{gpu=\"{gpu}\",Hostname=\"{host}\"}} {v} {t}\n"
            ));
            t += 300;
        }
    }
    om.push_str("# EOF\n");
    let file = dir.path().join("history.om");
    std::fs::write(&file, om).expect("openmetrics");
    let made = Command::new("promtool")
        .args([
            "tsdb",
            "create-blocks-from",
            "openmetrics",
            "--max-block-duration=720h",
        ])
        .arg(&file)
        .arg(dir.path().join("tsdb"))
        .output()
        .expect("promtool");
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let target = serve(fleet_page(12));
    let (_prom, url) = prometheus(dir.path(), &[target]);
    let get = |args: &[&str]| -> Option<Value> {
        let out = Command::new(common::bin())
            .args(["--source", "none", "--log-file"])
            .arg(dir.path().join("ns.log"))
            .args(["--prometheus", &url])
            .args(args)
            .args(["-o", "json"])
            .output()
            .ok()?;
        serde_json::from_slice(&out.stdout).ok()
    };
    let history = |nodes: &Value, name: &str| -> Value {
        nodes["items"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|n| n["name"] == name)
            .map(|n| n["history"].clone())
            .unwrap_or(Value::Null)
    };
    // Until the live scrape is in (the history alone says two).
    let nodes = wait_for(Duration::from_secs(40), || {
        let v = get(&["get", "nodes"])?;
        (history(&v, "gpu-007")["faults"][0]["count"] == 3).then_some(v)
    })
    .unwrap_or_else(|| panic!("gpu-007 never had three: {:?}", get(&["get", "nodes"])));
    let h = history(&nodes, "gpu-007");
    assert_eq!(h["faults"][0]["fault"], "Xid 79", "{h:#}");
    assert_eq!(h["faults"][0]["gpus"], serde_json::json!([3]));
    assert!(
        h["line"]
            .as_str()
            .is_some_and(|l| l.starts_with("3rd Xid 79 in 30 days")),
        "{h:#}"
    );
    assert!(h["repeat_offender"].is_string(), "{h:#}");
    let h8 = history(&nodes, "gpu-008");
    assert_eq!(h8["faults"][0]["count"], 1, "{h8:#}");
    assert!(h8["repeat_offender"].is_null(), "{h8:#}");
    // Nodes with nothing in the window have no history.
    assert!(history(&nodes, "gpu-001").is_null());

    // The same server read as a fleet (96 GPUs > 8): the weeks of the
    // broken host alone are asked — gpu-007 still has its three; gpu-008,
    // healthy now, is not asked (its history is what nightshift saw).
    let fleet = get(&["--prometheus-every-gpu-max", "8", "get", "nodes"]).expect("json");
    let h = history(&fleet, "gpu-007");
    assert_eq!(h["faults"][0]["count"], 3, "{h:#}");
    assert!(h["repeat_offender"].is_string(), "{h:#}");
    assert!(history(&fleet, "gpu-008").is_null(), "{fleet:#}");
    assert!(
        fleet["items"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|n| n["gpu_summary"].is_object()),
        "read as a fleet: {fleet:#}"
    );

    // What `get incidents` asks (issue 42): the broken host in full, no
    // healthy node's aggregate, and the broken host's weeks at once —
    // gpu-007's two Xid 79s of the history and today's; gpu-008 is not
    // asked.
    let rt = runtime();
    rt.block_on(async {
        let e = nightshift::sources::endpoints::Endpoints {
            prometheus: Some(url.clone()),
            prometheus_every_gpu_max: 8,
            ..nightshift::sources::endpoints::Endpoints::default()
        };
        let mut p = nightshift::sources::endpoints::Poller::new(&e)
            .expect("poller")
            .problems();
        let base = nightshift::model::Cluster::default();
        let round = p.poll(&base, &[], &e.hosts).await;
        assert!(round.aggregates.is_empty(), "{:?}", round.aggregates);
        assert!(round.readings.iter().all(|r| r.host == "gpu-007"));
        let xids: Vec<_> = round
            .faults
            .iter()
            .filter(|f| f.node == "gpu-007" && f.fault == nightshift::model::Fault::Xid(79))
            .collect();
        assert!(xids.len() >= 2, "{:?} {:?}", round.faults, round.notes);
        assert!(round.faults.iter().all(|f| f.node == "gpu-007"));
    });

    // The console's path, not the one-shot's: the endpoints' loop as the
    // console runs it (no scheduler here), the server read as a fleet. Its
    // first refresh asks for no weeks (the first screen waits for none of
    // them); a later one asks for the broken host's, and gpu-007 is a
    // repeat offender on the console's snapshot; healthy gpu-008 is not
    // asked.
    let rt = runtime();
    rt.block_on(async {
        let e = nightshift::sources::endpoints::Endpoints {
            prometheus: Some(url.clone()),
            interval: Duration::from_millis(300),
            timeout: Duration::from_secs(5),
            prometheus_every_gpu_max: 8,
            ..nightshift::sources::endpoints::Endpoints::default()
        };
        let mut out =
            nightshift::sources::endpoints::spawn(None, e, nightshift::sources::nothing_open())
                .expect("spawn");
        let from_prometheus = |c: &nightshift::model::Cluster, node: &str| {
            c.history
                .iter()
                .filter(|f| f.node == node && f.from == "prometheus")
                .count()
        };
        let mut snapshots = 0;
        let mut asked = None;
        while asked.is_none() && snapshots < 60 {
            let c = next_snapshot(&mut out).await;
            snapshots += 1;
            if snapshots == 1 {
                assert_eq!(
                    from_prometheus(&c, "gpu-007"),
                    0,
                    "asked on the first refresh"
                );
            }
            assert_eq!(
                from_prometheus(&c, "gpu-008"),
                0,
                "a healthy host was asked"
            );
            if from_prometheus(&c, "gpu-007") > 0 {
                asked = Some(c);
            }
        }
        let c = asked.expect("gpu-007's weeks never asked by the console's loop");
        let h = nightshift::engine::repeat::histories(&c, &Default::default(), &Default::default());
        let h7 = h.get("gpu-007").expect("gpu-007's history");
        assert_eq!(h7.faults[0].count, 3, "{h7:?}");
        assert!(h7.is_repeat_offender(), "{h7:?}");
    });
}

/// The autopilot's pages (issue 61) through a real Alertmanager (Debian's)
/// and a PagerDuty stand-in that checks each event as PagerDuty's Events
/// API v2 documents it: an incident pages once (PagerDuty's trigger once;
/// Alertmanager's alert re-sent while it fires, one alert all along), a
/// send that fails is tried again the next round, and the page resolves in
/// both when its incident closes.
#[test]
fn an_incident_pages_once_through_a_real_alertmanager_and_pagerduty_and_resolves_when_it_closes() {
    use nightshift::autopilot::page::{AlertmanagerFile, Page, Pager, PagerDutyFile, PagingFile};
    let dir = tempfile::tempdir().expect("tempdir");
    let Some(am) = common::alertmanager::Alertmanager::start(dir.path()) else {
        return;
    };
    let pd = common::pagerduty::PagerDuty::start();
    let rt = runtime();
    let mut pager = Pager::new(PagingFile {
        alertmanager: Some(AlertmanagerFile { url: am.url() }),
        pagerduty: Some(PagerDutyFile {
            routing_key: "0123456789abcdef0123456789abcdef".into(),
            url: Some(pd.url()),
        }),
        resend: Some("1s".into()),
    })
    .expect("pager");
    let page = Page {
        incident: "dom-ib-leaf-2-e17".into(),
        cluster: "sim-16".into(),
        node: "ib-leaf-2".into(),
        policy: "fabric".into(),
        summary:
            "dom-ib-leaf-2-e17 LEAF FAILING on ib-leaf-2: policy fabric pages for LEAF FAILING"
                .into(),
    };
    let open: std::collections::HashSet<String> = [page.incident.clone()].into();
    // PagerDuty answers 500 first: said, and sent again next round.
    pd.fail_next(1);
    let news = rt.block_on(pager.round(vec![page.clone()], &open));
    assert!(news.iter().any(|n| n.starts_with("paged: ")), "{news:?}");
    assert!(
        news.iter()
            .any(|n| n.contains("PagerDuty failed") && n.contains("500")),
        "{news:?}"
    );
    let alerts = am.alerts();
    assert_eq!(alerts.len(), 1, "{alerts:#?}");
    let a = &alerts[0];
    assert_eq!(a["labels"]["alertname"], "NightshiftDecision");
    assert_eq!(a["labels"]["incident"], "dom-ib-leaf-2-e17");
    assert_eq!(a["labels"]["node"], "ib-leaf-2");
    assert_eq!(a["labels"]["policy"], "fabric");
    assert_eq!(a["status"]["state"], "active");
    assert!(
        a["annotations"]["summary"]
            .as_str()
            .is_some_and(|s| s.contains("pages for LEAF FAILING"))
    );
    // Rounds while it fires: the same page wanted again and again.
    for _ in 0..3 {
        std::thread::sleep(Duration::from_millis(1100));
        let news = rt.block_on(pager.round(vec![page.clone()], &open));
        assert!(
            !news.iter().any(|n| n.starts_with("paged: ")),
            "paged again: {news:?}"
        );
    }
    // Alertmanager: re-sent (its own count of what it received), still one
    // alert. PagerDuty: one trigger, after the failed try.
    assert!(am.received_firing() >= 3, "{}", am.received_firing());
    assert_eq!(am.alerts().len(), 1);
    let events = pd.accepted();
    assert_eq!(events.len(), 1, "{events:#?}");
    let e = &events[0];
    assert_eq!(e["event_action"], "trigger");
    assert_eq!(e["dedup_key"], "nightshift/sim-16/dom-ib-leaf-2-e17");
    assert_eq!(e["payload"]["source"], "ib-leaf-2");
    assert_eq!(e["payload"]["severity"], "critical");
    assert!(pd.rejected().is_empty(), "{:?}", pd.rejected());
    // The incident closes (the switch is quiet): resolved in both.
    let news = rt.block_on(pager.round(Vec::new(), &Default::default()));
    assert!(
        news.iter().any(|n| n.starts_with("page resolved")),
        "{news:?}"
    );
    assert!(
        common::wait_for(Duration::from_secs(5), || am
            .alerts()
            .is_empty()
            .then_some(()))
        .is_some(),
        "still firing in Alertmanager: {:#?}",
        am.alerts()
    );
    let events = pd.accepted();
    assert_eq!(events.len(), 2, "{events:#?}");
    assert_eq!(events[1]["event_action"], "resolve");
    assert_eq!(
        events[1]["dedup_key"],
        "nightshift/sim-16/dom-ib-leaf-2-e17"
    );
    assert_eq!(pager.open().count(), 0);
}
