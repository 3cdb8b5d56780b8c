//! Sizes and bandwidths as people write them: `1.2TB`, `800 GiB`, `10GB/s`,
//! `25 Gbit/s`, `70B` parameters. Decimal prefixes are powers of 1000,
//! binary ones (`KiB`, `MiB`, `GiB`, `TiB`, `PiB`) powers of 1024.

/// Why a size, a rate, a count or a duration could not be read: one line
/// for the user, naming the text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnitError {
    #[error("{0:?} does not start with a number")]
    NotANumber(String),
    #[error("{0:?} must be a number ≥ 0")]
    Negative(String),
    #[error("{0:?} is out of range")]
    OutOfRange(String),
    #[error(
        "unknown size unit {unit:?} in {text:?} (try B, kB, MB, GB, TB, PB, KiB, MiB, GiB, TiB)"
    )]
    SizeUnit { unit: String, text: String },
    #[error("bandwidth {0:?} needs a rate unit such as GB/s or Gbit/s")]
    NoRate(String),
    #[error("unknown bandwidth unit {unit:?} in {text:?} (try MB/s, GB/s, GiB/s, Gbit/s)")]
    RateUnit { unit: String, text: String },
    #[error("bandwidth {0:?} must be more than zero")]
    ZeroRate(String),
    #[error("unknown count suffix {unit:?} in {text:?} (try K, M, B, T)")]
    CountSuffix { unit: String, text: String },
    #[error("unknown duration unit {unit:?} in {text:?} (try 90s, 30m, 1h06m, 2d)")]
    DurationUnit { unit: String, text: String },
}

/// For the callers that still speak in strings (the command line's
/// messages).
impl From<UnitError> for String {
    fn from(e: UnitError) -> String {
        e.to_string()
    }
}

/// Bytes in a size such as `1.2TB`, `512GiB`, `4096` (plain bytes).
pub fn parse_bytes(s: &str) -> Result<u64, UnitError> {
    let (num, unit) = split(s)?;
    let mult = byte_unit(unit).ok_or_else(|| UnitError::SizeUnit {
        unit: unit.to_string(),
        text: s.to_string(),
    })?;
    to_u64(num * mult, s)
}

/// Bytes per second in a bandwidth such as `10GB/s`, `25Gbit/s`, `800MiB/s`.
pub fn parse_bandwidth(s: &str) -> Result<f64, UnitError> {
    let t = s.trim();
    let body = t
        .strip_suffix("/s")
        .or_else(|| t.strip_suffix("ps"))
        .ok_or_else(|| UnitError::NoRate(s.to_string()))?;
    let (num, unit) = split(body)?;
    let mult = if let Some(prefix) = unit.strip_suffix("bit") {
        byte_unit(&format!("{prefix}B")).map(|m| m / 8.0)
    } else {
        byte_unit(unit)
    }
    .ok_or_else(|| UnitError::RateUnit {
        unit: unit.to_string(),
        text: s.to_string(),
    })?;
    let v = num * mult;
    if v > 0.0 && v.is_finite() {
        Ok(v)
    } else {
        Err(UnitError::ZeroRate(s.to_string()))
    }
}

/// A count such as `70B` (billion), `7e9`, `350M`.
pub fn parse_count(s: &str) -> Result<u64, UnitError> {
    let (num, unit) = split(s)?;
    let mult = match unit {
        "" => 1.0,
        "K" | "k" => 1e3,
        "M" => 1e6,
        "B" | "G" => 1e9,
        "T" => 1e12,
        _ => {
            return Err(UnitError::CountSuffix {
                unit: unit.to_string(),
                text: s.to_string(),
            });
        }
    };
    to_u64(num * mult, s)
}

/// A duration such as `30m`, `2h`, `90s`, `1d`, or plain seconds.
pub fn parse_duration(s: &str) -> Result<u64, UnitError> {
    // One number and one unit (`90s`, `1.5h`); else every duration
    // nightshift prints (`1h06m`, `9m58s`, `3d04h`) and humantime's forms.
    match one_unit(s) {
        Ok(v) => Ok(v),
        Err(e) => humantime::parse_duration(s.trim())
            .map(|d| d.as_secs())
            .map_err(|_| e),
    }
}

