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

        /// The audit-record reader with a sealed step and any lines a
        /// local user can append (issue 59): ends of it with any seal or
        /// none, its armed line again under any outer id, any record, any
        /// bytes. Nothing panics, nothing but its own armed line is
        /// trusted, and no line without the key's end seal ends it.
        #[test]
        fn fuzz_audit_lines_never_end_or_forge_a_sealed_step(
            phases in prop::collection::vec(0usize..3, 0..4),
            seals in prop::collection::vec(prop::option::of("[0-9a-f]{0,70}"), 0..4),
            outer in "[0-9a-z-]{0,30}",
            path in prop::collection::vec(any::<usize>(), 0..5),
            v in arb_json(),
            raw in prop::collection::vec(any::<u8>(), 0..200),
        ) {
            let dir = tempfile::tempdir().expect("tempdir");
            let log = crate::audit::AuditLog::new(dir.path().join("audit.jsonl"))
                .with_key(Some(dir.path().join("k")));
            let key = log.seal_key_for_arming().expect("key");
            let good = sealed(&key);
            let id = good["id"].as_str().unwrap_or_default().to_string();
            let mut lines = vec![good.to_string()];
            for (i, p) in phases.iter().enumerate() {
                let phase = ["cancelled", "fired", "refused"][*p];
                let mut end = serde_json::json!({"id": id, "phase": phase, "time": 2,
                    "operator": "mallory", "host": "h", "cluster": "sim-16", "source": "sim",
                    "action": "requeue", "target": "4701", "preview": "p", "outcome": null});
                if let Some(Some(t)) = seals.get(i) {
                    end["seal"] = t.clone().into();
                }
                lines.push(end.to_string());
            }
            let mut again = good.clone();
            again["id"] = outer.into();
            replace_deep(&mut again, &path, v);
            lines.push(again.to_string());
            let mut text = lines.join("\n").into_bytes();
            text.push(b'\n');
            text.extend_from_slice(&raw);
            std::fs::write(&log.path, text).expect("write");
            let checked = log.armed_checked();
            let _ = checked.warnings();
            let want: Armed = serde_json::from_value(good["armed"].clone()).expect("armed");
            prop_assert_eq!(&checked.trusted, &vec![want]);
        }
    }
}
