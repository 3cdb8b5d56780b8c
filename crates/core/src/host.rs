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
/// The operator: `$USER`, `$LOGNAME`, else the name the password file
/// gives this process's user (as `whoami`), else `uid N` — never "unknown".
pub fn os_user() -> String {
    std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .ok()
        .filter(|u| !u.is_empty())
        .unwrap_or_else(whoami)
}

fn whoami() -> String {
    account_name().unwrap_or_else(|| {
        // SAFETY: getuid has no preconditions and cannot fail.
        format!("uid {}", unsafe { libc::getuid() })
    })
}

/// The login name of this process's user as `id -un` finds it: `$USER`,
/// `$LOGNAME`, else the system's account database (through NSS: LDAP and
/// SSSD users of a login node are not in `/etc/passwd`); none when it has
/// no entry.
pub fn login_name() -> Option<String> {
    std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .ok()
        .filter(|u| !u.is_empty())
        .or_else(account_name)
}

/// This process's user's name in the account database (`getpwuid_r`).
fn account_name() -> Option<String> {
    // SAFETY: getuid has no preconditions and cannot fail.
    let uid = unsafe { libc::getuid() };
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    // SAFETY: passwd is plain data; getpwuid_r fills it, pointing into
    // `buf`, which outlives every read of it below.
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer is valid for the lengths given.
    let rc = unsafe { libc::getpwuid_r(uid, &mut pwd, buf.as_mut_ptr(), buf.len(), &mut found) };
    if rc != 0 || found.is_null() || pwd.pw_name.is_null() {
        return None;
    }
    // SAFETY: pw_name is a NUL-terminated string inside `buf`.
    let name = unsafe { std::ffi::CStr::from_ptr(pwd.pw_name) };
    Some(name.to_string_lossy().into_owned()).filter(|n| !n.is_empty())
}

/// This host's name.
pub fn name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

/// Opens `path` as `options` say, never through a link and never waiting
/// on a FIFO (`O_NOFOLLOW`, `O_NONBLOCK`), and refuses what is not a
/// regular file: how nightshift opens a file it was pointed at.
pub fn open_regular(
    options: &mut std::fs::OpenOptions,
    path: &std::path::Path,
) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = options
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) {
                std::io::Error::other("a symbolic link: refused (nightshift does not follow one)")
            } else {
                e
            }
        })?;
    if !f.metadata()?.is_file() {
        return Err(std::io::Error::other(
            "not a regular file (a FIFO or a device): refused",
        ));
    }
    Ok(f)
}

/// Reads a file nightshift was pointed at, bounded: a regular file only
/// (a FIFO would block, a device like `/dev/zero` never ends), never
/// through a link, at most `max` bytes (a longer one is an error, not a
/// truncated read). The one way a token, an index or a key-like file is
/// read (issue 59).
pub fn read_regular(path: &std::path::Path, max: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let f = open_regular(std::fs::OpenOptions::new().read(true), path)?;
    let m = f.metadata()?;
    if m.len() > max {
        return Err(std::io::Error::other(format!(
            "{} bytes, more than the {max} read",
            m.len()
        )));
    }
    let mut bytes = Vec::new();
    f.take(max).read_to_end(&mut bytes)?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    /// Without `$USER` and `$LOGNAME` the operator is still named (as
    /// `whoami` names them), never "unknown".
    #[test]
    fn the_operator_has_a_name_without_user_in_the_environment() {
        let name = super::whoami();
        assert!(!name.is_empty() && name != "unknown", "{name}");
        let id = std::process::Command::new("id").arg("-un").output();
        if let Ok(out) = id
            && out.status.success()
        {
            assert_eq!(name, String::from_utf8_lossy(&out.stdout).trim());
        }
    }
}
