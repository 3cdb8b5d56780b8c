//! What this binary is (`nightshift --version`): its version, the commit
//! it was built from, its target, and the oldest glibc it runs on (see
//! build.rs).

pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("NIGHTSHIFT_COMMIT"),
    ", ",
    env!("NIGHTSHIFT_TARGET"),
    ", glibc ",
    env!("NIGHTSHIFT_GLIBC"),
    ")"
);
