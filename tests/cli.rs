//! The scriptable CLI, run as a real process: `nightshift get …`.

mod common;

use common::nightshift;
use nightshift::engine::incidents::IncidentKind;
use serde_json::{Value, json};
use std::time::Duration;

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
    assert!(
        events.iter().any(|e| e["label"] == "XID 48"
            && e["related"][0] == "ECC DBE"
            && e["stage"] == "open")
    );
    // Every GPU incident names the jobs it hit, with their state then and now.
    let x13 = events
        .iter()
        .find(|e| e["kind"] == "xid" && e["xid"] == 13)
        .expect("Xid 13");
    assert_eq!(x13["jobs"][0]["state_then"], "running");
    assert_eq!(x13["jobs"][0]["state_now"], "failed");
    // The stalled gang is the Xid 79's evidence: one failure, one incident.
    let x79 = events.iter().find(|e| e["xid"] == 79).expect("the Xid 79");
    assert_eq!(x79["jobs"][0]["id"], "4700");
    assert_eq!(x79["burning_gpu_hours_per_hour"], 32.0);
    assert!(!events.iter().any(|e| e["kind"] == "stall"), "{inc}");
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
    let run = |seed: &str| {
        json(&[
            "--seed",
            seed,
            "get",
            "jobs",
            "-o",
            "json",
            "--sim-seconds",
            "300",
        ])
    };
    assert_eq!(run("5"), run("5"));
    assert_ne!(run("5"), run("6"));
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

#[test]
fn restore_what_if_holds_the_seed_case_exactly() {
    let v = json(&[
        "restore",
        "--state-bytes",
        "1.2TB",
        "--read-bw",
        "10GB/s",
        "-o",
        "json",
    ]);
    assert_eq!(v["load_s"]["value"], 120.0);
    let v = json(&[
        "restore",
        "--state-bytes",
        "1.2 TB",
        "--read-bw",
        "10GB/s",
        "--read-nodes",
        "4",
        "--node-bw",
        "25GB/s",
        "-o",
        "json",
    ]);
    assert_eq!(v["load_s"]["value"], 120.0);
    assert_eq!(v["read_bw"]["source"], "given");
    // Two nodes at 2 GB/s each are the bottleneck: 1.2 TB / 4 GB/s.
    let v = json(&[
        "restore",
        "--state-bytes",
        "1.2TB",
        "--read-bw",
        "10GB/s",
        "--read-nodes",
        "2",
        "--node-bw",
        "2GB/s",
        "-o",
        "json",
    ]);
    assert_eq!(v["load_s"]["value"], 300.0);
    let v = json(&[
        "restore",
        "--params",
        "70B",
        "--read-bw",
        "10GB/s",
        "-o",
        "json",
    ]);
    assert_eq!(v["state_bytes"]["value"], 1.12e12);
    assert_eq!(v["state_bytes"]["source"], "model");
}

#[test]
fn restore_of_the_hung_gang_job() {
    let v = json(&["restore", "4700", "-o", "json"]);
    assert_eq!(v["job"], "4700");
    assert_eq!(v["state_bytes"]["source"], "job_metadata");
    assert_eq!(v["load_s"]["value"], 120.0);
    assert_eq!(v["lost_work_s"]["value"], 1050.0);
    assert!(v["total_s"]["value"].as_f64().is_some_and(|t| t >= 420.0));
}

#[test]
fn why_explains_the_fragmented_wait() {
    let v = json(&["why", "4722", "-o", "json"]);
    let messages: Vec<&str> = v["causes"]
        .as_array()
        .expect("causes")
        .iter()
        .filter_map(|c| c["message"].as_str())
        .collect();
    assert!(
        messages.contains(&"16 GPUs free, but at most 3 on any node; needs 8 on one node"),
        "{messages:?}"
    );
    assert!(v["eta_s"].as_i64().is_some_and(|s| s > 0));
    let dir = tempfile::tempdir().expect("tempdir");
    let out = nightshift(dir.path(), &["why", "4722"]);
    let text = String::from_utf8(out.stdout).expect("utf-8");
    assert!(text.contains("estimated start: in "), "{text}");
    let out = nightshift(dir.path(), &["why", "no-such-job"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no job no-such-job"));
}

#[test]
fn blast_of_draining_the_xid79_node() {
    let v = json(&["blast", "drain", "h100-03", "-o", "json"]);
    let killed = v["killed"].as_array().expect("killed");
    assert_eq!(killed.len(), 1);
    assert_eq!(
        killed[0]["nodes"].as_array().map(Vec::len),
        Some(4),
        "the whole gang"
    );
    assert_eq!(v["gpus_freed"], 32);
    assert_eq!(v["gpus_out_of_service"], 8);
    assert_eq!(v["partition"]["name"], "h100");
    let v = json(&["blast", "priority", "4723", "9999", "-o", "json"]);
    assert!(
        v["jumped"]
            .as_array()
            .is_some_and(|j| j.iter().any(|x| x == "4722"))
    );
    let v = json(&["blast", "drain", "a100-08", "-o", "json"]);
    assert_eq!(v["no_op"], true, "already drained");
}

/// Runs an action command with its own audit log; returns (ok, stdout+stderr, audit lines).
fn act(dir: &std::path::Path, args: &[&str]) -> (bool, String, Vec<serde_json::Value>) {
    let audit = dir.join("audit.jsonl");
    let mut all = vec!["--audit-log", audit.to_str().expect("path")];
    all.extend_from_slice(args);
    let out = nightshift(dir, &all);
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    let lines = std::fs::read_to_string(&audit)
        .map(|t| {
            t.lines()
                .map(|l| serde_json::from_str(l).expect("audit line is JSON"))
                .collect()
        })
        .unwrap_or_default();
    (out.status.success(), text, lines)
}

#[test]
fn drain_with_requeue_through_the_guard() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (ok, text, audit) = act(
        dir.path(),
        &[
            "drain",
            "h100-03",
            "--reason",
            "xid79 GPU3",
            "--requeue",
            "--confirm",
            "h100-03",
        ],
    );
    assert!(ok, "{text}");
    assert!(
        text.contains("1 job(s) die") && text.contains("will send:"),
        "the preview comes first:\n{text}"
    );
    assert!(
        text.contains("done and verified: drain h100-03 ✓; requeue 4700 ✓"),
        "{text}"
    );
    assert!(text.contains("undo: nightshift resume h100-03"), "{text}");
    assert_eq!(audit.len(), 2);
    assert_eq!(audit[0]["phase"], "intent");
    assert_eq!(audit[1]["phase"], "outcome");
    assert_eq!(audit[1]["outcome"]["verified"], true);
    for field in [
        "time", "operator", "host", "cluster", "action", "target", "reason", "preview",
    ] {
        assert!(!audit[0][field].is_null(), "audit field {field}");
    }
    // `nightshift audit` shows it.
    let (ok, text, _) = act(dir.path(), &["audit"]);
    assert!(ok && text.contains("verified: h100-03 is drain"), "{text}");
    // Each clock named: when it was written, and the source's time it
    // acted on (the sim's night, as armed steps show it).
    assert!(text.starts_with("WALL CLOCK (UTC)      SOURCE  "), "{text}");
    assert!(text.contains("  11-30 02:47  intent"), "{text}");
}

#[test]
fn refusals_send_nothing_and_write_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cases: [(&[&str], &str); 5] = [
        (
            &[
                "drain",
                "h100-03",
                "--reason",
                "x",
                "--requeue",
                "--confirm",
                "h100-3",
            ],
            "not confirmed",
        ),
        (
            &["drain", "h100-03", "--reason", "x", "--requeue"],
            "--confirm h100-03",
        ),
        (
            &["drain", "h100-03", "--reason", "x"],
            "--requeue or --kill",
        ),
        (
            &[
                "--read-only",
                "drain",
                "h100-03",
                "--reason",
                "x",
                "--requeue",
                "--confirm",
                "h100-03",
            ],
            "read-only",
        ),
        (&["requeue", "4700"], "--confirm 4700"),
    ];
    for (args, why) in cases {
        let (ok, text, audit) = act(dir.path(), args);
        assert!(!ok, "{args:?} must fail:\n{text}");
        assert!(text.contains(why), "{args:?}: expected {why:?} in:\n{text}");
        assert!(audit.is_empty(), "{args:?} wrote to the audit log");
    }
    let (ok, text, audit) = act(
        dir.path(),
        &[
            "drain",
            "h100-03",
            "--reason",
            "x",
            "--requeue",
            "--dry-run",
        ],
    );
    assert!(
        ok && text.contains("dry run: nothing sent") && audit.is_empty(),
        "{text}"
    );
}

#[test]
fn reversible_actions_need_no_typing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (ok, text, audit) = act(dir.path(), &["priority", "4723", "top"]);
    assert!(ok, "{text}");
    assert!(text.contains("priority 8001"), "{text}");
    assert_eq!(audit.len(), 2);
    let (ok, text, _) = act(dir.path(), &["cordon", "h100-07"]);
    assert!(
        ok && text.contains("undo: nightshift resume h100-07"),
        "{text}"
    );
    let (ok, text, _) = act(dir.path(), &["hold", "4722"]);
    assert!(ok && text.contains("JobHeldAdmin"), "{text}");
}

#[test]
fn an_interrupted_action_is_reported_at_the_next_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let line = r#"{"id":"1-2-3","phase":"intent","time":1796006850,"operator":"oncall","scheduler_user":"oncall","host":"bastion","cluster":"prod","source":"slurm","action":"drain","target":"gpu07","reason":"xid79","preview":"p","outcome":null}"#;
    std::fs::write(dir.path().join("audit.jsonl"), format!("{line}\n")).expect("write");
    let (ok, text, _) = act(dir.path(), &["audit"]);
    assert!(ok, "{text}");
    assert!(
        text.contains(
            "warning: 1 earlier action(s) were interrupted — their outcome was never recorded; check the scheduler: drain gpu07"
        ),
        "{text}"
    );
    let (_, text, _) = act(dir.path(), &["cordon", "h100-07", "--dry-run"]);
    assert!(
        text.contains(
            "interrupted — their outcome was never recorded; check the scheduler: drain gpu07"
        ),
        "every start reports it:\n{text}"
    );
}

