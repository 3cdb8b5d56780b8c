//! Floats written by their bits where a value must come back exactly:
//! what the analysis remembers and the health numbers, recorded before
//! each keyframe, must equal what a reader that took in every snapshot
//! from the start holds (JSON's decimal floats are read back to within a
//! unit in the last place, not always to the bit).

use serde::{Deserialize, Deserializer, Serialize, Serializer};

pub fn serialize<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
    v.to_bits().serialize(s)
}

pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    u64::deserialize(d).map(f64::from_bits)
}

/// The same for an `Option<f64>`.
pub mod option {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(v: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
        v.map(f64::to_bits).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
        Option::<u64>::deserialize(d).map(|b| b.map(f64::from_bits))
    }
}

#[cfg(test)]
mod tests {
    #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
    struct V {
        #[serde(with = "super")]
        a: f64,
        #[serde(with = "super::option")]
        b: Option<f64>,
    }

    /// Values JSON's decimal form can lose a bit of come back whole.
    #[test]
    fn floats_come_back_to_the_bit() {
        for x in [
            0.1 + 0.2,
            1.0 / 3.0,
            f64::MIN_POSITIVE,
            2.225_073_858_507_201e-308,
            -0.0,
        ] {
            let v = V {
                a: x,
                b: Some(x * 7.0),
            };
            let back: V =
                serde_json::from_str(&serde_json::to_string(&v).expect("json")).expect("back");
            assert_eq!(back.a.to_bits(), v.a.to_bits());
            assert_eq!(back.b.map(f64::to_bits), v.b.map(f64::to_bits));
        }
    }
}
