//! Logs go to a file through tracing, never to the terminal the TUI owns.

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use tracing_subscriber::EnvFilter;

/// `$XDG_STATE_HOME/nightshift/nightshift.log`, else `~/.local/state/…`.
pub fn default_path() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_STATE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".local/state")))?;
    Some(base.join("nightshift").join("nightshift.log"))
}

/// Starts logging to `path` (or the default). Returns where logs go, or why
/// there is no log: a failure here must not stop the console.
pub fn init(path: Option<&Path>) -> Result<PathBuf, String> {
    let path = match path {
        Some(p) => p.to_path_buf(),
        None => default_path().ok_or("no log file: neither XDG_STATE_HOME nor HOME is set")?,
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .map_err(|e| format!("cannot open log {}: {e}", path.display()))?;
    let filter =
        EnvFilter::try_from_env("NIGHTSHIFT_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false)
        .with_writer(Mutex::new(file))
        .try_init()
        .map_err(|e| format!("logging already started: {e}"))?;
    Ok(path)
}
