//! Strategies shared by the property tests that fuzz parsers and mappers
//! (short in `cargo test`, long with scripts/fuzz.sh).

use proptest::prelude::*;
use serde_json::Value;

/// Any JSON value, hostile numbers and strings included.
pub fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        prop_oneof![
            Just(4294967295u64),
            Just(4294967294u64),
            Just(u64::MAX),
            Just(1u64 << 32)
        ]
        .prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        "\\PC{0,24}".prop_map(Value::String),
        prop_oneof![
            Just("gpu:h100:4294967295"),
            Just("a[0-99999]b[0-99999]"),
            Just("gpu[01-"),
            Just("\u{1b}]0;pwn\u{7}"),
            Just("gres:gpu:8(IDX:0-7)")
        ]
        .prop_map(|s| Value::String(s.to_string())),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z_]{1,8}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Replaces the value found by walking `path` into `v` (each step picks a
/// child of an object or array, modulo its size) with `new`: a hostile
/// value at any depth of a real document.
pub fn replace_deep(v: &mut Value, path: &[usize], new: Value) {
    let Some((&k, rest)) = path.split_first() else {
        *v = new;
        return;
    };
    match v {
        Value::Object(m) if !m.is_empty() => {
            let key = m.keys().nth(k % m.len()).cloned().unwrap_or_default();
            if let Some(child) = m.get_mut(&key) {
                replace_deep(child, rest, new);
            }
        }
        Value::Array(a) if !a.is_empty() => {
            let n = a.len();
            replace_deep(&mut a[k % n], rest, new);
        }
        _ => *v = new,
    }
}