fn run_text(args: &[&str]) -> String {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = nightshift(dir.path(), args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

/// The "back in" words for a restore's total, as the JSON gives it.
fn back_in(total: &Value) -> String {
    match total["value"].as_f64() {
        Some(v) => nightshift::text::duration(v.round() as i64),
        None => format!(
            "unknown: {}",
            nightshift::text::sanitize(total["note"].as_str().expect("note"))
        ),
    }
}

/// Text and JSON are rendered from the same value, and the TUI's job screen
/// shows that value too: every restore and blast answer of the sim night.
#[test]
fn restore_and_blast_agree_between_text_json_and_the_tui_all_night() {
    use nightshift::engine::analysis::{Analysis, Focus, FocusAnswer};
    for secs in ["0", "130"] {
        let jobs = json(&["get", "jobs", "-o", "json", "--sim-seconds", secs]);
        let running: Vec<String> = jobs["items"]
            .as_array()
            .expect("items")
            .iter()
            .filter(|j| j["state"] == "running")
            .map(|j| j["id"].as_str().expect("id").to_string())
            .collect();
        assert!(running.len() > 10, "{running:?}");
        let mut sim = nightshift::sources::sim::Sim::new(Default::default()).expect("sim");
        sim.advance(secs.parse().expect("secs"));
        let c = sim.snapshot();
        for id in &running {
            let j = json(&["restore", id, "-o", "json", "--sim-seconds", secs]);
            let t = run_text(&["restore", id, "--sim-seconds", secs]);
            let line = t
                .lines()
                .find(|l| l.trim_start().starts_with("total to resume"))
                .expect("total line");
            match j["total_s"]["value"].as_f64() {
                Some(v) => assert!(
                    line.contains(&format!("({v:.0} s)")),
                    "job {id} at {secs}s: text {line:?} vs JSON {v}"
                ),
                None => assert!(
                    line.contains("unknown")
                        && line.contains(j["total_s"]["note"].as_str().expect("note")),
                    "job {id}: text {line:?} vs JSON null"
                ),
            }
            // The TUI's job screen: the analyst's answer for the same second.
            let a = Analysis::compute(
                &c,
                None,
                &Focus::Job(id.clone()),
                &Default::default(),
                &Default::default(),
            );
            let Some(FocusAnswer::Job {
                restore: Some(r), ..
            }) = &a.focus
            else {
                panic!("no restore for running job {id}");
            };
            assert_eq!(
                r.total_s.value,
                j["total_s"]["value"].as_f64(),
                "job {id} at {secs}s: TUI vs CLI"
            );
        }
        let nodes = json(&["get", "nodes", "-o", "json", "--sim-seconds", secs]);
        for n in nodes["items"].as_array().expect("items") {
            let node = n["name"].as_str().expect("name");
            let j = json(&["blast", "drain", node, "-o", "json", "--sim-seconds", secs]);
            let t = run_text(&["blast", "drain", node, "--sim-seconds", secs]);
            for k in j["killed"].as_array().expect("killed") {
                let id = k["id"].as_str().expect("id");
                let line = t
                    .lines()
                    .find(|l| l.starts_with(&format!("  {id} ")))
                    .unwrap_or_else(|| panic!("{node}: no line for {id}:\n{t}"));
                let want = format!("back in {}", back_in(&k["restore"]["total_s"]));
                assert!(
                    line.ends_with(&want),
                    "drain {node} at {secs}s, job {id}: text {line:?}, JSON says {want:?}"
                );
            }
        }
    }
}

fn option<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["options"]
        .as_array()
        .and_then(|o| o.iter().find(|c| c["name"] == name))
        .unwrap_or_else(|| panic!("no option {name} in {v:#}"))
}

fn recommended(v: &Value) -> String {
    let picks: Vec<&Value> = v["options"]
        .as_array()
        .expect("options")
        .iter()
        .filter(|c| c["recommended"] == true)
        .collect();
    assert_eq!(picks.len(), 1, "exactly one recommended: {v:#}");
    picks[0]["name"].as_str().unwrap_or_default().to_string()
}

#[test]
fn options_on_the_sim_night_follow_the_incidents() {
    // The Xid 79 node: the gang is hung, so drain now; waiting has no number.
    let v = json(&["--sim-seconds", "100", "options", "h100-03", "-o", "json"]);
    assert_eq!(v["target"]["hung"], serde_json::json!(["4700"]));
    assert_eq!(recommended(&v), "drain_now");
    assert!(
        option(&v, "drain_now")["why"]
            .as_str()
            .is_some_and(|w| w.contains("already hung")),
        "{v:#}"
    );
    assert!(option(&v, "wait_checkpoint")["gpu_hours_lost"].is_null());
    assert!(
        option(&v, "drain_now")["actions"][0]
            .as_str()
            .is_some_and(|a| a.contains("drain h100-03")),
        "the exact calls: {v:#}"
    );
    // The correctable burst on h100-05 (+70 s): its job still runs and
    // checkpoints at 02:53:30, 4m20s after this snapshot: wait for it.
    let v = json(&["--sim-seconds", "100", "options", "h100-05", "-o", "json"]);
    assert_eq!(v["target"]["action"], "reset_next_drain");
    assert_eq!(recommended(&v), "wait_checkpoint");
    let wait = option(&v, "wait_checkpoint");
    assert_eq!(wait["wait_s"], 260);
    assert_eq!(wait["gpu_hours_lost"], 0.0);
    // Draining now loses 1800 − 260 s of 8 GPUs.
    let now = option(&v, "drain_now")["gpu_hours_lost"]
        .as_f64()
        .expect("known");
    assert!((now - 1540.0 / 3600.0 * 8.0).abs() < 1e-9, "{now}");
    // After the checkpoint the next one is 30 minutes away: keep running.
    let v = json(&["--sim-seconds", "400", "options", "h100-05", "-o", "json"]);
    assert_eq!(recommended(&v), "do_nothing");
    // The uncorrectable error on h100-06: not waited for, whatever it saves.
    let v = json(&["--sim-seconds", "200", "options", "h100-06", "-o", "json"]);
    assert_ne!(recommended(&v), "wait_checkpoint");
    assert_ne!(recommended(&v), "do_nothing");
}

#[test]
fn soft_preemption_loses_the_write_not_the_time_since_the_checkpoint() {
    let hard = json(&[
        "--sim-seconds",
        "100",
        "blast",
        "preempt",
        "4701",
        "-o",
        "json",
    ]);
    let soft = json(&[
        "--sim-seconds",
        "100",
        "blast",
        "preempt",
        "4701",
        "--grace",
        "5m",
        "-o",
        "json",
    ]);
    let (h, s) = (
        hard["lost_gpu_hours"].as_f64().expect("hard"),
        soft["lost_gpu_hours"].as_f64().expect("soft"),
    );
    // 400 GB at 5 GB/s: an 80 s write on 8 GPUs, against 1540 s of work.
    assert!((h - 1540.0 / 3600.0 * 8.0).abs() < 1e-9, "{h}");
    assert!((s - 80.0 / 3600.0 * 8.0).abs() < 1e-9, "{s}");
    assert_eq!(soft["killed"][0]["restore"]["grace"]["fits"], true);
    // Too short a grace: the hard numbers, said so.
    let short = json(&[
        "--sim-seconds",
        "100",
        "blast",
        "preempt",
        "4701",
        "--grace",
        "30s",
        "-o",
        "json",
    ]);
    assert_eq!(short["lost_gpu_hours"], hard["lost_gpu_hours"]);
    assert_eq!(short["killed"][0]["restore"]["grace"]["fits"], false);
    // The hung gang cannot checkpoint on the way out.
    let hung = json(&["blast", "preempt", "4700", "--grace", "30m", "-o", "json"]);
    assert!(
        hung["killed"][0]["restore"]["grace"]["note"]
            .as_str()
            .is_some_and(|n| n.contains("hung")),
        "{hung:#}"
    );
    // Through the guard: signalled, its checkpoint written, requeued.
    let dir = tempfile::tempdir().expect("tempdir");
    let (ok, text, audit) = act(
        dir.path(),
        &[
            "--sim-seconds",
            "100",
            "preempt",
            "4701",
            "--grace",
            "5m",
            "--confirm",
            "4701",
        ],
    );
    assert!(ok, "{text}");
    assert!(
        text.contains("signal 4701 SIGUSR1 ✓; requeue 4701 ✓"),
        "{text}"
    );
    assert_eq!(audit[1]["outcome"]["verified"], true);
}

fn stdout(dir: &std::path::Path, args: &[&str]) -> String {
    let out = nightshift(dir, args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

#[test]
fn a_recorded_night_answers_as_live_did_at_any_time() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("night.nsrec");
    let f = file.to_str().expect("path");
    let said = stdout(dir.path(), &["--sim-seconds", "600", "record", f]);
    assert!(said.starts_with("recorded 601 snapshots"), "{said}");
    for at in ["100", "599"] {
        let replay = ["--replay", f, "--at"];
        let plus = format!("+{at}s");
        for cmd in [
            &["get", "incidents", "-o", "json"][..],
            &["get", "gpus", "-o", "json"],
            &["options", "h100-05", "-o", "json"],
            &["why", "4722", "-o", "json"],
        ] {
            let live: Vec<&str> = ["--sim-seconds", at].iter().chain(cmd).copied().collect();
            let mut played: Vec<&str> = replay.to_vec();
            played.push(&plus);
            played.extend_from_slice(cmd);
            let (a, b) = (stdout(dir.path(), &live), stdout(dir.path(), &played));
            // The options name their calls: a recording sends nothing.
            let b = b.replace("(a recording: not sent) ", "simulated scheduler: ");
            assert_eq!(a, b, "{cmd:?} at +{at}s");
        }
    }
    // A recording is history: nothing in it can be acted on.
    let out = nightshift(
        dir.path(),
        &[
            "--replay",
            f,
            "drain",
            "h100-03",
            "--reason",
            "x",
            "--requeue",
            "--confirm",
            "h100-03",
        ],
    );
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("nothing in it can be acted on"));
    // Before the start is an error; never an empty answer.
    let out = nightshift(dir.path(), &["--replay", f, "--at", "01:00", "get", "jobs"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("before the recording starts"));
    // Every duration nightshift prints is a time it reads (`+1m30s`), and
    // past the end is said, not moved there in silence.
    let a = stdout(
        dir.path(),
        &["--replay", f, "--at", "+90s", "get", "jobs", "-o", "json"],
    );
    let b = stdout(
        dir.path(),
        &["--replay", f, "--at", "+1m30s", "get", "jobs", "-o", "json"],
    );
    assert_eq!(a, b);
    let out = nightshift(dir.path(), &["--replay", f, "--at", "+1h", "get", "jobs"]);
    assert!(out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("after the recording ends"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn kpis_of_the_first_minute_of_the_sim_night_checked_by_hand() {
    let k = json(&[
        "--sim-seconds",
        "60",
        "get",
        "kpis",
        "--window",
        "1m",
        "-o",
        "json",
    ]);
    assert_eq!(k["observed_s"], 60);
    assert_eq!(k["samples"], 61);
    // a100-08 is drained for burn-in all minute: 15 of 16 nodes available,
    // a sixtieth of an hour out.
    assert_eq!(k["node_availability"], 0.9375);
    let out = k["node_hours_out"].as_f64().expect("hours");
    assert!((out - 60.0 / 3600.0).abs() < 1e-9, "{out}");
    // The a100 8-GPU job waits with 16 GPUs free in fragments all minute.
    assert_eq!(k["fragmentation"], 1.0);
    // The Xid 13 at +40 s killed one job: its GPU-hours since its start
    // (it reports no checkpoint), as `get jobs` tells them.
    assert_eq!(k["failures"], 1);
    let jobs = json(&["--sim-seconds", "60", "get", "jobs", "-o", "json"]);
    let failed: Vec<&Value> = jobs["items"]
        .as_array()
        .expect("jobs")
        .iter()
        .filter(|j| j["state"] == "failed")
        .collect();
    assert_eq!(failed.len(), 1);
    let j = failed[0];
    let ran = j["end_time"].as_i64().expect("end") - j["start_time"].as_i64().expect("start");
    let want = ran as f64 / 3600.0 * j["gpus_total"].as_f64().expect("gpus");
    let lost = k["lost_gpu_hours_failed"].as_f64().expect("lost");
    assert!((lost - want).abs() < 1e-9, "{lost} vs {want}");
    assert_eq!(k["requeues"], 0);
}

#[test]
fn the_report_of_a_recorded_night_names_the_incidents_and_what_they_cost() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("night.nsrec");
    let f = file.to_str().expect("path");
    stdout(dir.path(), &["--sim-seconds", "300", "record", f]);
    let md = stdout(dir.path(), &["report", f]);
    for want in [
        "# Night report: sim-16 (sim)",
        "### 02:47:00 XID 79 on h100-03 GPU 3 — GPU has fallen off the bus",
        "- catalog: drain the node, then reboot it",
        "- evidence: 02:47:00 the gang stalled: rank on h100-03 GPU 3 hit Xid 79",
        "- stalled: burning 32 GPU-hours per hour while hung",
        "### 02:48:10 XID 13 on a100-07 GPU 6 — Graphics Engine Exception",
        "### 02:49:10 XID 48 (+ECC DBE, XID 63) on h100-06 GPU 5 — Double Bit ECC Error",
        "- action: none recorded",
        "## Still open at the end",
        "## Scheduler health",
    ] {
        assert!(md.contains(want), "{want:?} missing from:\n{md}");
    }
    let r: Value =
        serde_json::from_str(&stdout(dir.path(), &["report", f, "-o", "json"])).expect("json");
    // The hung gang still holds its 32 GPUs at the end (02:52:30): all its
    // work since its checkpoint at 02:30:00 is lost when it is requeued.
    // One failure, one incident: the stall is the Xid 79's.
    let incidents = r["incidents"].as_array().expect("incidents");
    assert!(!incidents.iter().any(|i| i["kind"] == "stall"), "{r:#}");
    let stall = incidents
        .iter()
        .find(|i| i["xid"] == 79)
        .expect("the Xid 79");
    assert_eq!(stall["burning_gpu_hours_per_hour"], 32.0);
    let gang = &stall["jobs"][0];
    assert_eq!(gang["id"], "4700");
    assert_eq!(gang["fate"], "stalled, still holding its GPUs");
    let lost = gang["gpu_hours_lost"].as_f64().expect("lost");
    assert!((lost - 32.0 * 1350.0 / 3600.0).abs() < 1e-9, "{lost}");
    // One definition of GPU-hours lost: the health numbers count the hung
    // gang's unsaved work as the incident does, and the headline's total
    // is theirs (the jobs hit are the only ones that lost work tonight).
    let k = &r["kpis"];
    assert_eq!(k["lost_gpu_hours_hung"].as_f64(), Some(lost), "{k:#}");
    let all = k["lost_gpu_hours_failed"].as_f64().expect("failed")
        + k["lost_gpu_hours_requeued"].as_f64().expect("requeued")
        + lost;
    let hit = r["gpu_hours_lost"].as_f64().expect("headline");
    assert!((all - hit).abs() < 1e-9, "{all} vs {hit}");
    assert!(md.contains("by hung jobs still holding their GPUs"), "{md}");
    // `get kpis` of the same recording says the same numbers (issue 39:
    // it left out the hung gang the report counted).
    let got: Value = serde_json::from_str(&stdout(
        dir.path(),
        &["--replay", f, "get", "kpis", "-o", "json"],
    ))
    .expect("json");
    for field in [
        "lost_gpu_hours_failed",
        "lost_gpu_hours_requeued",
        "lost_gpu_hours_hung",
    ] {
        assert_eq!(got[field], k[field], "{field}: {got:#} vs {k:#}");
    }
    assert!(md.contains("**still running** — nothing lost"), "{md}");
    assert!(
        !md.contains("0.0 GPU-hours lost since its checkpoint, kept running"),
        "{md}"
    );
    assert!(r["actions"].as_array().is_some_and(Vec::is_empty));
    assert_eq!(
        r["to"].as_i64().expect("to") - r["from"].as_i64().expect("from"),
        300
    );
}

/// The fabric's part of the night (issue 27): 25 minutes recorded hold the
/// NVLink CRC storm (+15 min) and the leaf switch's flap (+20 min); the
/// report tells the flap once, as its domain's incident, with its four
/// nodes and the two gangs it killed, and the storm as its GPU's.
#[test]
fn the_report_tells_the_leaf_flap_once_as_the_switchs_and_the_nvlink_storm_as_its_gpus() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("fabric.nsrec");
    let f = file.to_str().expect("path");
    stdout(dir.path(), &["--sim-seconds", "1500", "record", f]);
    let r: Value =
        serde_json::from_str(&stdout(dir.path(), &["report", f, "-o", "json"])).expect("json");
    let incidents = r["incidents"].as_array().expect("incidents");
    let domain: Vec<&Value> = incidents.iter().filter(|i| i["kind"] == "domain").collect();
    assert_eq!(domain.len(), 1, "{r:#}");
    let d = domain[0];
    assert_eq!(d["node"], "ib-leaf-2");
    assert_eq!(
        d["nodes"],
        json!(["h100-05", "h100-06", "h100-07", "h100-08"])
    );
    assert!(
        d["advice"]
            .as_str()
            .is_some_and(|a| a.contains("cordon the domain's nodes")),
        "{d:#}"
    );
    let msg = d["meaning"].as_str().expect("meaning");
    assert!(
        msg.contains("4 nodes lost their network link")
            && msg.contains("h100-05, h100-06, h100-07, h100-08"),
        "{msg}"
    );
    let names: Vec<&str> = d["jobs"]
        .as_array()
        .expect("jobs")
        .iter()
        .filter_map(|j| j["name"].as_str())
        .collect();
    assert_eq!(names, ["megatron-moe-2n", "dist-eval-2n"], "{d:#}");
    // Its nodes' links are not told again as four incidents of their own.
    assert!(!incidents.iter().any(|i| i["kind"] == "link"), "{r:#}");
    let storm: Vec<&Value> = incidents.iter().filter(|i| i["kind"] == "nvlink").collect();
    assert_eq!(storm.len(), 1, "{r:#}");
    assert_eq!(
        (storm[0]["node"].as_str(), storm[0]["gpu"].as_u64()),
        (Some("a100-03"), Some(1))
    );
    let md = stdout(dir.path(), &["report", f]);
    assert!(
        md.contains("(+IB DOWN) on ib-leaf-2 — leaf ib-leaf-2: 4 nodes"),
        "{md}"
    );
    assert!(md.contains("NVLINK on a100-03 GPU 1"), "{md}");
}

/// The fabric from the command line: `[topology]` adds the domains the
/// source does not say (a power feed) and a bad host list is refused with
/// its key; `options` and `blast domain` answer for the failing leaf.
#[test]
fn topology_config_and_a_domains_options_and_blast() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = dir.path().join("ns.toml");
    std::fs::write(
        &cfg,
        "[topology]\ndomains = [{ level = \"power\", name = \"pdu-a\", nodes = \"h100-[01-04]\" }]\n",
    )
    .expect("config");
    let c = cfg.to_str().expect("path");
    let v: Value = serde_json::from_str(&stdout(
        dir.path(),
        &["--config", c, "get", "nodes", "-o", "json"],
    ))
    .expect("json");
    let node = |name: &str| {
        v["items"]
            .as_array()
            .and_then(|a| a.iter().find(|n| n["name"] == name))
            .cloned()
            .expect("node")
    };
    let levels = |n: &Value| -> Vec<String> {
        n["domains"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|d| {
                format!(
                    "{} {}",
                    d["level"].as_str().unwrap_or(""),
                    d["name"].as_str().unwrap_or("")
                )
            })
            .collect()
    };
    assert_eq!(
        levels(&node("h100-02")),
        [
            "leaf ib-leaf-1",
            "rack rack-h100-1",
            "spine ib-spine-1",
            "power pdu-a"
        ]
    );
    assert!(
        !levels(&node("h100-05"))
            .iter()
            .any(|l| l.starts_with("power"))
    );
    assert_eq!(node("h100-02")["ib_ports"][0]["state"], 4);
    std::fs::write(
        &cfg,
        "[topology]\ndomains = [{ level = \"power\", name = \"pdu-a\", nodes = \"h100-[04-01\" }]\n",
    )
    .expect("config");
    let out = nightshift(dir.path(), &["--config", c, "get", "nodes"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("topology.domains: power pdu-a: nodes"),
        "{err}"
    );

    // The leaf's flap: its options recommend the cordon, and say what
    // draining all of it would cost.
    let o: Value = serde_json::from_str(&stdout(
        dir.path(),
        &[
            "--sim-seconds",
            "1230",
            "options",
            "ib-leaf-2",
            "-o",
            "json",
        ],
    ))
    .expect("json");
    assert_eq!(o["target"]["kind"], "domain");
    let names: Vec<&str> = o["options"]
        .as_array()
        .expect("options")
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(names, ["cordon_domain", "drain_domain", "do_nothing"]);
    assert_eq!(o["options"][0]["recommended"], true);
    assert_eq!(o["options"][0]["capacity_out"]["gpus"], 32);
    assert!(
        o["options"][1]["why"]
            .as_str()
            .is_some_and(|w| w.contains("fixes nothing")),
        "{o:#}"
    );
    let b: Value = serde_json::from_str(&stdout(
        dir.path(),
        &[
            "--sim-seconds",
            "1230",
            "blast",
            "domain",
            "ib-leaf-2",
            "-o",
            "json",
        ],
    ))
    .expect("json");
    assert_eq!(b["gpus_out_of_service"], 32);
    let killed: Vec<&str> = b["killed"]
        .as_array()
        .expect("killed")
        .iter()
        .filter_map(|k| k["name"].as_str())
        .collect();
    assert!(
        killed.contains(&"megatron-moe-2n") && killed.contains(&"dist-eval-2n"),
        "{killed:?}"
    );
    assert!(
        b["summary"]
            .as_str()
            .is_some_and(|s| s
                .starts_with("take ib-leaf-2 out (4 nodes: h100-05, h100-06, h100-07, h100-08)")),
        "{b:#}"
    );
}

/// The sim's options work after the subcommand too (`why 4700 --seed 3`
/// and `get nodes --nodes 64` failed with clap's `-- --seed` tip), and mean
/// the same as before it. restore's nodes reading in parallel are
/// `--read-nodes`.
#[test]
fn sim_options_work_before_or_after_the_subcommand() {
    let before = json(&["--seed", "3", "--jobs", "40", "get", "jobs", "-o", "json"]);
    let after = json(&["get", "jobs", "-o", "json", "--seed", "3", "--jobs", "40"]);
    assert_eq!(before, after);
    let default = json(&["get", "jobs", "-o", "json"]);
    assert_ne!(before, default, "the options were applied");
    let nodes = json(&["get", "nodes", "-o", "json", "--nodes", "64"]);
    assert_eq!(nodes["items"].as_array().map(Vec::len), Some(64));
    assert_eq!(
        nodes,
        json(&["--nodes", "64", "get", "nodes", "-o", "json"])
    );
    let r = json(&[
        "restore",
        "--state-bytes",
        "1TB",
        "--read-bw",
        "10GB/s",
        "--read-nodes",
        "4",
        "--node-bw",
        "1GB/s",
        "-o",
        "json",
    ]);
    assert_eq!(r["nodes"], 4, "{r:#}");
    // The what-if reads no cluster: the old spelling is a clear error, not
    // a what-if on one node.
    let dir = tempfile::tempdir().expect("tempdir");
    let out = nightshift(
        dir.path(),
        &["restore", "--state-bytes", "1TB", "--nodes", "4"],
    );
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--read-nodes"));
}

/// `get … --all`: each cluster of `[[clusters]]` answers under its name,
/// one that cannot answer is its error beside the others (the command
/// still succeeds); `--context NAME` answers for that cluster alone.
#[test]
fn get_all_answers_per_cluster_and_context_picks_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = dir.path().join("fleet.toml");
    std::fs::write(
        &cfg,
        "[[clusters]]\nname = \"east\"\nsource = \"sim\"\n\n\
         [[clusters]]\nname = \"west\"\nsource = \"sim\"\n[clusters.sim]\nseed = 9\n\n\
         [[clusters]]\nname = \"dead\"\nsource = \"slurm\"\n[clusters.slurm]\nurl = \"http://127.0.0.1:1\"\nuser = \"ops\"\n",
    )
    .expect("config");
    let cfg = cfg.to_str().expect("utf-8 path");
    let out = common::nightshift(
        dir.path(),
        &[
            "--config",
            cfg,
            "--all",
            "--sim-seconds",
            "100",
            "get",
            "incidents",
            "-o",
            "json",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["kind"], "fleet");
    let clusters = v["clusters"].as_array().expect("clusters");
    let names: Vec<&str> = clusters
        .iter()
        .filter_map(|c| c["cluster"].as_str())
        .collect();
    assert_eq!(names, ["east", "west", "dead"]);
    assert_eq!(clusters[0]["answer"]["kind"], "incidents");
    assert!(
        clusters[0]["answer"]["items"]
            .as_array()
            .is_some_and(|i| !i.is_empty()),
        "{}",
        clusters[0]
    );
    assert!(
        clusters[2]["error"]
            .as_str()
            .is_some_and(|e| e.contains("127.0.0.1:1")),
        "{}",
        clusters[2]
    );
    // One of them alone.
    let v = json(&[
        "--config",
        cfg,
        "--context",
        "west",
        "get",
        "nodes",
        "-o",
        "json",
    ]);
    assert_eq!(v["kind"], "nodes");
    // An action on one of them is audited under its name in
    // `[[clusters]]`, as the fleet console audits it (the sim calls
    // itself otherwise): what one arms, the other and `follow` find.
    let (ok, text, audit) = act(
        dir.path(),
        &[
            "--config",
            cfg,
            "--context",
            "west",
            "cordon",
            "h100-01",
            "--confirm",
            "h100-01",
        ],
    );
    assert!(ok, "{text}");
    assert_eq!(audit[0]["cluster"], "west", "{audit:?}");
    // The preview names the cluster, and the undo it prints acts there
    // when pasted — not on the default cluster (issue 37).
    assert!(text.contains("(cluster west)"), "{text}");
    assert!(
        text.contains("undo: nightshift --context west resume h100-01"),
        "{text}"
    );
    // Other commands want one cluster.
    let out = common::nightshift(dir.path(), &["--config", cfg, "--all", "why", "4700"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--context NAME"));
}

/// Nodes that keep failing (issue 29): a recording in which h100-05's GPU
/// 2 falls off the bus three times in three weeks (each Xid is gone from
/// the source's events by the next, as a source's rolling window drops
/// them). The report lists it, `get nodes` counts it, and its options
/// recommend repair instead of another reboot; earlier in the recording it
/// had fewer.
#[test]
fn a_node_with_three_xid_79s_in_a_recording_is_a_repeat_offender() {
    use nightshift::model::{Event, EventKind, LastXid};
    use std::sync::Arc;
    let dir = tempfile::tempdir().expect("tempdir");
    let sim = dir.path().join("sim.nsrec");
    stdout(
        dir.path(),
        &["--sim-seconds", "10", "record", sim.to_str().expect("path")],
    );
    let mut c = nightshift::recording::Recording::open(&sim)
        .and_then(|r| r.state_at(r.span().0))
        .expect("the sim's first state");
    let file = dir.path().join("month.nsrec");
    let mut rec = nightshift::recording::Recorder::create(&file, "sim").expect("recorder");
    let start = c.time;
    let node = c
        .nodes
        .iter()
        .position(|n| n.name == "h100-05")
        .expect("h100-05 in the sim");
    for (k, day) in [0i64, 11, 20].into_iter().enumerate() {
        c.time = start + day * 86_400;
        c.events = vec![Event {
            seq: k as u64 + 1,
            time: c.time,
            node: "h100-05".into(),
            gpu: Some(2),
            kind: EventKind::Xid { code: 79 },
            message: "GPU has fallen off the bus".into(),
            jobs: Vec::new(),
        }];
        Arc::make_mut(&mut c.nodes[node]).gpus[2].last_xid = Some(Box::new(LastXid {
            code: 79,
            time: Some(c.time),
            message: None,
        }));
        rec.snapshot(&Arc::new(c.clone())).expect("snapshot");
        // Rebooted and back: its GPU clean, until the next time.
        Arc::make_mut(&mut c.nodes[node]).gpus[2].last_xid = None;
        c.events.clear();
        c.time += 3600;
        rec.snapshot(&Arc::new(c.clone())).expect("snapshot");
    }
    rec.finish().expect("finish");
    let f = file.to_str().expect("path");
    let md = stdout(dir.path(), &["report", f]);
    assert!(md.contains("## Nodes that keep failing"), "{md}");
    assert!(md.contains("- h100-05: 3rd Xid 79 in 30 days ("), "{md}");
    let history = |at: Option<&str>| -> Value {
        let mut args = vec!["--replay", f];
        if let Some(t) = at {
            args.extend(["--at", t]);
        }
        args.extend(["get", "nodes", "-o", "json"]);
        let v: Value = serde_json::from_str(&stdout(dir.path(), &args)).expect("json");
        v["items"]
            .as_array()
            .expect("items")
            .iter()
            .find(|n| n["name"] == "h100-05")
            .expect("h100-05")["history"]
            .clone()
    };
    // At the end: three, a repeat offender.
    let h = history(None);
    assert_eq!(h["faults"][0]["fault"], "Xid 79", "{h:#}");
    assert_eq!(h["faults"][0]["count"], 3, "{h:#}");
    assert_eq!(h["faults"][0]["gpus"], serde_json::json!([2]));
    assert!(h["repeat_offender"].is_string(), "{h:#}");
    // Twelve days in: the second.
    let h = history(Some(&(start + 12 * 86_400).to_string()));
    assert_eq!(h["faults"][0]["count"], 2, "{h:#}");
    assert!(h["repeat_offender"].is_null(), "{h:#}");
    // At the third fault: repair, not a reboot.
    let third = (start + 20 * 86_400).to_string();
    let o: Value = serde_json::from_str(&stdout(
        dir.path(),
        &[
            "--replay", f, "--at", &third, "options", "h100-05", "-o", "json",
        ],
    ))
    .expect("options json");
    let pick = o["options"]
        .as_array()
        .expect("options")
        .iter()
        .find(|c| c["recommended"] == true)
        .expect("one recommended");
    assert_eq!(pick["name"], "repair", "{o:#}");
    assert!(
        pick["why"]
            .as_str()
            .is_some_and(|w| w.starts_with("3rd Xid 79 in 30 days")),
        "{pick:#}"
    );
    assert!(
        pick["actions"][0]
            .as_str()
            .is_some_and(|a| a.contains("RMA: 3rd Xid 79")),
        "{pick:#}"
    );
}

/// The audit log is part of a node's history (issue 29): nightshift's own
/// earlier drains of h100-03 for an Xid 79 (their intents name the
/// incident) count with tonight's, so that its third is flagged on the
/// command line too.
#[test]
fn earlier_drains_in_the_audit_log_make_a_repeat_offender() {
    let dir = tempfile::tempdir().expect("tempdir");
    let audit = dir.path().join("audit.jsonl");
    let now: Value =
        serde_json::from_str(&stdout(dir.path(), &["get", "nodes", "-o", "json"])).expect("json");
    let t = now["time"].as_i64().expect("time");
    let mut lines = String::new();
    // Twenty and nine days ago; the second incident was cordoned, then
    // drained five hours later: one fault, not two. Another cluster's
    // h100-03 (the log is shared) is not this one.
    let intents = [
        (20i64, 0, "open", "sim-16"),
        (9, 0, "open", "sim-16"),
        (9, 5, "remedied", "sim-16"),
        (4, 0, "open", "gpu-east"),
    ];
    for (i, (days, hours, stage, cluster)) in intents.into_iter().enumerate() {
        let incident = format!("e{days} XID 79 on h100-03 GPU 3 ({stage})");
        let r = serde_json::json!({"id": format!("old-{i}"), "phase": "intent",
            "time": t - days * 86_400 + hours * 3600,
            "operator": "oncall", "scheduler_user": null, "host": "h", "cluster": cluster,
            "source": "sim", "action": "drain", "target": "h100-03", "reason": "xid 79",
            "preview": "p", "incident": incident, "outcome": null});
        lines.push_str(&format!("{r}\n"));
    }
    std::fs::write(&audit, lines).expect("audit");
    let v: Value = serde_json::from_str(&stdout(
        dir.path(),
        &[
            "--audit-log",
            audit.to_str().expect("path"),
            "get",
            "nodes",
            "-o",
            "json",
        ],
    ))
    .expect("json");
    let h = v["items"]
        .as_array()
        .expect("items")
        .iter()
        .find(|n| n["name"] == "h100-03")
        .expect("h100-03")["history"]
        .clone();
    assert_eq!(h["faults"][0]["count"], 3, "{h:#}");
    assert!(h["repeat_offender"].is_string(), "{h:#}");
    // The console's analysis reads the same log beside its snapshots (no
    // snapshot rewritten for it) and says the same of the same moment.
    let console = console_history_with_audit(
        &audit,
        t,
        "h100-03",
        h["repeat_offender"].as_str().unwrap_or_default(),
    );
    assert_eq!(
        console,
        (3, h["repeat_offender"].as_str().map(String::from))
    );
}

/// The console's analyst on the sim at `time`, fed the audit log as the
/// console feeds it (`watch_faults`, `AuditFeed`): `node`'s fault count
/// and its repeat-offender line, once the analysis names it.
fn console_history_with_audit(
    audit: &std::path::Path,
    time: i64,
    node: &str,
    expected: &str,
) -> (u32, Option<String>) {
    use nightshift::analyst::{AuditFeed, Out};
    use nightshift::engine::analysis::Focus;
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let mut sim = nightshift::sources::sim::Sim::new(Default::default()).expect("sim");
        let start = sim.snapshot().time;
        sim.advance(u64::try_from(time - start).unwrap_or(0));
        let c = std::sync::Arc::new(sim.snapshot());
        assert_eq!(c.time, time, "the command line's moment");
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        let (_focus, focus_rx) = tokio::sync::watch::channel(Focus::None);
        let (otx, mut out) = tokio::sync::mpsc::channel(64);
        let log = nightshift::actions::audit::AuditLog::new(audit.to_path_buf());
        nightshift::analyst::spawn_into(
            rx,
            focus_rx,
            nightshift::engine::SiteParams::default(),
            nightshift::engine::xid::XidCatalog::default(),
            std::sync::Arc::new(std::sync::Mutex::new(
                nightshift::engine::kpis::KpiBook::new(3600),
            )),
            Some(AuditFeed {
                faults: nightshift::actions::audit::watch_faults(log),
                cluster: None,
            }),
            (otx, |o| o),
        );
        tx.send(nightshift::sources::Update::Snapshot(c))
            .await
            .expect("send");
        loop {
            match tokio::time::timeout(std::time::Duration::from_secs(30), out.recv()).await {
                Ok(Some(Out::Analysis(a))) => {
                    let h = a.base.history(node).expect("history");
                    let count = h.faults.first().map_or(0, |f| f.count);
                    if !expected.is_empty() || count > 0 {
                        return (count, h.repeat_offender.clone());
                    }
                }
                Ok(Some(_)) => {}
                other => panic!("no analysis: {}", other.is_ok()),
            }
        }
    })
}

/// "Requeue after its checkpoint" from the command line (issue 29): the
/// requeue's preview is printed and nothing is sent; without the job typed
/// nothing is armed; typed, it is armed in the audit log with the job's
/// checkpoint as its trigger; a job that does not run has no checkpoint to
/// wait for.
#[test]
fn a_requeue_after_the_checkpoint_is_armed_not_sent() {
    let dir = tempfile::tempdir().expect("tempdir");
    let audit = dir.path().join("audit.jsonl");
    let a = audit.to_str().expect("path");
    let run = |extra: &[&str]| {
        let mut args = vec!["--audit-log", a, "requeue"];
        args.extend(extra);
        common::nightshift(dir.path(), &args)
    };
    let out = run(&["4701", "--after-checkpoint"]);
    let said = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(!out.status.success(), "{said}");
    assert!(
        said.contains(
            "nothing sent now; confirming arms it: requeue 4701 after the checkpoint of job 4701"
        ),
        "{said}"
    );
    // The plan's cost (the options' row), the preview's being of now.
    assert!(
        said.contains("as planned: requeue 4701 in about")
            && said.contains("the preview's GPU-h are lost only if it were sent now"),
        "{said}"
    );
    assert!(
        !audit.exists()
            || !std::fs::read_to_string(&audit)
                .expect("audit")
                .contains("armed")
    );
    let said = stdout(
        dir.path(),
        &[
            "--audit-log",
            a,
            "requeue",
            "4701",
            "--after-checkpoint",
            "--confirm",
            "4701",
        ],
    );
    assert!(said.contains("armed "), "{said}");
    let listed: Value = serde_json::from_str(&stdout(
        dir.path(),
        &["--audit-log", a, "armed", "-o", "json"],
    ))
    .expect("json");
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed:#}");
    let armed = &listed[0];
    assert_eq!(
        (&armed["action"]["action"], &armed["action"]["job"]),
        (&json!("requeue"), &json!("4701")),
        "{listed:#}"
    );
    assert_eq!(armed["when"]["jobs"][0]["job"], "4701", "{listed:#}");
    // The table says what the step waits for now, as follow does.
    let table = stdout(dir.path(), &["--audit-log", a, "armed"]);
    assert!(
        table.contains("    now: waiting for job 4701's checkpoint"),
        "{table}"
    );
    let log = std::fs::read_to_string(&audit).expect("audit");
    assert!(!log.contains("\"intent\""), "nothing sent: {log}");
    let out = run(&["9999", "--after-checkpoint", "--confirm", "9999"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not running"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The console's analyst (the task the console runs) fed a recording's
/// snapshots up to `until`, as the console is fed while it plays it: its
/// analysis of the last of them.
fn console_analysis(
    rec: &nightshift::recording::Recording,
    until: i64,
) -> std::sync::Arc<nightshift::engine::analysis::Analysis> {
    use nightshift::analyst::Out;
    use nightshift::engine::analysis::Focus;
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let (tx, rx) = tokio::sync::mpsc::channel(4096);
        let (_focus, focus_rx) = tokio::sync::watch::channel(Focus::None);
        let kpis = std::sync::Arc::new(std::sync::Mutex::new(
            nightshift::engine::kpis::KpiBook::new(3600),
        ));
        let mut out = nightshift::analyst::spawn(
            rx,
            focus_rx,
            nightshift::engine::SiteParams::default(),
            nightshift::engine::xid::XidCatalog::default(),
            kpis,
        );
        let mut last = 0;
        for c in rec.states() {
            let c = c.expect("state");
            if c.time > until {
                break;
            }
            last = c.time;
            tx.send(nightshift::sources::Update::Snapshot(c))
                .await
                .expect("send");
            // Take what it sent so far: it never waits on a full channel.
            while let Ok(o) = out.try_recv() {
                drop(o);
            }
        }
        loop {
            match tokio::time::timeout(std::time::Duration::from_secs(60), out.recv()).await {
                Ok(Some(Out::Analysis(a))) if a.base.time == last => return a,
                Ok(Some(_)) => {}
                other => panic!("no analysis of the snapshot at {last}: {other:?}"),
            }
        }
    })
}

/// The console playing a recording, paused at its start, then jumped to
/// `to` (`:goto`): its analyst's analysis of the snapshot it jumped to.
fn console_after_jump(
    file: &std::path::Path,
    to: i64,
) -> std::sync::Arc<nightshift::engine::analysis::Analysis> {
    use nightshift::analyst::Out;
    use nightshift::engine::analysis::Focus;
    use nightshift::recording::replay::ReplayCmd;
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let rec = nightshift::recording::Recording::open(file).expect("open");
        let kpis = std::sync::Arc::new(std::sync::Mutex::new(
            nightshift::engine::kpis::KpiBook::new(3600),
        ));
        let site = nightshift::engine::SiteParams::default();
        let (rx, ctl) = nightshift::recording::replay::spawn(rec, 1.0, kpis.clone(), site.clone())
            .expect("replay");
        let (_focus, focus_rx) = tokio::sync::watch::channel(Focus::None);
        let mut out = nightshift::analyst::spawn(
            rx,
            focus_rx,
            site,
            nightshift::engine::xid::XidCatalog::default(),
            kpis,
        );
        ctl.send(ReplayCmd::Pause).await.expect("pause");
        ctl.send(ReplayCmd::Seek(to)).await.expect("seek");
        loop {
            match tokio::time::timeout(std::time::Duration::from_secs(60), out.recv()).await {
                Ok(Some(Out::Analysis(a))) if a.base.time == to => return a,
                Ok(Some(_)) => {}
                other => panic!("no analysis after the jump to {to}: {other:?}"),
            }
        }
    })
}

/// One situation (issue 39): the same moment asked through every surface
/// gives one answer. A recorded sim night:
/// - sampled every simulated minute from +5 to +25 min on the one analysis
///   (its memory fed every snapshot in order): each open incident that
///   needs its node out is answered by a drain among its node's options
///   (the catalog's remedy: no reboot for a "drain and look"); each
///   remedied one says what its node's options recommend; no node of an
///   open domain incident is recommended back to service or left as is;
/// - at +20 min: the console's analyst (fed the recording as the console
///   plays it, and one that jumped there from the start), `get
///   incidents`, `options`, `why`, `blast` and `get kpis`
///   give the same incidents (every field, the hung gang's stall
///   included), recommendation, estimate, cost and hung GPU-hours;
/// - at the end: the report names as open what `get incidents` does.
#[test]
fn every_surface_gives_one_answer_for_the_same_moment() {
    use nightshift::engine::incidents::Stage;
    use nightshift::engine::memory::Memory;
    use nightshift::engine::options::node_options;
    use nightshift::engine::xid::ActionClass;
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("night.nsrec");
    let f = file.to_str().expect("path");
    stdout(dir.path(), &["--sim-seconds", "1500", "record", f]);
    let rec = nightshift::recording::Recording::open(&file).expect("open");
    let (start, _) = rec.span();
    let site = nightshift::engine::SiteParams::default();
    let cat = nightshift::engine::xid::XidCatalog::default();
    let drains = ["drain_now", "reset_gpu", "drain_reboot", "repair"];
    // The one analysis at each minute, its memory fed every snapshot.
    let mut memory = Memory::default();
    let mut minutes = std::collections::BTreeMap::new();
    let mut prev: Option<std::sync::Arc<nightshift::model::Cluster>> = None;
    for c in rec.states() {
        let c = c.expect("state");
        if let Some(p) = &prev {
            let minute = (c.time - start) / 60;
            if (p.time - start) / 60 < minute && (5..=26).contains(&minute) {
                // `p` is the last snapshot at or before the minute.
                minutes.insert(minute, ((**p).clone(), memory.base(p, &site, &cat)));
            }
        }
        memory.observe(&c, &site);
        prev = Some(c);
    }
    assert!(minutes.len() >= 20, "{} minutes sampled", minutes.len());
    let mut checked = 0;
    for (minute, (c, b)) in &minutes {
        for i in b
            .incidents
            .iter()
            .filter(|i| i.is_open() && i.kind != IncidentKind::Stall)
        {
            let nodes = if i.kind == IncidentKind::Domain {
                i.nodes.clone()
            } else {
                vec![i.node.clone()]
            };
            for node in nodes {
                let o = node_options(c, b, &node, &site).expect("options");
                let w = o.options.iter().find(|x| x.recommended).expect("one");
                let said = format!("+{minute}m {} {node}: {} ({})", i.id, w.name, w.title);
                if i.kind == IncidentKind::Domain && i.is_failing() {
                    assert!(
                        !["validate_resume", "do_nothing"].contains(&w.name),
                        "{said}: put back or left while its domain fails"
                    );
                } else if i.kind == IncidentKind::Domain {
                    // Quiet again: back through its check unless its own
                    // GPUs still need their remedy (issue 58).
                    assert!(
                        w.name != "validate_resume"
                            || b.node_verdict(&node).is_none_or(|v| {
                                !nightshift::engine::validate::own_remedy_pending(v.verdict.action)
                            }),
                        "{said}: put back with its own GPUs unremedied"
                    );
                } else if i.stage == Stage::Open && i.action.needs_drain() {
                    assert!(drains.contains(&w.name), "{said} for {:?}", i.action);
                    if i.action != ActionClass::DrainReboot {
                        assert_ne!(w.name, "drain_reboot", "{said} for {:?}", i.action);
                    }
                } else if i.stage == Stage::Remedied || i.stage == Stage::AwaitingRemedy {
                    assert!(i.status.ends_with(w.title.as_str()), "{said}: {}", i.status);
                }
                checked += 1;
            }
        }
    }
    assert!(checked >= 40, "only {checked} answers compared");

    // +20 min: the console's analyst, then the command line.
    let (c, b) = &minutes[&20];
    let at = c.time.to_string();
    let console = console_analysis(&rec, c.time);
    let engine_items = serde_json::to_value(&b.incidents).expect("json");
    assert_eq!(
        serde_json::to_value(&console.base.incidents).expect("json"),
        engine_items,
        "the console's incidents"
    );
    let jumped = console_after_jump(&file, c.time);
    assert_eq!(
        serde_json::to_value(&jumped.base.incidents).expect("json"),
        engine_items,
        "the incidents of a console that jumped there"
    );
    assert!(
        b.incidents.iter().any(|i| i.kind == IncidentKind::Stall)
            || b.incidents
                .iter()
                .any(|i| i.burning_gpu_hours_per_hour.is_some()),
        "a hung gang is part of the moment compared"
    );
    let json =
        |args: &[&str]| -> Value { serde_json::from_str(&stdout(dir.path(), args)).expect("json") };
    let replay = |rest: &[&str]| -> Value {
        let mut args = vec!["--replay", f, "--at", at.as_str()];
        args.extend_from_slice(rest);
        json(&args)
    };
    let got = replay(&["get", "incidents", "-o", "json"]);
    assert_eq!(got["items"], engine_items, "get incidents");
    // The node of the night's DBE: its options' recommendation.
    let o = replay(&["options", "h100-06", "-o", "json"]);
    let cli_pick = o["options"]
        .as_array()
        .expect("options")
        .iter()
        .find(|x| x["recommended"] == true)
        .and_then(|x| x["name"].as_str())
        .map(str::to_string);
    let engine_pick = node_options(c, b, "h100-06", &site)
        .expect("options")
        .options
        .into_iter()
        .find(|x| x.recommended)
        .map(|x| x.name.to_string());
    assert_eq!(cli_pick, engine_pick);
    // A waiting job's estimate, and the cost of draining the DBE's node.
    let pending = c
        .jobs
        .iter()
        .position(|j| j.state.is_pending())
        .expect("a waiting job");
    let w = nightshift::engine::why::why(c, pending, b).expect("why");
    let cli_why = replay(&["why", &c.jobs[pending].id, "-o", "json"]);
    assert_eq!(cli_why, serde_json::to_value(&w).expect("json"), "why");
    let target = nightshift::engine::blast::Target::Drain {
        reason: String::new(),
        node: "h100-06".into(),
        requeue: true,
    };
    let blast = nightshift::engine::blast::blast(c, b, &target, &site).expect("blast");
    let cli_blast = replay(&["blast", "drain", "h100-06", "-o", "json"]);
    assert_eq!(
        cli_blast,
        serde_json::to_value(&blast).expect("json"),
        "blast"
    );
    // The hung gangs' unsaved work: the console's `:kpis`, `get kpis`.
    let kpis = replay(&["get", "kpis", "-o", "json"]);
    let hung = nightshift::engine::kpis::hung_lost(&console.base, c);
    assert_eq!(kpis["lost_gpu_hours_hung"], json!(hung), "{kpis:#}");
    // The night's end: the report's open incidents are `get incidents`'.
    let end = json(&["--replay", f, "get", "incidents", "-o", "json"]);
    let open_now: std::collections::BTreeSet<String> = end["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter(|i| !["resolved"].contains(&i["stage"].as_str().unwrap_or_default()))
        .filter_map(|i| i["id"].as_str().map(str::to_string))
        .collect();
    let r = json(&["report", f, "-o", "json"]);
    let reported: std::collections::BTreeSet<String> = r["open_at_end"]
        .as_array()
        .expect("open_at_end")
        .iter()
        .filter_map(Value::as_str)
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect();
    assert_eq!(reported, open_now, "{r:#}");
}

/// Completions and the manual page come from the command line's own
/// definition (issue 41): bash loads the completion script and completes
/// a subcommand and a flag from it; zsh's script declares itself; groff
/// renders the page without a warning, with a section for each command
/// and its flags.
#[test]
fn completions_load_in_bash_and_the_manual_renders_in_groff() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bash = stdout(dir.path(), &["completions", "bash"]);
    let script = dir.path().join("nightshift.bash");
    std::fs::write(&script, &bash).expect("write");
    // Load it, then ask it what `nightshift dra<TAB>` and `nightshift
    // drain --aft<TAB>` complete to, as bash's completion would.
    let probe = format!(
        "source {}; COMP_WORDS=(nightshift dra); COMP_CWORD=1; _nightshift nightshift dra nightshift; echo \"${{COMPREPLY[@]}}\"; \
         COMP_WORDS=(nightshift drain --aft); COMP_CWORD=2; _nightshift nightshift --aft drain; echo \"${{COMPREPLY[@]}}\"",
        script.display()
    );
    let out = std::process::Command::new("bash")
        .args(["-c", &probe])
        .output()
        .expect("bash");
    let said = String::from_utf8_lossy(&out.stdout);
    let mut lines = said.lines();
    assert_eq!(
        lines.next(),
        Some("drain"),
        "{said}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        lines
            .next()
            .is_some_and(|l| l.split_whitespace().any(|w| w == "--after-checkpoint")),
        "{said}"
    );
    let zsh = stdout(dir.path(), &["completions", "zsh"]);
    assert!(
        zsh.starts_with("#compdef nightshift"),
        "{}",
        &zsh[..zsh.len().min(80)]
    );

    let page = stdout(dir.path(), &["man"]);
    assert!(
        page.starts_with(".ie") || page.starts_with(".TH"),
        "{}",
        &page[..page.len().min(80)]
    );
    for section in [
        "NIGHTSHIFT DRAIN",
        "NIGHTSHIFT WHY",
        "NIGHTSHIFT COMPLETIONS",
        // blast's own commands (issue 63: they were missing)
        "NIGHTSHIFT BLAST DRAIN",
        "NIGHTSHIFT BLAST DOMAIN",
    ] {
        assert!(page.contains(&format!(".SH \"{section}\"")), "no {section}");
    }
    // Issue 63: the positionals with their words, the environment, the
    // files, the exit statuses and the configuration's keys.
    for part in [
        "<NODE>\nThe node, as the scheduler names it",
        ".SH ENVIRONMENT",
        "NIGHTSHIFT_LOG",
        "NIGHTSHIFT_CONFIG",
        ".SH FILES",
        ".SH EXIT STATUS",
        ".SH CONFIGURATION",
        "max_answer_held_bytes",
    ] {
        assert!(page.contains(part), "no {part:?}");
    }
    if !common::require("groff", "apt-get install groff-base") {
        return;
    }
    let file = dir.path().join("nightshift.1");
    std::fs::write(&file, &page).expect("write");
    let out = std::process::Command::new("groff")
        // -k: through preconv, as man reads a page (the help is UTF-8).
        .args(["-k", "-man", "-Tutf8", "-ww"])
        .arg(&file)
        .output()
        .expect("groff");
    let warnings = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && warnings.trim().is_empty(),
        "{warnings}"
    );
    // groff draws `\-` as a minus sign.
    let text = String::from_utf8_lossy(&out.stdout).replace(['\u{2212}', '\u{2010}'], "-");
    assert!(
        text.contains("--after-checkpoint"),
        "the drain's flags are in the page"
    );
}

/// Issue 58's property over the recorded fixtures (real slurmrestd answers
/// of 22.05, 24.11 and v0.0.40: a node drained, one draining under a job,
/// gangs, arrays): for every node and every running job, the recommended
/// option's first step passes the guard's preview on the same base (the
/// breaker's count aside: its window depends on what else was done).
#[test]
fn every_recommendation_on_the_recorded_fixtures_passes_the_guard() {
    use nightshift::actions::audit::AuditLog;
    use nightshift::actions::executor::Executor;
    use nightshift::actions::guard;
    use nightshift::actions::policy::Policy;
    use nightshift::engine::analysis::Base;
    use nightshift::engine::options::{job_options, node_options};
    use nightshift::sources::slurm::{map, wire};
    let dir = tempfile::tempdir().expect("tempdir");
    let log = AuditLog::new(dir.path().join("audit.jsonl"));
    let site = nightshift::engine::SiteParams::default();
    let cat = nightshift::engine::xid::XidCatalog::default();
    let policy = Policy {
        max_nodes_per_window: u32::MAX,
        max_partition_share_out: 1.0,
        ..Policy::default()
    };
    let read = |p: &str| -> Value {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(p);
        serde_json::from_str(&std::fs::read_to_string(&path).expect("fixture")).expect("json")
    };
    let sets = [
        (
            "slurm-22.05/v0.0.38_nodes_drained.json",
            "slurm-22.05/v0.0.38_jobs.json",
            "slurm-22.05/v0.0.38_partitions.json",
        ),
        (
            "slurm-22.05/v0.0.38_nodes_draining.json",
            "slurm-22.05/v0.0.38_jobs.json",
            "slurm-22.05/v0.0.38_partitions.json",
        ),
        (
            "slurm-24.11/v0.0.42_nodes.json",
            "slurm-24.11/v0.0.42_jobs.json",
            "slurm-24.11/v0.0.42_partitions.json",
        ),
        (
            "slurm-v0.0.40/nodes.json",
            "slurm-v0.0.40/jobs.json",
            "slurm-v0.0.40/partitions.json",
        ),
    ];
    let executor = Executor::replay();
    let mut asked = 0;
    for (nodes, jobs, parts) in sets {
        let (n, _) = wire::list::<wire::Node>(read(nodes), "nodes", "node").expect("nodes");
        let (j, _) = wire::list::<wire::Job>(read(jobs), "jobs", "job").expect("jobs");
        let (p, _) =
            wire::list::<wire::Partition>(read(parts), "partitions", "partition").expect("parts");
        let mut c = map::cluster("lab", 0, &n, &j, &p).cluster;
        // The moment the answers were recorded: just after the last start.
        c.time = c
            .jobs
            .iter()
            .filter_map(|x| x.start_time.get())
            .max()
            .unwrap_or(0)
            + 60;
        let base = Base::compute(&c, None, &site, &cat);
        let mut all = Vec::new();
        for node in &c.nodes {
            all.push(node_options(&c, &base, &node.name, &site).expect("options"));
        }
        for job in c.jobs.iter().filter(|x| x.state.holds_resources()) {
            all.push(job_options(&c, &base, &job.id, None, &site).expect("options"));
        }
        for o in &all {
            let r = o
                .recommended()
                .unwrap_or_else(|| panic!("{nodes}: none: {o:#?}"));
            let Some(first) = r.steps.first() else {
                continue;
            };
            asked += 1;
            let p = guard::preview(
                first,
                &c,
                &base,
                std::time::Duration::ZERO,
                &policy,
                &log,
                false,
                Ok(&executor),
                &site,
            );
            assert!(
                p.refusal.is_none(),
                "{nodes}: {} {}: recommended {} — refused: {}",
                o.target.kind,
                o.target.name,
                r.title,
                p.refusal.map(|x| x.to_string()).unwrap_or_default()
            );
        }
    }
    assert!(asked >= 3, "only {asked} recommendations with a step");
}

/// Issue 58 on the sim: `drain h100-06 --requeue --after-checkpoint` said
/// "nothing runs on h100-06" while 4702 (submitted with --no-requeue) ran
/// there. It names the job and why no drain is armed, and sends nothing.
#[test]
fn an_armed_drain_of_a_node_running_only_a_no_requeue_job_names_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let audit = dir.path().join("audit.jsonl");
    let out = nightshift(
        dir.path(),
        &[
            "--audit-log",
            audit.to_str().expect("path"),
            "--sim-seconds",
            "300",
            "drain",
            "h100-06",
            "--reason",
            "x",
            "--requeue",
            "--after-checkpoint",
            "--confirm",
            "h100-06",
        ],
    );
    let said =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{said}");
    assert!(!said.contains("nothing runs on h100-06"), "{said}");
    assert!(
        said.contains("4702") && said.contains("--no-requeue"),
        "{said}"
    );
    assert!(
        std::fs::read_to_string(&audit)
            .unwrap_or_default()
            .is_empty(),
        "nothing sent"
    );
    // Its options: every preemption of 4702 unavailable, doing nothing
    // recommended, with the guard's reason.
    let v = json(&["--sim-seconds", "300", "options", "4702", "-o", "json"]);
    assert_eq!(recommended(&v), "do_nothing", "{v:#}");
    assert!(
        option(&v, "hard_preempt")["refused"]
            .as_str()
            .is_some_and(|r| r.contains("--no-requeue")),
        "{v:#}"
    );
}

