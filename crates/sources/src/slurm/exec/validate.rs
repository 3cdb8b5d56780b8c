//! Validate, then resume (issue 29): the node goes into a maintenance
//! reservation (nothing but the check can land on it), is resumed into it,
//! the site's check runs there as a job (`sbatch`, the whole node and its
//! GPUs), and then the reservation ends — the node back in service on a
//! pass, drained again with the failing tests as its reason otherwise. A
//! step that cannot be taken leaves the node out of service and says why.

use super::{Call, CallError, Executor, Outcome};
use crate::model::{JobState, NodeState, Step, VALIDATION_FAILED};
use crate::validate::{Verdict, verdict};
use std::time::{Duration, Instant};

/// The most of a check's output read back.
const OUTPUT_MAX: u64 = 1 << 20;

impl Executor {
    /// The longest a check may take (`[validate] timeout`).
    pub fn validate_timeout(&self) -> Duration {
        self.cfg.validate.timeout
    }

    fn reservation(node: &str) -> String {
        format!("nightshift-validate-{node}")
    }

    fn reserve_call(&self, node: &str) -> Call {
        Call::Scontrol(vec![
            "create".into(),
            "reservation".into(),
            format!("reservationname={}", Self::reservation(node)),
            format!("nodes={node}"),
            "starttime=now".into(),
            "duration=unlimited".into(),
            format!("users={}", self.cfg.user),
            "flags=maint,ignore_jobs".into(),
        ])
    }

    fn unreserve_call(&self, node: &str) -> Call {
        Call::Scontrol(vec![
            "delete".into(),
            format!("reservationname={}", Self::reservation(node)),
        ])
    }

    /// Where the check's output goes: a directory nightshift makes for
    /// this one check inside `[validate] output_dir` (an unpredictable
    /// name, mode 0700, so no one else can plant a file, a link or a FIFO
    /// where it will read), one file a job id in it.
    fn output_in(dir: &std::path::Path, job: &str) -> std::path::PathBuf {
        dir.join(format!("check-{job}.out"))
    }

    /// Why a validation cannot read its check's output here: the preview
    /// refuses it.
    pub fn validate_cannot(&self) -> Option<String> {
        output_dir_cannot(&self.cfg.validate.output_dir)
    }

    /// The check's job: the whole node, and `gpus` of its GPUs (`None`:
    /// all of them, counted when it is sent).
    fn check_call(
        &self,
        node: &str,
        level: u8,
        sent: Option<(u32, Option<&str>)>,
        private: Option<&std::path::Path>,
    ) -> Call {
        let (gpus, partition) = match sent {
            Some((g, p)) => (Some(g), p),
            None => (None, None),
        };
        let v = &self.cfg.validate;
        let output = match private {
            Some(dir) => Self::output_in(dir, "%j"),
            None => v
                .output_dir
                .join("<a private directory nightshift makes>/check-%j.out"),
        };
        let mut args = vec![
            "--parsable".into(),
            format!("--reservation={}", Self::reservation(node)),
            // The node's own partition: a node outside the default one is
            // "not available" to a job that names none.
            match (sent, partition) {
                (_, Some(p)) => format!("--partition={p}"),
                (None, None) => "--partition=<the node's partition>".into(),
                (Some(_), None) => String::new(),
            },
            format!("--nodelist={node}"),
            "--nodes=1".into(),
            "--exclusive".into(),
            "--job-name=nightshift-validate".into(),
            format!("--time={}", v.timeout.as_secs().div_ceil(60).max(1)),
            format!("--output={}", output.display()),
        ];
        args.retain(|a| !a.is_empty());
        match gpus {
            Some(0) => {}
            Some(n) => args.push(format!("--gres=gpu:{n}")),
            None => args.push("--gres=gpu:<all of its GPUs>".into()),
        }
        args.push(format!("--wrap={}", v.command_for(level)));
        Call::Sbatch(args)
    }

    /// The calls of a validation, in order, as the preview shows them.
    pub fn validate_calls(&self, node: &str, level: u8) -> Vec<String> {
        vec![
            self.reserve_call(node).to_string(),
            self.resume_call(node).to_string(),
            self.check_call(node, level, None, None).to_string(),
            format!(
                "wait up to {} for the check; read its output from a directory nightshift makes in {} (mode 0700, an unpredictable name), which the node must share with this host: an output not read here fails the check",
                crate::text::duration(self.cfg.validate.timeout.as_secs() as i64),
                self.cfg.validate.output_dir.display()
            ),
            format!("on a pass: {}", self.unreserve_call(node)),
            format!(
                "on a failure: {}, then {}",
                self.drain_call(node, &format!("{VALIDATION_FAILED}: <the failing tests>")),
                self.unreserve_call(node)
            ),
        ]
    }

