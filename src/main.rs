use clap::Parser;
use nightshift::cli::{BlastAction, Cli, Command, Format, RestoreArgs};
use nightshift::config::{FileConfig, Selection, Settings};
use nightshift::engine::analysis::Base;
use nightshift::engine::blast::{Target, blast};
use nightshift::engine::memory::Moment;
use nightshift::engine::restore::{RestoreInput, compute, restore};
use nightshift::engine::why::why;
use nightshift::engine::{Provenance, units};
use nightshift::model::Cluster;
use nightshift::one_shot::Wanted;
use nightshift::{output, report};
use serde::Serialize;
use std::process::ExitCode;

// glibc's malloc gave each of the runtime's threads an arena and kept what
// they freed: the console at 10,000 nodes sat at 620 MB resident where
// MALLOC_ARENA_MAX=2 gave 470 MB (docs/performance.md).
// `--features system-alloc` keeps glibc's, for heaptrack.
#[cfg(not(feature = "system-alloc"))]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = run(cli);
    // A terminating signal that came while an action was in flight: its
    // outcome is written; exit as the signal asked.
    let sig = nightshift::action_commands::INTERRUPTED.load(std::sync::atomic::Ordering::SeqCst);
    if sig != 0 {
        if let Err(e) = &result {
            eprintln!("nightshift: {}", nightshift::text::sanitize(e));
        }
        return ExitCode::from((128 + sig).clamp(0, 255) as u8);
    }
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // Errors may quote a source: never raw to the terminal.
            eprintln!("nightshift: {}", nightshift::text::sanitize(&e));
            ExitCode::FAILURE
        }
    }
}

/// The configuration file (`--config`, else `NIGHTSHIFT_CONFIG`, else
/// the user's config directory's) and the command line, as one
/// cluster's settings or every cluster's (`--all`).
fn selection(cli: &mut Cli) -> Result<Selection, String> {
    // Where users put it when `--config` is not given (issue 63).
    if cli.global.config.is_none() {
        cli.global.config = FileConfig::default_path();
    }
    let file = match &cli.global.config {
        Some(path) => FileConfig::load(path)?,
        None => FileConfig::default(),
    };
    Ok(Settings::select(&cli.global, file)?)
}

