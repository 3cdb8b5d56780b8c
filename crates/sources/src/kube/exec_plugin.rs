//! The kubeconfig's `exec` plugin, run once bounded before the client
//! runs it unbounded (issue 59: one that hangs hung `doctor` and `get`;
//! one with endless output aborted them).

use super::SourceError;

/// The exec plugin of `context`'s user, when it has one.
pub(super) fn exec_of<'a>(
    kc: &'a kube::config::Kubeconfig,
    context: Option<&str>,
) -> Option<&'a kube::config::ExecConfig> {
    let user = kc
        .contexts
        .iter()
        .find(|c| Some(c.name.as_str()) == context)?
        .context
        .as_ref()?
        .user
        .as_deref()?;
    kc.auth_infos
        .iter()
        .find(|a| a.name == user)?
        .auth_info
        .as_ref()?
        .exec
        .as_ref()
}

/// How long a plugin's answer stands for the connections after it (a
/// `doctor` connects several times; a console reconnecting later asks
/// again).
const EXEC_ANSWER_KEPT: std::time::Duration = std::time::Duration::from_secs(60);

/// [`preflight_exec`], its answer kept for [`EXEC_ANSWER_KEPT`] per
/// command line.
pub(super) async fn preflight_once(
    exec: &kube::config::ExecConfig,
    timeout: std::time::Duration,
) -> Result<(), SourceError> {
    use std::sync::Mutex;
    type Answers = Mutex<Vec<(String, std::time::Instant, Result<(), String>)>>;
    static ANSWERS: std::sync::OnceLock<Answers> = std::sync::OnceLock::new();
    let answers = ANSWERS.get_or_init(Default::default);
    let key = format!("{:?} {:?}", exec.command, exec.args);
    let kept = answers.lock().ok().and_then(|a| {
        a.iter()
            .find(|(k, at, _)| *k == key && at.elapsed() < EXEC_ANSWER_KEPT)
            .map(|(_, _, r)| r.clone())
    });
    if let Some(r) = kept {
        return r.map_err(SourceError::Other);
    }
    let r = preflight_exec(exec, timeout).await;
    if let Ok(mut a) = answers.lock() {
        a.retain(|(k, _, _)| *k != key);
        a.push((
            key,
            std::time::Instant::now(),
            r.as_ref().map(|_| ()).map_err(|e| match e {
                SourceError::Other(s) => s.clone(),
                other => other.to_string(),
            }),
        ));
    }
    r
}

/// The most an exec plugin may print: a credential is a few KiB.
const EXEC_OUTPUT_MAX: u64 = 1 << 20;

/// Runs the exec plugin as the client will (its command, arguments and
/// environment; no terminal), within `timeout` and reading at most
/// [`EXEC_OUTPUT_MAX`] of its output; killed when it does not end.
async fn preflight_exec(
    exec: &kube::config::ExecConfig,
    timeout: std::time::Duration,
) -> Result<(), SourceError> {
    use tokio::io::AsyncReadExt;
    let Some(program) = exec.command.as_deref() else {
        return Ok(());
    };
    let shown = crate::text::one_line(program, 80);
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(exec.args.iter().flatten())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true);
    for e in exec.env.iter().flatten() {
        if let (Some(n), Some(v)) = (e.get("name"), e.get("value")) {
            cmd.env(n, v);
        }
    }
    for n in exec.drop_env.iter().flatten() {
        cmd.env_remove(n);
    }
    let fail = |why: String| {
        SourceError::Other(format!(
            "the kubeconfig's exec plugin {shown} {why}: fix the plugin, or use a kubeconfig with a token"
        ))
    };
    let mut child = cmd.spawn().map_err(|e| fail(format!("cannot run: {e}")))?;
    let mut out = Vec::new();
    let read = async {
        match child.stdout.take() {
            Some(o) => o
                .take(EXEC_OUTPUT_MAX + 1)
                .read_to_end(&mut out)
                .await
                .map(|_| ()),
            None => Ok(()),
        }
    };
    match tokio::time::timeout(timeout, read).await {
        Err(_) => {
            let _ = child.start_kill();
            return Err(fail(format!(
                "did not answer within {}",
                crate::text::duration(timeout.as_secs() as i64)
            )));
        }
        Ok(Err(e)) => return Err(fail(format!("could not be read: {e}"))),
        Ok(Ok(())) => {}
    }
    if out.len() as u64 > EXEC_OUTPUT_MAX {
        let _ = child.start_kill();
        return Err(fail(format!(
            "printed more than {} KiB",
            EXEC_OUTPUT_MAX >> 10
        )));
    }
    match tokio::time::timeout(timeout, child.wait()).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(fail(format!("could not be waited for: {e}"))),
        Err(_) => {
            let _ = child.start_kill();
            Err(fail(format!(
                "did not end within {}",
                crate::text::duration(timeout.as_secs() as i64)
            )))
        }
    }
}
