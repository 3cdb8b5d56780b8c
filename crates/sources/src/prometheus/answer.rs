//! A Prometheus API answer (`/api/v1/query`, `/api/v1/query_range`),
//! typed, and parsed as it streams in with a bound on what it *keeps*
//! (issue 59): the series it holds (`limits.max_series_per_scrape`) and
//! the bytes they hold (`limits.max_answer_held_bytes`). A bound on the
//! text read is not one on memory: parsed into `serde_json::Value`, an
//! answer took 20–25 times its text, so an endless answer aborted the
//! process under a 4 GB cap long before 1 GiB of text was read. Here the
//! parse stops at the first series or byte past a bound, and the error
//! names the bound. Fields nightshift does not read (`infos`, `stats`)
//! are skipped, never held.
//!
//! The bound lives in a thread-local for the one parse running on this
//! thread ([`parse_bounded`] sets and clears it), so the derived
//! deserializers of the nested types can charge it; a parse with no bound
//! set (a test's `from_value`) charges nothing.

use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use std::cell::Cell;
use std::fmt;

/// An answer: its status, Prometheus's error words, its warnings and data.
#[derive(Debug, Default, Deserialize)]
pub struct Answer {
    #[serde(default)]
    pub status: Text,
    #[serde(default, rename = "errorType")]
    pub error_type: Option<Text>,
    #[serde(default)]
    pub error: Option<Text>,
    #[serde(default)]
    pub warnings: Vec<Text>,
    #[serde(default)]
    pub data: Option<Data>,
}

#[derive(Debug, Default, Deserialize)]
pub struct Data {
    #[serde(default, rename = "resultType")]
    pub result_type: Text,
    #[serde(default)]
    pub result: SeriesList,
}

/// The series of an answer, each charged to the bound as it is read.
#[derive(Debug, Default)]
pub struct SeriesList(pub Vec<Series>);

/// One series: its labels (`__name__` among them) and its sample (an
/// instant answer) or samples (a range).
#[derive(Debug, Default, Deserialize)]
pub struct Series {
    #[serde(default)]
    pub metric: Labels,
    #[serde(default)]
    pub value: Option<Point>,
    #[serde(default)]
    pub values: Points,
}

/// A series' labels whose values are strings (others are skipped).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Labels(pub Vec<(String, String)>);

/// A range's samples.
#[derive(Debug, Default)]
pub struct Points(pub Vec<Point>);

/// One sample: its time (seconds) and value; NaN where either is not a
/// number (Prometheus's `"NaN"`, `"+Inf"` and `"-Inf"` are read as such).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    pub time: f64,
    pub value: f64,
}

/// A string of the answer, charged to the bound.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Text(pub String);

impl Text {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Labels {
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    pub fn contains(&self, key: &str) -> bool {
        self.0.iter().any(|(k, _)| k == key)
    }
}

impl Series {
    pub fn label(&self, key: &str) -> Option<&str> {
        self.metric.get(key)
    }

    /// The host a series is about: its `Hostname`/`hostname` label, else
    /// the target scraped (`instance` without its port).
    pub fn host(&self) -> Option<&str> {
        self.label("Hostname")
            .or_else(|| self.label("hostname"))
            .or_else(|| {
                self.label("instance")
                    .map(|i| i.split(':').next().unwrap_or(i))
            })
    }
}

/// Which bound a parse passed, and its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Passed {
    Series(u64),
    Bytes(u64),
}

impl Passed {
    pub fn key(self) -> &'static str {
        match self {
            Passed::Series(_) => "limits.max_series_per_scrape",
            Passed::Bytes(_) => "limits.max_answer_held_bytes",
        }
    }
}

impl fmt::Display for Passed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Passed::Series(n) => write!(f, "more than {n} series"),
            Passed::Bytes(n) => write!(f, "more than {n} bytes once parsed"),
        }
    }
}

/// Why a bounded parse gave no answer.
#[derive(Debug)]
pub enum ParseError {
    /// The answer passed a bound: the parse stopped there.
    Held(Passed),
    Json(serde_json::Error),
}

#[derive(Clone, Copy)]
struct Budget {
    max_series: u64,
    max_bytes: u64,
    series: u64,
    bytes: u64,
    passed: Option<Passed>,
}

thread_local! {
    static BUDGET: Cell<Option<Budget>> = const { Cell::new(None) };
}

