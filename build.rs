//! What `nightshift --version` says beside the version: the commit the
//! binary was built from, its target, and the oldest glibc it runs on
//! (the portable build sets `NIGHTSHIFT_GLIBC_FLOOR`; a normal build runs
//! on its build host's glibc or newer).

use std::process::Command;

fn main() {
    let commit = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|c| !c.is_empty() && c.chars().all(|ch| ch.is_ascii_hexdigit()))
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=NIGHTSHIFT_COMMIT={commit}");
    let target = std::env::var("TARGET").unwrap_or_else(|_| "unknown".into());
    println!("cargo:rustc-env=NIGHTSHIFT_TARGET={target}");
    let glibc = std::env::var("NIGHTSHIFT_GLIBC_FLOOR")
        .ok()
        .filter(|v| !v.is_empty() && v.chars().all(|c| c.is_ascii_digit() || c == '.'))
        .map_or_else(
            || "the build host's or newer".to_string(),
            |v| format!("{v} or newer"),
        );
    println!("cargo:rustc-env=NIGHTSHIFT_GLIBC={glibc}");
    println!("cargo:rerun-if-env-changed=NIGHTSHIFT_GLIBC_FLOOR");
    // A new commit: HEAD, the branch it names, or the packed refs moved.
    println!("cargo:rerun-if-changed=.git/HEAD");
    println!("cargo:rerun-if-changed=.git/packed-refs");
    if let Ok(head) = std::fs::read_to_string(".git/HEAD")
        && let Some(r) = head.trim().strip_prefix("ref: ")
    {
        println!("cargo:rerun-if-changed=.git/{r}");
    }
}
