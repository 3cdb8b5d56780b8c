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

/// The log file, rotated by size: when it would pass `max_bytes` it becomes
/// `<log>.1` (the older `.1` becomes `.2`, and so on up to `keep`). Every
/// line is sanitised like everything else nightshift prints: a job name or
/// an error text full of escape sequences cannot drive the terminal of
/// whoever runs `tail -f` on the log.
pub struct LogFile {
    path: PathBuf,
    file: std::fs::File,
    size: u64,
    max_bytes: u64,
    keep: u32,
}

/// The log's size bound, and how many rotated files are kept.
pub const MAX_LOG_BYTES: u64 = 10 << 20;
pub const KEEP_LOGS: u32 = 3;

/// Why there is no log (the console runs on without one).
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error("cannot open log {}: {source}", path.display())]
    Open {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("no log file: neither XDG_STATE_HOME nor HOME is set")]
    NoPath,
    #[error("cannot create {}: {source}", dir.display())]
    CreateDir {
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error("logging already started: {0}")]
    Started(String),
}

/// Opens the log to append: never through a link (it is followed as
/// root into any file), never waiting on a FIFO, a regular file only
/// (issue 59: `--log-file` at a FIFO hung, at a link was followed).
fn open_log(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    crate::host::open_regular(
        OpenOptions::new().create(true).append(true).mode(0o600),
        path,
    )
}

impl LogFile {
    pub fn open(path: &Path, max_bytes: u64, keep: u32) -> Result<LogFile, LogError> {
        let file = open_log(path).map_err(|e| LogError::Open {
            path: path.to_path_buf(),
            source: e,
        })?;
        let size = file.metadata().map(|m| m.len()).unwrap_or(0);
        Ok(LogFile {
            path: path.to_path_buf(),
            file,
            size,
            max_bytes,
            keep,
        })
    }

    fn rotate(&mut self) -> std::io::Result<()> {
        let name = |k: u32| {
            let mut p = self.path.clone().into_os_string();
            p.push(format!(".{k}"));
            PathBuf::from(p)
        };
        for k in (1..self.keep).rev() {
            let _ = std::fs::rename(name(k), name(k + 1));
        }
        std::fs::rename(&self.path, name(1))?;
        self.file = open_log(&self.path)?;
        self.size = 0;
        Ok(())
    }
}

impl std::io::Write for LogFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        // Keep line ends and tabs; every other control character is shown.
        let clean: String = text
            .split_inclusive('\n')
            .map(|line| {
                let (body, nl) = match line.strip_suffix('\n') {
                    Some(b) => (b, "\n"),
                    None => (line, ""),
                };
                format!("{}{nl}", crate::text::sanitize(&body.replace('\t', "    ")))
            })
            .collect();
        if self.size > 0 && self.size + clean.len() as u64 > self.max_bytes {
            self.rotate()?;
        }
        self.file.write_all(clean.as_bytes())?;
        self.size += clean.len() as u64;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

/// Starts logging to `path` (or the default) at `level` (`-v`/`-q`;
/// `NIGHTSHIFT_LOG` wins when set). Returns where logs go, or why there is
/// no log: a failure here must not stop the console.
pub fn init(path: Option<&Path>, level: &str) -> Result<PathBuf, LogError> {
    let path = match path {
        Some(p) => p.to_path_buf(),
        None => default_path().ok_or(LogError::NoPath)?,
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| LogError::CreateDir {
            dir: dir.to_path_buf(),
            source: e,
        })?;
    }
    let file = LogFile::open(&path, MAX_LOG_BYTES, KEEP_LOGS)?;
    let filter =
        EnvFilter::try_from_env("NIGHTSHIFT_LOG").unwrap_or_else(|_| EnvFilter::new(level));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false)
        .with_writer(Mutex::new(file))
        .try_init()
        .map_err(|e| LogError::Started(e.to_string()))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn the_log_is_sanitised_and_rotates_by_size() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("n.log");
        let mut log = LogFile::open(&path, 100, 2).expect("open");
        log.write_all(b"job \x1b]0;pwned\x07 name\n")
            .expect("write");
        let text = std::fs::read_to_string(&path).expect("read");
        assert_eq!(text, "job \u{241b}]0;pwned\u{fffd} name\n");
        for i in 0..20 {
            writeln!(log, "line {i:04} of the log, long enough to rotate").expect("write");
        }
        let rotated = |k: u32| dir.path().join(format!("n.log.{k}"));
        assert!(rotated(1).exists() && rotated(2).exists());
        assert!(!rotated(3).exists(), "only `keep` old files");
        for p in [path.clone(), rotated(1), rotated(2)] {
            let n = std::fs::metadata(&p).expect("meta").len();
            assert!(n <= 100, "{} is {n} bytes", p.display());
        }
    }

    /// Issue 59: a link at the log's path is refused (nothing is made
    /// where it points), and a FIFO there is refused at once, not waited on.
    #[test]
    fn a_log_path_that_is_a_link_or_a_fifo_is_refused_at_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        let target = dir.path().join("elsewhere");
        let link = dir.path().join("link.log");
        std::os::unix::fs::symlink(&target, &link).expect("link");
        assert!(LogFile::open(&link, 100, 2).is_err());
        assert!(!target.exists(), "made through the link");
        let fifo = dir.path().join("fifo.log");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).expect("path");
        // SAFETY: a valid path; mkfifo has no other preconditions.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let started = std::time::Instant::now();
        assert!(LogFile::open(&fifo, 100, 2).is_err());
        assert!(started.elapsed() < std::time::Duration::from_secs(2));
    }
}