/// Charges one series and `bytes` to this thread's parse, if bounded.
fn charge(series: u64, bytes: usize) -> Result<(), Passed> {
    BUDGET.with(|cell| {
        let Some(mut b) = cell.get() else {
            return Ok(());
        };
        b.series += series;
        b.bytes = b.bytes.saturating_add(bytes as u64);
        let passed = if b.series > b.max_series {
            Some(Passed::Series(b.max_series))
        } else if b.bytes > b.max_bytes {
            Some(Passed::Bytes(b.max_bytes))
        } else {
            None
        };
        b.passed = b.passed.or(passed);
        cell.set(Some(b));
        passed.map_or(Ok(()), Err)
    })
}

fn charged<E: de::Error>(series: u64, bytes: usize) -> Result<(), E> {
    charge(series, bytes).map_err(|p| E::custom(format_args!("the answer holds {p}")))
}

/// What a `String` costs beside its text.
const STRING_COST: usize = std::mem::size_of::<String>();

/// Parses an answer from `reader`, keeping at most `max_series` series and
/// about `max_bytes` bytes of what they hold.
pub fn parse_bounded(
    reader: impl std::io::Read,
    max_series: u64,
    max_bytes: u64,
) -> Result<Answer, ParseError> {
    BUDGET.with(|c| {
        c.set(Some(Budget {
            max_series,
            max_bytes,
            series: 0,
            bytes: 0,
            passed: None,
        }))
    });
    let parsed = serde_json::from_reader::<_, Answer>(reader);
    let budget = BUDGET.with(|c| c.take());
    match (parsed, budget.and_then(|b| b.passed)) {
        (_, Some(p)) => Err(ParseError::Held(p)),
        (Ok(a), None) => Ok(a),
        (Err(e), None) => Err(ParseError::Json(e)),
    }
}

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Text, D::Error> {
        let s = String::deserialize(d)?;
        charged(0, STRING_COST + s.len())?;
        Ok(Text(s))
    }
}

impl<'de> Deserialize<'de> for SeriesList {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<SeriesList, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = SeriesList;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a list of series")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<SeriesList, A::Error> {
                let mut out = Vec::new();
                // Checked at each series (its labels and samples as they
                // are read), not once the list is whole.
                while let Some(s) = seq.next_element::<Series>()? {
                    charged(1, std::mem::size_of::<Series>())?;
                    out.push(s);
                }
                Ok(SeriesList(out))
            }
        }
        d.deserialize_seq(V)
    }
}

impl<'de> Deserialize<'de> for Labels {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Labels, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Labels;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a series' labels")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Labels, A::Error> {
                let mut out = Vec::new();
                while let Some(k) = map.next_key::<String>()? {
                    if let Scalar::Text(v) = map.next_value::<Scalar>()? {
                        charged(0, 2 * STRING_COST + k.len() + v.len())?;
                        out.push((k, v));
                    }
                }
                Ok(Labels(out))
            }
        }
        d.deserialize_map(V)
    }
}

impl<'de> Deserialize<'de> for Points {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Points, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Points;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a list of samples")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Points, A::Error> {
                let mut out = Vec::new();
                while let Some(p) = seq.next_element::<Point>()? {
                    charged(0, std::mem::size_of::<Point>())?;
                    out.push(p);
                }
                Ok(Points(out))
            }
        }
        d.deserialize_seq(V)
    }
}

impl<'de> Deserialize<'de> for Point {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Point, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Point;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a sample [time, \"value\"]")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Point, A::Error> {
                let time = seq
                    .next_element::<Scalar>()?
                    .map_or(f64::NAN, Scalar::number);
                let value = seq
                    .next_element::<Scalar>()?
                    .map_or(f64::NAN, Scalar::number);
                // A longer list than Prometheus writes: the rest is skipped.
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Point { time, value })
            }
        }
        d.deserialize_seq(V)
    }
}

/// A value where a string or number is expected; anything else is
/// skipped (read, never held).
enum Scalar {
    Text(String),
    Number(f64),
    Other,
}

impl Scalar {
    /// As a number: a string as Prometheus writes one (`"NaN"`, `"+Inf"`
    /// parse as such), anything else NaN.
    fn number(self) -> f64 {
        match self {
            Scalar::Number(n) => n,
            Scalar::Text(s) => s.parse().unwrap_or(f64::NAN),
            Scalar::Other => f64::NAN,
        }
    }
}

