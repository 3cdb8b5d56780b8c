//! The machine nightshift runs on: the wall clock, the user at the
//! keyboard, the host's name. The bottom of the module tree: anything may
//! use it, it uses nothing of nightshift's.

/// Wall-clock seconds since the Unix epoch (0 if the clock is before it).
pub fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// The operating-system user at the keyboard.
pub fn os_user() -> String {
    std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .unwrap_or_else(|_| "unknown".into())
}

/// This host's name.
pub fn name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}