    /// Runs the validation; a step each. The last step says where the
    /// node ended: in service (passed), or out with the reason.
    pub async fn validate(&self, node: &str, level: u8) -> Vec<Step> {
        let mut steps = Vec::new();
        let gpus = match self.node_now(node).await {
            Ok(n) if n.state == NodeState::Up => {
                steps.push(Step::failed(
                    format!("validate {node}"),
                    format!("{node} is in service: validate a node that is out"),
                ));
                return steps;
            }
            Ok(n) => (n.gpu_count, n.partitions.first().cloned()),
            Err(e) => {
                steps.push(Step::failed(format!("read {node}"), e.to_string()));
                return steps;
            }
        };
        let r = Self::reservation(node);
        let reserve = self.reserve_call(node);
        match self.send(&reserve).await {
            Ok(()) => steps.push(Step::sent(
                format!("reserve {node} ({r})"),
                Outcome {
                    verified: true,
                    observed: format!("{r}: {node}, maintenance, for {}", self.cfg.user),
                },
            )),
            Err(e) => {
                steps.push(Step::failed(format!("reserve {node} ({r})"), e.to_string()));
                return steps;
            }
        }
        match self.resume_reserved(node).await {
            Ok(o) => steps.push(Step::sent(format!("resume {node} into {r}"), o)),
            Err(e) => {
                steps.push(Step::failed(
                    format!("resume {node} into {r}"),
                    e.to_string(),
                ));
                steps.extend(
                    self.keep_out(node, &format!("could not resume it: {e}"))
                        .await,
                );
                return steps;
            }
        }
        let check = format!("check {node} ({})", self.cfg.validate.command_for(level));
        let ran = self.run_check(node, level, gpus.0, gpus.1.as_deref()).await;
        match ran {
            Ok((job, Verdict::Pass, seen)) => {
                steps.push(Step::sent(
                    check,
                    Outcome {
                        verified: true,
                        observed: format!("job {job} passed: {seen}"),
                    },
                ));
                steps.push(self.end_reservation(node, true).await);
            }
            Ok((job, Verdict::Fail(tests), _)) => {
                let why = tests.join("; ");
                let mut s = Step::failed(check, format!("job {job}: {why}"));
                s.observed = format!("{node} stays out of service");
                steps.push(s);
                steps.extend(self.keep_out(node, &why).await);
            }
            Err(e) => {
                steps.push(Step::failed(check, e.clone()));
                steps.extend(self.keep_out(node, &e).await);
            }
        }
        steps
    }

