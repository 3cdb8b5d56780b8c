//! The command line. Global options choose the source; subcommands print
//! state for scripts. Later commands (`why`, `blast`, actions) slot in here.

use clap::{Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

#[derive(Debug, Parser)]
#[command(
    name = "nightshift",
    version,
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

#[derive(Debug, clap::Args, Default)]
pub struct GlobalArgs {
    /// Where the cluster state comes from [default: sim]
    #[arg(long, global = true, value_enum)]
    pub source: Option<SourceKind>,
    /// TOML configuration file (see config/nightshift.example.toml)
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Bind no key and accept no command that changes the cluster
    #[arg(long, global = true)]
    pub read_only: bool,
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
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SourceKind {
    /// The built-in simulated cluster
    Sim,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Open the TUI (the default)
    Tui,
    /// Print the current state and exit
    Get(GetArgs),
}

#[derive(Debug, clap::Args)]
pub struct GetArgs {
    /// What to print
    #[arg(value_enum)]
    pub what: GetWhat,
    /// Output format
    #[arg(short, long, value_enum, default_value_t = Format::Table)]
    pub output: Format,
    /// Simulated cluster: run this many sim seconds before printing
    #[arg(long, default_value_t = 0, value_name = "S")]
    pub sim_seconds: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum GetWhat {
    Nodes,
    Gpus,
    Jobs,
    Incidents,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Table,
    Json,
}
