//! `nightshift doctor` on Slurm: the token slurmrestd is sent, the API
//! version chosen and the Slurm it speaks for, and the commands
//! (`scontrol`, `sbatch`, `scancel`) that fill the REST versions' gaps.

use super::SlurmConfig;
use super::client::Client;
use crate::protocol::doctor::{Check, Verdict, check};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// The Slurm checks after the scheduler's reading: the token, the API
/// and the commands.
/// `reached`: slurmrestd answered the reading; where it did not, its API
/// is not asked again (that would wait for a dead server twice).
pub async fn checks(cfg: &SlurmConfig, now: i64, reached: bool) -> Vec<Check> {
    let mut out = vec![token(cfg.token.as_deref(), now)];
    if reached {
        out.push(api(cfg).await);
    }
    out.push(scontrol(&cfg.scontrol, cfg.slurm_conf.as_deref()));
    out
}

/// The API version nightshift chose and the Slurm release slurmrestd
/// reports for itself (its ping's `meta`).
async fn api(cfg: &SlurmConfig) -> Check {
    let client = match Client::new(cfg) {
        Ok(c) => c,
        Err(e) => return check("slurm api", Verdict::Fail, e.to_string(), None),
    };
    let version = match client.discover().await {
        Ok(v) => v,
        Err(e) => {
            return check(
                "slurm api",
                Verdict::Fail,
                format!("no API version chosen: {e}"),
                Some("[slurm] api_version names one slurmrestd serves, or leave it out"),
            );
        }
    };
    let release = client
        .get(&format!("/slurm/{version}/ping"))
        .await
        .ok()
        .and_then(|v| {
            let meta = &v["meta"];
            let s = if meta["slurm"].is_object() {
                &meta["slurm"]
            } else {
                &meta["Slurm"]
            };
            s["release"].as_str().map(str::to_string).or_else(|| {
                let v = &s["version"];
                Some(format!(
                    "{}.{}.{}",
                    v["major"]
                        .as_str()
                        .map_or(v["major"].to_string(), str::to_string),
                    v["minor"]
                        .as_str()
                        .map_or(v["minor"].to_string(), str::to_string),
                    v["micro"]
                        .as_str()
                        .map_or(v["micro"].to_string(), str::to_string),
                ))
                .filter(|r| !r.contains("null"))
            })
        });
    let pinned = if cfg.api_version.is_some() {
        "as [slurm] api_version asks"
    } else {
        "the newest both speak"
    };
    check(
        "slurm api",
        Verdict::Ok,
        format!(
            "{version} ({pinned}); slurmrestd says Slurm {}",
            release.as_deref().unwrap_or("(release not given)")
        ),
        None,
    )
}

/// Slurm's JWT: whether it is there and when it expires (its `exp`
/// claim, read without checking its signature: slurmrestd does that).
pub fn token(token: Option<&str>, now: i64) -> Check {
    let Some(t) = token.filter(|t| !t.trim().is_empty()) else {
        return check(
            "slurm token",
            Verdict::Fail,
            "no token: slurmrestd refuses every request".into(),
            Some("`scontrol token lifespan=86400`, then SLURM_JWT=… (or [slurm] token_file)"),
        );
    };
    let exp = t
        .split('.')
        .nth(1)
        .and_then(|p| URL_SAFE_NO_PAD.decode(p.trim_end_matches('=')).ok())
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .and_then(|v| v["exp"].as_i64());
    let Some(e) = exp else {
        return check(
            "slurm token",
            Verdict::Warn,
            "not a JWT with an expiry (exp) nightshift can read".into(),
            None,
        );
    };
    // An expiry no clock can show (i64::MIN, a year past 9999): said as
    // what it is, not "expired at ?" (issue 59).
    if !(0..=253_402_300_799).contains(&e) {
        return check(
            "slurm token",
            Verdict::Fail,
            format!("its expiry (exp {e}) is not a time: not a token slurmrestd made"),
            Some("`scontrol token lifespan=86400`, then SLURM_JWT=…"),
        );
    }
    let at = crate::text::datetime(e);
    let (verdict, detail, fix) = if e <= now {
        (
            Verdict::Fail,
            format!("expired at {at} ({} ago)", crate::text::duration(now - e)),
            Some("`scontrol token lifespan=86400`, then SLURM_JWT=…"),
        )
    } else {
        let detail = format!("expires at {at} (in {})", crate::text::duration(e - now));
        if e - now < 3600 {
            let fix = "renew it before the night: `scontrol token lifespan=86400`";
            (Verdict::Warn, detail, Some(fix))
        } else {
            (Verdict::Ok, detail, None)
        }
    };
    check("slurm token", verdict, detail, fix)
}