    /// Submits the check and waits for it: its job id, verdict and what
    /// was seen of it; an error when it could not run or did not end in
    /// time (then it is cancelled).
    async fn run_check(
        &self,
        node: &str,
        level: u8,
        gpus: u32,
        partition: Option<&str>,
    ) -> Result<(String, Verdict, String), String> {
        let private = PrivateDir::make(&self.cfg.validate.output_dir)
            .map_err(|e| format!("the check's output directory: {e}"))?;
        let submitted = self
            .run(&self.check_call(node, level, Some((gpus, partition)), Some(private.path())))
            .await
            .map_err(|e| match e {
                // The scheduler's own words, not the command line (which
                // would fill the reason's 250 characters before them).
                CallError::Refused { said, .. } => {
                    format!("sbatch refused the check: {}", said.trim())
                }
                e => format!("the check could not be submitted: {e}"),
            })?;
        // `--parsable`: `ID` or `ID;CLUSTER`.
        let job = submitted
            .trim()
            .split(';')
            .next()
            .filter(|id| !id.is_empty() && id.chars().all(|c| c.is_ascii_digit()))
            .ok_or_else(|| format!("sbatch said {submitted:?}, not a job id"))?
            .to_string();
        let deadline = Instant::now() + self.cfg.validate.timeout;
        let state = loop {
            match self.job_now(&job).await {
                Ok(j)
                    if !j.state.holds_resources()
                        && !j.state.is_pending()
                        && j.state != JobState::Unknown =>
                {
                    break j.state;
                }
                Ok(_) | Err(CallError::NoJob(_)) => {}
                Err(e) => tracing::warn!("validate {node}: job {job}: {e}"),
            }
            if Instant::now() > deadline {
                let _ = self.send(&self.cancel_call(&job)).await;
                return Err(format!(
                    "job {job} did not end within {}: cancelled",
                    crate::text::duration(self.cfg.validate.timeout.as_secs() as i64)
                ));
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        };
        let path = Self::output_in(private.path(), &job);
        let output = read_output(&path);
        let passed = state == JobState::Completed;
        let seen = format!("{} ({})", state.as_str(), path.display());
        match output {
            Ok(text) => Ok((job, verdict(passed, &text), seen)),
            // A check whose output is not read here has not been seen to
            // pass: the node stays out, and the reason says why.
            Err(e) => Ok((
                job,
                Verdict::Fail(vec![format!(
                    "the check ended {}; its output {} is not readable here: {e}",
                    state.as_str(),
                    path.display()
                )]),
                seen,
            )),
        }
    }

    /// Ends the reservation: the node is in service when it passed.
    async fn end_reservation(&self, node: &str, passed: bool) -> Step {
        let what = format!("end {}", Self::reservation(node));
        if let Err(e) = self.send(&self.unreserve_call(node)).await {
            return Step::failed(what, e.to_string());
        }
        let o = self
            .verify(
                || self.node_now(node),
                |n| (n.state == NodeState::Up) == passed,
                Self::show_node,
            )
            .await;
        Step::sent(what, o)
    }

    /// A check that failed or could not run: the node drained again with
    /// why, then its reservation ended.
    async fn keep_out(&self, node: &str, why: &str) -> Vec<Step> {
        let reason = crate::text::one_line(&format!("{VALIDATION_FAILED}: {why}"), 250);
        let drained = match self.drain(node, &reason).await {
            Ok(o) => Step::sent(format!("drain {node}: {reason}"), o),
            Err(e) => Step::failed(format!("drain {node}: {reason}"), e.to_string()),
        };
        vec![drained, self.end_reservation(node, false).await]
    }
}

/// A directory of nightshift's own for one check's output, removed with
/// what is in it when dropped.
struct PrivateDir(std::path::PathBuf);

impl PrivateDir {
    /// Makes `nightshift-validate-RANDOM` in `parent`, mode 0700: `mkdir`
    /// fails on anything already there (a planted directory or link), so
    /// the directory is this process's own.
    fn make(parent: &std::path::Path) -> Result<PrivateDir, String> {
        use std::os::unix::fs::{DirBuilderExt, MetadataExt};
        if let Some(why) = output_dir_cannot(parent) {
            return Err(why);
        }
        for _ in 0..8 {
            let mut raw = [0u8; 12];
            std::io::Read::read_exact(
                &mut std::fs::File::open("/dev/urandom").map_err(|e| e.to_string())?,
                &mut raw,
            )
            .map_err(|e| e.to_string())?;
            let name: String = raw.iter().map(|b| format!("{b:02x}")).collect();
            let dir = parent.join(format!("nightshift-validate-{name}"));
            match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
                Ok(()) => {
                    let m = std::fs::symlink_metadata(&dir).map_err(|e| e.to_string())?;
                    // SAFETY: geteuid has no preconditions.
                    if !m.is_dir() || m.uid() != unsafe { libc::geteuid() } {
                        return Err(format!("{} is not nightshift's own", dir.display()));
                    }
                    return Ok(PrivateDir(dir));
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => {
                    return Err(format!(
                        "cannot make a directory in {}: {e}",
                        parent.display()
                    ));
                }
            }
        }
        Err(format!(
            "cannot make a directory of its own in {}",
            parent.display()
        ))
    }