fn run(mut cli: Cli) -> Result<(), String> {
    // Read nothing, connect to nothing: the program describes itself.
    match &cli.command {
        Some(Command::Completions { shell }) => return completions(*shell),
        Some(Command::Man) => return man_page(),
        _ => {}
    }
    let sim_nodes_given = cli.global.nodes.is_some();
    let settings = match selection(&mut cli)? {
        Selection::One(s) => *s,
        Selection::All(all) => return fleet(cli.command, all),
    };
    nightshift::limits::set(settings.limits);
    // A log that cannot be opened must not stop the console; say so once
    // before the TUI takes the terminal.
    if let Err(e) = nightshift::logging::init(settings.log_file.as_deref(), settings.log_level) {
        eprintln!(
            "nightshift: logging off: {}",
            nightshift::text::sanitize(&e.to_string())
        );
    }
    match cli.command {
        // A dumb terminal cannot draw a full-screen console: plain text.
        None | Some(Command::Tui) if std::env::var("TERM").is_ok_and(|t| t == "dumb") => {
            let m = snapshot(&settings)?;
            let (c, b) = (&m.cluster, base(&m, &settings));
            nightshift::out!("{}", output::plain_overview(c, &b));
            Ok(())
        }
        None | Some(Command::Tui) => console(settings),
        Some(Command::Get(args)) if args.what == nightshift::cli::GetWhat::Kpis => {
            let window = units::parse_duration(&args.window)? as i64;
            let k = nightshift::recording_commands::kpis(&settings, window)?;
            emit(args.output, &k, report::kpis)
        }
        Some(Command::Get(args)) => {
            let m = snapshot_for(&settings, wanted_by(args.what))?;
            Ok(output::print(
                &m.cluster,
                &base(&m, &settings),
                args.what,
                args.output,
            )?)
        }
        Some(Command::Why(args)) => {
            let m = snapshot(&settings)?;
            let j = job_index(&m.cluster, &args.job)?;
            let base = base(&m, &settings);
            let w = why(&m.cluster, j, &base).ok_or_else(|| format!("no job {}", args.job))?;
            emit(args.output, &w, report::why)
        }
        Some(Command::Blast(args)) => blast_command(&settings, args),
        Some(Command::Restore(args)) => {
            // The what-if reads no cluster: a --nodes there was meant for
            // the nodes reading in parallel.
            if args.job.is_none() && sim_nodes_given {
                return Err(
                    "restore's what-if reads no cluster: --nodes sets the simulated cluster's size; the nodes reading in parallel are --read-nodes N".into(),
                );
            }
            restore_command(&settings, &args)
        }
        Some(Command::Report(args)) => report_command(&settings, &args),
        Some(Command::Record(args)) => Ok(nightshift::recording_commands::record(
            &settings,
            &args.file,
            args.duration
                .as_deref()
                .map(units::parse_duration)
                .transpose()?,
        )?),
        Some(Command::Options(args)) => Ok(nightshift::action_commands::options(
            &settings,
            &args.target,
            args.grace
                .as_deref()
                .map(units::parse_duration)
                .transpose()?,
            args.output,
        )?),
        Some(Command::Doctor { output }) => doctor(&[settings], output),
        Some(Command::Autopilot(args)) => autopilot(&settings, args),
        Some(Command::Audit { output }) => {
            Ok(nightshift::action_commands::show(&settings, output)?)
        }
        Some(
            cmd @ (Command::Armed { .. }
            | Command::Disarm { .. }
            | Command::Follow { .. }
            | Command::Drain {
                after_checkpoint: true,
                ..
            }
            | Command::Requeue {
                after_checkpoint: true,
                ..
            }
            | Command::Preempt {
                after_checkpoint: true,
                ..
            }),
        ) => follow_command(&settings, cmd),
        #[cfg(feature = "agent")]
        Some(Command::Agent {
            listen,
            interval,
            recorded,
            host,
            nvml_lib,
            sysfs,
        }) => agent(listen, interval, recorded, host, (nvml_lib, sysfs)),
        #[cfg(not(feature = "agent"))]
        Some(Command::Agent { .. }) => {
            Err("this nightshift was built without the node agent (cargo feature `agent`)".into())
        }
        Some(cmd) => Ok(nightshift::action_commands::run(&settings, &cmd)?),
    }
}

/// `nightshift doctor`: the checks of each cluster (one, or every
/// `[[clusters]]` entry with --all); an error when one fails.
fn doctor(all: &[Settings], format: Format) -> Result<(), String> {
    use nightshift::doctor::{Verdict, run, table};
    let checks: Vec<(String, Vec<nightshift::doctor::Check>)> = all
        .iter()
        .map(|s| (s.cluster.clone().unwrap_or_default(), run(s)))
        .collect();
    match format {
        Format::Json if all.len() == 1 => {
            nightshift::outln!("{}", nightshift::text::json_pretty(&checks[0].1)?)
        }
        Format::Json => {
            let by: std::collections::BTreeMap<&str, &Vec<_>> =
                checks.iter().map(|(n, c)| (n.as_str(), c)).collect();
            nightshift::outln!("{}", nightshift::text::json_pretty(&by)?)
        }
        Format::Table => {
            for (name, c) in &checks {
                if all.len() > 1 {
                    nightshift::outln!("cluster {}", nightshift::text::sanitize(name));
                }
                nightshift::out!("{}", table(c));
            }
        }
    }
    let failed = checks
        .iter()
        .flat_map(|(_, c)| c)
        .filter(|c| c.verdict == Verdict::Fail)
        .count();
    match failed {
        0 => Ok(()),
        n => Err(format!(
            "{n} check(s) failed: nightshift is blind or cannot act until they are fixed"
        )),
    }
}

/// `nightshift completions SHELL`: generated from the command line's own
/// definition, so it never lags behind it.
fn completions(shell: clap_complete::Shell) -> Result<(), String> {
    use clap::CommandFactory;
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "nightshift", &mut out);
    nightshift::out!("{}", String::from_utf8_lossy(&out));
    Ok(())
}