/// At home on the login node (issue 63): with no `--config`, the file in
/// the user's config directory is read (`$XDG_CONFIG_HOME`, then
/// `~/.config`), `NIGHTSHIFT_CONFIG` wins over both (and must exist), and
/// `doctor` says which file it read; with `USER` and `LOGNAME` unset (cron,
/// containers), the Slurm user is the account's name as `id -un` finds
/// it, not "no Slurm user name".
#[test]
fn the_config_is_read_where_users_put_it_and_the_user_is_the_accounts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path().join("home");
    let xdg = dir.path().join("xdg");
    for d in [xdg.join("nightshift"), home.join(".config/nightshift")] {
        std::fs::create_dir_all(&d).expect("dir");
        std::fs::write(d.join("config.toml"), "[ui]\nbell_on_critical = true\n").expect("config");
    }
    let other = dir.path().join("other.toml");
    std::fs::write(&other, "[ui]\nmouse = false\n").expect("config");
    let doctor = |env: &[(&str, &std::path::Path)]| -> (bool, String) {
        let mut cmd = std::process::Command::new(common::bin());
        cmd.args(["doctor", "-o", "json", "--log-file"])
            .arg(dir.path().join("n.log"))
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("NIGHTSHIFT_CONFIG")
            .env("HOME", &home);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = cmd.output().expect("run");
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        (out.status.success(), text)
    };
    let read = |text: &str| -> String {
        let v: Value = serde_json::from_str(text).expect("json");
        v.as_array()
            .and_then(|c| c.iter().find(|c| c["name"] == "config"))
            .and_then(|c| c["detail"].as_str())
            .unwrap_or_default()
            .to_string()
    };
    let (ok, text) = doctor(&[("XDG_CONFIG_HOME", &xdg)]);
    assert!(ok, "{text}");
    assert_eq!(
        read(&text),
        format!("read {}", xdg.join("nightshift/config.toml").display())
    );
    let (ok, text) = doctor(&[]);
    assert!(ok, "{text}");
    assert_eq!(
        read(&text),
        format!(
            "read {}",
            home.join(".config/nightshift/config.toml").display()
        )
    );
    let (ok, text) = doctor(&[("XDG_CONFIG_HOME", &xdg), ("NIGHTSHIFT_CONFIG", &other)]);
    assert!(ok, "{text}");
    assert_eq!(read(&text), format!("read {}", other.display()));
    let missing = dir.path().join("missing.toml");
    let (ok, text) = doctor(&[("NIGHTSHIFT_CONFIG", &missing)]);
    assert!(!ok && text.contains("missing.toml"), "{text}");
    let empty = dir.path().join("empty");
    let (ok, text) = doctor(&[("HOME", &empty)]);
    assert!(
        ok && read(&text).starts_with("none: the defaults"),
        "{text}"
    );
    // The config names commands nightshift runs: one another user can
    // write, or owns, is refused (a hostile local user, nightshift as root).
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&other, std::fs::Permissions::from_mode(0o666)).expect("chmod");
    let (ok, text) = doctor(&[("NIGHTSHIFT_CONFIG", &other)]);
    assert!(!ok && text.contains("writable by every user"), "{text}");
    std::fs::set_permissions(&other, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        std::os::unix::fs::chown(&other, Some(12345), None).expect("chown");
        let (ok, text) = doctor(&[("NIGHTSHIFT_CONFIG", &other)]);
        assert!(!ok && text.contains("owned by uid 12345"), "{text}");
    }

    // No USER, no LOGNAME: the account's name, and the dead endpoint is
    // what is said.
    let out = std::process::Command::new(common::bin())
        .args([
            "--source",
            "slurm",
            "--slurm-url",
            "http://127.0.0.1:9",
            "get",
            "nodes",
            "--log-file",
        ])
        .arg(dir.path().join("n.log"))
        .env_remove("USER")
        .env_remove("LOGNAME")
        .env("HOME", &empty)
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(!err.contains("no Slurm user name"), "{err}");
    assert!(err.contains("127.0.0.1:9"), "{err}");
}

