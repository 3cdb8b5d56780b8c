//! The seal on an armed step (issue 43): the audit log is shared by design
//! (the console, `nightshift follow`, several operators), so a line written
//! into it must not be enough to act. An armed step carries who confirmed
//! it, the digest of the preview they confirmed and an HMAC-SHA256 tag over
//! all of it, made with a key only the arming side holds: the operator's
//! (`$XDG_STATE_HOME/nightshift/armed.key`, mode 0600, made on first use)
//! or the site's (`[actions] armed_key`). A step is fired only when its tag
//! verifies, its kind is one nightshift arms, and its arguments pass the
//! checks they passed when it was armed.

use crate::model::{Action, Armed, Trigger};
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

type HmacSha256 = Hmac<Sha256>;

/// The key's length in bytes.
const KEY_LEN: usize = 32;
/// The most jobs an armed step may wait for (a gang of gangs).
const MAX_JOBS: usize = 4096;
/// The longest node name, job id or reason an armed step may carry.
const MAX_FIELD: usize = 256;

/// Why a key could not be had.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error(
        "no key for armed steps: neither XDG_STATE_HOME nor HOME is set (set [actions] armed_key)"
    )]
    NoPlace,
    #[error("the armed steps' key {}: {why}", path.display())]
    Unusable { path: PathBuf, why: String },
}

/// Where the operator's key lives when the site names none.
pub fn default_key_path() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_STATE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".local/state")))?;
    Some(base.join("nightshift").join("armed.key"))
}

fn unusable(path: &Path, why: impl std::fmt::Display) -> KeyError {
    KeyError::Unusable {
        path: path.to_path_buf(),
        why: why.to_string(),
    }
}

/// Reads the key at `path`: a regular file (never through a link, never
/// blocking), of this user or root, that no one else can read or write.
pub fn load(path: &Path) -> Result<Vec<u8>, KeyError> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| unusable(path, e))?;
    let m = f.metadata().map_err(|e| unusable(path, e))?;
    if !m.is_file() {
        return Err(unusable(path, "not a regular file"));
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    if m.uid() != me && m.uid() != 0 {
        return Err(unusable(
            path,
            format!("owned by uid {}, not by this user", m.uid()),
        ));
    }
    if m.mode() & 0o022 != 0 {
        return Err(unusable(path, "writable by others: refused"));
    }
    // Anyone who can read the key can seal a step root's `follow` fires
    // (issue 59: modes 0644 and 0604 were accepted). Its group may read
    // it (a site's on-call group, mode 0640), every user may not.
    if m.mode() & 0o004 != 0 {
        return Err(unusable(
            path,
            "readable by every user: anyone could seal a step with it (chmod o-r)",
        ));
    }
    let mut key = Vec::new();
    Read::by_ref(&mut f)
        .take(4096)
        .read_to_end(&mut key)
        .map_err(|e| unusable(path, e))?;
    if key.len() < KEY_LEN {
        return Err(unusable(
            path,
            format!("{} bytes, fewer than {KEY_LEN}", key.len()),
        ));
    }
    Ok(key)
}

/// The key at `path`, made (random, mode 0600, in a 0700 directory) when
/// there is none yet. Two processes making it at once end with one key:
/// each writes its own file and links it into place, and the loser reads
/// the winner's.
pub fn load_or_create(path: &Path) -> Result<Vec<u8>, KeyError> {
    match load(path) {
        Ok(k) => return Ok(k),
        Err(_) if std::fs::symlink_metadata(path).is_err() => {}
        Err(e) => return Err(e),
    }
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| unusable(path, e))?;
    }
    let mut key = vec![0u8; KEY_LEN];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut r| r.read_exact(&mut key))
        .map_err(|e| unusable(path, format!("no randomness: {e}")))?;
    let tmp = dir.join(format!(
        ".armed.key.{}.{}",
        std::process::id(),
        hex(&key[..8])
    ));
    {
        use std::os::unix::fs::OpenOptionsExt;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)
            .map_err(|e| unusable(path, e))?;
        f.write_all(&key)
            .and_then(|()| f.sync_all())
            .map_err(|e| unusable(path, e))?;
    }
    let linked = std::fs::hard_link(&tmp, path);
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Ok(()) => Ok(key),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => load(path),
        Err(e) => Err(unusable(path, e)),
    }
}

