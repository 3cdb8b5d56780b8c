//! slurmrestd's JSON, as v0.0.38 (Slurm 22.05) and v0.0.39–v0.0.44
//! (23.02–25.11) write it. Every field is optional; numbers may be plain,
//! `null`, `-1`, or `{"set", "infinite", "number"}`; states may be a string
//! with flags beside it or an array.

use crate::error::{Invalid, invalid};
use serde::Deserialize;
use serde::de::{Deserializer, Error as _};
use serde_json::Value;

/// A Slurm number: unknown (`None`, not set), infinite, or a value.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Num {
    pub value: Option<i64>,
    pub infinite: bool,
}

impl Num {
    pub fn get(self) -> Option<i64> {
        if self.infinite { None } else { self.value }
    }

    /// A positive value; 0 and negatives (Slurm's "none") are `None`.
    pub fn positive(self) -> Option<i64> {
        self.get().filter(|v| *v > 0)
    }
}

/// Slurm's NO_VAL and INFINITE sentinels (32- and 64-bit).
const SENTINELS: [u64; 4] = [
    0xFFFF_FFFE,
    0xFFFF_FFFF,
    0xFFFF_FFFF_FFFF_FFFE,
    0xFFFF_FFFF_FFFF_FFFF,
];

fn num_from(v: &Value) -> Result<Num, Invalid> {
    Ok(match v {
        Value::Null => Num::default(),
        Value::Number(n) => {
            if let Some(u) = n.as_u64() {
                if u == 0xFFFF_FFFF || u == 0xFFFF_FFFF_FFFF_FFFF {
                    Num {
                        value: None,
                        infinite: true,
                    }
                } else if SENTINELS.contains(&u) {
                    Num::default()
                } else {
                    Num {
                        value: i64::try_from(u).ok(),
                        infinite: false,
                    }
                }
            } else if let Some(i) = n.as_i64() {
                // -1 is Slurm's way of writing "unlimited" in v0.0.38.
                if i == -1 {
                    Num {
                        value: None,
                        infinite: true,
                    }
                } else {
                    Num {
                        value: Some(i),
                        infinite: false,
                    }
                }
            } else {
                Num {
                    value: n.as_f64().map(|f| f as i64),
                    infinite: false,
                }
            }
        }
        Value::Object(o) => {
            let set = o.get("set").and_then(Value::as_bool).unwrap_or(true);
            let infinite = o.get("infinite").and_then(Value::as_bool).unwrap_or(false);
            let inner = o
                .get("number")
                .map(num_from)
                .transpose()?
                .unwrap_or_default();
            if infinite {
                Num {
                    value: None,
                    infinite: true,
                }
            } else if !set {
                Num::default()
            } else {
                inner
            }
        }
        Value::String(s) => Num {
            value: s.trim().parse().ok(),
            infinite: false,
        },
        other => return Err(invalid!("expected a number, got {other}")),
    })
}

impl<'de> Deserialize<'de> for Num {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        num_from(&v).map_err(D::Error::custom)
    }
}

/// A state: `"mixed"` (v0.0.38, flags beside it) or `["MIXED","DRAIN"]`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct States(pub Vec<String>);

impl<'de> Deserialize<'de> for States {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(match Value::deserialize(d)? {
            Value::String(s) => States(vec![s.to_ascii_uppercase()]),
            Value::Array(a) => States(
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_ascii_uppercase)
                    .collect(),
            ),
            _ => States::default(),
        })
    }
}

/// A string that older versions may write as `null`.
fn string<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::String(s) => s,
        Value::Null => String::new(),
        other => other.to_string(),
    })
}