/// The usual flags (issue 63): `--version` names the commit, the target
/// and the glibc floor; `-vv` puts trace lines in the log (`-q` keeps it
/// to warnings); `-q` with `-v` is a usage error, exit status 2.
#[test]
fn version_says_the_build_and_v_and_q_set_the_log_level() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = nightshift(dir.path(), &["--version"]);
    let v = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{v}");
    assert!(
        v.starts_with("nightshift ")
            && v.contains("(commit ")
            && v.contains("linux")
            && v.contains("glibc"),
        "{v}"
    );
    let log = dir.path().join("nightshift.log");
    let out = nightshift(dir.path(), &["-vv", "get", "nodes"]);
    assert!(out.status.success());
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(text.contains(" TRACE "), "{text}");
    std::fs::remove_file(&log).expect("rm");
    let out = nightshift(dir.path(), &["-q", "get", "nodes"]);
    assert!(out.status.success());
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        !text.contains(" INFO ") && !text.contains(" TRACE "),
        "{text}"
    );
    let out = nightshift(dir.path(), &["-q", "-v", "get", "nodes"]);
    assert_eq!(out.status.code(), Some(2));
}

/// `doctor`'s advice and layout (issue 63): Kubernetes with no kubeconfig
/// says how to point at one (not "see the error"); no scheduler names the
/// config's top-level `source` key; a long check name (an endpoint's URL)
/// takes a line of its own, so the other lines keep a narrow name column
/// and do not wrap at 80; the last line names what failed.
#[test]
fn doctor_says_what_to_do_and_fits_a_login_terminal() {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).expect("home");
    let run = |args: &[&str]| -> String {
        let out = std::process::Command::new(common::bin())
            .args(args)
            .arg("--log-file")
            .arg(dir.path().join("n.log"))
            .env("HOME", &home)
            .env_remove("KUBECONFIG")
            .env_remove("KUBERNETES_SERVICE_HOST")
            .env_remove("NIGHTSHIFT_CONFIG")
            .env_remove("XDG_CONFIG_HOME")
            .output()
            .expect("run");
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let said = run(&["--source", "kube", "doctor"]);
    assert!(
        said.contains("→ point at a kubeconfig: KUBECONFIG=FILE"),
        "{said}"
    );
    assert!(!said.contains("see the error"), "{said}");
    let dead = "http://127.0.0.1:9/a-long-path/for-a-long-name/metrics";
    let said = run(&["--source", "none", "--dcgm", dead, "doctor"]);
    assert!(
        said.contains("`source = \"slurm\"` at the top of the config"),
        "{said}"
    );
    let lines: Vec<&str> = said.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.starts_with(&format!("FAIL  endpoint {dead}")))
        .unwrap_or_else(|| panic!("{said}"));
    assert_eq!(
        lines[at].trim_end(),
        format!("FAIL  endpoint {dead}"),
        "its name alone"
    );
    assert!(
        lines[at + 1].trim_start().starts_with("cannot reach"),
        "{said}"
    );
    let scheduler = lines
        .iter()
        .find(|l| l.starts_with("warn  scheduler"))
        .expect("scheduler");
    let detail_at = scheduler.find("none configured").expect("detail");
    assert!(detail_at <= 6 + 18 + 2, "a narrow name column: {scheduler}");
    let last = lines.last().copied().unwrap_or_default();
    assert!(last.starts_with("1 failed (endpoint "), "{said}");
}