/// SHA-256 of a preview's text, in hex.
pub fn digest(preview: &str) -> String {
    hex(&Sha256::digest(preview.as_bytes()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The tag of `a` under `key`: over its JSON without the tag itself.
pub fn tag(key: &[u8], a: &Armed) -> String {
    let mac = mac_of(key, a);
    hex(&mac.finalize().into_bytes())
}

fn mac_of(key: &[u8], a: &Armed) -> HmacSha256 {
    // Everything but the tag itself is sealed: `forced` too (issue 59: a
    // `"forced": true` added to a sealed record made a step the breaker
    // had refused fire). A step sealed unforced reads the same as before.
    let unsigned = Armed {
        tag: String::new(),
        ..a.clone()
    };
    let body = serde_json::to_vec(&unsigned).unwrap_or_default();
    // An HMAC takes a key of any length.
    let mut mac = match HmacSha256::new_from_slice(key) {
        Ok(m) => m,
        Err(_) => unreachable_key(),
    };
    mac.update(b"nightshift armed step v1\n");
    mac.update(&body);
    mac
}

#[cold]
fn unreachable_key() -> HmacSha256 {
    // `new_from_slice` fails only for fixed-size MACs; HMAC is not one.
    // A fresh MAC under an empty key keeps the function total: its tags
    // never match a real key's.
    <HmacSha256 as hmac::digest::KeyInit>::new(&Default::default())
}

/// Whether `a`'s tag is the one `key` makes (in constant time).
pub fn verify(key: &[u8], a: &Armed) -> bool {
    let Some(want) = unhex(&a.tag) else {
        return false;
    };
    mac_of(key, a).verify_slice(&want).is_ok()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if s.len() != 64 {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// The seal of a step's end (`fired`, `refused`, `cancelled`): an HMAC
/// over its id and the phase, by the key that sealed the step.
pub fn end_tag(key: &[u8], id: &str, phase: &str) -> String {
    hex(&end_mac(key, id, phase).finalize().into_bytes())
}

/// Whether `tag` is the end seal `key` makes for step `id` ending so.
pub fn verify_end(key: &[u8], id: &str, phase: &str, tag: &str) -> bool {
    let Some(want) = unhex(tag) else {
        return false;
    };
    end_mac(key, id, phase).verify_slice(&want).is_ok()
}

fn end_mac(key: &[u8], id: &str, phase: &str) -> HmacSha256 {
    let mut mac = match HmacSha256::new_from_slice(key) {
        Ok(m) => m,
        Err(_) => unreachable_key(),
    };
    mac.update(b"nightshift armed step end v1\n");
    mac.update(id.as_bytes());
    mac.update(b"\n");
    mac.update(phase.as_bytes());
    mac
}

/// Whether `a` is a step nightshift arms, with arguments it would have
/// taken when arming: the drain after the checkpoint (its gangs requeued),
/// the requeue or the hard preempt after it; waiting for checkpoints.
pub fn armable(a: &Armed) -> Result<(), String> {
    if a.id.is_empty()
        || a.id.len() > 64
        || !a.id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
    {
        return Err("its id is not one nightshift makes".into());
    }
    let name_ok =
        |s: &str| !s.is_empty() && s.len() <= MAX_FIELD && !s.chars().any(char::is_control);
    match &a.action {
        Action::Drain {
            node,
            reason,
            requeue: true,
        } if name_ok(node)
            && reason.len() <= MAX_FIELD
            && !reason.chars().any(char::is_control) => {}
        Action::Drain { requeue: false, .. } => {
            return Err(
                "a drain that cancels its jobs is never armed (only requeued gangs)".into(),
            );
        }
        Action::Requeue { job } | Action::Preempt { job, grace_s: None } if name_ok(job) => {}
        other => {
            return Err(format!(
                "{} is not a step nightshift arms, or its arguments are not ones it takes",
                other.verb()
            ));
        }
    }
    match &a.when {
        Trigger::Checkpoints { jobs, .. }
            if !jobs.is_empty()
                && jobs.len() <= MAX_JOBS
                && jobs.iter().all(|j| name_ok(&j.job)) => {}
        Trigger::Checkpoints { .. } => return Err("it waits for no job, or for too many".into()),
        Trigger::At { .. } => {
            return Err("a step armed for a bare time is not one nightshift arms".into());
        }
    }
    if !a.cluster.chars().all(|c| !c.is_control()) || a.cluster.len() > MAX_FIELD {
        return Err("its cluster's name is not one nightshift takes".into());
    }
    Ok(())
}

/// How a step whose seal cannot be checked (no usable key) is refused.
pub const CANNOT_CHECK: &str = "its seal cannot be checked";

/// Whether `a` may be fired with `key`: sealed by it, and armable. The
/// reason when not, in one line.
pub fn trusted(key: Result<&[u8], &KeyError>, a: &Armed) -> Result<(), String> {
    armable(a)?;
    match key {
        Err(e) => Err(format!("{CANNOT_CHECK}: {e}")),
        Ok(_) if a.tag.is_empty() => Err(
            "it carries no seal (armed by an older nightshift, or written by hand): arm it again"
                .into(),
        ),
        Ok(k) if verify(k, a) => Ok(()),
        Ok(_) => Err(
            "its seal does not match this operator's key: not armed by this nightshift, or altered"
                .into(),
        ),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::model::JobMark;

    /// A sealable step: a requeue after job 4701's checkpoint.
    pub(crate) fn step() -> Armed {
        Armed {
            id: "1796006850-42-7-0".into(),
            action: Action::Requeue { job: "4701".into() },
            when: Trigger::Checkpoints {
                jobs: vec![JobMark {
                    job: "4701".into(),
                    ckpt_last: Some(100),
                }],
                by: None,
            },
            armed_at: 100,
            cluster: "sim-16".into(),
            confirmed_by: "oncall".into(),
            preview_digest: digest("requeue 4701"),
            tag: String::new(),
            forced: false,
        }
    }

    #[test]
    fn a_sealed_step_verifies_and_any_change_breaks_its_seal() {
        let key = [7u8; 32];
        let mut a = step();
        a.tag = tag(&key, &a);
        assert_eq!(trusted(Ok(&key), &a), Ok(()));
        // Read back from its JSON line, it still verifies.
        let back: Armed =
            serde_json::from_str(&serde_json::to_string(&a).expect("json")).expect("armed");
        assert!(verify(&key, &back));
        // Another key, another action, another trigger: refused.
        assert!(!verify(&[8u8; 32], &a));
        let mut b = a.clone();
        b.action = Action::Requeue { job: "4702".into() };
        assert!(trusted(Ok(&key), &b).is_err());
        let mut c = a.clone();
        c.when = Trigger::Checkpoints {
            jobs: vec![],
            by: None,
        };
        assert!(trusted(Ok(&key), &c).is_err());
        // `forced` is sealed: added to a sealed unforced step, it breaks
        // the seal (issue 59).
        let mut f = a.clone();
        f.forced = true;
        assert!(trusted(Ok(&key), &f).is_err());
        let mut d = a.clone();
        d.tag = String::new();
        assert!(
            trusted(Ok(&key), &d)
                .expect_err("unsealed")
                .contains("no seal")
        );
    }

    #[test]
    fn only_the_kinds_nightshift_arms_are_armable() {
        let mut a = step();
        for (action, ok) in [
            (
                Action::Drain {
                    node: "n1".into(),
                    reason: "xid".into(),
                    requeue: true,
                },
                true,
            ),
            (
                Action::Drain {
                    node: "n1".into(),
                    reason: "xid".into(),
                    requeue: false,
                },
                false,
            ),
            (
                Action::Preempt {
                    job: "1".into(),
                    grace_s: None,
                },
                true,
            ),
            (
                Action::Preempt {
                    job: "1".into(),
                    grace_s: Some(60),
                },
                false,
            ),
            (Action::Resume { node: "n1".into() }, false),
            (
                Action::Validate {
                    node: "n1".into(),
                    level: 255,
                },
                false,
            ),
            (
                Action::Requeue {
                    job: "1\u{1b}]0;x\u{7}".into(),
                },
                false,
            ),
        ] {
            a.action = action.clone();
            assert_eq!(armable(&a).is_ok(), ok, "{action:?}");
        }
        let mut b = step();
        b.id = "x\u{1b}[2J".into();
        assert!(armable(&b).is_err());
        let mut c = step();
        c.when = Trigger::At { time: 9 };
        assert!(armable(&c).is_err());
    }

    #[test]
    fn a_key_is_made_once_private_and_refused_when_others_can_write_it() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("state/nightshift/armed.key");
        let k1 = load_or_create(&path).expect("made");
        let k2 = load_or_create(&path).expect("read");
        assert_eq!(k1, k2);
        let mode = std::fs::metadata(&path).expect("meta").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).expect("chmod");
        assert!(load(&path).is_err());
        // Readable by every user: refused too (issue 59); its group may.
        for (mode, ok) in [(0o644, false), (0o604, false), (0o640, true), (0o600, true)] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
            assert_eq!(load(&path).is_ok(), ok, "mode {mode:o}");
        }
        let link = dir.path().join("link.key");
        std::os::unix::fs::symlink(&path, &link).expect("link");
        assert!(load_or_create(&link).is_err(), "a link is never followed");
    }
}
