use clap::Parser;
use nightshift::cli::{Cli, Command, GetArgs};
use nightshift::config::{FileConfig, Settings};
use nightshift::sources::SourceConfig;
use nightshift::sources::sim::Sim;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("nightshift: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<(), String> {
    let file = match &cli.global.config {
        Some(path) => FileConfig::load(path)?,
        None => FileConfig::default(),
    };
    let settings = Settings::resolve(&cli.global, file)?;
    // A log that cannot be opened must not stop the console; say so once
    // before the TUI takes the terminal.
    if let Err(e) = nightshift::logging::init(settings.log_file.as_deref()) {
        eprintln!("nightshift: logging off: {e}");
    }
    match cli.command {
        None | Some(Command::Tui) => {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .map_err(|e| format!("cannot start the runtime: {e}"))?;
            rt.block_on(nightshift::tui::run(settings))
        }
        Some(Command::Get(args)) => get(&settings, &args),
    }
}

fn get(settings: &Settings, args: &GetArgs) -> Result<(), String> {
    let cluster = match &settings.source {
        SourceConfig::Sim { sim, .. } => {
            let mut sim = Sim::new(*sim)?;
            sim.advance(args.sim_seconds);
            sim.snapshot()
        }
    };
    let out = nightshift::output::render(&cluster, args.what, args.output)?;
    print!("{out}");
    Ok(())
}
