//! Where the configuration file is, and reading it as an admin host must:
//! refused when another user owns or can write it, never waiting on a
//! FIFO, at most 1 MiB.

use super::{ConfigError, FileConfig};
use std::path::{Path, PathBuf};

impl FileConfig {
    /// The configuration file read when `--config` is not given:
    /// `NIGHTSHIFT_CONFIG` when set (it must exist), else
    /// `$XDG_CONFIG_HOME/nightshift/config.toml`, else
    /// `~/.config/nightshift/config.toml`, when one exists; none: the
    /// defaults.
    pub fn default_path() -> Option<PathBuf> {
        if let Some(p) = std::env::var_os("NIGHTSHIFT_CONFIG").filter(|p| !p.is_empty()) {
            return Some(PathBuf::from(p));
        }
        Self::looked_in().into_iter().find(|p| p.is_file())
    }

    /// Where a configuration file is looked for, in order.
    pub fn looked_in() -> Vec<PathBuf> {
        let mut out = Vec::new();
        if let Some(x) = std::env::var_os("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
        {
            out.push(x.join("nightshift/config.toml"));
        }
        if let Some(home) = std::env::var_os("HOME").filter(|h| !h.is_empty()) {
            out.push(PathBuf::from(home).join(".config/nightshift/config.toml"));
        }
        out
    }

    /// Reads the configuration at `path`. It names commands nightshift
    /// runs (as root on admin hosts): a file another user owns or can
    /// write is refused, as the audit log and the key are; a FIFO or a
    /// device is not waited on, and at most 1 MiB is read.
    pub fn load(path: &Path) -> Result<FileConfig, ConfigError> {
        let read = |e: std::io::Error| ConfigError::Read {
            path: path.to_path_buf(),
            source: e,
        };
        // Opened without waiting on a FIFO, then judged by what was opened
        // (no window to swap the file between the check and the read).
        let file = {
            use std::os::unix::fs::OpenOptionsExt;
            std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(path)
                .map_err(read)?
        };
        let meta = file.metadata().map_err(read)?;
        if !meta.is_file() {
            return Err(read(std::io::Error::other("not a regular file")));
        }
        if let Some(why) = crate::actions::audit::untrusted(&meta) {
            return Err(read(std::io::Error::other(format!(
                "{why}: refused (another user could make nightshift run their commands)"
            ))));
        }
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut std::io::Read::take(file, 1 << 20), &mut bytes)
            .map_err(read)?;
        let text =
            String::from_utf8(bytes).map_err(|_| read(std::io::Error::other("not UTF-8")))?;
        let mut file: FileConfig = toml::from_str(&text).map_err(|e| ConfigError::Parse {
            path: path.to_path_buf(),
            source: e,
        })?;
        file.text = text;
        Ok(file)
    }
}