/// A list of strings, or a comma-separated string (`"gpu,debug"`).
fn strings<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::Array(a) => a
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect(),
        Value::String(s) => s
            .split(',')
            .filter(|x| !x.is_empty())
            .map(str::to_string)
            .collect(),
        _ => Vec::new(),
    })
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Node {
    #[serde(deserialize_with = "string")]
    pub name: String,
    pub state: States,
    #[serde(deserialize_with = "strings")]
    pub state_flags: Vec<String>,
    #[serde(deserialize_with = "string")]
    pub reason: String,
    #[serde(deserialize_with = "string")]
    pub reason_set_by_user: String,
    pub reason_changed_at: Num,
    pub boot_time: Num,
    #[serde(deserialize_with = "string")]
    pub gres: String,
    #[serde(deserialize_with = "string")]
    pub gres_used: String,
    #[serde(deserialize_with = "strings")]
    pub partitions: Vec<String>,
    #[serde(deserialize_with = "strings")]
    pub features: Vec<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Job {
    pub job_id: Num,
    /// The Slurm cluster's name (ClusterName in slurm.conf).
    #[serde(deserialize_with = "string")]
    pub cluster: String,
    #[serde(deserialize_with = "string")]
    pub name: String,
    #[serde(deserialize_with = "string")]
    pub user_name: String,
    #[serde(deserialize_with = "string")]
    pub account: String,
    #[serde(deserialize_with = "string")]
    pub partition: String,
    #[serde(deserialize_with = "string")]
    pub qos: String,
    pub priority: Num,
    pub job_state: States,
    #[serde(deserialize_with = "string")]
    pub state_reason: String,
    #[serde(deserialize_with = "string")]
    pub nodes: String,
    pub node_count: Num,
    #[serde(deserialize_with = "string")]
    pub tres_per_node: String,
    #[serde(deserialize_with = "string")]
    pub tres_per_job: String,
    #[serde(deserialize_with = "strings")]
    pub gres_detail: Vec<String>,
    pub submit_time: Num,
    #[serde(default)]
    pub eligible_time: Num,
    pub start_time: Num,
    pub end_time: Num,
    /// Minutes.
    pub time_limit: Num,
    pub array_job_id: Num,
    pub array_task_id: Num,
    #[serde(deserialize_with = "string")]
    pub array_task_string: String,
    pub restart_cnt: Num,
    #[serde(deserialize_with = "string")]
    pub comment: String,
    #[serde(deserialize_with = "opt_bool")]
    pub requeue: Option<bool>,
    /// `--switches`: the most leaf switches its nodes may span (v0.0.40
    /// on; 0 or absent: no limit).
    pub required_switches: Num,
    /// The same before v0.0.40 (Slurm 24.05 and older).
    pub minimum_switches: Num,
    /// `--nodelist`: the nodes it must run on, as a host list.
    #[serde(deserialize_with = "string")]
    pub required_nodes: String,
}

/// A boolean, or nothing for `null` or any other shape.
fn opt_bool<'de, D: Deserializer<'de>>(d: D) -> Result<Option<bool>, D::Error> {
    Ok(Value::deserialize(d)?.as_bool())
}

/// A nested object that may be `null` (or of another shape): its default
/// then, field by field, instead of rejecting the record.
fn lenient<'de, D: Deserializer<'de>, T: serde::de::DeserializeOwned + Default>(
    d: D,
) -> Result<T, D::Error> {
    let v = Value::deserialize(d)?;
    Ok(serde_json::from_value(v).unwrap_or_default())
}

/// v0.0.38 writes a partition's nodes as a string; v0.0.40+ as an object.
#[derive(Debug, Clone, Default)]
pub struct PartitionNodes(pub String);

impl<'de> Deserialize<'de> for PartitionNodes {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(PartitionNodes(match Value::deserialize(d)? {
            Value::String(s) => s,
            Value::Object(o) => o
                .get("configured")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            _ => String::new(),
        }))
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Maximums {
    pub time: Num,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Partition {
    #[serde(deserialize_with = "string")]
    pub name: String,
    pub nodes: PartitionNodes,
    /// v0.0.38: minutes, -1 unlimited.
    pub max_time_limit: Num,
    /// v0.0.40+.
    #[serde(deserialize_with = "lenient")]
    pub maximums: Maximums,
}

/// A reservation (`GET /reservations`): its nodes, flags (`MAINT`,
/// `IGNORE_JOBS`, …) and times, in every version's shape.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Reservation {
    #[serde(deserialize_with = "string")]
    pub name: String,
    #[serde(deserialize_with = "string")]
    pub node_list: String,
    #[serde(deserialize_with = "lenient")]
    pub flags: States,
    pub start_time: Num,
    pub end_time: Num,
}

/// The envelope every response has, the list under its own key. Lists stay
/// raw JSON here: each record is decoded on its own (`records`), so one
/// unreadable record is skipped, not the whole answer; a list that is not
/// there at all is `None`, and an error for whoever needed it.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Envelope {
    #[serde(deserialize_with = "lenient")]
    pub errors: Vec<Value>,
    pub nodes: Option<Vec<Value>>,
    pub jobs: Option<Vec<Value>>,
    pub partitions: Option<Vec<Value>>,
    pub reservations: Option<Vec<Value>>,
}

/// A record's name for a warning: its `name`, its `job_id`, else its place.
fn record_name(v: &Value, i: usize) -> String {
    let s = |k: &str| v.get(k).filter(|x| !x.is_null()).map(|x| x.to_string());
    s("name")
        .or_else(|| s("job_id"))
        .map(|n| crate::text::one_line(n.trim_matches('"'), 40))
        .unwrap_or_else(|| format!("#{i}"))
}

/// The list under `key` of an answer, record by record; an answer without
/// that list at all (`{}`) is an error, never an empty cluster.
pub fn list<T: serde::de::DeserializeOwned>(
    value: Value,
    key: &str,
    kind: &str,
) -> Result<(Vec<T>, Vec<String>), Invalid> {
    let env: Envelope =
        serde_json::from_value(value).map_err(|e| invalid!("not slurmrestd's envelope: {e}"))?;
    let list = match key {
        "nodes" => env.nodes,
        "jobs" => env.jobs,
        "reservations" => env.reservations,
        _ => env.partitions,
    };
    let list = list.ok_or_else(|| invalid!("the answer has no `{key}` list"))?;
    Ok(records(&list, kind))
}

/// Decodes each record of a list on its own; one that cannot be read is
/// skipped and named in a warning.
pub fn records<T: serde::de::DeserializeOwned>(
    list: &[Value],
    kind: &str,
) -> (Vec<T>, Vec<String>) {
    let mut out = Vec::with_capacity(list.len());
    let mut warnings = Vec::new();
    for (i, v) in list.iter().enumerate() {
        match T::deserialize(v) {
            Ok(r) => out.push(r),
            Err(e) => warnings.push(format!(
                "skipped {kind} {}: {}",
                record_name(v, i),
                crate::text::one_line(&e.to_string(), 120)
            )),
        }
    }
    (out, warnings)
}

/// The text of slurmrestd's `errors[]`, as it wrote it.
pub fn error_text(errors: &[Value]) -> Option<String> {
    if errors.is_empty() {
        return None;
    }
    let parts: Vec<String> = errors
        .iter()
        .map(|e| {
            let field = |k: &str| {
                e.get(k).and_then(|v| {
                    v.as_str()
                        .map(str::to_string)
                        .or_else(|| v.as_i64().map(|n| n.to_string()))
                })
            };
            let number = field("error_number").or_else(|| field("error_code"));
            let text = [field("error"), field("description")]
                .into_iter()
                .flatten()
                .filter(|s| !s.is_empty())
                .collect::<Vec<_>>()
                .join(": ");
            match (number, text.is_empty()) {
                (Some(n), false) => format!("{text} (error {n})"),
                (Some(n), true) => format!("error {n}"),
                (None, false) => text,
                (None, true) => e.to_string(),
            }
        })
        .collect();
    Some(parts.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_in_every_shape() {
        let n = |s: &str| serde_json::from_str::<Num>(s).expect("num");
        assert_eq!(n("5").get(), Some(5));
        assert_eq!(n("null").get(), None);
        assert!(n("-1").infinite);
        assert!(n("4294967295").infinite);
        assert_eq!(n("4294967294").get(), None);
        assert_eq!(
            n(r#"{"set":true,"infinite":false,"number":120}"#).get(),
            Some(120)
        );
        assert_eq!(
            n(r#"{"set":false,"infinite":false,"number":0}"#).get(),
            None
        );
        assert!(n(r#"{"set":true,"infinite":true,"number":0}"#).infinite);
    }

    #[test]
    fn states_as_string_or_array() {
        let s: States = serde_json::from_str(r#""mixed""#).expect("state");
        assert_eq!(s.0, ["MIXED"]);
        let s: States = serde_json::from_str(r#"["IDLE","DRAIN"]"#).expect("state");
        assert_eq!(s.0, ["IDLE", "DRAIN"]);
    }

    #[test]
    fn errors_read_verbatim() {
        let e: Vec<Value> = serde_json::from_str(
            r#"[{"error_number":2017,"error":"Invalid job id specified","source":"x"}]"#,
        )
        .expect("json");
        assert_eq!(
            error_text(&e).as_deref(),
            Some("Invalid job id specified (error 2017)")
        );
        assert_eq!(error_text(&[]), None);
    }
}
