//! The scriptable CLI, run as a real process: `nightshift get …`.

mod common;

use common::nightshift;
use serde_json::Value;

fn json(args: &[&str]) -> Value {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = nightshift(dir.path(), args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stderr.is_empty(),
        "nothing on stderr, logs go to the file: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("valid JSON")
}

#[test]
fn get_gpus_json_has_ecc_counts_and_the_last_xid() {
    let v = json(&["get", "gpus", "-o", "json"]);
    assert_eq!(v["kind"], "gpus");
    assert_eq!(v["source"], "sim");
    let items = v["items"].as_array().expect("items");
    assert_eq!(items.len(), 128);
    let xid = items
        .iter()
        .find(|g| g["last_xid"]["code"] == 79)
        .expect("the GPU with Xid 79");
    assert_eq!(xid["node"], "h100-03");
    assert_eq!(xid["index"], 3);
    assert_eq!(xid["health"], "critical");
    assert!(
        xid["sm_occupancy"].is_null(),
        "a GPU off the bus reports nothing, not zero"
    );
    for field in [
        "sbe_volatile",
        "dbe_volatile",
        "sbe_aggregate",
        "dbe_aggregate",
    ] {
        assert!(xid["ecc"][field].is_u64(), "ecc.{field}");
    }
    assert_eq!(xid["row_remap_pending"], false);
    assert!(xid["job"].is_string());
}

#[test]
fn get_after_sim_seconds_shows_the_ecc_incident() {
    let v = json(&["get", "gpus", "-o", "json", "--sim-seconds", "120"]);
    let items = v["items"].as_array().expect("items");
    let ecc = items
        .iter()
        .find(|g| g["ecc"]["dbe_volatile"] == 1)
        .expect("a GPU with a DBE");
    assert_eq!(ecc["last_xid"]["code"], 48);
    assert_eq!(ecc["row_remap_pending"], true);
    let inc = json(&["get", "incidents", "-o", "json", "--sim-seconds", "120"]);
    let events = inc["items"].as_array().expect("items");
    let times: Vec<i64> = events
        .iter()
        .map(|e| e["time"].as_i64().expect("time"))
        .collect();
    assert!(
        times.windows(2).all(|w| w[0] >= w[1]),
        "newest first: {times:?}"
    );
    assert!(events.iter().any(|e| e["type"] == "ecc" && e["dbe"] == 1));
    assert!(events.iter().any(|e| e["type"] == "xid" && e["code"] == 13));
}

#[test]
fn get_jobs_and_nodes_agree() {
    let jobs = json(&["get", "jobs", "-o", "json"]);
    let nodes = json(&["get", "nodes", "-o", "json"]);
    let jobs = jobs["items"].as_array().expect("jobs");
    for n in nodes["items"].as_array().expect("nodes") {
        let name = n["name"].as_str().expect("name");
        let held: u64 = jobs
            .iter()
            .filter(|j| {
                j["state"] == "running"
                    && j["nodes"]
                        .as_array()
                        .is_some_and(|ns| ns.iter().any(|x| x == name))
            })
            .map(|j| j["gpus_per_node"].as_u64().unwrap_or(0))
            .sum();
        assert_eq!(Some(held), n["gpus_allocated"].as_u64(), "{name}");
    }
    let gang = jobs
        .iter()
        .find(|j| j["name"] == "llm-pretrain-70b")
        .expect("gang job");
    assert_eq!(gang["nodes"].as_array().map(Vec::len), Some(4));
    assert_eq!(gang["checkpoint"]["size_bytes"], 1_200_000_000_000u64);
    assert!(jobs.iter().any(|j| j["reason"] == "AssocGrpGRES"));
}

#[test]
fn same_seed_same_output_other_seed_other_output() {
    let a = json(&[
        "get",
        "jobs",
        "-o",
        "json",
        "--seed",
        "5",
        "--sim-seconds",
        "300",
    ]);
    let b = json(&[
        "get",
        "jobs",
        "-o",
        "json",
        "--seed",
        "5",
        "--sim-seconds",
        "300",
    ]);
    let c = json(&[
        "get",
        "jobs",
        "-o",
        "json",
        "--seed",
        "6",
        "--sim-seconds",
        "300",
    ]);
    assert_eq!(a, b);
    assert_ne!(a, c);
}

#[test]
fn tables_are_readable_and_sanitised() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = nightshift(dir.path(), &["get", "nodes"]);
    let text = String::from_utf8(out.stdout).expect("utf-8");
    assert!(text.starts_with("NAME"));
    assert!(
        text.lines()
            .any(|l| l.contains("a100-08") && l.contains("drain") && l.contains("PSU replaced"))
    );
    let out = nightshift(dir.path(), &["get", "jobs"]);
    let text = String::from_utf8(out.stdout).expect("utf-8");
    assert!(text.contains("␛[31mpwn"), "hostile job name shown defused");
    assert!(
        !text.contains('\u{1b}'),
        "no raw escape reaches the terminal"
    );
}

#[test]
fn bad_input_is_a_clear_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = dir.path().join("bad.toml");
    std::fs::write(&cfg, "colour = true\n").expect("write");
    let out = nightshift(
        dir.path(),
        &["--config", cfg.to_str().expect("path"), "get", "nodes"],
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("colour") && err.starts_with("nightshift: "),
        "{err}"
    );

    let out = nightshift(dir.path(), &["--nodes", "4", "get", "nodes"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("at least 16"));

    let out = nightshift(
        dir.path(),
        &["--config", "/nonexistent/ns.toml", "get", "nodes"],
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/ns.toml"));
}

#[test]
fn the_example_config_runs() {
    let cfg = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/config/nightshift.example.toml"
    );
    let v = json(&["--config", cfg, "get", "nodes", "-o", "json"]);
    assert_eq!(v["items"].as_array().map(Vec::len), Some(16));
}
