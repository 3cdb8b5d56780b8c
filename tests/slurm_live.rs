//! Live tests against a real Slurm 22.05: slurmctld, four slurmd and
//! slurmrestd started from Debian's packages (tests/slurm-lab/up.sh). What
//! nightshift reads must agree with sinfo and squeue, node by node and job
//! by job; what its executors do must show up in Slurm.

mod common;

use common::slurm::{Lab, Slurm, available, available_24_11, available_26_05};
use common::wait_for;
use nightshift::sources::SourceError;
use nightshift::sources::slurm::SlurmConfig;
use nightshift::sources::slurm::client::ApiVersion;
use nightshift::sources::slurm::exec::{Call, Executor};
use serde_json::Value;
use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

fn config(lab: &Lab) -> SlurmConfig {
    SlurmConfig {
        url: lab.url.clone(),
        user: "root".into(),
        token: Some(lab.token.clone()),
        interval: Duration::from_secs(1),
        timeout: Duration::from_secs(10),
        cluster_name: Some("lab".into()),
        scontrol: lab.scontrol(),
        slurm_conf: Some(lab.conf()),
        api_version: None,
        rest_budget: 0.03,
        full_jobs_interval: Duration::from_secs(30),
        max_interval: Duration::from_secs(15),
        checkpoint_signal: "SIGUSR1".into(),
        validate: Default::default(),
    }
}

/// How nightshift reaches the lab in one check: slurmrestd's URL and the
/// REST version it is told to speak (None: its own choice).
#[derive(Clone, Copy)]
struct Via<'a> {
    url: &'a str,
    api: Option<&'a str>,
}