    fn path(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for PrivateDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Why `dir` cannot hold the check's output: not there, not a directory,
/// a link, not writable here.
pub(crate) fn output_dir_cannot(dir: &std::path::Path) -> Option<String> {
    let d = dir.display();
    match std::fs::symlink_metadata(dir) {
        Err(e) => Some(format!("[validate] output_dir {d}: {e}")),
        Ok(m) if m.file_type().is_symlink() => Some(format!(
            "[validate] output_dir {d} is a symbolic link: give the directory itself"
        )),
        Ok(m) if !m.is_dir() => Some(format!("[validate] output_dir {d} is not a directory")),
        Ok(m) if let Some(why) = swappable(&m) => Some(format!(
            "[validate] output_dir {d} {why}: another user could rename the check's private directory aside and plant a passing report (issue 59) — use a directory of this user or root that others cannot write, or set its sticky bit (chmod +t)"
        )),
        Ok(_) => {
            let c = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).ok()?;
            // SAFETY: `c` is a valid NUL-terminated path for the call.
            let writable = unsafe { libc::access(c.as_ptr(), libc::W_OK | libc::X_OK) } == 0;
            (!writable).then(|| format!("[validate] output_dir {d} is not writable here"))
        }
    }
}

/// Why another user could swap what is in the directory: they own it, or
/// may rename its entries (it is writable by them and not sticky).
fn swappable(m: &std::fs::Metadata) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    if m.uid() != me && m.uid() != 0 {
        return Some(format!("is owned by uid {}", m.uid()));
    }
    (m.mode() & 0o022 != 0 && m.mode() & 0o1000 == 0).then(|| {
        format!(
            "is writable by others without the sticky bit (mode {:o})",
            m.mode() & 0o7777
        )
    })
}

/// The check's output, at most `OUTPUT_MAX` bytes of it: a regular file
/// only, never through a link, never blocking on a FIFO.
fn read_output(path: &std::path::Path) -> Result<String, String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| e.to_string())?;
    if !f.metadata().is_ok_and(|m| m.is_file()) {
        return Err("not a regular file: refused".into());
    }
    let mut buf = Vec::new();
    f.take(OUTPUT_MAX)
        .read_to_end(&mut buf)
        .map_err(|e| e.to_string())?;
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Nothing but a regular file is read as the check's output: a link
    /// (to a secret) and a FIFO (which would block) are refused at once.
    #[test]
    fn only_a_regular_file_is_read_and_a_fifo_never_blocks() {
        let dir = tempfile::tempdir().expect("tempdir");
        let secret = dir.path().join("secret");
        std::fs::write(&secret, "root's last line").expect("secret");
        let link = dir.path().join("link.out");
        std::os::unix::fs::symlink(&secret, &link).expect("link");
        assert!(read_output(&link).is_err());
        let fifo = dir.path().join("fifo.out");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).expect("path");
        // SAFETY: a valid path; mkfifo has no other preconditions.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let start = std::time::Instant::now();
        let read = read_output(&fifo);
        assert!(
            read.is_err() && start.elapsed() < std::time::Duration::from_secs(2),
            "{read:?}"
        );
        let plain = dir.path().join("plain.out");
        std::fs::write(&plain, "ok").expect("plain");
        assert_eq!(read_output(&plain).as_deref(), Ok("ok"));
    }

    /// Issue 59: an output directory others may rename entries in (writable
    /// by them, not sticky) or that another user owns is refused; a sticky
    /// one (/tmp's 1777) and this user's own are taken.
    #[test]
    fn an_output_directory_others_can_swap_entries_in_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let set = |mode: u32| {
            std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(mode))
                .expect("chmod")
        };
        set(0o777);
        assert!(
            output_dir_cannot(dir.path()).is_some_and(|w| w.contains("sticky bit")),
            "{:?}",
            output_dir_cannot(dir.path())
        );
        set(0o775);
        assert!(output_dir_cannot(dir.path()).is_some());
        set(0o1777);
        assert_eq!(output_dir_cannot(dir.path()), None);
        set(0o755);
        assert_eq!(output_dir_cannot(dir.path()), None);
        // Another user's (the tests run as root: uid 65534 stands for one).
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            std::os::unix::fs::chown(dir.path(), Some(65534), None).expect("chown");
            assert!(
                output_dir_cannot(dir.path()).is_some_and(|w| w.contains("owned by uid 65534"))
            );
        }
    }

    /// The private directory is new, 0700, refused in a missing or linked
    /// parent, and gone when dropped.
    #[test]
    fn the_private_directory_is_new_and_its_own() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let p = PrivateDir::make(dir.path()).expect("made");
        let m = std::fs::metadata(p.path()).expect("meta");
        assert_eq!(m.permissions().mode() & 0o777, 0o700);
        let made = p.path().to_path_buf();
        drop(p);
        assert!(!made.exists());
        assert!(PrivateDir::make(&dir.path().join("missing")).is_err());
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(dir.path(), &link).expect("link");
        assert!(output_dir_cannot(&link).is_some());
    }
}