/// A command's help shows its own options first and the ~25 global ones
/// under their own heading after them; every positional says what it is
/// (issue 63).
#[test]
fn a_commands_help_shows_its_own_options_first_and_every_positional_has_text() {
    let dir = tempfile::tempdir().expect("tempdir");
    let help = |args: &[&str]| -> String {
        let out = nightshift(dir.path(), args);
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let h = help(&["drain", "--help"]);
    let own = h.find("--after-checkpoint").expect("its own option");
    let global = h.find("Global options:").expect("a heading of their own");
    let source = h.find("--source").expect("a global option");
    assert!(own < global && global < source, "{h}");
    for cmd in [
        &["drain"][..],
        &["cordon"],
        &["resume"],
        &["requeue"],
        &["preempt"],
        &["priority"],
        &["validate"],
        &["reason"],
        &["disarm"],
        &["blast", "drain"],
        &["blast", "domain"],
        &["blast", "preempt"],
    ] {
        let h = help(&[cmd, &["--help"]].concat());
        let args = h
            .split("Arguments:")
            .nth(1)
            .and_then(|a| a.split("Options:").next())
            .unwrap_or_else(|| panic!("{cmd:?}: {h}"));
        let lines: Vec<&str> = args.lines().filter(|l| !l.trim().is_empty()).collect();
        assert!(!lines.is_empty(), "{cmd:?}: {h}");
        for (i, l) in lines.iter().enumerate() {
            if l.trim_start().starts_with('<') {
                let text = lines.get(i + 1).map_or("", |t| t.trim());
                assert!(
                    !text.is_empty() && !text.starts_with('<'),
                    "{cmd:?} {l}: {h}"
                );
            }
        }
    }
}

/// The starting policies (README: "Letting nightshift act") over the
/// sim's night, with no key pressed (issue 61): every GPU fault is drained
/// by `nightshift autopilot` as `policy:gpu-faults`, in the round that
/// first read it; the leaf switch's flaps page exactly once (PagerDuty's
/// Events API v2, a stand-in that checks each event) and the page
/// resolves when the switch has been quiet; the audit log says it all.
#[test]
fn the_autopilot_remedies_the_sims_gpu_faults_and_pages_the_switch_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pd = common::pagerduty::PagerDuty::start();
    let cfg = dir.path().join("autopilot.toml");
    std::fs::write(
        &cfg,
        format!(
            "{}\n[paging.pagerduty]\nrouting_key = \"0123456789abcdef0123456789abcdef\"\nurl = \"{}\"\n",
            include_str!("../config/policies.example.toml")
                .replace("mode = \"shadow\"", "mode = \"live\""),
            pd.url()
        ),
    )
    .expect("config");
    let audit = dir.path().join("audit.jsonl");
    // 100 s of the night a round: 3,500 s in all, past the leaf's second
    // flap (1,500 s) and its 15 quiet minutes.
    let out = common::nightshift(
        dir.path(),
        &[
            "--config",
            cfg.to_str().expect("path"),
            "--audit-log",
            audit.to_str().expect("path"),
            "--speed",
            "100",
            "autopilot",
            "--interval",
            "1s",
            "--for",
            "35s",
        ],
    );
    let said =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert!(
        said.starts_with("autopilot: 2 policies (2 live, 0 shadow)"),
        "{said}"
    );
    let records: Vec<Value> = std::fs::read_to_string(&audit)
        .expect("audit")
        .lines()
        .map(|l| serde_json::from_str(l).expect("record"))
        .collect();
    let drains: Vec<&Value> = records
        .iter()
        .filter(|r| r["phase"] == "intent" && r["action"] == "drain")
        .collect();
    let mut nodes: Vec<&str> = drains.iter().filter_map(|r| r["target"].as_str()).collect();
    nodes.sort_unstable();
    // The Xid 79 the night starts with, the Xid 48, the NVLink storm.
    assert_eq!(nodes, ["a100-03", "h100-03", "h100-06"], "{said}");
    assert!(
        drains.iter().all(|r| r["operator"] == "policy:gpu-faults"),
        "{drains:#?}"
    );
    assert!(
        records
            .iter()
            .filter(|r| r["phase"] == "outcome")
            .all(|r| r["outcome"]["ok"] == true),
        "{said}"
    );
    // Nothing else was sent: the switch is a person's decision.
    assert!(
        records
            .iter()
            .filter(|r| r["phase"] == "intent")
            .all(|r| r["action"] == "drain"),
        "{said}"
    );
    let events = pd.accepted();
    let actions: Vec<&str> = events
        .iter()
        .filter_map(|e| e["event_action"].as_str())
        .collect();
    assert_eq!(actions, ["trigger", "resolve"], "{said}\n{events:#?}");
    assert_eq!(events[0]["dedup_key"], events[1]["dedup_key"]);
    assert!(
        events[0]["payload"]["summary"]
            .as_str()
            .is_some_and(|s| s.contains("LEAF FAILING")),
        "{events:#?}"
    );
    assert!(said.contains("page resolved"), "{said}");
}