/// The `scontrol` the validation and the REST versions' gaps run, and
/// the cluster it talks to.
fn scontrol(program: &str, slurm_conf: Option<&std::path::Path>) -> Check {
    let found = find(program);
    let conf = slurm_conf
        .map(|p| p.display().to_string())
        .or_else(|| std::env::var("SLURM_CONF").ok());
    // sbatch runs a validation, scancel ends the jobs of a drain that does
    // not requeue them: both are looked for beside scontrol, as sent.
    let missing: Vec<String> = [("sbatch", "validation"), ("scancel", "a drain's cancels")]
        .iter()
        .filter(|(p, _)| find(&super::exec::beside(program, p)).is_none())
        .map(|(p, what)| format!("{p} ({what})"))
        .collect();
    match (found, conf) {
        (None, _) => check(
            "scontrol",
            Verdict::Warn,
            format!("{program} not found: validation and the calls REST lacks cannot run"),
            Some("install slurm-client here, or [slurm] scontrol = PATH"),
        ),
        (Some(f), Some(c)) if !std::path::Path::new(&c).is_file() => check(
            "scontrol",
            Verdict::Fail,
            format!(
                "{f}, but its SLURM_CONF {c} is not a file: it would ask another cluster, or none"
            ),
            Some("[slurm] slurm_conf = the cluster's slurm.conf"),
        ),
        (Some(f), c) if !missing.is_empty() => check(
            "scontrol",
            Verdict::Warn,
            format!(
                "{f}{}, but not {} beside it",
                c.map_or(String::new(), |c| format!(" with SLURM_CONF={c}")),
                missing.join(" or ")
            ),
            Some("install slurm-client's commands together, or [slurm] scontrol = PATH"),
        ),
        (Some(f), c) => check(
            "scontrol",
            Verdict::Ok,
            format!(
                "{f}{}; sbatch and scancel beside it",
                c.map_or(String::new(), |c| format!(" with SLURM_CONF={c}"))
            ),
            None,
        ),
    }
}

/// Where `program` is: itself when it names a path, else the first on PATH.
fn find(program: &str) -> Option<String> {
    if program.contains('/') {
        std::path::Path::new(program)
            .is_file()
            .then(|| program.to_string())
    } else {
        std::env::var_os("PATH").and_then(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join(program))
                .find(|f| f.is_file())
                .map(|f| f.display().to_string())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;

    fn jwt(exp: i64) -> String {
        // {"alg":"HS256"} . {"exp":…,"sun":"root"} . signature
        let b64 = |s: &str| URL_SAFE_NO_PAD.encode(s);
        format!(
            "{}.{}.c2ln",
            b64(r#"{"alg":"HS256"}"#),
            b64(&format!(r#"{{"exp":{exp},"sun":"root"}}"#))
        )
    }

    #[test]
    fn a_token_is_read_by_its_expiry() {
        let now = 1_800_000_000;
        assert_eq!(token(Some(&jwt(now + 86_400)), now).verdict, Verdict::Ok);
        let soon = token(Some(&jwt(now + 600)), now);
        assert_eq!(soon.verdict, Verdict::Warn, "{soon:?}");
        let gone = token(Some(&jwt(now - 7200)), now);
        assert_eq!(gone.verdict, Verdict::Fail);
        assert!(
            gone.detail.contains("expired at") && gone.detail.contains("2h"),
            "{gone:?}"
        );
        assert_eq!(token(None, now).verdict, Verdict::Fail);
        assert_eq!(token(Some("not-a-jwt"), now).verdict, Verdict::Warn);
        // An expiry that is no time (issue 59: "expired at ?").
        for exp in [i64::MIN, -1, i64::MAX] {
            let odd = token(Some(&jwt(exp)), now);
            assert_eq!(odd.verdict, Verdict::Fail, "{odd:?}");
            assert!(
                odd.detail.contains("is not a time") && !odd.detail.contains('?'),
                "{odd:?}"
            );
        }
    }
}