impl<'de> Deserialize<'de> for Scalar {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Scalar, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Scalar;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string or a number")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Scalar, E> {
                Ok(Scalar::Text(v.to_string()))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Scalar, E> {
                Ok(Scalar::Text(v))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Scalar, E> {
                Ok(Scalar::Number(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Scalar, E> {
                Ok(Scalar::Number(v as f64))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Scalar, E> {
                Ok(Scalar::Number(v as f64))
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Scalar, E> {
                Ok(Scalar::Other)
            }
            fn visit_unit<E: de::Error>(self) -> Result<Scalar, E> {
                Ok(Scalar::Other)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Scalar, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Scalar::Other)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Scalar, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Scalar::Other)
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vector(series: usize) -> String {
        let one = r#"{"metric":{"__name__":"DCGM_FI_DEV_GPU_TEMP","gpu":"0","Hostname":"n1"},"value":[1796006000,"61"]}"#;
        format!(
            r#"{{"status":"success","data":{{"resultType":"vector","result":[{}]}}}}"#,
            vec![one; series].join(",")
        )
    }

    #[test]
    fn an_answer_is_typed_with_prometheus_numbers_and_odd_values_skipped() {
        let text = r#"{"status":"success","warnings":["w"],"infos":["i"],"data":{"resultType":"matrix","result":[
            {"metric":{"__name__":"x","gpu":"3","bad":7,"nested":{"a":1}},"values":[[1,"NaN"],[2,"+Inf"],[3,"-Inf"],[4,"1.5"],[5,"no"],["6",true,"extra"]]}]}}"#;
        let a = parse_bounded(text.as_bytes(), 10, 1 << 20).expect("answer");
        assert_eq!(a.status.as_str(), "success");
        assert_eq!(a.warnings, [Text("w".into())]);
        let d = a.data.expect("data");
        assert_eq!(d.result_type.as_str(), "matrix");
        let s = &d.result.0[0];
        assert_eq!(
            s.metric.0,
            [("__name__".into(), "x".into()), ("gpu".into(), "3".into())],
            "non-string label values are skipped"
        );
        let v: Vec<(f64, f64)> = s.values.0.iter().map(|p| (p.time, p.value)).collect();
        assert!(v[0].1.is_nan());
        assert_eq!(v[1].1, f64::INFINITY);
        assert_eq!(v[2].1, f64::NEG_INFINITY);
        assert_eq!(v[3], (4.0, 1.5));
        assert!(v[4].1.is_nan());
        assert_eq!(v[5].0, 6.0, "a time as a string is read");
        assert!(v[5].1.is_nan());
    }

    /// The bounds are on what is kept, checked as it is read: an answer one
    /// series past the series bound, or a byte past the bytes', stops with
    /// that bound named — and one at the bound is whole.
    #[test]
    fn a_parse_stops_at_the_first_series_or_byte_past_its_bound() {
        let a = parse_bounded(vector(3).as_bytes(), 3, 1 << 20).expect("at the bound");
        assert_eq!(a.data.expect("data").result.0.len(), 3);
        let e = parse_bounded(vector(4).as_bytes(), 3, 1 << 20).expect_err("past it");
        assert!(matches!(e, ParseError::Held(Passed::Series(3))), "{e:?}");
        // What three series cost, then one byte less.
        let cost = {
            BUDGET.with(|c| {
                c.set(Some(Budget {
                    max_series: u64::MAX,
                    max_bytes: u64::MAX,
                    series: 0,
                    bytes: 0,
                    passed: None,
                }))
            });
            let _ = serde_json::from_str::<Answer>(&vector(3));
            BUDGET.with(|c| c.take()).map_or(0, |b| b.bytes)
        };
        assert!(cost > 3 * 100, "{cost}");
        assert!(parse_bounded(vector(3).as_bytes(), 10, cost).is_ok());
        let e = parse_bounded(vector(3).as_bytes(), 10, cost - 1).expect_err("a byte short");
        assert!(matches!(e, ParseError::Held(Passed::Bytes(_))), "{e:?}");
        // The bound is gone with the parse.
        assert!(serde_json::from_str::<Answer>(&vector(20)).is_ok());
    }

    /// An endless answer stops at the bound, without reading on: the
    /// reader below never ends.
    #[test]
    fn an_endless_answer_stops_at_the_bound() {
        struct Endless(usize);
        impl std::io::Read for Endless {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                let head = br#"{"status":"success","data":{"resultType":"vector","result":["#;
                let one = br#"{"metric":{"__name__":"DCGM_FI_DEV_GPU_TEMP","gpu":"0","Hostname":"n1"},"value":[1,"6"]},"#;
                let src: &[u8] = if self.0 == 0 { head } else { one };
                self.0 += 1;
                let n = buf.len().min(src.len());
                buf[..n].copy_from_slice(&src[..n]);
                Ok(n)
            }
        }
        let e = parse_bounded(std::io::BufReader::new(Endless(0)), u64::MAX, 1 << 20)
            .expect_err("endless");
        assert!(matches!(e, ParseError::Held(Passed::Bytes(_))), "{e:?}");
    }
}
