//! The armed record, fuzzed (issue 43): any value at any depth of a
//! sealed record, or any record, read, checked and listed without a panic;
//! a changed step is never trusted.

mod fuzz {
    use crate::model::Armed;
    use crate::seal::*;
    use nightshift_sources::fuzzing::{arb_json, replace_deep};
    use proptest::prelude::*;

    /// A sealed step as the audit log keeps it, as JSON.
    fn sealed(key: &[u8]) -> serde_json::Value {
        let mut a = crate::seal::tests::step();
        a.tag = tag(key, &a);
        serde_json::json!({"id": a.id, "phase": "armed", "time": 1, "operator": "x",
            "scheduler_user": null, "host": "h", "cluster": "sim-16", "source": "sim",
            "action": "requeue", "target": "4701", "reason": null, "preview": "p",
            "outcome": null, "armed": a})
    }

    proptest! {
        /// Any value at any depth of a sealed armed record, or any record:
        /// reading the log, checking the seal and listing never panic, and
        /// a changed step is never trusted.
        #[test]
        fn fuzz_armed_records(path in prop::collection::vec(any::<usize>(), 0..5), v in arb_json(), raw in arb_json()) {
            let dir = tempfile::tempdir().expect("tempdir");
            let log = crate::audit::AuditLog::new(dir.path().join("audit.jsonl"))
                .with_key(Some(dir.path().join("k")));
            let key = log.seal_key_for_arming().expect("key");
            let good = sealed(&key);
            let mut bad = good.clone();
            replace_deep(&mut bad, &path, v);
            let text = format!("{good}\n{bad}\n{raw}\n");
            std::fs::write(&log.path, text).expect("write");
            let checked = log.armed_checked();
            let _ = checked.warnings();
            let _ = crate::follow::short_ids(&checked.trusted);
            for a in &checked.trusted {
                prop_assert!(verify(&key, a) && armable(a).is_ok());
                let want: Armed = serde_json::from_value(good["armed"].clone()).expect("armed");
                prop_assert_eq!(a, &want);
            }
        }
    }
}
