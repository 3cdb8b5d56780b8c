//! The command line. Global options choose the source; subcommands print
//! state for scripts. Later commands (`why`, `blast`, actions) slot in here.

use clap::{Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

#[derive(Debug, Parser)]
#[command(
    name = "nightshift",
    version = crate::build_info::VERSION,
    about = "A terminal console for the engineer on call for a GPU cluster",
    long_about = "A terminal console for the engineer on call for a GPU cluster.\n\n\
        With no command it opens the TUI; with no source it shows the built-in \
        simulated cluster."
)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// Under their own heading in every command's help, after the command's
/// own options (issue 63: they came first, mixed in).
#[derive(Debug, clap::Args, Default)]
#[command(next_help_heading = "Global options")]
pub struct GlobalArgs {
    /// Where the cluster state comes from [default: sim]
    #[arg(long, global = true, value_enum)]
    pub source: Option<SourceKind>,
    /// TOML configuration file (see config/nightshift.example.toml)
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// More detail in the log: -v debug, -vv trace (NIGHTSHIFT_LOG, when set, wins)
    #[arg(short = 'v', long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Only warnings and errors in the log (NIGHTSHIFT_LOG, when set, wins)
    #[arg(short = 'q', long, global = true, conflicts_with = "verbose")]
    pub quiet: bool,
    /// Bind no key and accept no command that changes the cluster
    #[arg(long, global = true)]
    pub read_only: bool,
    /// Leave the mouse to the terminal (its text selection): no clicks or
    /// wheel in the console
    #[arg(long, global = true)]
    pub no_mouse: bool,
    /// Where logs go [default: $XDG_STATE_HOME/nightshift/nightshift.log]
    #[arg(long, global = true, value_name = "FILE")]
    pub log_file: Option<PathBuf>,
    /// Simulated cluster: random seed [default: 1]
    #[arg(long, global = true)]
    pub seed: Option<u64>,
    /// Simulated cluster: number of nodes, 8 GPUs each, at least 16 [default: 16]
    #[arg(long, global = true)]
    pub nodes: Option<usize>,
    /// Simulated cluster: total jobs at start-up, the rest a pending backlog
    #[arg(long, global = true)]
    pub jobs: Option<usize>,
    /// Simulated cluster: sim seconds per wall-clock second [default: 1]
    #[arg(long, global = true)]
    pub speed: Option<f64>,
    /// Slurm: slurmrestd's address, http://HOST:6820 or unix:/path/to/slurmrestd.sock
    #[arg(long, global = true, value_name = "URL")]
    pub slurm_url: Option<String>,
    /// Slurm: user name for X-SLURM-USER-NAME [default: $USER]
    #[arg(long, global = true, value_name = "NAME")]
    pub slurm_user: Option<String>,
    /// Slurm: file holding the JWT [default: $SLURM_JWT]
    #[arg(long, global = true, value_name = "FILE")]
    pub slurm_token_file: Option<PathBuf>,
    /// Slurm: REST API version to speak, e.g. v0.0.40 [default: the newest both know]
    #[arg(long, global = true, value_name = "VERSION")]
    pub slurm_api: Option<String>,
    /// Kubernetes: kubeconfig file [default: $KUBECONFIG, ~/.kube/config, in-cluster]
    #[arg(long, global = true, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// A cluster of [[clusters]] in the config; else (Kubernetes) a kubeconfig context [default: its current context]
    #[arg(long, global = true, value_name = "NAME")]
    pub context: Option<String>,
    /// Every cluster of [[clusters]] in the config, in one console (and `get` for each)
    #[arg(long, global = true, conflicts_with = "context")]
    pub all: bool,
    /// Kubernetes: only this namespace's pods and workloads [default: all]
    #[arg(long, short = 'n', global = true, value_name = "NS")]
    pub namespace: Option<String>,
    /// Node endpoint /metrics to scrape (dcgm-exporter, nightshift agent); repeatable
    #[arg(long, global = true, value_name = "URL")]
    pub dcgm: Vec<String>,
    /// Prometheus node exporter /metrics to scrape for the nodes' InfiniBand ports; repeatable
    #[arg(long, global = true, value_name = "URL")]
    pub node_exporter: Vec<String>,
    /// A Prometheus server to query for the DCGM metrics (and node exporters' InfiniBand ports)
    #[arg(long, global = true, value_name = "URL")]
    pub prometheus: Option<String>,
    /// Up to this many GPUs on the Prometheus server, read every GPU's series each refresh; above, per-node aggregates [default: 4096]
    #[arg(long, global = true, value_name = "N")]
    pub prometheus_every_gpu_max: Option<u32>,
    /// Where the audit log goes [default: $XDG_STATE_HOME/nightshift/audit.jsonl]
    #[arg(long, global = true, value_name = "FILE")]
    pub audit_log: Option<PathBuf>,
    /// Simulated cluster, commands that print: run this many sim seconds first
    #[arg(long, global = true, value_name = "S")]
    pub sim_seconds: Option<u64>,
    /// Play a recording (nightshift record) instead of a live source;
    /// actions are off
    #[arg(long, global = true, value_name = "FILE")]
    pub replay: Option<PathBuf>,
    /// With --replay, for commands that print: the state at this time
    /// (HH:MM[:SS] UTC, +DURATION from the start, or Unix seconds)
    /// [default: the end]
    #[arg(long, global = true, value_name = "TIME", requires = "replay")]
    pub at: Option<String>,
    /// The console: record what the source delivers (and the actions
    /// taken) to this file as it runs
    #[arg(long, global = true, value_name = "FILE", conflicts_with = "replay")]
    pub record: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SourceKind {
    /// The built-in simulated cluster
    Sim,
    /// Slurm through slurmrestd
    Slurm,
    /// Kubernetes (nodes, pods, events, Kueue, Volcano) through its API server
    Kube,
    /// No scheduler: node endpoints only (--dcgm, --prometheus)
    None,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Open the TUI (the default)
    Tui,
    /// Print the current state and exit
    Get(GetArgs),
    /// Why a job waits: causes with numbers, estimated start, what would help
    Why(JobArgs),
    /// The blast radius of an action, before taking it
    Blast(BlastArgs),
    /// Remediation options for a node or a job, side by side, one recommended
    Options(OptionsArgs),
    /// The night's post-mortem from a recording: incidents, jobs hit,
    /// GPU-hours lost, actions and their timing, what is still open
    Report(ReportArgs),
    /// Record the source to FILE: the sim for --sim-seconds of its time
    /// (no terminal needed), a live source until ctrl-c or --for
    Record(RecordArgs),
    /// Checkpoint restore time of a job, or of a what-if
    Restore(RestoreArgs),
    /// Drain a node: no new work, its jobs (whole gangs) requeued or killed
    Drain {
        /// The node, as the scheduler names it
        node: String,
        /// Why, recorded in the scheduler and the audit log
        #[arg(long)]
        reason: String,
        /// Requeue the node's jobs
        #[arg(long, conflicts_with = "kill")]
        requeue: bool,
        /// Kill the node's jobs
        /// Cancel the jobs instead of requeueing them
        #[arg(long)]
        kill: bool,
        /// Cordon it now, and drain it once each of its jobs has written its
        /// next checkpoint: the drain is armed, and `nightshift follow` (or
        /// the console) sends it then, through the guard again
        #[arg(long, requires = "requeue")]
        after_checkpoint: bool,
        #[command(flatten)]
        act: ActArgs,
    },
    /// Cordon a node: no new work, running jobs continue
    Cordon {
        /// The node, as the scheduler names it
        node: String,
        #[arg(long, default_value = "cordoned by nightshift")]
        reason: String,
        #[command(flatten)]
        act: ActArgs,
    },
    /// Put a cordoned or drained node back in service
    Resume {
        /// The node, as the scheduler names it
        node: String,
        #[command(flatten)]
        act: ActArgs,
    },
    /// Check a node that is out of service before it takes work again:
    /// the site's check ([validate] command, DCGM diagnostics) runs on it
    /// through the scheduler; resumed on a pass, kept out with the check's
    /// failure as its reason otherwise
    Validate {
        /// The node, as the scheduler names it
        node: String,
        /// DCGM diagnostics level: 1 after a GPU reset (seconds), 2 after a
        /// reboot or an uncorrectable error (about two minutes), 3 or 4 for
        /// longer checks [default: 2]
        #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u8).range(1..=4))]
        level: u8,
        #[command(flatten)]
        act: ActArgs,
    },
    /// Change the reason of a node that is out of service (drained, cordoned)
    Reason {
        /// The node, as the scheduler names it
        node: String,
        /// The new reason, as Slurm shows it (sinfo -R)
        reason: String,
        #[command(flatten)]
        act: ActArgs,
    },
    /// Requeue a running job (and its gang)
    Requeue {
        /// The job id (an array task as 1234_5)
        job: String,
        /// Once it has written its next checkpoint: the requeue is armed,
        /// and `nightshift follow` (or the console) sends it then, through
        /// the guard again
        #[arg(long)]
        after_checkpoint: bool,
        #[command(flatten)]
        act: ActArgs,
    },
    /// Preempt a running job (and its gang); --grace: signal it to
    /// checkpoint first (SIGUSR1), requeue it after its checkpoint or the
    /// grace period
    Preempt {
        /// The job id (an array task as 1234_5)
        job: String,
        /// e.g. 5m
        #[arg(long, value_name = "DURATION", conflicts_with = "after_checkpoint")]
        grace: Option<String>,
        /// Once it has written its next checkpoint (armed, as requeue's)
        #[arg(long)]
        after_checkpoint: bool,
        #[command(flatten)]
        act: ActArgs,
    },
    /// Set a job's priority to a value, or `top` of its partition
    Priority {
        /// The job id (an array task as 1234_5)
        job: String,
        /// The new priority: a number, or `top` (above every job of its partition)
        value: String,
        #[command(flatten)]
        act: ActArgs,
    },
    /// Hold a pending job
    Hold {
        /// The job id (an array task as 1234_5)
        job: String,
        #[command(flatten)]
        act: ActArgs,
    },
    /// Release a held job
    Release {
        /// The job id (an array task as 1234_5)
        job: String,
        #[command(flatten)]
        act: ActArgs,
    },
    /// Why nightshift sees nothing, or less than it should: the source,
    /// its token, scontrol, each endpoint and the GPU families it lacks,
    /// the audit log, the terminal — one line each, with what to do. Exits
    /// non-zero when something blinds it
    Doctor {
        #[arg(short, long, value_enum, default_value_t = Format::Table)]
        output: Format,
    },
    /// Print the shell completions for SHELL (bash, zsh, fish, elvish,
    /// powershell), e.g. `nightshift completions bash >
    /// ~/.local/share/bash-completion/completions/nightshift`
    Completions { shell: clap_complete::Shell },
    /// Print the manual page (roff), e.g. `nightshift man >
    /// ~/.local/share/man/man1/nightshift.1`
    Man,
    /// Run the node agent: NVML readings served as dcgm-exporter metrics, events, health
    Agent {
        /// Address to listen on
        #[arg(long, default_value = "0.0.0.0:9400")]
        listen: std::net::SocketAddr,
        /// Seconds between NVML reads
        #[arg(long, default_value_t = 5.0)]
        interval: f64,
        /// Serve readings recorded in a JSON file instead of NVML (no GPU needed)
        #[arg(long, value_name = "FILE")]
        recorded: Option<PathBuf>,
        /// Host name in the metrics' Hostname label [default: this machine's]
        #[arg(long)]
        host: Option<String>,
        /// The NVML library to load [default: libnvidia-ml.so.1 where the
        /// system's loader finds it] (a driver installed off the usual path)
        #[arg(long, value_name = "PATH")]
        nvml_lib: Option<PathBuf>,
        /// Where sysfs is: the node's InfiniBand ports are read from
        /// PATH/class/infiniband and served under the node exporter's names
        #[arg(long, value_name = "PATH", default_value = "/sys")]
        sysfs: PathBuf,
    },
    /// Show the audit log of actions
    Audit {
        #[arg(short, long, value_enum, default_value_t = Format::Table)]
        output: Format,
    },
    /// The steps armed to be sent later (drain --after-checkpoint), with
    /// what each waits for
    Armed {
        #[arg(short, long, value_enum, default_value_t = Format::Table)]
        output: Format,
    },
    /// Cancel an armed step (its id, or a unique start of it)
    Disarm {
        /// The armed step's id as `armed` lists it, or a unique start of it
        id: String,
    },
    /// Send the armed steps when they are due, without a terminal (under
    /// tmux or systemd): each through the guard, its rules checked again
    /// then; ends when nothing is left armed
    Follow {
        /// How often the cluster is read
        #[arg(long, default_value = "5s", value_name = "DURATION")]
        interval: String,
        /// Stop after this long even if steps are still armed
        #[arg(long = "for", value_name = "DURATION")]
        duration: Option<String>,
    },
    /// Carry out the site's [[policy]]s without a terminal: each incident
    /// a policy takes is remedied through the guard (live) or said
    /// (shadow), a person is paged only for what a policy cannot decide,
    /// and the armed steps are sent when due (as `follow`)
    Autopilot(AutopilotArgs),
}

/// `nightshift autopilot`.
#[derive(Debug, clap::Args)]
pub struct AutopilotArgs {
    #[command(subcommand)]
    pub what: Option<AutopilotCommand>,
    /// How often the cluster is read
    #[arg(long, default_value = "5s", value_name = "DURATION")]
    pub interval: String,
    /// Stop after this long
    #[arg(long = "for", value_name = "DURATION")]
    pub duration: Option<String>,
    /// Every policy in shadow mode: say what it would do, send nothing
    /// (with --replay FILE: beside what the people did)
    #[arg(long)]
    pub shadow: bool,
}

/// `nightshift autopilot pause|resume|status`.
#[derive(Debug, clap::Subcommand)]
pub enum AutopilotCommand {
    /// Pause every autopilot on this audit log (recorded with who paused it)
    Pause {
        /// Why, in the audit log and on every console
        #[arg(long, default_value = "")]
        reason: String,
    },
    /// Resume the autopilot
    Resume,
    /// The policies, their modes, and whether the autopilot is paused
    Status,
}

/// Options every action takes.
#[derive(Debug, clap::Args)]
pub struct ActArgs {
    /// Destructive actions: the node name or job id, typed again
    #[arg(long, value_name = "TARGET")]
    pub confirm: Option<String>,
    /// Print the preview and send nothing
    #[arg(long)]
    pub dry_run: bool,
    /// Override the circuit breaker
    #[arg(long)]
    pub force: bool,
    /// Output format
    #[arg(short, long, value_enum, default_value_t = Format::Table)]
    pub output: Format,
}

#[derive(Debug, clap::Args)]
pub struct JobArgs {
    /// Job id
    pub job: String,
    /// Output format
    #[arg(short, long, value_enum, default_value_t = Format::Table)]
    pub output: Format,
}

#[derive(Debug, clap::Args)]
pub struct ReportArgs {
    /// A recording (nightshift record, or the console's --record)
    pub file: PathBuf,
    /// Output format
    #[arg(short, long, value_enum, default_value_t = ReportFormat::Markdown)]
    pub output: ReportFormat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReportFormat {
    Markdown,
    Json,
}

#[derive(Debug, clap::Args)]
pub struct RecordArgs {
    /// The recording to write (never overwritten)
    pub file: PathBuf,
    /// A live source: stop after this long (e.g. 8h) [default: ctrl-c]
    #[arg(long = "for", value_name = "DURATION")]
    pub duration: Option<String>,
}

#[derive(Debug, clap::Args)]
pub struct OptionsArgs {
    /// A node name, or a job id (its preemption)
    pub target: String,
    /// For a job: the grace period of soft preemption [default: long
    /// enough for its checkpoint write]
    #[arg(long, value_name = "DURATION")]
    pub grace: Option<String>,
    /// Output format
    #[arg(short, long, value_enum, default_value_t = Format::Table)]
    pub output: Format,
}

#[derive(Debug, clap::Args)]
pub struct BlastArgs {
    #[command(subcommand)]
    pub action: BlastAction,
    /// Output format
    #[arg(short, long, value_enum, default_value_t = Format::Table, global = true)]
    pub output: Format,
}

#[derive(Debug, Subcommand)]
pub enum BlastAction {
    /// Drain a node (its jobs are requeued; --kill to cancel them instead)
    Drain {
        /// The node, as the scheduler names it
        node: String,
        /// Cancel the jobs instead of requeueing them
        #[arg(long)]
        kill: bool,
    },
    /// Take a failure domain out (a switch, a rack: every node under it
    /// drained; --kill to cancel their jobs instead of requeueing them)
    Domain {
        /// The failure domain: a switch or a rack, as `get nodes` names it
        name: String,
        /// Cancel the jobs instead of requeueing them
        #[arg(long)]
        kill: bool,
    },
    /// Requeue a running job (and its gang)
    Requeue {
        /// The job id (an array task as 1234_5)
        job: String,
    },
    /// Preempt a running job (requeued or cancelled per the site's PreemptMode)
    Preempt {
        /// The job id (an array task as 1234_5)
        job: String,
        /// Soft preemption: signal the job to checkpoint and stop it this
        /// long after (e.g. 5m); lost work is then the checkpoint write
        #[arg(long, value_name = "DURATION")]
        grace: Option<String>,
    },
    /// Change a pending job's priority
    Priority {
        /// The job id (an array task as 1234_5)
        job: String,
        /// The new priority
        value: u64,
    },
}

#[derive(Debug, clap::Args)]
pub struct RestoreArgs {
    /// Job id (omit for the what-if form)
    pub job: Option<String>,
    /// What-if: checkpoint size, e.g. 1.2TB, 800GiB
    #[arg(long, value_name = "SIZE", conflicts_with = "job")]
    pub state_bytes: Option<String>,
    /// What-if: model parameters instead of a size, e.g. 70B (× bytes per parameter)
    #[arg(long, value_name = "COUNT", conflicts_with_all = ["job", "state_bytes"])]
    pub params: Option<String>,
    /// Storage read bandwidth, e.g. 10GB/s [default: the site's]
    #[arg(long, value_name = "RATE")]
    pub read_bw: Option<String>,
    /// Nodes reading in parallel [default: the job's, or 1] (`--nodes` is
    /// the simulated cluster's size, before or after the subcommand)
    #[arg(long, value_name = "N")]
    pub read_nodes: Option<u32>,
    /// Per-node read bandwidth, e.g. 25GB/s [default: the site's]
    #[arg(long, value_name = "RATE")]
    pub node_bw: Option<String>,
    /// Output format
    #[arg(short, long, value_enum, default_value_t = Format::Table)]
    pub output: Format,
}

#[derive(Debug, clap::Args)]
pub struct GetArgs {
    /// What to print
    #[arg(value_enum)]
    pub what: GetWhat,
    /// kpis: the window the figures cover, up to now (or --at)
    #[arg(long, value_name = "DURATION", default_value = "1h")]
    pub window: String,
    /// Output format
    #[arg(short, long, value_enum, default_value_t = Format::Table)]
    pub output: Format,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum GetWhat {
    Nodes,
    Gpus,
    Jobs,
    Incidents,
    /// The scheduler's health numbers over --window (needs history: a
    /// recording, --sim-seconds, or the console's `:kpis`)
    Kpis,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Table,
    Json,
}
