//! Durations as people write them (`--timeout 30s`, a profile's `timeout = "5m"`,
//! `--limit cpu=1.5s`).

/// Parses `30`, `30s`, `1.5s`, `250ms`, `5m`, `2h`.
pub fn parse(text: &str) -> Result<std::time::Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("'{text}' is not a duration (examples: 30s, 5m, 1h, 250ms)"))?;
    let seconds = match unit {
        "" | "s" => value,
        "ms" => value / 1000.0,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        _ => {
            return Err(format!(
                "'{text}': unknown unit '{unit}' (use ms, s, m or h)"
            ));
        }
    };
    if !seconds.is_finite() || seconds > 1.0e9 {
        return Err(format!(
            "'{text}' is too long: at most 1e9 s (about 31 years, e.g. 24h)"
        ));
    }
    if seconds <= 0.0 {
        return Err(format!("'{text}' must be a positive duration"));
    }
    Ok(std::time::Duration::from_secs_f64(seconds))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse("30").unwrap(), Duration::from_secs(30));
        assert_eq!(parse("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse("1h").unwrap(), Duration::from_secs(3600));
        assert!(parse("0").is_err());
        assert!(parse("-1").is_err());
        assert!(parse("5d").is_err());
        assert!(parse("abc").is_err());
    }
}