/// `nightshift man`: the manual page, from the same definition; each
/// subcommand is a section of it.
fn man_page() -> Result<(), String> {
    use clap::CommandFactory;
    let cmd = Cli::command();
    let mut out = Vec::new();
    clap_mangen::Man::new(cmd.clone())
        .render(&mut out)
        .map_err(|e| format!("cannot write the manual page: {e}"))?;
    man_subcommands(&cmd, "nightshift", &mut out)?;
    out.extend_from_slice(MAN_TAIL.as_bytes());
    // The configuration's keys, each with its words, as the example file
    // documents them.
    out.extend_from_slice(b".SH CONFIGURATION\nEvery key, with its default, as config/nightshift.example.toml gives it:\n.nf\n");
    out.extend_from_slice(roff_text(include_str!("../config/nightshift.example.toml")).as_bytes());
    out.extend_from_slice(b"\n.fi\n");
    nightshift::out!("{}", String::from_utf8_lossy(&out));
    Ok(())
}

/// Each subcommand of `cmd` (and theirs: `blast drain`), its words and
/// its own options and arguments under its own heading.
fn man_subcommands(cmd: &clap::Command, path: &str, out: &mut Vec<u8>) -> Result<(), String> {
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("{path} {}", sub.get_name());
        let about = sub
            .get_long_about()
            .or(sub.get_about())
            .map(ToString::to_string)
            .unwrap_or_default();
        out.extend_from_slice(format!(".SH \"{}\"\n", name.to_uppercase()).as_bytes());
        out.extend_from_slice(format!("{}\n", roff_text(&about)).as_bytes());
        // Its own arguments, not the global ones every command takes.
        let own = sub
            .clone()
            .mut_args(|a| if a.is_global_set() { a.hide(true) } else { a });
        // Its arguments, each with its words.
        let positionals: Vec<&clap::Arg> = sub.get_positionals().collect();
        if !positionals.is_empty() {
            out.extend_from_slice(b".SS Arguments\n");
            for a in positionals {
                let name = a.get_id().as_str().to_uppercase();
                let help = a.get_help().map(ToString::to_string).unwrap_or_default();
                out.extend_from_slice(format!(".TP\n<{name}>\n{}\n", roff_text(&help)).as_bytes());
            }
        }
        let mut body = Vec::new();
        clap_mangen::Man::new(own)
            .render_options_section(&mut body)
            .map_err(|e| format!("cannot write the manual page: {e}"))?;
        out.extend_from_slice(
            &String::from_utf8_lossy(&body)
                .replacen(".SH OPTIONS", ".SS Options", 1)
                .into_bytes(),
        );
        man_subcommands(sub, &name, out)?;
    }
    Ok(())
}