impl<'a> Via<'a> {
    fn tcp(lab: &'a Lab) -> Via<'a> {
        Via {
            url: &lab.url,
            api: None,
        }
    }
}

/// `nightshift get WHAT -o json --source slurm` as a process, token from the environment.
fn get(lab: &Lab, what: &str) -> Vec<Value> {
    get_via(lab, Via::tcp(lab), what)
}

fn get_via(lab: &Lab, via: Via, what: &str) -> Vec<Value> {
    let mut cmd = Command::new(common::bin());
    cmd.args([
        "--source",
        "slurm",
        "--slurm-url",
        via.url,
        "--slurm-user",
        "root",
        "--log-file",
    ])
    .arg(lab.dir.path().join("nightshift.log"));
    if let Some(api) = via.api {
        cmd.args(["--slurm-api", api]);
    }
    // The lab's scontrol (for the switch topology): 22.05 reads the lab's
    // slurm.conf; 24.11's is the wrapper into its chroot.
    let path = format!(
        "{}:{}",
        lab.dir.path().join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = cmd
        .args(["get", what, "-o", "json"])
        .env("SLURM_JWT", &lab.token)
        .env("SLURM_CONF", lab.conf())
        .env("PATH", path)
        .output()
        .expect("nightshift");
    assert!(
        out.status.success(),
        "get {what} via {} {:?}: {}",
        via.url,
        via.api,
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["source"], "slurm");
    // Not configured: the name is Slurm's own (ClusterName), from the
    // answers' meta (24.11) or the job records (22.05, so only with a job).
    let named = match lab.version {
        Slurm::V22_05 => what == "jobs" && v["items"].as_array().is_some_and(|a| !a.is_empty()),
        Slurm::V24_11 | Slurm::V26_05 => true,
    };
    if named {
        assert_eq!(
            v["cluster"],
            lab.cluster_name(),
            "the cluster's name from Slurm"
        );
    }
    v["items"].as_array().cloned().unwrap_or_default()
}

/// sinfo's state words in nightshift's terms.
fn sinfo_state(s: &str) -> &'static str {
    match s.trim_end_matches(['*', '~', '#', '!', '%', '$', '@', '^', '-']) {
        "draining" => "draining",
        "drained" => "drain",
        "idle" | "mixed" | "allocated" | "completing" => "up",
        "down" | "fail" | "failing" => "down",
        // Held back by the scheduler: a reservation, an invalid
        // registration, a power-down, a topology block (issue 38).
        "maint" | "reserved" | "inval" | "powering_down" | "blocked" => "reserved",
        _ => "unknown",
    }
}

/// GPUs in use from sinfo's GresUsed, `gpu:h100:8(IDX:0-7)`.
fn gres_used(s: &str) -> u64 {
    s.split(':')
        .nth(2)
        .and_then(|n| n.split('(').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

fn check_nodes_agree(lab: &Lab, via: Via) {
    let ours: BTreeMap<String, Value> = get_via(lab, via, "nodes")
        .into_iter()
        .map(|n| (n["name"].as_str().unwrap_or("").to_string(), n))
        .collect();
    let sinfo = lab.run(
        "sinfo",
        &[
            "-h",
            "-N",
            "-O",
            "NodeList:30,StateLong:30,GresUsed:40,Reason:60",
        ],
    );
    // sinfo -N prints a node once per partition it is in.
    let mut seen = std::collections::BTreeSet::new();
    for line in sinfo.lines() {
        let cols: Vec<&str> = line.split_whitespace().collect();
        let (name, state, used) = (cols[0], cols[1], cols[2]);
        let reason = cols[3..].join(" ");
        let n = ours
            .get(name)
            .unwrap_or_else(|| panic!("node {name} missing from nightshift"));
        assert_eq!(n["state"], sinfo_state(state), "{name}: sinfo says {state}");
        assert_eq!(
            n["gpus_allocated"].as_u64(),
            Some(gres_used(used)),
            "{name}: sinfo says {used}"
        );
        assert_eq!(n["gpus_total"], 8, "{name}");
        let expect_reason = if reason == "none" {
            Value::Null
        } else {
            Value::String(reason.clone())
        };
        if reason == "none" && sinfo_state(state) == "reserved" {
            // No one gave it a reason: nightshift says what holds it.
            assert!(n["reason"].is_string(), "{name}: {n}");
        } else {
            assert_eq!(n["reason"], expect_reason, "{name}");
        }
        seen.insert(name.to_string());
    }
    assert_eq!(seen.len(), ours.len(), "same nodes");
    check_domains_agree(lab, &ours);
}

/// Each node's failure domains are its switches as `scontrol show
/// topology` prints them (the labs' topology.conf: two leaves under a
/// spine), lowest level first; ranges expanded by `scontrol show hostnames`.
fn check_domains_agree(lab: &Lab, ours: &BTreeMap<String, Value>) {
    let topo = lab.run("scontrol", &["show", "topology"]);
    let mut want: BTreeMap<String, Vec<(u32, String)>> = BTreeMap::new();
    for line in topo.lines() {
        let field = |k: &str| {
            line.split_whitespace()
                .find_map(|f| f.strip_prefix(&format!("{k}=")[..]))
                .map(str::to_string)
        };
        let (Some(name), Some(level), Some(nodes)) =
            (field("SwitchName"), field("Level"), field("Nodes"))
        else {
            continue;
        };
        for n in lab.run("scontrol", &["show", "hostnames", &nodes]).lines() {
            want.entry(n.trim().to_string())
                .or_default()
                .push((level.parse().expect("level"), name.clone()));
        }
    }
    assert_eq!(want.len(), 4, "the labs' topology names every node: {topo}");
    for (node, mut switches) in want {
        switches.sort();
        let got: Vec<(String, String)> = ours[&node]["domains"]
            .as_array()
            .map(|ds| {
                ds.iter()
                    .map(|d| {
                        (
                            d["level"].as_str().unwrap_or("").to_string(),
                            d["name"].as_str().unwrap_or("").to_string(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        let expect: Vec<(String, String)> = switches
            .into_iter()
            .map(|(l, n)| ((if l == 0 { "leaf" } else { "spine" }).to_string(), n))
            .collect();
        assert_eq!(got, expect, "{node}: scontrol show topology says\n{topo}");
    }
}

fn check_jobs_agree(lab: &Lab, via: Via) {
    check_jobs_agree_at_least(lab, via, 8);
}

/// `check_jobs_agree` where squeue lists at least `min` jobs.
fn check_jobs_agree_at_least(lab: &Lab, via: Via, min: usize) {
    let ours: BTreeMap<String, Value> = get_via(lab, via, "jobs")
        .into_iter()
        .map(|j| (j["id"].as_str().unwrap_or("").to_string(), j))
        .collect();
    let squeue = lab.run("squeue", &["-h", "-t", "all", "-o", "%i|%T|%r|%b|%N|%D"]);
    let mut seen = 0;
    for line in squeue.lines() {
        let c: Vec<&str> = line.split('|').collect();
        let (id, state, reason, tres, nodes) = (c[0], c[1], c[2], c[3], c[4]);
        let j = ours
            .get(id)
            .unwrap_or_else(|| panic!("job {id} missing from nightshift: {:?}", ours.keys()));
        assert_eq!(
            j["state"].as_str().map(str::to_uppercase).as_deref(),
            Some(state),
            "job {id}"
        );
        let expect_reason = if reason == "None" {
            Value::Null
        } else {
            // squeue writes the reason and Slurm's description of it
            // ("ReqNodeNotAvail, May be reserved for other job"): the
            // reason is the first part.
            Value::String(reason.split(", ").next().unwrap_or(reason).to_string())
        };
        assert_eq!(j["reason"], expect_reason, "job {id}");
        if let Some(g) = tres.rsplit(':').next().and_then(|g| g.parse::<u64>().ok()) {
            assert_eq!(
                j["gpus_per_node"].as_u64(),
                Some(g),
                "job {id}: squeue %b {tres}"
            );
        }
        if state == "RUNNING" {
            let expanded = lab.run("scontrol", &["show", "hostnames", nodes]);
            let want: Vec<&str> = expanded.lines().collect();
            let got: Vec<&str> = j["nodes"]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            assert_eq!(got, want, "job {id} nodes");
        }
        seen += 1;
    }
    assert!(seen >= min, "squeue listed {seen} jobs");
}

fn squeue_field(lab: &Lab, id: &str, fmt: &str) -> String {
    lab.run("squeue", &["-h", "-j", id, "-o", fmt])
        .trim()
        .to_string()
}

/// The console itself on the live cluster: nodes with GPUs in use, the
/// queue with Slurm's reasons, the drained node with its reason.
fn tui_shows_the_live_cluster(lab: &Lab, drained: &str) {
    assert!(common::require("tmux", "apt-get install tmux"), "tmux");
    let t = common::Tmux::start(120, 32);
    let log = lab.dir.path().join("tui.log");
    t.type_line(&format!(
        "SLURM_JWT={} {} --source slurm --slurm-url {} --slurm-user root --log-file {}; echo EXIT=$?",
        lab.token,
        common::bin(),
        lab.url,
        log.display()
    ));
    t.expect(" slurm │ ");
    t.expect(&format!("{drained} "));
    t.expect("drning");
    t.keys(&[":"]);
    t.keys(&["-l", "queue"]);
    t.keys(&["Enter"]);
    t.expect("Resources");
    t.expect("JobHeldUser");
    t.keys(&[":"]);
    t.keys(&["-l", "incidents"]);
    t.keys(&["Enter"]);
    t.expect("xid79 gpu3");
    t.keys(&["q"]);
    t.expect("EXIT=0");
    let logged = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        !logged.contains(&lab.token),
        "the token never reaches the log"
    );
}

/// The jobs of the mixed load both versions' read tests share.
struct Load {
    single: String,
    gang: String,
    wait_prio: String,
    /// The node drained under a running job (draining).
    drained: String,
}

/// Running: one single-node job, a 2-node gang with checkpoint metadata, a
/// small job on a node then drained under it; pending on Resources,
/// Priority, Dependency, JobHeldUser; an array.
fn mixed_load(lab: &Lab) -> Load {
    let single = lab.sbatch(&["-J", "single", "--gres=gpu:8"]);
    let gang = lab.sbatch(&[
        "-J",
        "gang",
        "-N2",
        "--gpus-per-node=8",
        "--comment",
        "ckpt_bytes=1.2TB ckpt_every=30m",
    ]);
    let small = lab.sbatch(&["-J", "small", "--gres=gpu:4"]);
    assert!(
        wait_for(Duration::from_secs(20), || (squeue_field(
            lab, &small, "%T"
        ) == "RUNNING"
            && squeue_field(lab, &gang, "%T") == "RUNNING"
            && squeue_field(lab, &single, "%T") == "RUNNING")
            .then_some(()))
        .is_some(),
        "jobs did not start: {}",
        lab.run("squeue", &[])
    );
    let wait_res = lab.sbatch(&["-J", "wait-res", "--gres=gpu:8"]);
    let wait_prio = lab.sbatch(&["-J", "wait-prio", "--gres=gpu:8"]);
    lab.sbatch(&[
        "-J",
        "after",
        "--gres=gpu:1",
        &format!("--dependency=afterok:{single}"),
    ]);
    lab.sbatch(&["-J", "held", "--hold", "--gres=gpu:2"]);
    lab.sbatch(&["-J", "arr", "--array=0-5", "--gres=gpu:1"]);
    assert!(
        wait_for(Duration::from_secs(20), || (squeue_field(
            lab, &wait_res, "%r"
        ) == "Resources"
            && squeue_field(lab, &wait_prio, "%r") == "Priority")
            .then_some(()))
        .is_some(),
        "pending reasons did not settle: {}",
        lab.run("squeue", &["-o", "%i %T %r"])
    );
    // A drained node with a job still running on it: draining.
    let drained = squeue_field(lab, &small, "%N");
    lab.run(
        "scontrol",
        &[
            "update",
            &format!("nodename={drained}"),
            "state=drain",
            "reason=xid79 gpu3",
        ],
    );
    Load {
        single,
        gang,
        wait_prio,
        drained,
    }
}

#[test]
fn live_slurm_reads_agree_and_executors_act() {
    if !available() {
        return;
    }
    let lab = Lab::start();
    let Load {
        single,
        gang,
        wait_prio,
        drained: small_node,
    } = mixed_load(&lab);
    check_nodes_agree(&lab, Via::tcp(&lab));
    check_jobs_agree(&lab, Via::tcp(&lab));
    tui_shows_the_live_cluster(&lab, &small_node);

    let jobs = get(&lab, "jobs");
    let g = jobs.iter().find(|j| j["name"] == "gang").expect("gang job");
    assert_eq!(g["checkpoint"]["size_bytes"], 1_200_000_000_000u64);
    assert_eq!(g["checkpoint"]["interval_s"], 1800);
    assert!(g["gang"].is_string());
    let gpus = get(&lab, "gpus");
    let held: usize = gpus.iter().filter(|x| x["job"] == gang.as_str()).count();
    assert_eq!(held, 16, "the gang holds 16 GPUs by index");
    options_on_live_slurm(&lab, &gang, &small_node);
    recording_of_live_slurm(&lab);

    // The executors.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let exec = rt
        .block_on(Executor::connect(&config(&lab)))
        .expect("connect");
    // 22.05 has no job states: a poll is everything, and a tight budget
    // on slurmrestd's time slows polling down, saying why.
    let mut cfg = config(&lab);
    cfg.interval = Duration::from_millis(200);
    cfg.rest_budget = 0.001;
    cfg.max_interval = Duration::from_secs(120);
    let mut s = Stream::start(&rt, cfg);
    s.until(&rt, 20, |_| true).expect("a snapshot");
    let (every, stretched, note) = s.refreshes.first().cloned().expect("the refresh said");
    assert!(
        stretched && every > Duration::from_millis(200),
        "{every:?} {note}"
    );
    assert!(
        note.starts_with("a poll every ") && note.ends_with("budget 0.1% of a core"),
        "{note}"
    );
    drop(s);
    let single_node = squeue_field(&lab, &single, "%N");
    let out = rt
        .block_on(exec.drain(&single_node, "nightshift test"))
        .expect("drain");
    assert!(out.verified, "{out:?}");
    let sinfo = lab.run(
        "sinfo",
        &["-h", "-n", &single_node, "-O", "StateLong:20,Reason:40"],
    );
    assert!(
        sinfo.contains("draining") && sinfo.contains("nightshift test"),
        "{sinfo}"
    );
    let out = rt.block_on(exec.resume(&single_node)).expect("resume");
    assert!(out.verified, "{out:?}");
    // Someone drains the node between a preview and its send: the guard's
    // executor keeps their reason, sends nothing for it, owes no undo.
    rt.block_on(exec.drain(&single_node, "theirs: PSU"))
        .expect("their drain");
    let guarded = nightshift::actions::executor::Executor::new(
        rt.block_on(Executor::connect(&config(&lab)))
            .expect("connect"),
    );
    let steps = rt.block_on(guarded.execute(&nightshift::model::Action::Cordon {
        node: single_node.clone(),
        reason: "mine".into(),
    }));
    assert!(
        steps.len() == 1 && steps[0].ok && steps[0].unchanged,
        "{steps:?}"
    );
    let sinfo = lab.run("sinfo", &["-h", "-n", &single_node, "-O", "Reason:40"]);
    assert!(sinfo.contains("theirs: PSU"), "their reason kept: {sinfo}");
    let out = rt.block_on(exec.resume(&single_node)).expect("resume");
    assert!(out.verified, "{out:?}");
    let out = rt
        .block_on(exec.set_priority(&wait_prio, 4_294_000_000))
        .expect("priority");
    assert!(out.verified, "{out:?}");
    assert_eq!(squeue_field(&lab, &wait_prio, "%Q"), "4294000000");
    let out = rt.block_on(exec.requeue(&single)).expect("requeue");
    assert!(out.verified, "{out:?}");
    assert_eq!(squeue_field(&lab, &single, "%T"), "PENDING");
    // A requeued job, as Slurm and nightshift both see it.
    check_jobs_agree(&lab, Via::tcp(&lab));
    let again = get(&lab, "jobs");
    let requeued = again
        .iter()
        .find(|j| j["id"] == single.as_str())
        .expect("requeued job");
    assert_eq!(requeued["restarts"], 1);
    // Slurm's own error text, verbatim.
    let err = rt
        .block_on(exec.set_priority("999999", 5))
        .expect_err("no such job");
    // Slurm said no, as a typed answer: slurmrestd's errors[] (22.05
    // updates jobs over REST) or scontrol's words.
    assert!(
        matches!(
            err,
            nightshift::sources::slurm::exec::CallError::Refused { .. }
                | nightshift::sources::slurm::exec::CallError::Source(
                    nightshift::sources::SourceError::Api { .. }
                )
        ),
        "Slurm said no: {err:?}"
    );
    let err = err.to_string();
    assert!(err.contains("Invalid job id specified"), "{err}");
    let err = rt
        .block_on(exec.drain("nosuchnode", "x"))
        .expect_err("no such node")
        .to_string();
    assert!(err.contains("scontrol update nodename=nosuchnode"), "{err}");
}

/// nightshift's own Slurm poll loop against a lab, read update by update.
struct Stream {
    rx: tokio::sync::mpsc::Receiver<nightshift::sources::Update>,
    task: tokio::task::JoinHandle<()>,
    /// The Refresh notes seen: (interval, stretched, note).
    refreshes: Vec<(Duration, bool, String)>,
}

impl Stream {
    fn start(rt: &tokio::runtime::Runtime, cfg: SlurmConfig) -> Stream {
        let (tx, rx) = tokio::sync::mpsc::channel(64);
        let task = rt.spawn(nightshift::sources::slurm::run(cfg, tx));
        Stream {
            rx,
            task,
            refreshes: Vec::new(),
        }
    }

    /// The first snapshot for which `done` holds, within `secs`.
    fn until(
        &mut self,
        rt: &tokio::runtime::Runtime,
        secs: u64,
        done: impl Fn(&nightshift::model::Cluster) -> bool,
    ) -> Option<std::sync::Arc<nightshift::model::Cluster>> {
        use nightshift::sources::Update;
        rt.block_on(async {
            let until = tokio::time::Instant::now() + Duration::from_secs(secs);
            loop {
                let u = tokio::time::timeout_at(until, self.rx.recv())
                    .await
                    .ok()??;
                match u {
                    Update::Snapshot(c) if done(&c) => return Some(c),
                    Update::Refresh {
                        every,
                        stretched,
                        note,
                        ..
                    } => self.refreshes.push((every, stretched, note)),
                    Update::Status { error: Some(e), .. } => panic!("poll failed: {e}"),
                    _ => {}
                }
            }
        })
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// On 24.11 the quick poll reads job states and fetches only what changed:
/// with every-record fetches an hour apart, a job submitted and then
/// cancelled still shows up, in each state, within a few polls.
fn cheap_polls_follow_changes(lab: &Lab, rt: &tokio::runtime::Runtime) {
    let mut cfg = config(lab);
    cfg.cluster_name = None;
    cfg.interval = Duration::from_millis(500);
    // No budget stretching here: this is about what is fetched.
    cfg.rest_budget = 1.0;
    cfg.full_jobs_interval = Duration::from_secs(3600);
    let mut s = Stream::start(rt, cfg);
    let queued = lab.run("squeue", &["-h", "-o", "%i"]).lines().count();
    let first = s.until(rt, 20, |_| true).expect("a first snapshot");
    assert_eq!(first.name, lab.cluster_name());
    // squeue shows a pending array as one line; nightshift too.
    assert_eq!(first.jobs.len(), queued, "{:?}", first.jobs);
    let late = lab.sbatch(&["-J", "late", "--gres=gpu:1", "--hold"]);
    let seen = s.until(rt, 15, |c| c.job(&late).is_some());
    let job = seen
        .as_ref()
        .and_then(|c| c.job(&late))
        .expect("the new job");
    assert_eq!(job.name, "late");
    assert!(job.state.is_pending(), "{:?}", job.state);
    lab.run("scancel", &[&late]);
    let gone = s.until(rt, 15, |c| {
        c.job(&late)
            .is_some_and(|j| !j.state.is_pending() && !j.state.holds_resources())
    });
    assert!(gone.is_some(), "the cancelled job's new state");
    let (_, stretched, note) = s.refreshes.first().expect("the refresh said");
    assert!(!stretched, "{note}");
    assert!(
        note.contains("changed jobs at once, all jobs every 1h"),
        "{note}"
    );
}

/// Slurm 24.11 in its chroot: reads agree with squeue and sinfo on each of
/// REST v0.0.40, v0.0.41 and v0.0.42 and over the unix socket; the TUI
/// shows it; cheap polls follow a job through its states; drain,
/// resume, hold, release and priority go through REST (24.11 has no
/// requeue endpoint: scontrol, the chroot's) and show up in Slurm.
#[test]
fn live_slurm_24_11_reads_agree_on_each_api_version_and_writes_go_through_rest() {
    if !available_24_11() {
        return;
    }
    let lab = Lab::start_version(Slurm::V24_11);
    doctor_names_the_release(&lab, "24.11");
    let load = mixed_load(&lab);
    for api in ["v0.0.40", "v0.0.41", "v0.0.42"] {
        let via = Via {
            url: &lab.url,
            api: Some(api),
        };
        check_nodes_agree(&lab, via);
        check_jobs_agree(&lab, via);
        let gpus = get_via(&lab, via, "gpus");
        let held = gpus
            .iter()
            .filter(|x| x["job"] == load.gang.as_str())
            .count();
        assert_eq!(held, 16, "{api}: the gang holds 16 GPUs by index");
    }
    let socket = lab.socket_url();
    let via = Via {
        url: &socket,
        api: None,
    };
    check_nodes_agree(&lab, via);
    check_jobs_agree(&lab, via);
    tui_shows_the_live_cluster(&lab, &load.drained);

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    cheap_polls_follow_changes(&lab, &rt);
    let node = squeue_field(&lab, &load.single, "%N");
    for (api, url) in [(40, lab.url.clone()), (42, socket.clone())] {
        let mut cfg = config(&lab);
        cfg.api_version = Some(ApiVersion(api));
        cfg.url = url;
        let exec = rt.block_on(Executor::connect(&cfg)).expect("connect");
        let job = &load.wait_prio;
        for call in [
            exec.drain_call(&node, "x"),
            exec.resume_call(&node),
            exec.hold_call(job),
            exec.release_call(job),
            exec.priority_call(job, 1),
        ] {
            assert!(matches!(call, Call::Rest { .. }), "v0.0.{api}: {call}");
        }
        let reason = format!("nightshift v0.0.{api}");
        let out = rt.block_on(exec.drain(&node, &reason)).expect("drain");
        assert!(out.verified, "{out:?}");
        let sinfo = lab.run(
            "sinfo",
            &["-h", "-n", &node, "-O", "StateLong:20,Reason:40"],
        );
        assert!(
            sinfo.contains("draining") && sinfo.contains(&reason),
            "{sinfo}"
        );
        let out = rt.block_on(exec.resume(&node)).expect("resume");
        assert!(out.verified, "{out:?}");
        let sinfo = lab.run("sinfo", &["-h", "-n", &node, "-O", "StateLong:20"]);
        assert!(!sinfo.contains("drain"), "{sinfo}");
        let out = rt.block_on(exec.hold(job)).expect("hold");
        assert!(out.verified, "{out:?}");
        assert!(squeue_field(&lab, job, "%r").starts_with("JobHeld"));
        let out = rt.block_on(exec.release(job)).expect("release");
        assert!(out.verified, "{out:?}");
        assert!(!squeue_field(&lab, job, "%r").starts_with("JobHeld"));
        let prio = 4_294_000_000 + u64::from(api);
        let out = rt.block_on(exec.set_priority(job, prio)).expect("priority");
        assert!(out.verified, "{out:?}");
        assert_eq!(squeue_field(&lab, job, "%Q"), prio.to_string());
    }
    let exec = rt
        .block_on(Executor::connect(&config(&lab)))
        .expect("connect");
    assert!(matches!(exec.requeue_call(&load.single), Call::Scontrol(_)));
    let out = rt.block_on(exec.requeue(&load.single)).expect("requeue");
    assert!(out.verified, "{out:?}");
    // 24.11 shows the requeued job COMPLETING while its old run ends.
    assert!(
        wait_for(Duration::from_secs(20), || (squeue_field(
            &lab,
            &load.single,
            "%T"
        ) == "PENDING")
            .then_some(()))
        .is_some(),
        "{}",
        squeue_field(&lab, &load.single, "%T")
    );
    check_jobs_agree(&lab, Via::tcp(&lab));
    // Slurm's own error text, verbatim, from REST.
    let err = rt
        .block_on(exec.drain("nosuchnode", "x"))
        .expect_err("no such node")
        .to_string();
    assert!(err.contains("/node/nosuchnode"), "{err}");
    let err = rt
        .block_on(exec.set_priority("999999", 5))
        .expect_err("no such job")
        .to_string();
    assert!(err.contains("/job/999999"), "{err}");
    // Last: the job it submits stays in Slurm's list after its cancel.
    why_bound_to_one_switch(&lab);
}

#[test]
fn bad_token_and_dead_endpoint_are_clear_errors() {
    if !available() {
        return;
    }
    let lab = Lab::start();
    let mut cfg = config(&lab);
    cfg.token = Some("not-a-token".into());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let err = rt
        .block_on(nightshift::sources::slurm::fetch_once(&cfg))
        .expect_err("bad token");
    // slurmrestd 22.05 answers a bad JWT with HTTP 500 and errors[].
    assert!(
        matches!(
            err,
            SourceError::Auth { .. } | SourceError::Api { .. } | SourceError::Decode { .. }
        ),
        "{err:?}"
    );
    cfg.token = None;
    let err = rt
        .block_on(nightshift::sources::slurm::fetch_once(&cfg))
        .expect_err("no token");
    assert!(
        matches!(err, SourceError::Auth { status: 401, .. }),
        "{err:?}"
    );
    cfg.url = "http://127.0.0.1:1".into();
    let err = rt
        .block_on(nightshift::sources::slurm::fetch_once(&cfg))
        .expect_err("dead");
    assert!(matches!(err, SourceError::Unreachable { .. }), "{err:?}");
    assert!(err.to_string().contains("cannot reach slurmrestd"), "{err}");
    doctor_on_the_lab(&lab);
}

/// `nightshift doctor` against the live lab (issue 41): a good token, an
/// expired one (slurmrestd refuses it), a `slurm.conf` that is not there,
/// no `scontrol` — each its own line with what to do.
fn doctor_on_the_lab(lab: &Lab) {
    let line = |said: &str, start: &str| -> String {
        said.lines()
            .find(|l| l.starts_with(start))
            .unwrap_or_else(|| panic!("no line {start:?} in\n{said}"))
            .to_string()
    };
    let (ok, said) = nightshift_on(lab, &[], &["doctor"]);
    assert!(ok, "{said}");
    assert!(
        line(&said, "ok    scheduler").contains("slurm answered in"),
        "{said}"
    );
    assert!(
        line(&said, "ok    slurm token").contains("expires at"),
        "{said}"
    );
    assert!(
        line(&said, "ok    scontrol").contains("SLURM_CONF="),
        "{said}"
    );
    // The API version chosen and the release slurmrestd speaks for.
    let api = line(&said, "ok    slurm api");
    assert!(
        api.contains("v0.0.") && api.contains("slurmrestd says Slurm 22.05"),
        "{api}"
    );
    // A token that lived one second.
    let out = Command::new("scontrol")
        .args(["token", "username=root", "lifespan=1"])
        .env("SLURM_CONF", lab.conf())
        .output()
        .expect("scontrol token");
    let expired = String::from_utf8_lossy(&out.stdout)
        .trim()
        .strip_prefix("SLURM_JWT=")
        .unwrap_or_else(|| panic!("{}", String::from_utf8_lossy(&out.stderr)))
        .to_string();
    std::thread::sleep(Duration::from_secs(3));
    let (ok, said) = nightshift_on(lab, &[("SLURM_JWT", &expired)], &["doctor"]);
    assert!(!ok, "{said}");
    assert!(
        line(&said, "FAIL  slurm token").contains("expired at"),
        "{said}"
    );
    assert!(line(&said, "FAIL  scheduler").contains("slurm"), "{said}");
    assert!(
        said.contains("→ slurmrestd refuses the token: expired at"),
        "{said}"
    );
    assert!(said.contains("→ `scontrol token lifespan=86400`"), "{said}");
    // scontrol asking no cluster, then no scontrol at all.
    let (ok, said) = nightshift_on(
        lab,
        &[("SLURM_CONF", "/nonexistent/slurm.conf")],
        &["doctor"],
    );
    assert!(!ok, "{said}");
    assert!(
        line(&said, "FAIL  scontrol").contains("is not a file"),
        "{said}"
    );
    let (_, said) = nightshift_on(lab, &[("PATH", "/nonexistent")], &["doctor"]);
    assert!(
        line(&said, "warn  scontrol").contains("not found"),
        "{said}"
    );
}

/// `nightshift doctor` on a newer lab: the scheduler read, the token good,
/// the API version chosen and the release slurmrestd says it is.
fn doctor_names_the_release(lab: &Lab, release: &str) {
    let (_, said) = nightshift_on(lab, &[], &["doctor"]);
    for start in ["ok    scheduler", "ok    slurm token"] {
        assert!(
            said.lines().any(|l| l.starts_with(start)),
            "{start}: {said}"
        );
    }
    let api = said
        .lines()
        .find(|l| l.starts_with("ok    slurm api"))
        .unwrap_or_else(|| panic!("{said}"));
    assert!(
        api.contains("v0.0.4") && api.contains(&format!("slurmrestd says Slurm {release}")),
        "{api}"
    );
}

/// nightshift against the lab, with the token in the environment and the
/// lab's slurm.conf for scontrol; returns (ok, output).
fn nightshift_on(lab: &Lab, extra_env: &[(&str, &str)], args: &[&str]) -> (bool, String) {
    let mut cmd = Command::new(common::bin());
    cmd.args([
        "--source",
        "slurm",
        "--slurm-url",
        &lab.url,
        "--slurm-user",
        "root",
        "--log-file",
    ])
    .arg(lab.dir.path().join("nightshift.log"))
    .arg("--audit-log")
    .arg(lab.dir.path().join("audit.jsonl"))
    .args(args)
    .env("SLURM_JWT", &lab.token)
    .env("SLURM_CONF", lab.conf());
    for (k, v) in extra_env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("nightshift");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr),
    )
}

#[test]
fn live_soft_preemption_signals_waits_for_the_checkpoint_then_requeues() {
    if !available() {
        return;
    }
    let lab = Lab::start();
    // A batch script that checkpoints on SIGUSR1 (Slurm signals the batch
    // shell too): it writes its new ckpt_last into its own comment, where
    // nightshift reads checkpoint metadata.
    let since = 600;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs();
    let comment = format!("ckpt_bytes=1GB ckpt_every=1h ckpt_last={}", now - since);
    let step = lab.dir.path().join("ckpt-step.sh");
    std::fs::write(
        &step,
        "trap 'scontrol update jobid=$SLURM_JOB_ID comment=\"ckpt_bytes=1GB ckpt_every=1h ckpt_last=$(date +%s)\"' USR1\nwhile :; do sleep 1; done\n",
    )
    .expect("step script");
    let job = lab
        .run(
            "sbatch",
            &[
                "--parsable",
                "-J",
                "ckpt",
                "--gres=gpu:1",
                "--comment",
                &comment,
                "--output",
                &lab.dir.path().join("ckpt.out").display().to_string(),
                "--wrap",
                &format!("exec bash {}", step.display()),
            ],
        )
        .trim()
        .to_string();
    assert!(
        wait_for(Duration::from_secs(20), || {
            (squeue_field(&lab, &job, "%T") == "RUNNING").then_some(())
        })
        .is_some(),
        "the job did not start: {} {} {}",
        lab.run("squeue", &["-s"]),
        lab.run("scontrol", &["show", "job", &job]),
        std::fs::read_to_string(lab.dir.path().join("ckpt.out")).unwrap_or_default()
    );
    // The comparison says the grace period saves the work since 10 minutes.
    let (ok, out) = nightshift_on(
        &lab,
        &[],
        &["blast", "preempt", &job, "--grace", "1m", "-o", "json"],
    );
    assert!(ok, "{out}");
    let b: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(b["killed"][0]["restore"]["grace"]["fits"], true, "{b:#}");
    // Through the guard: the signal, the checkpoint seen, the requeue.
    let (ok, out) = nightshift_on(
        &lab,
        &[],
        &["preempt", &job, "--grace", "1m", "--confirm", &job],
    );
    assert!(ok, "{out}");
    assert!(
        out.contains(&format!(
            "will send: DELETE /slurm/v0.0.38/job/{job}?signal=SIGUSR1"
        )),
        "{out}"
    );
    assert!(
        out.contains(&format!("signal {job} SIGUSR1 ✓"))
            && out.contains(&format!("wait for {job}'s checkpoint ✓"))
            && out.contains(&format!("requeue {job} ✓")),
        "{out}"
    );
    let audit = std::fs::read_to_string(lab.dir.path().join("audit.jsonl")).expect("audit");
    assert!(audit.contains("checkpoint written after"), "{audit}");
    let shown = lab.run("scontrol", &["show", "job", &job]);
    assert!(shown.contains("Restarts=1"), "{shown}");
    assert!(
        !shown.contains(&format!("ckpt_last={}", now - since)),
        "a newer checkpoint: {shown}"
    );
}

#[test]
fn live_drain_and_requeue_through_the_guard() {
    if !available() {
        return;
    }
    let lab = Lab::start();
    let gang = lab.sbatch(&["-J", "gang", "-N2", "--gpus-per-node=8"]);
    let other = lab.sbatch(&["-J", "other", "--gres=gpu:8"]);
    assert!(
        wait_for(Duration::from_secs(20), || (squeue_field(
            &lab, &gang, "%T"
        ) == "RUNNING"
            && squeue_field(&lab, &other, "%T") == "RUNNING")
            .then_some(()))
        .is_some(),
        "{}",
        lab.run("squeue", &[])
    );
    let hosts = lab.run(
        "scontrol",
        &["show", "hostnames", &squeue_field(&lab, &gang, "%N")],
    );
    let rank_node = hosts
        .lines()
        .nth(1)
        .expect("second rank's node")
        .to_string();

    // Wrong confirmation: nothing happens in Slurm.
    let (ok, out) = nightshift_on(
        &lab,
        &[],
        &[
            "drain",
            &rank_node,
            "--reason",
            "xid79 gpu3",
            "--requeue",
            "--confirm",
            "gpu99",
        ],
    );
    assert!(!ok && out.contains("not confirmed"), "{out}");
    assert_eq!(squeue_field(&lab, &gang, "%T"), "RUNNING");

    // The real one: drain one rank's node and requeue its jobs.
    let (ok, out) = nightshift_on(
        &lab,
        &[],
        &[
            "drain",
            &rank_node,
            "--reason",
            "xid79 gpu3",
            "--requeue",
            "--confirm",
            &rank_node,
        ],
    );
    assert!(ok, "{out}");
    assert!(
        out.contains(&format!(
            "will send: scontrol update nodename={rank_node} state=drain 'reason=xid79 gpu3'"
        )),
        "{out}"
    );
    assert!(
        out.contains(&format!("will send: scontrol requeue {gang}")),
        "{out}"
    );
    assert!(out.contains("done and verified"), "{out}");
    // Every rank's job is requeued: the gang is one Slurm job, pending again.
    let state = squeue_field(&lab, &gang, "%T");
    assert!(
        state == "PENDING" || state == "REQUEUED" || state == "CONFIGURING",
        "gang is {state}"
    );
    let restarts = lab.run("scontrol", &["show", "job", &gang]);
    assert!(restarts.contains("Restarts=1"), "{restarts}");
    // Slurm holds a requeued job back until its begin time: planned from
    // then, not "none while BeginTime".
    let reason = squeue_field(&lab, &gang, "%r");
    let (_, why) = nightshift_on(&lab, &[], &["why", &gang]);
    assert!(!why.contains("none while"), "{reason}: {why}");
    if reason == "BeginTime" {
        assert!(
            why.contains("requeued: the scheduler holds it back until"),
            "{why}"
        );
    }
    assert_eq!(
        squeue_field(&lab, &other, "%T"),
        "RUNNING",
        "a job elsewhere is untouched"
    );
    let sinfo = lab.run(
        "sinfo",
        &["-h", "-n", &rank_node, "-O", "StateLong:20,Reason:40"],
    );
    assert!(
        (sinfo.contains("drained") || sinfo.contains("draining")) && sinfo.contains("xid79 gpu3"),
        "{sinfo}"
    );

    // Audited, with no token in it.
    let audit = std::fs::read_to_string(lab.dir.path().join("audit.jsonl")).expect("audit");
    assert_eq!(audit.lines().count(), 2, "{audit}");
    assert!(
        audit.contains("\"scheduler_user\":\"root\"") && audit.contains("\"verified\":true"),
        "{audit}"
    );
    assert!(!audit.contains(&lab.token), "no token in the audit log");

    // Draining it again is a no-op, not an error.
    let (ok, out) = nightshift_on(
        &lab,
        &[],
        &[
            "drain",
            &rank_node,
            "--reason",
            "xid79 gpu3",
            "--requeue",
            "--confirm",
            &rank_node,
        ],
    );
    assert!(ok && out.contains("nothing to do"), "{out}");

    // A process killed between intent and outcome leaves an intent-only
    // record that the next start reports. scontrol here hangs.
    let hang = lab.dir.path().join("hung-scontrol");
    std::fs::write(&hang, "#!/bin/sh\nsleep 60\n").expect("script");
    Command::new("chmod")
        .args(["+x"])
        .arg(&hang)
        .status()
        .expect("chmod");
    let cfg = lab.dir.path().join("hang.toml");
    std::fs::write(
        &cfg,
        format!("[slurm]\nscontrol = \"{}\"\n", hang.display()),
    )
    .expect("config");
    let mut child = Command::new(common::bin())
        .args([
            "--source",
            "slurm",
            "--slurm-url",
            &lab.url,
            "--slurm-user",
            "root",
            "--config",
        ])
        .arg(&cfg)
        .arg("--audit-log")
        .arg(lab.dir.path().join("audit.jsonl"))
        .args(["cordon", "gpu04", "--force"])
        .env("SLURM_JWT", &lab.token)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn");
    let audit_path = lab.dir.path().join("audit.jsonl");
    let intent = wait_for(Duration::from_secs(15), || {
        std::fs::read_to_string(&audit_path)
            .ok()
            .filter(|a| a.contains("\"target\":\"gpu04\""))
            .map(|_| ())
    });
    let _ = child.kill();
    let _ = child.wait();
    assert!(intent.is_some(), "the intent was written before the call");
    let (ok, out) = nightshift_on(&lab, &[], &["audit"]);
    assert!(
        ok && out.contains("check the scheduler: cordon gpu04"),
        "{out}"
    );
    let _ = Command::new("pkill")
        .args(["-f", &hang.display().to_string()])
        .status();
}

/// nightshift's stdout alone, for JSON.
/// A job that must run under one leaf switch (`--switches=1`, read from
/// REST's `required_switches`, v0.0.40 on) and cannot (3 nodes; the labs'
/// leaves hold 2): `why` names each leaf's free GPUs and the plan says
/// it cannot start, instead of promising nodes under two switches.
fn why_bound_to_one_switch(lab: &Lab) {
    let out = lab.sbatch(&["-N", "3", "--gres=gpu:8", "--switches=1@30:00"]);
    let id = out.trim().rsplit(' ').next().expect("job id").to_string();
    let w: Value =
        serde_json::from_str(&nightshift_stdout(lab, &["why", &id, "-o", "json"])).expect("json");
    let t = w["causes"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["kind"] == "topology"))
        .unwrap_or_else(|| panic!("no topology cause: {w:#}"));
    let msg = t["message"].as_str().expect("message");
    assert!(
        msg.starts_with("needs 24 under one leaf (3 × 8): leaf-") && msg.contains("free"),
        "{msg}"
    );
    assert_eq!(
        t["free_by_domain"].as_object().map(|o| o.len()),
        Some(2),
        "{t:#}"
    );
    assert!(
        w["estimate_note"].as_str().is_some_and(
            |n| n.contains("needs 3 nodes under one leaf; the largest leaf of gpu holds 2")
        ),
        "{w:#}"
    );
    lab.run("scancel", &[&id]);
}

fn nightshift_stdout(lab: &Lab, args: &[&str]) -> String {
    let out = Command::new(common::bin())
        .args([
            "--source",
            "slurm",
            "--slurm-url",
            &lab.url,
            "--slurm-user",
            "root",
        ])
        .arg("--log-file")
        .arg(lab.dir.path().join("nightshift.log"))
        .args(args)
        .env("SLURM_JWT", &lab.token)
        .env("SLURM_CONF", lab.conf())
        .env(
            "PATH",
            format!(
                "{}:{}",
                lab.dir.path().join("bin").display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        )
        .output()
        .expect("nightshift");
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

/// The options on the live cluster: the same comparison as on the sim,
/// with Slurm's exact calls (REST where it has the endpoint, scontrol
/// where it does not) and soft preemption mapped to a signal then a
/// requeue.
fn options_on_live_slurm(lab: &Lab, gang: &str, node: &str) {
    let v: Value = serde_json::from_str(&nightshift_stdout(
        lab,
        &["options", gang, "--grace", "10m", "-o", "json"],
    ))
    .expect("json");
    let names: Vec<&str> = v["options"]
        .as_array()
        .expect("options")
        .iter()
        .filter_map(|o| o["name"].as_str())
        .collect();
    assert_eq!(
        names,
        [
            "hard_preempt",
            "soft_preempt",
            "wait_checkpoint",
            "do_nothing"
        ],
        "{v:#}"
    );
    let soft = &v["options"][1];
    let calls: Vec<&str> = soft["actions"]
        .as_array()
        .expect("calls")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(
        calls[0],
        format!("DELETE /slurm/v0.0.38/job/{gang}?signal=SIGUSR1"),
        "{calls:?}"
    );
    assert_eq!(calls[2], format!("scontrol requeue {gang}"), "{calls:?}");
    // Never more lost with a grace period than without.
    let (hard, soft_lost) = (
        v["options"][0]["gpu_hours_lost"].as_f64().expect("hard"),
        soft["gpu_hours_lost"].as_f64().expect("soft"),
    );
    assert!(soft_lost <= hard, "{soft_lost} > {hard}");
    assert_eq!(
        v["options"]
            .as_array()
            .expect("options")
            .iter()
            .filter(|o| o["recommended"] == true)
            .count(),
        1
    );
    // The drained node: draining it again is a no-op, nothing to requeue
    // twice; its running job's options come with scontrol's calls.
    let v: Value = serde_json::from_str(&nightshift_stdout(lab, &["options", node, "-o", "json"]))
        .expect("json");
    let drain = v["options"]
        .as_array()
        .expect("options")
        .iter()
        .find(|o| o["name"] == "drain_now")
        .expect("drain now");
    assert!(
        drain["actions"][0]
            .as_str()
            .is_some_and(|c| c.starts_with(&format!("scontrol update nodename={node} state=drain"))),
        "{drain:#}"
    );
    assert_eq!(drain["capacity_out"]["gpus"], 0, "already out of service");
    let text = nightshift_stdout(lab, &["options", node]);
    assert!(text.contains("recommended: "), "{text}");
}

/// `record` on the live cluster: a few seconds of polls, replayed with the
/// same jobs in the same states as live, and a report.
fn recording_of_live_slurm(lab: &Lab) {
    let file = lab.dir.path().join("live.nsrec");
    let f = file.to_str().expect("path");
    let said = nightshift_stdout(lab, &["record", f, "--for", "5s"]);
    let n: u64 = said
        .strip_prefix("recorded ")
        .and_then(|r| r.split_whitespace().next())
        .and_then(|x| x.parse().ok())
        .unwrap_or_else(|| panic!("{said}"));
    assert!(n >= 2, "{said}");
    let ids = |v: &Value| -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = v["items"]
            .as_array()
            .expect("items")
            .iter()
            .map(|j| (j["id"].to_string(), j["state"].to_string()))
            .collect();
        out.sort();
        out
    };
    let live: Value = serde_json::from_str(&nightshift_stdout(lab, &["get", "jobs", "-o", "json"]))
        .expect("json");
    let played: Value = serde_json::from_str(&nightshift_stdout(
        lab,
        &["--replay", f, "get", "jobs", "-o", "json"],
    ))
    .expect("json");
    assert_eq!(ids(&live), ids(&played));
    assert_eq!(played["source"], "slurm");
    let md = nightshift_stdout(lab, &["report", f]);
    assert!(md.starts_with("# Night report: "), "{md}");
    assert!(md.contains("(slurm)"), "{md}");
    // One situation (issue 39): the recorded moment's analysis is what
    // every command prints for it.
    let compared = common::situation::one_answer_at_the_end(lab.dir.path(), &file, 4, &|a| {
        nightshift_on(lab, &[], a)
    });
    assert!(compared >= 4, "only {compared} answers compared");
}

/// `restore JOB` and `blast drain NODE`: the text says what the JSON says,
/// number for number; an unknown total is unknown in both, with its reason.
fn answers_agree(lab: &Lab, jobs: &[&str], nodes: &[&str]) {
    for id in jobs {
        let j: Value =
            serde_json::from_str(&nightshift_stdout(lab, &["restore", id, "-o", "json"]))
                .expect("json");
        let t = nightshift_stdout(lab, &["restore", id]);
        let line = t
            .lines()
            .find(|l| l.trim_start().starts_with("total to resume"))
            .expect("total");
        match j["total_s"]["value"].as_f64() {
            Some(v) => assert!(line.contains(&format!("({v:.0} s)")), "{id}: {line} vs {v}"),
            None => assert!(
                line.contains("unknown")
                    && line.contains(j["total_s"]["note"].as_str().expect("note")),
                "{id}: {line}"
            ),
        }
    }
    for node in nodes {
        let j: Value = serde_json::from_str(&nightshift_stdout(
            lab,
            &["blast", "drain", node, "-o", "json"],
        ))
        .expect("json");
        let t = nightshift_stdout(lab, &["blast", "drain", node]);
        for k in j["killed"].as_array().expect("killed") {
            let id = k["id"].as_str().expect("id");
            let total = &k["restore"]["total_s"];
            let want = match total["value"].as_f64() {
                Some(v) => nightshift::text::duration(v.round() as i64),
                None => format!("unknown: {}", total["note"].as_str().expect("note")),
            };
            let line = t
                .lines()
                .find(|l| l.starts_with(&format!("  {id} ")))
                .unwrap_or_else(|| panic!("no line for {id}:\n{t}"));
            assert!(
                line.ends_with(&format!("back in {want}")),
                "{line} vs {want}"
            );
        }
    }
}

#[test]
fn live_small_partition_answers_agree_drain_without_force_and_partial_outcomes() {
    if !available() {
        return;
    }
    let lab = Lab::start();
    // A 2-node gang in the 2-node partition `pair` (gpu03, gpu04).
    let gang = lab.sbatch(&["-J", "pairgang", "-p", "pair", "-N2", "--gpus-per-node=8"]);
    let solo = lab.sbatch(&["-J", "solo", "-w", "gpu01", "--gres=gpu:4"]);
    assert!(
        wait_for(Duration::from_secs(20), || (squeue_field(
            &lab, &gang, "%T"
        ) == "RUNNING"
            && squeue_field(&lab, &solo, "%T") == "RUNNING")
            .then_some(()))
        .is_some(),
        "{}",
        lab.run("squeue", &[])
    );
    answers_agree(&lab, &[&gang, &solo], &["gpu01", "gpu02", "gpu03", "gpu04"]);
    // Draining a rank's node leaves the gang no room in `pair`: its return
    // is unknown, and says what it waits for, never a smaller number.
    let j: Value = serde_json::from_str(&nightshift_stdout(
        &lab,
        &["blast", "drain", "gpu04", "-o", "json"],
    ))
    .expect("json");
    let k = &j["killed"][0];
    assert_eq!(k["id"], gang.as_str());
    assert!(k["restore"]["total_s"]["value"].is_null(), "{k}");
    assert_eq!(
        k["restore"]["total_s"]["note"],
        "cannot restart until gpu04 returns: needs 2 nodes with 8 GPUs, 1 left in pair"
    );
    // The first node out of `pair` (and of `gpu`) drains without --force.
    let (ok, out) = nightshift_on(
        &lab,
        &[],
        &[
            "drain",
            "gpu04",
            "--reason",
            "xid79 gpu3",
            "--requeue",
            "--confirm",
            "gpu04",
        ],
    );
    assert!(ok, "{out}");
    assert!(out.contains("done and verified: drain gpu04 ✓"), "{out}");

    // A job submitted with --no-requeue: the drain is done, its requeue is
    // not sent (Slurm would refuse it), and every answer says so.
    let stuck = lab.sbatch(&["-J", "stuck", "-w", "gpu02", "--gres=gpu:8", "--no-requeue"]);
    assert!(
        wait_for(Duration::from_secs(20), || (squeue_field(
            &lab, &stuck, "%T"
        ) == "RUNNING")
            .then_some(()))
        .is_some()
    );
    let (ok, out) = nightshift_on(
        &lab,
        &[],
        &[
            "drain",
            "gpu02",
            "--reason",
            "ecc gpu5",
            "--requeue",
            "--confirm",
            "gpu02",
            // gpu04 is out already: 2 of 4 of `gpu` is over the breaker's share.
            "--force",
        ],
    );
    // One story: the preview, the outcome and Slurm agree that it keeps
    // running on the draining node; no requeue Slurm refuses is sent.
    assert!(ok, "{out}");
    assert!(out.contains("--no-requeue"), "the preview warned: {out}");
    assert!(
        out.contains(&format!("job(s) {stuck} refuse a requeue")),
        "the blast radius says it: {out}"
    );
    assert!(
        !out.contains(&format!("will send: scontrol requeue {stuck}")),
        "{out}"
    );
    assert!(
        out.contains("done and verified: drain gpu02 ✓")
            && out.contains(&format!("requeue {stuck}: nothing sent")),
        "{out}"
    );
    assert!(out.contains("undo: nightshift resume gpu02"), "{out}");
    assert_eq!(
        squeue_field(&lab, &stuck, "%T"),
        "RUNNING",
        "it keeps running"
    );
    let sinfo = lab.run("sinfo", &["-h", "-n", "gpu02", "-O", "StateLong:20"]);
    assert!(sinfo.contains("draining"), "{sinfo}");
    let audit = std::fs::read_to_string(lab.dir.path().join("audit.jsonl")).expect("audit");
    assert!(!audit.contains("\"partial\":true"), "{audit}");

    // Someone drains gpu01 by hand with scontrol: the breaker counts it by
    // Slurm's reason_changed_at beside nightshift's two (issue 37), and a
    // third node in ten minutes refuses the fourth, naming all three.
    lab.run(
        "scontrol",
        &[
            "update",
            "nodename=gpu01",
            "state=drain",
            "reason=theirs: PSU",
        ],
    );
    let (ok, out) = nightshift_on(
        &lab,
        &[],
        &[
            "drain",
            "gpu03",
            "--reason",
            "mine",
            "--requeue",
            "--confirm",
            "gpu03",
        ],
    );
    assert!(!ok, "{out}");
    assert!(
        out.contains("3 node(s) already taken out in the last 10 min")
            && ["gpu01 at", "gpu02 at", "gpu04 at"]
                .iter()
                .all(|n| out.contains(n)),
        "{out}"
    );
    assert!(
        !lab.run("sinfo", &["-h", "-n", "gpu03", "-O", "StateLong:20"])
            .contains("drain"),
        "nothing sent"
    );
}

/// slurmrestd dies while a node endpoint keeps answering: the header turns
/// STALE within the stale window (the endpoint's answers never make the
/// scheduler's data look fresh), keeps the scheduler's error, and `D` is
/// refused for data too old.
#[test]
fn live_dead_slurmrestd_behind_a_live_endpoint_goes_stale_and_drain_is_refused() {
    use common::fake::{Behaviour, Fake};
    if !available() {
        return;
    }
    assert!(common::require("tmux", "apt-get install tmux"), "tmux");
    let lab = Lab::start();
    // A job on gpu01 whose GPU 2 reports an Xid 79 and an uncorrectable
    // error: one failure, one incident, naming the job (the console polls
    // the endpoint and Slurm side by side; its JOBS column showed `-`).
    let job = lab.sbatch(&["-J", "hit", "-w", "gpu01", "--gres=gpu:8"]);
    assert!(
        wait_for(Duration::from_secs(20), || (squeue_field(&lab, &job, "%T")
            == "RUNNING")
            .then_some(()))
        .is_some(),
        "{}",
        lab.run("squeue", &[])
    );
    let dcgm = Fake::start(Behaviour::text(
        200,
        "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",Hostname=\"gpu01\"} 97\n\
         DCGM_FI_DEV_XID_ERRORS{gpu=\"2\",Hostname=\"gpu01\"} 79\n\
         DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{gpu=\"2\",Hostname=\"gpu01\"} 1\n",
    ));
    let cfg = lab.dir.path().join("stale.toml");
    std::fs::write(
        &cfg,
        "[ui]\nstale_after_s = 4\n[actions]\nmax_data_age_s = 4\n[slurm]\ninterval_s = 1\ntimeout_s = 1\n[endpoints]\ninterval_s = 1\n",
    )
    .expect("config");
    let t = common::Tmux::start(120, 32);
    t.type_line(&format!(
        "SLURM_JWT={} SLURM_CONF={} {} --source slurm --slurm-url {} --slurm-user root --dcgm {} --config {} --log-file {} --audit-log {}; echo EXIT=$?",
        lab.token,
        lab.conf().display(),
        common::bin(),
        lab.url,
        dcgm.url("/metrics"),
        cfg.display(),
        lab.dir.path().join("tui.log").display(),
        lab.dir.path().join("audit.jsonl").display(),
    ));
    t.expect(" slurm │ ");
    // gpu04 is known only to Slurm: the scheduler has answered.
    t.expect("gpu04");
    t.expect("data 0s old");
    t.keys(&[":"]);
    t.keys(&["-l", "incidents"]);
    t.keys(&["Enter"]);
    t.expect("incidents (newest first");
    let screen = t.expect(&format!("{job}(running)"));
    let rows: Vec<&str> = screen
        .lines()
        .filter(|l| l.contains("gpu01") && l.contains("(running)"))
        .collect();
    assert_eq!(rows.len(), 1, "one failure, one incident: {screen}");
    assert!(rows[0].contains("XID 79 +1"), "{screen}");
    let pid = std::fs::read_to_string(lab.dir.path().join("run/slurmrestd.pid")).expect("pid");
    assert!(
        Command::new("kill")
            .arg(pid.trim())
            .status()
            .is_ok_and(|s| s.success())
    );
    t.expect("STALE");
    t.expect("cannot reach slurmrestd");
    t.keys(&[":"]);
    t.keys(&["-l", "nodes"]);
    t.keys(&["Enter"]);
    t.keys(&["D"]);
    t.expect("REFUSED: data too old to act on");
    t.escape();
    t.keys(&["q"]);
    t.expect("EXIT=0");
    let audit = std::fs::read_to_string(lab.dir.path().join("audit.jsonl")).unwrap_or_default();
    assert!(audit.is_empty(), "nothing was sent: {audit}");
}

/// Three clusters in one console (issue 28, `--all`): the simulated
/// cluster, this live Slurm and the Kubernetes lab (kube-lab, the tests'
/// stand-in API server). The fleet overview shows all three; an incident
/// of each is two keys away (its number, then enter on its first
/// incident); killing slurmrestd marks that cluster alone stale; a drain
/// in the sim names its cluster in the preview, takes `sim/NODE` typed,
/// and the audit record carries the cluster.
#[test]
fn one_console_watches_the_sim_live_slurm_and_the_kube_lab() {
    if !available() {
        return;
    }
    assert!(common::require("tmux", "apt-get install tmux"), "tmux");
    let lab = Lab::start();
    let kube = common::kube::KubeLab::start();
    // An incident on Slurm: a node drained with a reason.
    lab.run(
        "scontrol",
        &[
            "update",
            "nodename=gpu04",
            "state=drain",
            "reason=fleet-test",
        ],
    );
    let cfg = lab.dir.path().join("fleet.toml");
    std::fs::write(
        &cfg,
        format!(
            "[ui]\nstale_after_s = 8\n\n\
             [[clusters]]\nname = \"sim\"\nsource = \"sim\"\n\n\
             [[clusters]]\nname = \"lab-slurm\"\nsource = \"slurm\"\n[clusters.slurm]\nurl = \"{}\"\nuser = \"root\"\ninterval_s = 1\ntimeout_s = 1\n\n\
             [[clusters]]\nname = \"lab-kube\"\nsource = \"kube\"\n[clusters.kube]\nkubeconfig = \"{}\"\n",
            lab.url,
            kube.kubeconfig().display()
        ),
    )
    .expect("config");
    let audit = lab.dir.path().join("audit.jsonl");
    let t = common::Tmux::start(130, 40);
    t.type_line(&format!(
        "SLURM_JWT={} SLURM_CONF={} {} --config {} --all --log-file {} --audit-log {}; echo EXIT=$?",
        lab.token,
        lab.conf().display(),
        common::bin(),
        cfg.display(),
        lab.dir.path().join("tui.log").display(),
        audit.display(),
    ));
    t.expect("nightshift fleet");
    t.expect("3 clusters");
    // Every cluster answered: three rows with their data's age.
    let fresh = wait_for(Duration::from_secs(30), || {
        let s = t.screen();
        ["sim", "lab-slurm", "lab-kube"]
            .iter()
            .all(|n| {
                s.lines()
                    .any(|l| l.contains(&format!(" {n} ")) && l.contains("s old"))
            })
            .then_some(s)
    });
    let s = fresh.unwrap_or_else(|| panic!("not every cluster answered:\n{}", t.screen()));
    assert!(s.contains("lab-slurm") && s.contains("gpu04"), "{s}");
    // Two keys to an incident of each: its number, enter.
    for (key, name, node) in [
        ("1", "sim", "h100-"),
        ("2", "lab-slurm", "gpu04"),
        ("3", "lab-kube", "gpu-"),
    ] {
        t.keys(&[key]);
        t.expect(&format!("◆ {name}"));
        t.keys(&["Enter"]);
        let s = t.expect(&format!("node {node}"));
        assert!(s.contains(&format!("◆ {name}")), "{s}");
        t.escape();
        t.escape();
        t.expect("nightshift fleet");
    }
    // Slurm's REST server dies: that cluster alone goes stale.
    let pid = std::fs::read_to_string(lab.dir.path().join("run/slurmrestd.pid")).expect("pid");
    assert!(
        Command::new("kill")
            .arg(pid.trim())
            .status()
            .is_ok_and(|s| s.success())
    );
    let s = t.expect("STALE");
    let row = |n: &str| {
        s.lines()
            .find(|l| {
                l.contains(&format!(" {n} ")) && (l.contains(" old") || l.contains("waiting"))
            })
            .unwrap_or_default()
            .to_string()
    };
    assert!(row("lab-slurm").contains("STALE"), "{s}");
    assert!(
        !row("sim").contains("STALE") && row("sim").contains("s old"),
        "{s}"
    );
    assert!(
        !row("lab-kube").contains("STALE") && row("lab-kube").contains("s old"),
        "{s}"
    );
    assert!(s.contains("cannot reach slurmrestd"), "{s}");
    // A drain through the fleet: the sim's h100-03, named with its cluster.
    t.keys(&["1"]);
    t.expect("◆ sim");
    t.command("node h100-03");
    t.keys(&["D"]);
    t.expect("cluster: sim");
    t.expect("type sim/h100-03 and press enter to confirm");
    t.type_confirmation("h100-03");
    t.expect("does not match");
    t.type_confirmation("sim/h100-03");
    t.expect("done and verified: drain h100-03");
    t.escape();
    t.escape();
    t.escape();
    t.expect("nightshift fleet");
    t.keys(&["q"]);
    t.expect("EXIT=0");
    let log = std::fs::read_to_string(&audit).expect("audit log");
    let records: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).expect("record"))
        .collect();
    assert_eq!(records.len(), 2, "intent and outcome: {log}");
    assert!(
        records
            .iter()
            .all(|r| r["cluster"] == "sim" && r["target"] == "h100-03"),
        "{log}"
    );
}

/// `nightshift validate NODE` against `lab`, its check the DCGM stand-in
/// (tests/fixtures/validate/dcgmi.sh, copied into the lab where its jobs
/// can run it) answering `verdict`: (ok, output).
fn validate_on(lab: &Lab, node: &str, verdict: &str) -> (bool, String) {
    let jobs = lab.dir.path().join("jobs");
    let script = jobs.join("dcgmi.sh");
    std::fs::copy(common::dcgmi_stand_in(), &script).expect("copy the check");
    let out_dir = lab.dir.path().join("validate");
    std::fs::create_dir_all(&out_dir).expect("output dir");
    let cfg = lab.dir.path().join(format!("validate-{verdict}.toml"));
    std::fs::write(
        &cfg,
        format!(
            "[slurm]\nscontrol = {:?}\n[validate]\ncommand = \"sh {} {verdict} {{level}}\"\ntimeout = \"2m\"\noutput_dir = {:?}\n",
            lab.scontrol(),
            script.display(),
            out_dir.display().to_string(),
        ),
    )
    .expect("config");
    nightshift_on(
        lab,
        &[],
        &[
            "--config",
            cfg.to_str().expect("path"),
            "validate",
            node,
            "--level",
            "2",
        ],
    )
}

/// Back to service through a check, on real Slurm (issue 29): a drained
/// node is reserved for maintenance, resumed into the reservation, checked
/// by a job there (DCGM's JSON from a stand-in: there are no GPUs here),
/// and back in service on a pass; one whose check fails stays drained with
/// the failing test as its reason. No reservation is left either way
/// (`scontrol show reservation`, `sinfo`).
fn validate_then_resume(lab: &Lab) {
    let state = |node: &str| {
        lab.run("sinfo", &["-h", "-n", node, "-o", "%T"])
            .trim()
            .to_string()
    };
    for node in ["gpu02", "gpu03"] {
        lab.run(
            "scontrol",
            &[
                "update",
                &format!("nodename={node}"),
                "state=drain",
                "reason=xid 79 gpu3",
            ],
        );
    }
    // Planted where the check's output used to be read (issue 43): a
    // regular file with the planter's words for the passing node, a link
    // to a secret and a FIFO for the failing one, for every job id the lab
    // can give next. The check's own output is read from a directory
    // nightshift makes, so none of them is read, followed or waited on.
    let out_dir = lab.dir.path().join("validate");
    std::fs::create_dir_all(&out_dir).expect("output dir");
    let secret = lab.dir.path().join("secret");
    std::fs::write(&secret, "the secret's last line\n").expect("secret");
    for id in 1..=400 {
        let _ = std::fs::write(
            out_dir.join(format!("nightshift-validate-gpu02-{id}.out")),
            "planted: GPU 0 is on fire\n",
        );
        let link = out_dir.join(format!("nightshift-validate-gpu03-{id}.out"));
        if id % 2 == 0 {
            let _ = std::os::unix::fs::symlink(&secret, &link);
        } else {
            let _ = std::process::Command::new("mkfifo").arg(&link).status();
        }
    }
    let (ok, out) = validate_on(lab, "gpu02", "pass");
    assert!(ok, "{out}");
    assert!(!out.contains("planted"), "{out}");
    assert!(
        out.contains("dcgmi.sh pass 2) ✓; end nightshift-validate-gpu02 ✓"),
        "{out}"
    );
    assert_eq!(state("gpu02"), "idle", "{out}");
    let (ok, out) = validate_on(lab, "gpu03", "fail");
    assert!(!ok, "{out}");
    assert!(
        out.contains("GPU Memory: GPU 3: Pending page retirements"),
        "{out}"
    );
    assert_eq!(state("gpu03"), "drained", "{out}");
    let reason = lab.run("sinfo", &["-h", "-R", "-n", "gpu03", "-o", "%E"]);
    assert!(
        reason.starts_with("nightshift validation failed: GPU Memory: GPU 3: Pending page"),
        "{reason}"
    );
    assert!(
        !reason.contains("secret") && !out.contains("secret"),
        "{reason} {out}"
    );
    // Nothing of nightshift's own is left in the output directory.
    let left: Vec<_> = std::fs::read_dir(&out_dir)
        .expect("dir")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.ends_with(".out"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    let reservations = lab.run("scontrol", &["show", "reservation"]);
    assert!(
        !reservations.contains("nightshift-validate"),
        "{reservations}"
    );
    // The audit log has both, each with its steps.
    let audit = std::fs::read_to_string(lab.dir.path().join("audit.jsonl")).expect("audit");
    assert!(audit.matches("\"validate\"").count() >= 2, "{audit}");
    // A node in service is not validated: nothing to do.
    let (_, out) = validate_on(lab, "gpu01", "pass");
    assert!(out.contains("in service already"), "{out}");
}

#[test]
fn live_validate_then_resume_on_slurm_22_05_and_24_11() {
    if !available() {
        return;
    }
    validate_then_resume(&Lab::start());
    if !available_24_11() {
        return;
    }
    validate_then_resume(&Lab::start_version(Slurm::V24_11));
}

/// A job on one whole node that writes a checkpoint (its comment's
/// `ckpt_last`, where nightshift reads it) `after` seconds in, or never;
/// returns (job, node) once it runs.
fn checkpointing_job(lab: &Lab, name: &str, after: Option<u64>) -> (String, String) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs();
    let comment = format!("ckpt_bytes=1GB ckpt_every=1m ckpt_last={}", now - 30);
    let script = lab.dir.path().join(format!("{name}.sh"));
    let body = match after {
        Some(s) => format!(
            "sleep {s}\nscontrol update jobid=$SLURM_JOB_ID comment=\"ckpt_bytes=1GB ckpt_every=1m ckpt_last=$(date +%s)\"\nsleep 600\n"
        ),
        None => "sleep 600\n".to_string(),
    };
    std::fs::write(&script, body).expect("script");
    let job = lab
        .run(
            "sbatch",
            &[
                "--parsable",
                "-J",
                name,
                "--gres=gpu:8",
                "--comment",
                &comment,
                "--wrap",
                &format!("exec bash {}", script.display()),
            ],
        )
        .trim()
        .to_string();
    let node = wait_for(Duration::from_secs(20), || {
        (squeue_field(lab, &job, "%T") == "RUNNING").then(|| squeue_field(lab, &job, "%N"))
    })
    .unwrap_or_else(|| panic!("{name} never ran: {}", lab.run("squeue", &[])));
    (job, node)
}

/// Follow-ups that run themselves, on real Slurm 22.05 (issue 29): "cordon
/// now, drain after the checkpoint" confirmed once — the cordon sent, the
/// drain armed in the audit log — and `nightshift follow` (no terminal)
/// sends the drain when the job's checkpoint moves; an armed step
/// cancelled is never sent; and a plan confirmed past the circuit breaker
/// (`--force`) keeps that override when its step comes due, though its
/// partition lost two more nodes meanwhile (issue 37).
#[test]
fn live_armed_drain_after_checkpoint_fires_by_follow_is_cancelled_and_keeps_its_override() {
    if !available() {
        return;
    }
    let lab = Lab::start();
    let state = |node: &str| {
        lab.run("sinfo", &["-h", "-n", node, "-o", "%T"])
            .trim()
            .to_string()
    };
    let follow = || nightshift_on(&lab, &[], &["follow", "--interval", "1s", "--for", "60s"]);

    // Fired by follow when the checkpoint moves.
    let (job, node) = checkpointing_job(&lab, "ckpt", Some(6));
    let (ok, out) = nightshift_on(
        &lab,
        &[],
        &[
            "drain",
            &node,
            "--reason",
            "xid 63 gpu1",
            "--requeue",
            "--after-checkpoint",
            "--confirm",
            &node,
        ],
    );
    assert!(ok, "{out}");
    assert!(
        out.contains("armed ") && out.contains(&format!("after the checkpoint of job {job}")),
        "{out}"
    );
    assert!(
        state(&node).contains("drain"),
        "cordoned now: {}",
        state(&node)
    );
    assert_eq!(squeue_field(&lab, &job, "%T"), "RUNNING");
    let (ok, listed) = nightshift_on(&lab, &[], &["armed", "-o", "json"]);
    assert!(ok, "{listed}");
    let listed: Value = serde_json::from_str(&listed).expect("json");
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed:#}");
    assert_eq!(listed[0]["action"]["node"], node.as_str());
    let (ok, out) = follow();
    assert!(ok, "{out}");
    assert!(
        out.contains(&format!("waiting for job {job}'s checkpoint")),
        "{out}"
    );
    assert!(
        out.contains(&format!("fired: job {job} checkpointed at"))
            && out.contains(&format!("requeue {job} ✓")),
        "{out}"
    );
    assert!(out.contains("nothing armed on lab: done"), "{out}");
    let reason = lab.run("sinfo", &["-h", "-R", "-n", &node, "-o", "%E"]);
    assert_eq!(reason.trim(), "xid 63 gpu1");
    let shown = lab.run("scontrol", &["show", "job", &job]);
    assert!(shown.contains("Restarts=1"), "{shown}");
    let audit = std::fs::read_to_string(lab.dir.path().join("audit.jsonl")).expect("audit");
    for phase in ["\"armed\"", "\"fired\""] {
        assert!(audit.contains(phase), "{phase} in {audit}");
    }

    // Cancelled: never sent.
    lab.run("scancel", &["--user=root"]);
    for n in ["gpu01", "gpu02", "gpu03", "gpu04"] {
        let _ = Command::new("scontrol")
            .args(["update", &format!("nodename={n}"), "state=resume"])
            .env("SLURM_CONF", lab.conf())
            .output();
    }
    let (job, node) = checkpointing_job(&lab, "quiet", None);
    let (ok, out) = nightshift_on(
        &lab,
        &[],
        &[
            "drain",
            &node,
            "--reason",
            "fan",
            "--requeue",
            "--after-checkpoint",
            "--confirm",
            &node,
        ],
    );
    assert!(ok, "{out}");
    let id = out
        .lines()
        .find_map(|l| l.strip_prefix("armed ").and_then(|r| r.split(':').next()))
        .expect("the armed id")
        .to_string();
    let (ok, out) = nightshift_on(&lab, &[], &["disarm", &id]);
    assert!(ok && out.contains("cancelled"), "{out}");
    let (ok, out) = nightshift_on(&lab, &[], &["armed"]);
    assert!(ok && out.contains("nothing armed"), "{out}");
    let (ok, out) = follow();
    assert!(ok && out.contains("nothing armed on lab: done"), "{out}");
    assert_eq!(squeue_field(&lab, &job, "%T"), "RUNNING");

    // "Requeue after its checkpoint": nothing sent when armed; follow
    // sends the requeue when the checkpoint moves.
    let (again, _) = checkpointing_job(&lab, "again", Some(6));
    let (ok, out) = nightshift_on(
        &lab,
        &[],
        &["requeue", &again, "--after-checkpoint", "--confirm", &again],
    );
    assert!(ok, "{out}");
    assert!(
        out.lines().any(|l| l.starts_with("armed ")
            && l.contains(&format!(
                ": requeue {again} after the checkpoint of job {again}"
            ))),
        "{out}"
    );
    assert_eq!(squeue_field(&lab, &again, "%T"), "RUNNING", "not sent yet");
    let (ok, out) = follow();
    assert!(ok, "{out}");
    assert!(
        out.contains(&format!("fired: job {again} checkpointed at")),
        "{out}"
    );
    let shown = lab.run("scontrol", &["show", "job", &again]);
    assert!(shown.contains("Restarts=1"), "{shown}");

    // A plan confirmed past the circuit breaker keeps its override for
    // its own armed step (issue 37: it was refused when it fired, the node
    // left cordoned and its job running) — even with two more of the
    // partition taken out by hand meanwhile. (A plan armed without the
    // override is judged again when it fires: the guard's unit tests.)
    lab.run("scancel", &["--user=root"]);
    let _ = Command::new("scontrol")
        .args(["update", &format!("nodename={node}"), "state=resume"])
        .env("SLURM_CONF", lab.conf())
        .output();
    let (job, node) = checkpointing_job(&lab, "late", Some(6));
    let (ok, out) = nightshift_on(
        &lab,
        &[],
        // Past the breaker when it is armed (`--force`).
        &[
            "drain",
            &node,
            "--reason",
            "xid 63",
            "--requeue",
            "--after-checkpoint",
            "--confirm",
            &node,
            "--force",
        ],
    );
    assert!(ok, "{out}");
    let others: Vec<&str> = ["gpu01", "gpu02", "gpu03", "gpu04"]
        .into_iter()
        .filter(|n| *n != node)
        .take(2)
        .collect();
    for n in &others {
        lab.run(
            "scontrol",
            &[
                "update",
                &format!("nodename={n}"),
                "state=drain",
                "reason=psu",
            ],
        );
    }
    let (ok, out) = follow();
    assert!(ok, "{out}");
    assert!(
        out.contains(&format!("fired: job {job} checkpointed at")) && !out.contains("refused"),
        "{out}"
    );
    let shown = lab.run("scontrol", &["show", "job", &job]);
    assert!(
        shown.contains("Restarts=1"),
        "the drain requeued it: {shown}"
    );
    assert!(state(&node).contains("drain"), "{}", state(&node));
}

/// The calls sent are the calls previewed, on Slurm (issue 37): every
/// action nightshift takes there, its preview's `will send:` lines against
/// what reached the cluster — slurmrestd's writes through a recording
/// proxy, scontrol/sbatch/scancel through wrappers that log their
/// arguments — on 22.05 (scontrol for most writes) and 24.11 (REST).
fn every_action_sends_what_its_preview_listed(lab: &Lab) {
    use common::sent::{Sent, assert_sent_as_previewed, call_of, previewed};
    let rec = common::slurm::Recorder::start(lab);
    let cfg = lab.dir.path().join("sent.toml");
    std::fs::write(
        &cfg,
        format!(
            "[slurm]\nscontrol = {:?}\n[actions]\nmax_partition_share_out = 0.75\nmax_nodes_per_window = 10\n",
            rec.scontrol
        ),
    )
    .expect("config");
    let running = |args: &[&str]| {
        let id = lab.sbatch(args);
        assert!(
            wait_for(Duration::from_secs(20), || (squeue_field(lab, &id, "%T")
                == "RUNNING")
                .then_some(()))
            .is_some(),
            "{}",
            lab.run("squeue", &[])
        );
        id
    };
    let a = running(&["-J", "a", "-w", "gpu01", "--gres=gpu:2"]);
    let b = running(&["-J", "b", "-w", "gpu01", "--gres=gpu:2"]);
    let c = running(&["-J", "c", "-w", "gpu02", "--gres=gpu:2"]);
    let d = running(&["-J", "d", "-w", "gpu03", "--gres=gpu:2"]);
    let pending = lab.sbatch(&["-J", "p", "--hold", "--gres=gpu:8"]);
    let cases: Vec<Vec<&str>> = vec![
        vec!["cordon", "gpu04", "--reason", "fan alarm"],
        vec!["reason", "gpu04", "fan replaced, burn-in"],
        vec!["resume", "gpu04"],
        vec!["release", &pending],
        vec!["priority", &pending, "500"],
        vec!["hold", &pending],
        vec!["requeue", &a, "--confirm", &a],
        vec!["preempt", &b, "--confirm", &b],
        vec!["preempt", &c, "--grace", "2s", "--confirm", &c],
        vec![
            "drain",
            "gpu03",
            "--reason",
            "xid 79",
            "--kill",
            "--confirm",
            "gpu03",
        ],
        vec![
            "drain",
            "gpu01",
            "--reason",
            "xid 48",
            "--requeue",
            "--confirm",
            "gpu01",
        ],
    ];
    for args in cases {
        let (http_before, cmd_before) = rec.sent();
        let out = Command::new(common::bin())
            .args([
                "--source",
                "slurm",
                "--slurm-url",
                &rec.url,
                "--slurm-user",
                "root",
            ])
            .arg("--config")
            .arg(&cfg)
            .arg("--log-file")
            .arg(lab.dir.path().join("nightshift.log"))
            .arg("--audit-log")
            .arg(lab.dir.path().join("audit.jsonl"))
            .args(&args)
            .env("SLURM_JWT", &lab.token)
            .env("SLURM_CONF", lab.conf())
            .output()
            .expect("nightshift");
        let t = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{args:?}: {t}");
        let (http, cmds) = rec.sent();
        // Reads nightshift makes through scontrol (`show`) are not sends.
        let cmds: Vec<Sent> = cmds[cmd_before.len()..]
            .iter()
            .filter(|c| !matches!(c, Sent::Command(a) if a.iter().any(|w| w == "show")))
            .cloned()
            .collect();
        let shown = previewed(&t);
        // The preview lists REST calls and commands in the order they are
        // sent; each kind is recorded on its own side, so each kind is
        // compared in its order.
        let is_http = |l: &String| matches!(call_of(l), Some(Sent::Http { .. }));
        let (rest, other): (Vec<String>, Vec<String>) = shown.iter().cloned().partition(is_http);
        let what = format!("Slurm {:?}: {}", lab.version, args.join(" "));
        if !rest.is_empty() {
            assert_sent_as_previewed(&what, &rest, &http[http_before.len()..]);
        } else {
            assert!(
                http.len() == http_before.len(),
                "{what}: sent {:?}",
                &http[http_before.len()..]
            );
        }
        if other.iter().any(|l| call_of(l).is_some()) {
            assert_sent_as_previewed(&what, &other, &cmds);
        } else {
            assert!(cmds.is_empty(), "{what}: ran {cmds:?}\n{t}");
        }
    }
    let _ = d;
}

#[test]
fn live_every_action_sends_what_its_preview_listed_on_22_05_and_24_11() {
    if !available() {
        return;
    }
    every_action_sends_what_its_preview_listed(&Lab::start());
    if available_24_11() {
        every_action_sends_what_its_preview_listed(&Lab::start_version(Slurm::V24_11));
    }
}

/// Slurm 26.05 (issue 38), through its newest REST version (v0.0.45):
/// every action sends what its preview listed, a requeue through v0.0.45's
/// own REST requeue (no scontrol); a node in a maintenance reservation is
/// "reserved" — never free capacity — as `sinfo` says `maint`, with the
/// reservation as its reason, and a job that would fit only there is not
/// told it can start now (there) while Slurm's own estimate (`squeue
/// --start`) has none; the reads agree with sinfo and squeue.
#[test]
fn live_slurm_26_05_actions_send_their_preview_and_a_maintenance_reservation_is_not_capacity() {
    if !available_26_05() {
        return;
    }
    every_action_sends_what_its_preview_listed(&Lab::start_version(Slurm::V26_05));

    let lab = Lab::start_version(Slurm::V26_05);
    doctor_names_the_release(&lab, "26.05");
    // Three nodes full; gpu04, the only one with room, goes into a
    // maintenance reservation.
    let busy: Vec<String> = ["gpu01", "gpu02", "gpu03"]
        .iter()
        .map(|n| lab.sbatch(&["-J", "busy", "-w", n, "--gres=gpu:8"]))
        .collect();
    lab.run(
        "scontrol",
        &[
            "create",
            "reservation",
            "reservationname=maint4",
            "starttime=now",
            "duration=60",
            "nodes=gpu04",
            "flags=maint,ignore_jobs",
            "users=root",
        ],
    );
    assert!(
        wait_for(Duration::from_secs(20), || {
            let s = lab.run("sinfo", &["-h", "-n", "gpu04", "-O", "StateLong:20"]);
            (s.trim() == "maint"
                && busy
                    .iter()
                    .all(|b| squeue_field(&lab, b, "%T") == "RUNNING"))
            .then_some(())
        })
        .is_some(),
        "{}",
        lab.run("sinfo", &["-N"])
    );
    let there = lab.sbatch(&["-J", "there", "--gres=gpu:8"]);
    check_nodes_agree(&lab, Via::tcp(&lab));
    check_jobs_agree_at_least(&lab, Via::tcp(&lab), 2);
    let nodes = get(&lab, "nodes");
    let n4 = nodes.iter().find(|n| n["name"] == "gpu04").expect("gpu04");
    assert_eq!(n4["state"], "reserved", "{n4}");
    assert!(
        n4["reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("in maintenance reservation maint4 until ")),
        "{n4}"
    );
    // The reservation's end, as Slurm says it.
    let end = lab.run("scontrol", &["show", "reservation", "maint4"]);
    let back_at = n4["back_at"].as_i64().expect("back_at");
    let end_text = end
        .split_whitespace()
        .find_map(|w| w.strip_prefix("EndTime="))
        .expect("EndTime")
        .to_string();
    let iso = lab.run("date", &["-u", "-d", &end_text, "+%s"]);
    let local = lab.run("date", &["-d", &end_text, "+%s"]);
    assert!(
        [iso.trim(), local.trim()].contains(&back_at.to_string().as_str()),
        "back_at {back_at}; scontrol: {end}"
    );
    // Not "now", not there now: when the reservation ends (the running
    // jobs have no time limit), as the why says.
    let why = nightshift_stdout(&lab, &["why", &there, "-o", "json"]);
    let v: Value = serde_json::from_str(&why).expect("why json");
    let text = v.to_string();
    assert!(!text.contains("can start now"), "{why}");
    let start = lab.run("squeue", &["-h", "--start", "-j", &there, "-o", "%S"]);
    assert!(
        text.contains(&back_at.to_string()),
        "the estimate is the reservation's end ({back_at}); squeue --start: {start}; nightshift: {why}"
    );
    assert!(
        text.contains("when gpu04 comes back: in maintenance reservation maint4 until"),
        "the reservation is the cause, with its end: {why}"
    );
    // Slurm's own estimate, where it has one, is the same minute give or
    // take its scheduler's cycle.
    if start.trim() != "N/A" {
        let slurm: i64 = lab
            .run("date", &["-d", start.trim(), "+%s"])
            .trim()
            .parse()
            .expect("epoch");
        assert!(
            (slurm - back_at).abs() <= 120,
            "squeue --start {start} vs {back_at}"
        );
    }
    // The reservation gone, `there` takes gpu04: every node is held by a
    // job without a time limit. One more 8-GPU job has no estimate, and
    // says which jobs hold the room (issue 38: "in 364d23h", a date read
    // as this year's) — Slurm has none either.
    lab.run("scontrol", &["delete", "reservation=maint4"]);
    assert!(
        wait_for(Duration::from_secs(30), || (squeue_field(
            &lab, &there, "%T"
        ) == "RUNNING")
            .then_some(()))
        .is_some(),
        "{}",
        lab.run("squeue", &[])
    );
    let last = lab.sbatch(&["-J", "last", "--gres=gpu:8"]);
    let why = nightshift_stdout(&lab, &["why", &last]);
    assert!(
        why.contains("held by jobs without a time limit (")
            && !why.contains("364d")
            && !why.contains("can start now"),
        "{why}"
    );
    let start = lab.run("squeue", &["-h", "--start", "-j", &last, "-o", "%S"]);
    let year_on: i64 = lab
        .run("date", &["-d", "+300 days", "+%s"])
        .trim()
        .parse()
        .expect("epoch");
    let slurm_far = start.trim() == "N/A"
        || lab
            .run("date", &["-d", start.trim(), "+%s"])
            .trim()
            .parse::<i64>()
            .is_ok_and(|t| t > year_on);
    assert!(slurm_far, "squeue --start: {start}");
}

/// Issue 58 on real Slurm: what the options recommend for a node the guard
/// accepts, and validate's partition is the node's own.
/// - A node drained by hand ("fan noisy -- alice") that still runs a job:
///   its check is refused by the guard (`validate --dry-run`), so the
///   options never recommend sending it; they say to validate once its
///   jobs end, and the recommended option's own step (none) passes.
/// - A node outside the default partition (slurmrestd 22.05's `/node/NAME`
///   names the first partition for every node): validate sends its own
///   partition, sbatch takes it, and the node is back in service.
fn recommendations_the_guard_accepts(lab: &Lab) {
    // gpu04 only in a partition of its own, not the default one.
    lab.run(
        "scontrol",
        &["update", "partitionname=gpu", "nodes=gpu[01-03]"],
    );
    lab.run("scontrol", &["update", "partitionname=pair", "nodes=gpu03"]);
    lab.run(
        "scontrol",
        &[
            "create",
            "partitionname=solo",
            "nodes=gpu04",
            "maxtime=infinite",
            "state=up",
        ],
    );
    let job = lab
        .run(
            "sbatch",
            &[
                "--parsable",
                "-J",
                "busy",
                "-w",
                "gpu01",
                "--gres=gpu:1",
                "-t",
                "30",
                "--output",
                "/dev/null",
                "--wrap",
                "sleep 600",
            ],
        )
        .trim()
        .to_string();
    assert!(
        wait_for(Duration::from_secs(20), || {
            (squeue_field(lab, &job, "%T") == "RUNNING").then_some(())
        })
        .is_some(),
        "the job did not start: {}",
        lab.run("squeue", &[])
    );
    lab.run(
        "scontrol",
        &[
            "update",
            "nodename=gpu01",
            "state=drain",
            "reason=fan noisy -- alice",
        ],
    );
    lab.run(
        "scontrol",
        &[
            "update",
            "nodename=gpu04",
            "state=drain",
            "reason=xid 79 gpu3",
        ],
    );
    let (ok, out) = nightshift_on(lab, &[], &["options", "gpu01", "-o", "json"]);
    assert!(ok, "{out}");
    let o: Value = serde_json::from_str(&out).expect("json");
    let picks: Vec<&Value> = o["options"]
        .as_array()
        .expect("options")
        .iter()
        .filter(|c| c["recommended"] == true)
        .collect();
    assert_eq!(picks.len(), 1, "{o:#}");
    let title = picks[0]["title"].as_str().unwrap_or_default();
    assert!(
        title.starts_with("validate (DCGM level") && title.contains("once its jobs end"),
        "{o:#}"
    );
    assert!(
        picks[0]["actions"].as_array().is_none_or(|a| a
            .iter()
            .all(|x| !x.as_str().unwrap_or("").contains("sbatch"))),
        "nothing is sent for it now: {o:#}"
    );
    // The guard's dry run of the check itself: refused, with the job.
    let (ok, out) = nightshift_on(
        lab,
        &[],
        &["validate", "gpu01", "--level", "2", "--dry-run"],
    );
    assert!(
        out.contains(&format!("gpu01 still runs job {job}")),
        "{ok} {out}"
    );
    // The whole moment, recorded: every surface gives its one answer, and
    // every recommended option's dry run against this Slurm passes.
    let file = lab.dir.path().join("guard.nsrec");
    nightshift_stdout(
        lab,
        &["record", file.to_str().expect("path"), "--for", "3s"],
    );
    let compared = common::situation::one_answer_at_the_end(lab.dir.path(), &file, 4, &|a| {
        nightshift_on(lab, &[], a)
    });
    assert!(compared >= 4, "only {compared} answers compared");
    // The node outside the default partition: its own partition is sent,
    // and the check runs there.
    let (ok, out) = validate_on(lab, "gpu04", "pass");
    assert!(ok, "{out}");
    assert!(!out.contains("not available"), "{out}");
    assert_eq!(
        lab.run("sinfo", &["-h", "-n", "gpu04", "-o", "%T"]).trim(),
        "idle",
        "{out}"
    );
    lab.run("scancel", &[&job]);
}

/// Issue 58, seen on Slurm 26.05: a maintenance window on a node that has
/// not started yet (in 20 minutes, for an hour), and a 30-minute job bound
/// to that node: Slurm starts it after the window (`squeue --start`);
/// nightshift said "can start now". Its estimate is the window's end, as
/// Slurm's is, within a scheduler cycle.
fn a_reservation_ahead_delays_what_runs_into_it(lab: &Lab) {
    lab.run(
        "scontrol",
        &[
            "create",
            "reservation",
            "reservationname=maint-a1",
            "nodes=gpu02",
            "starttime=now+20minutes",
            "duration=60",
            "users=root",
            "flags=maint",
        ],
    );
    let show = lab.run("scontrol", &["show", "reservation", "maint-a1"]);
    let end_text = show
        .split_whitespace()
        .find_map(|w| w.strip_prefix("EndTime="))
        .expect("EndTime")
        .to_string();
    let end: i64 = lab
        .run("date", &["-d", &end_text, "+%s"])
        .trim()
        .parse()
        .expect("epoch");
    let job = lab.sbatch(&["-J", "ahead", "-w", "gpu02", "--gres=gpu:4", "-t", "30"]);
    // Slurm's own estimate, once its scheduler has looked.
    let slurm = wait_for(Duration::from_secs(30), || {
        let s = lab.run("squeue", &["-h", "--start", "-j", &job, "-o", "%S"]);
        let s = s.trim().to_string();
        (s != "N/A" && !s.is_empty()).then_some(s)
    });
    assert_eq!(squeue_field(lab, &job, "%T"), "PENDING", "{show}");
    let why = nightshift_stdout(lab, &["why", &job, "-o", "json"]);
    let w: Value = serde_json::from_str(&why).expect("json");
    assert!(!why.contains("can start now"), "{why}");
    let eta = w["eta_s"]
        .as_i64()
        .unwrap_or_else(|| panic!("no eta: {w:#}"));
    let now: i64 = lab.run("date", &["+%s"]).trim().parse().expect("epoch");
    assert!(
        (now + eta - end).abs() <= 120,
        "nightshift's start {} vs the window's end {end}: {w:#}",
        now + eta
    );
    if let Some(s) = slurm {
        let slurm: i64 = lab
            .run("date", &["-d", &s, "+%s"])
            .trim()
            .parse()
            .expect("epoch");
        assert!(
            (slurm - (now + eta)).abs() <= 180,
            "squeue --start {s} vs nightshift {}",
            now + eta
        );
    }
    // A job whose limit ends before the window starts now, there.
    let short = lab.sbatch(&["-J", "short", "-w", "gpu02", "--gres=gpu:2", "-t", "5"]);
    assert!(
        wait_for(Duration::from_secs(30), || (squeue_field(
            lab, &short, "%T"
        ) == "RUNNING")
            .then_some(()))
        .is_some(),
        "Slurm starts the short one: {}",
        lab.run("squeue", &[])
    );
    lab.run("scancel", &[&job, &short]);
    lab.run("scontrol", &["delete", "reservation=maint-a1"]);
}

/// Issue 58, seen on Slurm 22.05: with a job at the top (4294901760),
/// `priority JOB 5000 --dry-run` said "jobs it jumps: 1, 3" while the job
/// drops behind them. The preview names the jobs it falls behind.
fn a_lowered_priority_falls_behind(lab: &Lab) {
    let full = lab.sbatch(&["-J", "full", "-w", "gpu03", "--gres=gpu:8"]);
    assert!(
        wait_for(Duration::from_secs(20), || (squeue_field(lab, &full, "%T")
            == "RUNNING")
            .then_some(()))
        .is_some(),
        "{}",
        lab.run("squeue", &[])
    );
    let waiting: Vec<String> = (0..3)
        .map(|_| lab.sbatch(&["-J", "wait", "-w", "gpu03", "--gres=gpu:8"]))
        .collect();
    let top = &waiting[0];
    lab.run(
        "scontrol",
        &["update", &format!("jobid={top}"), "priority=4294901760"],
    );
    let out = nightshift_stdout(lab, &["priority", top, "5000", "--dry-run"]);
    assert!(!out.contains("jobs it jumps"), "{out}");
    let behind = out
        .lines()
        .find_map(|l| l.strip_prefix("jobs it falls behind: "))
        .unwrap_or_else(|| panic!("{out}"));
    for j in &waiting[1..] {
        assert!(behind.split(", ").any(|x| x == j), "{j} in {behind}: {out}");
    }
    let mut all = waiting.clone();
    all.push(full);
    let ids: Vec<&str> = all.iter().map(String::as_str).collect();
    lab.run("scancel", &ids);
}

/// A node set DOWN on the live cluster is an incident on every surface
/// that reads it once — `get incidents` (the options and `get nodes` see
/// it out of service) —
/// whether or not nightshift watched it go down (issue 60: only a process
/// that saw the change had one); resumed, it is gone.
fn a_node_down_is_an_incident_whoever_reads_it(lab: &Lab) {
    let node = "gpu02";
    lab.run(
        "scontrol",
        &[
            "update",
            &format!("nodename={node}"),
            "state=down",
            "reason=disk gone -- carol",
        ],
    );
    let open_down = |items: &[Value]| {
        items
            .iter()
            .filter(|i| i["node"] == node && i["label"] == "NODE DOWN" && i["stage"] == "open")
            .count()
    };
    let inc = get(lab, "incidents");
    assert_eq!(open_down(&inc), 1, "{inc:#?}");
    // The options see it out of service, and its incident is its node's.
    let opts = nightshift_stdout(lab, &["options", node]);
    assert!(opts.contains("out of service"), "{opts}");
    let nodes = get(lab, "nodes");
    assert!(
        nodes
            .iter()
            .any(|n| n["name"] == node && n["state"] == "down"),
        "{nodes:#?}"
    );
    // Resumed (or put back by slurmctld already, its slurmd answering).
    let _ = lab.run_ok(
        "scontrol",
        &["update", &format!("nodename={node}"), "state=resume"],
    );
    let inc = get(lab, "incidents");
    assert_eq!(open_down(&inc), 0, "{inc:#?}");
}

/// The consistency suite on a real source (issue 60): the live Slurm lab
/// with a dcgm endpoint whose NVLink counter for gpu01 GPU 3 rises 300 a
/// second, and a node set DOWN, recorded for 40 s. The NVLink storm is an
/// incident of that GPU and the node down one of its node — derived from
/// the readings, as on the sim — and every surface reading the recording
/// (`get incidents`, `options` with its dry-run against the lab, `why`,
/// the report) gives the one analysis's answer.
fn a_moving_dcgm_endpoint_and_a_node_down_read_alike_everywhere(lab: &Lab) {
    use common::fake::{Behaviour, Fake};
    let dcgm = Fake::start(Behaviour::Rising {
        text: "# TYPE DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL counter\n\
               DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL{gpu=\"3\",UUID=\"GPU-3\",Hostname=\"gpu01\"} {n}\n\
               DCGM_FI_DEV_GPU_TEMP{gpu=\"3\",UUID=\"GPU-3\",Hostname=\"gpu01\"} 61\n",
        per_second: 300,
        since: std::time::Instant::now(),
    });
    lab.run(
        "scontrol",
        &[
            "update",
            "nodename=gpu03",
            "state=down",
            "reason=disk gone -- carol",
        ],
    );
    let file = lab.dir.path().join("storm.nsrec");
    let f = file.to_str().expect("path");
    let url = dcgm.url("/metrics");
    let (ok, said) = nightshift_on(lab, &[], &["--dcgm", &url, "record", f, "--for", "40s"]);
    assert!(ok, "{said}");
    let (ok, out) = nightshift_on(lab, &[], &["--replay", f, "get", "incidents", "-o", "json"]);
    assert!(ok, "{out}");
    let v: Value = serde_json::from_str(&out).expect("json");
    let items = v["items"].as_array().expect("items");
    assert!(
        items
            .iter()
            .any(|i| i["kind"] == "nvlink" && i["node"] == "gpu01" && i["gpu"] == 3),
        "{out}"
    );
    // The lab's slurmd answers, so slurmctld may put gpu03 back before
    // the recording ends: its going down is an incident either way.
    assert!(
        items
            .iter()
            .any(|i| i["label"] == "NODE DOWN" && i["node"] == "gpu03"),
        "{out}"
    );
    let (ok, md) = nightshift_on(lab, &[], &["report", f]);
    assert!(ok && md.contains("NVLINK on gpu01 GPU 3"), "{md}");
    let compared = common::situation::one_answer_at_the_end(lab.dir.path(), &file, 4, &|a| {
        nightshift_on(lab, &[], a)
    });
    assert!(compared >= 4, "only {compared} answers compared");
    // Back in service, whether slurmctld put it back already or not.
    let _ = lab.run_ok("scontrol", &["update", "nodename=gpu03", "state=resume"]);
}

#[test]
fn live_recommendations_the_guard_accepts_on_slurm_22_05_24_11_and_26_05() {
    if !available() {
        return;
    }
    let lab = Lab::start();
    a_node_down_is_an_incident_whoever_reads_it(&lab);
    a_moving_dcgm_endpoint_and_a_node_down_read_alike_everywhere(&lab);
    recommendations_the_guard_accepts(&lab);
    a_reservation_ahead_delays_what_runs_into_it(&lab);
    a_lowered_priority_falls_behind(&lab);
    if available_24_11() {
        let lab = Lab::start_version(Slurm::V24_11);
        recommendations_the_guard_accepts(&lab);
        a_reservation_ahead_delays_what_runs_into_it(&lab);
    }
    if available_26_05() {
        let lab = Lab::start_version(Slurm::V26_05);
        a_node_down_is_an_incident_whoever_reads_it(&lab);
        recommendations_the_guard_accepts(&lab);
        a_reservation_ahead_delays_what_runs_into_it(&lab);
    }
}

/// The autopilot on live Slurm (issue 61), with a dcgm endpoint: an Xid
/// 79 appearing in the scrape is drained and its job requeued by
/// `nightshift autopilot` as `policy:gpu-faults`, with no key pressed;
/// the same Xid on a second node, with the circuit breaker at its limit,
/// pages a real Alertmanager and nothing is sent. The time from the Xid's
/// appearance to the drain seen in Slurm is printed (the report's number;
/// the test holds it to a generous bound only).
fn the_autopilot_drains_an_xid_79_and_pages_at_the_breaker(lab: &Lab) {
    use common::fake::{Behaviour, Fake};
    let Some(am) = common::alertmanager::Alertmanager::start(lab.dir.path()) else {
        return;
    };
    let job = lab.sbatch(&["-J", "train", "-w", "gpu02", "--gres=gpu:1", "--requeue"]);
    assert!(
        wait_for(Duration::from_secs(20), || (squeue_field(lab, &job, "%T")
            == "RUNNING")
            .then_some(()))
        .is_some(),
        "{}",
        lab.run("squeue", &[])
    );
    let quiet = "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",Hostname=\"gpu02\"} 97\n\
                 DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",Hostname=\"gpu03\"} 95\n";
    let dcgm = Fake::start(Behaviour::text(200, quiet));
    let cfg = lab.dir.path().join("autopilot.toml");
    std::fs::write(
        &cfg,
        format!(
            "[slurm]\nscontrol = {:?}\n\
             [actions]\nmax_nodes_per_window = 1\nmax_partition_share_out = 0.9\n\
             [paging.alertmanager]\nurl = \"{}\"\n{}",
            lab.scontrol(),
            am.url(),
            include_str!("../config/policies.example.toml")
                .replace("mode = \"shadow\"", "mode = \"live\"")
        ),
    )
    .expect("config");
    let out = lab.dir.path().join("autopilot.out");
    let mut child = Command::new(common::bin())
        .args([
            "--source",
            "slurm",
            "--slurm-url",
            &lab.url,
            "--slurm-user",
            "root",
        ])
        .arg("--log-file")
        .arg(lab.dir.path().join("autopilot.log"))
        .arg("--audit-log")
        .arg(lab.dir.path().join("audit.jsonl"))
        .arg("--config")
        .arg(&cfg)
        .args(["--dcgm", &dcgm.url("/metrics")])
        .args(["autopilot", "--interval", "1s", "--for", "60s"])
        .env("SLURM_JWT", &lab.token)
        .env("SLURM_CONF", lab.conf())
        .stdout(std::fs::File::create(&out).expect("out"))
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .expect("autopilot");
    let said = || std::fs::read_to_string(&out).unwrap_or_default();
    assert!(
        wait_for(Duration::from_secs(20), || said()
            .contains("autopilot: 2 policies (2 live, 0 shadow)")
            .then_some(()))
        .is_some(),
        "{}",
        said()
    );
    let node_state = |n: &str| {
        lab.run("sinfo", &["-h", "-n", n, "-o", "%T"])
            .trim()
            .to_string()
    };
    let started = std::time::Instant::now();
    dcgm.set(Behaviour::text(
        200,
        format!("{quiet}DCGM_FI_DEV_XID_ERRORS{{gpu=\"0\",Hostname=\"gpu02\"}} 79\n"),
    ));
    let drained = wait_for(Duration::from_secs(20), || {
        node_state("gpu02").starts_with("drain").then_some(())
    });
    let took = started.elapsed();
    assert!(
        drained.is_some(),
        "gpu02 not drained: {}\n{}",
        node_state("gpu02"),
        said()
    );
    eprintln!(
        "autopilot on Slurm {:?}: Xid 79 in the scrape → gpu02 draining in {took:?} (endpoint interval 1 s)",
        lab.version
    );
    // Its job requeued: it restarts elsewhere (or waits to).
    assert!(
        wait_for(Duration::from_secs(20), || lab
            .run("scontrol", &["show", "job", &job])
            .contains("Restarts=1")
            .then_some(()))
        .is_some(),
        "{}\n{}",
        lab.run("scontrol", &["show", "job", &job]),
        said()
    );
    // A second Xid 79, on gpu03: the breaker (one node in 10 minutes) is at
    // its limit — a page, nothing sent.
    dcgm.set(Behaviour::text(
        200,
        format!(
            "{quiet}DCGM_FI_DEV_XID_ERRORS{{gpu=\"0\",Hostname=\"gpu02\"}} 79\n\
             DCGM_FI_DEV_XID_ERRORS{{gpu=\"0\",Hostname=\"gpu03\"}} 79\n"
        ),
    ));
    let paged = wait_for(Duration::from_secs(20), || {
        am.alerts()
            .into_iter()
            .find(|a| a["labels"]["node"] == "gpu03")
    });
    let alert = paged.unwrap_or_else(|| panic!("no page for gpu03: {}", said()));
    assert_eq!(alert["labels"]["policy"], "gpu-faults");
    assert!(
        alert["annotations"]["summary"]
            .as_str()
            .is_some_and(|s| s.contains("circuit breaker")),
        "{alert:#}"
    );
    let _ = child.kill();
    let _ = child.wait();
    let records: Vec<Value> = std::fs::read_to_string(lab.dir.path().join("audit.jsonl"))
        .expect("audit")
        .lines()
        .map(|l| serde_json::from_str(l).expect("record"))
        .collect();
    let intents: Vec<(&str, &str, &str)> = records
        .iter()
        .filter(|r| r["phase"] == "intent")
        .map(|r| {
            (
                r["operator"].as_str().unwrap_or(""),
                r["action"].as_str().unwrap_or(""),
                r["target"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        intents,
        [("policy:gpu-faults", "drain", "gpu02")],
        "{}",
        said()
    );
    assert!(
        node_state("gpu03").starts_with("idle")
            || node_state("gpu03").starts_with("mix")
            || node_state("gpu03").starts_with("alloc"),
        "gpu03 untouched: {}",
        node_state("gpu03")
    );
    // Back as it was for what runs after.
    let _ = lab.run_ok("scancel", &[&job]);
    let _ = lab.run_ok("scontrol", &["update", "nodename=gpu02", "state=resume"]);
}

#[test]
fn live_the_autopilot_on_slurm_22_05_24_11_and_26_05() {
    if !available() {
        return;
    }
    the_autopilot_drains_an_xid_79_and_pages_at_the_breaker(&Lab::start());
    if available_24_11() {
        the_autopilot_drains_an_xid_79_and_pages_at_the_breaker(&Lab::start_version(Slurm::V24_11));
    }
    if available_26_05() {
        the_autopilot_drains_an_xid_79_and_pages_at_the_breaker(&Lab::start_version(Slurm::V26_05));
    }
}
