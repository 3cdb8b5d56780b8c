//! The audit log: interrupted intents found at the next start, torn and
//! unreadable lines, rotation, and logs that must not be trusted.

use super::*;

#[test]
fn an_interrupted_action_is_found_at_the_next_start() {
    let b = bench();
    let intent = Record {
        reason: Some("xid79".into()),
        ..intent("x-1", "gpu07", 1)
    };
    b.log.write(&intent).expect("write");
    let left = b.log.unfinished();
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].target, "gpu07");
    let warnings = crate::audit::warn_unfinished(&b.log);
    assert!(
        warnings[0].contains("interrupted") && warnings[0].contains("gpu07"),
        "{warnings:?}"
    );
}

#[test]
fn a_torn_last_line_does_not_swallow_the_next_record() {
    let b = bench();
    b.log.write(&intent("a", "gpu01", 1)).expect("write");
    // A crash mid-write: half a record, no newline.
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&b.log.path)
        .expect("open");
    std::io::Write::write_all(&mut f, b"{\"id\":\"b\",\"phase\":\"int").expect("tear");
    b.log.write(&intent("c", "gpu03", 3)).expect("write");
    let ids: Vec<String> = b.log.read().into_iter().map(|r| r.id).collect();
    assert_eq!(ids, ["a", "c"], "the record after the torn line is whole");
    let text = std::fs::read_to_string(&b.log.path).expect("read");
    assert_eq!(
        text.lines().count(),
        3,
        "the torn line is kept, on its own:\n{text}"
    );
}

#[test]
fn every_interrupted_intent_is_counted_and_the_newest_named() {
    let b = bench();
    for (i, t) in ["gpu01", "gpu02", "gpu03", "gpu04", "gpu05"]
        .iter()
        .enumerate()
    {
        b.log
            .write(&intent(&format!("x{i}"), t, i as i64 + 1))
            .expect("write");
    }
    let w = crate::audit::warn_unfinished(&b.log);
    assert!(
        w[0].starts_with("5 earlier action(s) were interrupted"),
        "{}",
        w[0]
    );
    assert!(
        w[0].contains("gpu05") && w[0].contains("gpu04") && w[0].contains("gpu03"),
        "the newest three: {}",
        w[0]
    );
    assert!(w[0].contains("and 2 older"), "{}", w[0]);
    assert_eq!(w.len(), 6, "then every one on its own line");
}

#[test]
fn the_audit_is_read_across_rotated_files() {
    let b = bench();
    let old = b.log.path.with_file_name("audit.jsonl.1");
    let older = b.log.path.with_file_name("audit.jsonl.2");
    AuditLog::new(older)
        .write(&intent("1", "gpu01", 1))
        .expect("write");
    AuditLog::new(old)
        .write(&intent("2", "gpu02", 2))
        .expect("write");
    b.log.write(&intent("3", "gpu03", 3)).expect("write");
    let ids: Vec<String> = b.log.read().into_iter().map(|r| r.id).collect();
    assert_eq!(ids, ["1", "2", "3"], "oldest first");
}

/// A crash mid-write can tear the last line inside a multi-byte character:
/// the file is then not UTF-8 at all. Every whole record before it still
/// counts (the breaker, the interrupted intents) and the torn line is named.
#[test]
fn a_last_line_torn_mid_character_loses_no_earlier_record() {
    let b = bench();
    let now = crate::audit::now();
    // This cluster's records (the breaker counts a cluster's own).
    for (i, n) in ["h100-07", "h100-08", "a100-07"].iter().enumerate() {
        b.log
            .write(&Record {
                cluster: "sim-16".into(),
                ..intent(&format!("t{i}"), n, now)
            })
            .expect("write");
    }
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&b.log.path)
        .expect("open");
    // `é` is 0xC3 0xA9: the write stopped after its first byte.
    std::io::Write::write_all(&mut f, b"{\"id\":\"t3\",\"target\":\"h\xC3").expect("tear");
    drop(f);
    assert_eq!(b.log.nodes_taken_out_since(0), Ok(3), "the breaker counts");
    assert_eq!(b.log.unfinished().len(), 3, "the interrupted intents");
    let reading = b.log.reading();
    assert_eq!(reading.skipped.len(), 1, "{:?}", reading.skipped);
    assert!(
        reading.skipped[0].contains("line 4") && reading.skipped[0].contains("UTF-8"),
        "{:?}",
        reading.skipped
    );
    // Three nodes out in the window: a fourth is refused.
    let err = run(
        &b,
        &drain("a100-05"),
        "a100-05",
        &Policy::default(),
        Duration::ZERO,
    )
    .expect_err("the breaker");
    assert!(err.contains("circuit breaker"), "{err}");
}