/// The manual's ENVIRONMENT, FILES and EXIT STATUS.
const MAN_TAIL: &str = r#".SH ENVIRONMENT
.TP
NIGHTSHIFT_CONFIG
The configuration file to read when --config is not given.
.TP
XDG_CONFIG_HOME
Where the configuration is looked for: $XDG_CONFIG_HOME/nightshift/config.toml, else ~/.config/nightshift/config.toml.
.TP
XDG_STATE_HOME
Where the log, the audit log and the key that seals armed steps go: $XDG_STATE_HOME/nightshift/, else ~/.local/state/nightshift/.
.TP
NIGHTSHIFT_LOG
The log's filter (e.g. debug, nightshift=trace); wins over -v and -q.
.TP
SLURM_JWT, SLURM_CONF
slurmrestd's token, and the Slurm configuration scontrol reads.
.TP
KUBECONFIG
The kubeconfig, as kubectl reads it.
.TP
SSL_CERT_FILE, SSL_CERT_DIR
The CA certificates HTTPS sources are checked against, where the system has none.
.TP
NO_COLOR, TERM
No colours; TERM=dumb prints the overview as plain text.
.SH FILES
.TP
~/.config/nightshift/config.toml
The configuration (see CONFIGURATION).
.TP
~/.local/state/nightshift/nightshift.log
The log, rotated at 10 MB (three old files kept).
.TP
~/.local/state/nightshift/audit.jsonl
The audit log of every action ([actions] audit_log), never truncated; refused when another user owns it or can write it.
.TP
~/.local/state/nightshift/armed.key
The key that seals armed steps (mode 0600; [actions] armed_key for a site's).
.SH EXIT STATUS
.TP
0
Done.
.TP
1
An error, or a refusal (the guard's, the circuit breaker's, read-only): nothing was sent, and the line says why.
.TP
2
A usage error.
.TP
141
Standard output was closed (| head).
.TP
128 + N
Signal N came during an action; its outcome was written first.
"#;

/// Text as roff reads it: a leading dot or quote is escaped.
fn roff_text(s: &str) -> String {
    s.lines()
        .map(|l| match l.chars().next() {
            Some('.' | '\'') => format!("\\&{l}"),
            _ => l.replace('\\', "\\e"),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The armed follow-ups' commands (issue 29): arm, list, cancel, follow.
fn follow_command(settings: &Settings, cmd: Command) -> Result<(), String> {
    use nightshift::follow_commands as follow;
    match cmd {
        Command::Armed { output } => Ok(follow::list(settings, output)?),
        Command::Disarm { id } => Ok(follow::disarm(settings, &id)?),
        Command::Follow { interval, duration } => Ok(follow::run(
            settings,
            std::time::Duration::from_secs(units::parse_duration(&interval)?.max(1)),
            duration
                .as_deref()
                .map(units::parse_duration)
                .transpose()?
                .map(std::time::Duration::from_secs),
        )?),
        cmd @ Command::Drain { .. } => Ok(follow::arm_drain(settings, &cmd)?),
        cmd => Ok(follow::arm_job(settings, &cmd)?),
    }
}

/// `nightshift autopilot [pause|resume|status]` (issue 61).
fn autopilot(settings: &Settings, args: nightshift::cli::AutopilotArgs) -> Result<(), String> {
    use nightshift::autopilot_commands as ap;
    use nightshift::cli::AutopilotCommand;
    match args.what {
        Some(AutopilotCommand::Pause { reason }) => Ok(ap::pause(settings, true, &reason)?),
        Some(AutopilotCommand::Resume) => Ok(ap::pause(settings, false, "")?),
        Some(AutopilotCommand::Status) => Ok(ap::status(settings)?),
        None => Ok(ap::run(
            settings,
            &ap::Run {
                interval: std::time::Duration::from_secs(
                    units::parse_duration(&args.interval)?.max(1),
                ),
                until: args
                    .duration
                    .as_deref()
                    .map(units::parse_duration)
                    .transpose()?
                    .map(std::time::Duration::from_secs),
                shadow: args.shadow,
            },
        )?),
    }
}

/// The console on the terminal, on a runtime of its own.
/// `--all`: the console over every cluster, or `get` for each.
fn fleet(command: Option<Command>, all: Vec<Settings>) -> Result<(), String> {
    let Some(first) = all.first() else {
        return Err("--all: no cluster in [[clusters]]".into());
    };
    nightshift::limits::set(first.limits);
    if let Err(e) = nightshift::logging::init(first.log_file.as_deref(), first.log_level) {
        eprintln!(
            "nightshift: logging off: {}",
            nightshift::text::sanitize(&e.to_string())
        );
    }
    match command {
        None | Some(Command::Tui) => on_console_runtime(nightshift::fleet_tui::run(all)),
        Some(Command::Doctor { output }) => doctor(&all, output),
        Some(Command::Get(args)) if args.what != nightshift::cli::GetWhat::Kpis => {
            // Each cluster answers on its own: one that cannot is its
            // error, beside the others' answers.
            let answers: Vec<(String, Result<String, String>)> = all
                .iter()
                .map(|s| {
                    let name = s.cluster.clone().unwrap_or_default();
                    let answer = snapshot(s).and_then(|m| {
                        output::render(&m.cluster, &base(&m, s), args.what, args.output)
                            .map_err(|e| e.to_string())
                    });
                    (name, answer)
                })
                .collect();
            nightshift::out!("{}", output::fleet(&answers, args.output)?);
            if answers.iter().all(|(_, a)| a.is_err()) {
                return Err("every cluster failed".into());
            }
            Ok(())
        }
        Some(_) => Err(
            "--all opens the console over every cluster, or runs `get` for each; for other commands pick one with --context NAME"
                .into(),
        ),
    }
}

fn console(settings: Settings) -> Result<(), String> {
    on_console_runtime(nightshift::tui::run(settings))
}

/// Runs a console on its own runtime.
fn on_console_runtime(
    console: impl std::future::Future<Output = Result<(), nightshift::error::CommandError>>,
) -> Result<(), String> {
    console_holds_less_memory();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))?;
    let result = rt.block_on(console);
    // Quitting never waits for a worker still busy with a big merge
    // or a hung request: the terminal is restored already.
    rt.shutdown_timeout(std::time::Duration::from_millis(500));
    Ok(result?)
}

/// The console gives freed memory back to the system at once, where
/// mimalloc v3 waits a second by default: a console that stays open all night
/// holds less (at 10,000 nodes, 239–268 MB resident against 274–303 MB,
/// the same CPU; docs/performance.md). Only the console: the one-shots and
/// `report` free and take big buffers in bursts, where purging at once
/// would give the pages back only to zero them again. A user's own
/// `MIMALLOC_PURGE_DELAY` is kept.
///
/// It also takes no transparent huge pages (`alloc::no_huge_pages`).
fn console_holds_less_memory() {
    #[cfg(not(feature = "system-alloc"))]
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: sets one of mimalloc's options, which it reads on each
        // purge; nothing else is touched.
        unsafe { libmimalloc_sys::mi_option_set(nightshift::alloc::PURGE_DELAY, 0) };
    }
    if nightshift::alloc::no_huge_pages() == Some(false) {
        tracing::debug!("the kernel did not turn transparent huge pages off");
    }
}

/// `nightshift blast …`: what an action would cost.
fn blast_command(settings: &Settings, args: nightshift::cli::BlastArgs) -> Result<(), String> {
    let m = snapshot(settings)?;
    let c = &m.cluster;
    let target = match args.action {
        BlastAction::Domain { name, kill } => {
            let b = nightshift::engine::blast::blast_domain(
                c,
                &base(&m, settings),
                &name,
                !kill,
                &settings.site,
            )?;
            return emit(args.output, &b, report::blast);
        }
        BlastAction::Drain { node, kill } => Target::Drain {
            reason: String::new(),
            node,
            requeue: !kill,
        },
        BlastAction::Requeue { job } => Target::Requeue { job },
        BlastAction::Preempt { job, grace } => Target::Preempt {
            job,
            grace_s: grace.as_deref().map(units::parse_duration).transpose()?,
        },
        BlastAction::Priority { job, value } => Target::Priority { job, value },
    };
    let b = blast(c, &base(&m, settings), &target, &settings.site)?;
    emit(args.output, &b, report::blast)
}

/// `nightshift report FILE`: the night of a recording.
fn report_command(settings: &Settings, args: &nightshift::cli::ReportArgs) -> Result<(), String> {
    // One pass over the file: its damage is known once it is read.
    let stream = nightshift::recording::stream::Stream::open(&args.file)?;
    let r = nightshift::postmortem::report(stream, &settings.site, &settings.xid_catalog)?;
    for w in &r.damage {
        nightshift::text::warn(w);
    }
    match args.output {
        nightshift::cli::ReportFormat::Markdown => {
            nightshift::out!("{}", nightshift::postmortem::markdown(&r))
        }
        nightshift::cli::ReportFormat::Json => {
            nightshift::outln!("{}", nightshift::text::json_pretty(&r)?)
        }
    }
    Ok(())
}

/// `nightshift agent`: NVML readings served as dcgm-exporter metrics.
#[cfg(feature = "agent")]
fn agent(
    listen: std::net::SocketAddr,
    interval: f64,
    recorded: Option<std::path::PathBuf>,
    host: Option<String>,
    (nvml_lib, sysfs): (Option<std::path::PathBuf>, std::path::PathBuf),
) -> Result<(), String> {
    if !(interval.is_finite() && interval > 0.0) {
        return Err(format!("--interval must be > 0, got {interval}"));
    }
    let cfg = nightshift::agent::server::AgentConfig {
        listen,
        interval: std::time::Duration::from_secs_f64(interval),
        recorded,
        host: host.unwrap_or_else(nightshift::agent::server::hostname),
        nvml_lib,
        sysfs,
    };
    Ok(runtime()?.block_on(nightshift::agent::server::run(cfg))?)
}

fn restore_command(settings: &Settings, args: &RestoreArgs) -> Result<(), String> {
    let storage_bw = args
        .read_bw
        .as_deref()
        .map(units::parse_bandwidth)
        .transpose()?;
    let node_bw = args
        .node_bw
        .as_deref()
        .map(units::parse_bandwidth)
        .transpose()?;
    let r = match &args.job {
        Some(id) => {
            let m = snapshot(settings)?;
            let (c, j) = (&m.cluster, job_index(&m.cluster, id)?);
            let mut site = settings.site.clone();
            if let Some(b) = storage_bw {
                site.storage_read_bw = b;
            }
            if let Some(b) = node_bw {
                site.node_read_bw = b;
            }
            let base = m.base(&site, &settings.xid_catalog);
            restore(c, &base, j, &site).ok_or_else(|| format!("no job {id}"))?
        }
        None => {
            let state_bytes = args
                .state_bytes
                .as_deref()
                .map(units::parse_bytes)
                .transpose()?;
            let params = args.params.as_deref().map(units::parse_count).transpose()?;
            if state_bytes.is_none() && params.is_none() {
                return Err(
                    "restore needs a JOB, or --state-bytes SIZE (or --params COUNT) for a what-if"
                        .into(),
                );
            }
            let input = RestoreInput {
                nodes: args.read_nodes.unwrap_or(1),
                state_bytes,
                params,
                state_source: Provenance::Given,
                storage_bw,
                node_bw,
                ..RestoreInput::default()
            };
            compute(&input, &settings.site)
        }
    };
    emit(args.output, &r, report::restore)
}

fn emit<T: Serialize>(
    format: Format,
    value: &T,
    text: impl Fn(&T) -> String,
) -> Result<(), String> {
    match format {
        Format::Json => {
            let s = nightshift::text::json_pretty(value)?;
            nightshift::outln!("{s}");
        }
        Format::Table => nightshift::out!("{}", text(value)),
    }
    Ok(())
}

/// The engine's base for a moment: the same computation, on the same
/// memory of the snapshots before it, that the console's analyst makes,
/// so the command line and the console agree.
fn base(m: &Moment, settings: &Settings) -> Base {
    m.base(&settings.site, &settings.xid_catalog)
}

fn job_index(c: &Cluster, id: &str) -> Result<usize, String> {
    c.jobs
        .iter()
        .position(|j| j.id == id)
        .ok_or_else(|| format!("no job {id} in the current data of {}", c.name))
}

/// The chosen source's current state, once, with the node endpoints'
/// readings laid over it.
fn snapshot(settings: &Settings) -> Result<Moment, String> {
    snapshot_for(settings, Wanted::Whole)
}

/// What `get WHAT` reads of a fleet's Prometheus: the incidents need only
/// the broken GPUs.
fn wanted_by(what: nightshift::cli::GetWhat) -> Wanted {
    match what {
        nightshift::cli::GetWhat::Incidents => Wanted::Incidents,
        _ => Wanted::Whole,
    }
}

/// The same, reading of a fleet's Prometheus what `wanted` needs.
fn snapshot_for(settings: &Settings, wanted: Wanted) -> Result<Moment, String> {
    if let Some(path) = &settings.replay {
        return Ok(nightshift::recording::run::replayed_moment(
            path,
            settings.at.as_deref(),
            &settings.site,
        )?);
    }
    let read =
        nightshift::sources::once::read(&settings.source, settings.sim_seconds, &settings.site);
    let reading = runtime()?.block_on(read).map_err(|e| e.to_string())?;
    nightshift::one_shot::moment(settings, reading, wanted)
}

fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))
}