fn one_unit(s: &str) -> Result<u64, UnitError> {
    let (num, unit) = split(s)?;
    let mult = match unit {
        "" | "s" => 1.0,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        "d" => 86_400.0,
        _ => {
            return Err(UnitError::DurationUnit {
                unit: unit.to_string(),
                text: s.to_string(),
            });
        }
    };
    to_u64(num * mult, s)
}

/// The longest leading number (`1.2`, `7e9`) and the unit after it.
fn split(s: &str) -> Result<(f64, &str), UnitError> {
    let t = s.trim();
    let (num, rest) = (1..=t.len())
        .rev()
        .filter(|&i| {
            t.is_char_boundary(i) && t[..i].starts_with(|c: char| c.is_ascii_digit() || c == '.')
        })
        .find_map(|i| t[..i].parse::<f64>().ok().map(|n| (n, &t[i..])))
        .ok_or_else(|| UnitError::NotANumber(s.to_string()))?;
    if !num.is_finite() || num < 0.0 {
        return Err(UnitError::Negative(s.to_string()));
    }
    Ok((num, rest.trim()))
}

fn byte_unit(u: &str) -> Option<f64> {
    Some(match u {
        "" | "B" => 1.0,
        "k" | "kB" | "KB" => 1e3,
        "M" | "MB" => 1e6,
        "G" | "GB" => 1e9,
        "T" | "TB" => 1e12,
        "P" | "PB" => 1e15,
        "Ki" | "KiB" => 1024.0,
        "Mi" | "MiB" => 1024f64.powi(2),
        "Gi" | "GiB" => 1024f64.powi(3),
        "Ti" | "TiB" => 1024f64.powi(4),
        "Pi" | "PiB" => 1024f64.powi(5),
        _ => return None,
    })
}

fn to_u64(v: f64, s: &str) -> Result<u64, UnitError> {
    if v.is_finite() && v >= 0.0 && v < u64::MAX as f64 {
        Ok(v.round() as u64)
    } else {
        Err(UnitError::OutOfRange(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_bytes("1.2TB"), Ok(1_200_000_000_000));
        assert_eq!(parse_bytes("1.2 TB"), Ok(1_200_000_000_000));
        assert_eq!(parse_bytes("2GiB"), Ok(2 * 1024 * 1024 * 1024));
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert!(parse_bytes("12 parsecs").is_err());
        assert!(parse_bytes("TB").is_err());
        assert!(parse_bytes("-1TB").is_err());
    }

    #[test]
    fn bandwidths() {
        assert_eq!(parse_bandwidth("10GB/s"), Ok(1e10));
        assert_eq!(parse_bandwidth("25 GB/s"), Ok(25e9));
        assert_eq!(parse_bandwidth("100Gbit/s"), Ok(12.5e9));
        assert_eq!(parse_bandwidth("1GiB/s"), Ok(1024f64.powi(3)));
        assert!(parse_bandwidth("10GB").is_err());
        assert!(parse_bandwidth("0GB/s").is_err());
    }

    #[test]
    fn counts_and_durations() {
        assert_eq!(parse_count("70B"), Ok(70_000_000_000));
        assert_eq!(parse_count("7e9"), Ok(7_000_000_000));
        assert_eq!(parse_duration("30m"), Ok(1800));
        assert_eq!(parse_duration("2h"), Ok(7200));
        assert_eq!(parse_duration("45"), Ok(45));
    }

    /// Every duration nightshift prints reads back as itself (`:at +1m30s`,
    /// `--at +9m58s` were refused).
    #[test]
    fn every_printed_duration_parses_back() {
        for secs in [
            0i64,
            45,
            90,
            598,
            3960,
            7_500,
            86_400,
            273_600,
            3 * 86_400 + 4 * 3600,
        ] {
            let printed = crate::text::duration(secs);
            assert_eq!(parse_duration(&printed), Ok(secs as u64), "{printed}");
        }
        assert_eq!(parse_duration("1m30s"), Ok(90));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("5x").is_err_and(|e| e.to_string().contains("1h06m")));
    }
}