/// A line past the bound (a planted or damaged log: 5 MiB of one line) is
/// read past without being held and named; the records around it count.
#[test]
fn an_endless_audit_line_is_skipped_not_held() {
    let b = bench();
    let now = crate::audit::now();
    let rec = |i: usize, n: &str| Record {
        cluster: "sim-16".into(),
        ..intent(&format!("t{i}"), n, now)
    };
    b.log.write(&rec(0, "h100-07")).expect("write");
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&b.log.path)
        .expect("open");
    std::io::Write::write_all(&mut f, &vec![b'x'; 5 << 20]).expect("long");
    std::io::Write::write_all(&mut f, b"\n").expect("end");
    drop(f);
    b.log.write(&rec(1, "h100-08")).expect("write");
    let reading = b.log.reading();
    assert_eq!(reading.records.len(), 2, "{:?}", reading.skipped);
    assert!(
        matches!(reading.skipped.as_slice(), [s] if s.contains("line 2") && s.contains("longer than")),
        "{:?}",
        reading.skipped
    );
    assert_eq!(b.log.nodes_taken_out_since(0), Ok(2));
}

/// A symlink where the audit log should be is never followed: nothing is
/// written through it, and no action is taken without an audit.
#[test]
fn an_audit_log_that_is_a_symlink_is_refused() {
    let b = bench();
    let target = b.log.path.with_file_name("elsewhere");
    std::fs::write(&target, "").expect("target");
    std::os::unix::fs::symlink(&target, &b.log.path).expect("symlink");
    let err = b
        .log
        .write(&intent("a", "h100-07", 1))
        .expect_err("refused");
    assert!(err.to_string().contains("symbolic link"), "{err}");
    assert_eq!(
        std::fs::read(&target).expect("read"),
        b"",
        "nothing written through it"
    );
    let p = preview(&b, &drain("h100-03"), &Policy::default(), Duration::ZERO);
    let why = p.refusal.map(|r| r.to_string()).unwrap_or_default();
    assert!(
        why.contains("symbolic link") && why.contains("audit log"),
        "{why}"
    );
    let err = run(
        &b,
        &drain("h100-03"),
        "h100-03",
        &Policy::default(),
        Duration::ZERO,
    )
    .expect_err("refused");
    assert!(err.contains("nothing sent"), "{err}");
    let c = snapshot(&b.world);
    assert!(
        c.node("h100-03").is_some_and(|n| n.state.schedulable()),
        "the node was not drained"
    );
}

/// An audit log that cannot be read at all (here: a directory) refuses
/// every mutating action with the reason, a cordon included.
#[test]
fn an_unreadable_audit_log_refuses_every_action() {
    let b = bench();
    std::fs::create_dir(&b.log.path).expect("dir");
    assert!(b.log.nodes_taken_out_since(0).is_err());
    let cordon = Action::Cordon {
        node: "h100-07".into(),
        reason: "t".into(),
    };
    let err = run(&b, &cordon, "y", &Policy::default(), Duration::ZERO).expect_err("refused");
    assert!(
        err.contains("not a regular file") && err.contains("nothing sent"),
        "{err}"
    );
}

/// `armed` and `follow` say what they could not read (issue 43): a torn
/// line among the armed steps is named with the steps that will not be
/// fired, never skipped in silence; the whole steps around it stand.
#[test]
fn armed_steps_name_the_torn_lines_they_skip() {
    let b = bench();
    let c = snapshot(&b.world);
    let a = crate::follow::arm(
        &b.log,
        &who(),
        drain("h100-03"),
        crate::engine::armed::after_checkpoints(&c, &["4700".to_string()]),
        c.time,
    )
    .expect("armed");
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&b.log.path)
        .expect("open");
    std::io::Write::write_all(&mut f, b"{\"id\":\"torn\",\"phase\":\"arm").expect("tear");
    drop(f);
    let checked = b.log.armed_checked();
    assert_eq!(checked.trusted, vec![a]);
    let said = checked.warnings();
    assert!(
        said.iter()
            .any(|w| w.contains("line 2") && w.contains("skipped")),
        "{said:?}"
    );
}