/// Shadow mode over a recorded night (issue 61): the sim's night recorded
/// with a person's drain of h100-06 at 02:50 (its Xid 48 came at 02:48),
/// sent through the guard onto the recorded sim; `nightshift autopilot
/// --replay` prints what the starting policies would have done and when
/// beside what the person did: the drain agreed, and how much sooner; the
/// faults nobody acted on; the switch, paged.
#[test]
fn the_autopilot_in_shadow_over_a_recording_compares_itself_with_the_people() {
    use nightshift::actions::{audit::AuditLog, executor::Executor, guard};
    use nightshift::sources::sim::{Own, Sim, SimConfig};
    use std::sync::{Arc, Mutex};
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("night.nsrec");
    let log = AuditLog::new(dir.path().join("audit.jsonl"));
    let world = Arc::new(Mutex::new(Sim::new(SimConfig::default()).expect("sim")));
    let sim = Executor::new(Own(world.clone()));
    let site = nightshift::engine::SiteParams::default();
    let mut rec = nightshift::recording::Recorder::create(&file, "sim")
        .expect("recording")
        .with_site(site.clone());
    rec.follow_audit(log.clone());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("rt");
    let mut memory = nightshift::engine::memory::Memory::default();
    for second in 0..2_700 {
        let c = world.lock().expect("sim").snapshot();
        memory.observe(&c, &site);
        if second == 230 {
            let base = memory.base(&c, &site, &Default::default());
            let drain = nightshift::model::Action::Drain {
                node: "h100-06".into(),
                reason: "xid48 GPU5".into(),
                requeue: true,
            };
            let p = guard::preview(
                &drain,
                &c,
                &base,
                Duration::ZERO,
                &Default::default(),
                &log,
                false,
                Ok(&sim),
                &site,
            );
            let who = guard::Who {
                scheduler_user: None,
                cluster: c.name.clone(),
                source: "sim".into(),
                operator: Some("alice".into()),
            };
            let now = guard::Check {
                cluster: &c,
                data_age: Duration::ZERO,
                policy: &Default::default(),
            };
            rt.block_on(guard::run(
                &p,
                "h100-06",
                &sim,
                &log,
                &who,
                Duration::from_secs(5),
                now,
            ))
            .expect("alice's drain");
        }
        rec.snapshot(&Arc::new(c)).expect("snapshot");
        world.lock().expect("sim").advance(1);
    }
    rec.finish().expect("finish");
    let cfg = dir.path().join("policies.toml");
    std::fs::write(&cfg, include_str!("../config/policies.example.toml")).expect("config");
    let out = common::nightshift(
        dir.path(),
        &[
            "--config",
            cfg.to_str().expect("path"),
            "--replay",
            file.to_str().expect("path"),
            "autopilot",
        ],
    );
    let said =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    let block = |head: &str| -> String {
        let start = said.find(head).unwrap_or_else(|| panic!("{head}: {said}"));
        said[start..].lines().take(4).collect::<Vec<_>>().join("\n")
    };
    let h100_06 = block("XID 48 on h100-06");
    assert!(h100_06.contains("[gpu-faults]"), "{h100_06}");
    assert!(h100_06.contains("drain h100-06"), "{h100_06}");
    assert!(h100_06.contains("alice drain h100-06"), "{h100_06}");
    // The Xid came at 100 s, alice drained at 230 s.
    assert!(h100_06.contains("agree; 2m10s sooner"), "{h100_06}");
    let h100_03 = block("XID 79 on h100-03");
    assert!(h100_03.contains("the people did nothing"), "{h100_03}");
    let leaf = block("LEAF FAILING");
    assert!(
        leaf.contains("[fabric]") && leaf.contains("a page"),
        "{leaf}"
    );
    let summary = said.lines().last().unwrap_or_default();
    assert!(
        summary.contains("1 agreement(s), 0 disagreement(s)")
            && summary.contains("1 page(s)")
            && summary.contains("2m10s sooner in all"),
        "{summary}"
    );
    // Nothing was sent: shadow over a recording sends nothing.
    let lines = std::fs::read_to_string(dir.path().join("audit.jsonl")).expect("audit");
    assert_eq!(
        lines.lines().count(),
        2,
        "alice's intent and outcome alone: {lines}"
    );
}
