//! Resource quantities (`100m`, `0.5`, `128Mi`, `1G`, `2e3`) as numbers, enough to compare
//! requests with allocatable: cpu in millicores, everything else in base units.

/// `text` in base units (bytes, cores, pods); None when it does not parse.
pub fn parse(text: &str) -> Option<f64> {
    let text = text.trim();
    const SUFFIXES: &[(&str, f64)] = &[
        ("Ki", 1024.0),
        ("Mi", 1024.0 * 1024.0),
        ("Gi", 1024.0 * 1024.0 * 1024.0),
        ("Ti", 1024.0 * 1024.0 * 1024.0 * 1024.0),
        ("Pi", 1024.0 * 1024.0 * 1024.0 * 1024.0 * 1024.0),
        ("n", 1e-9),
        ("u", 1e-6),
        ("m", 1e-3),
        ("k", 1e3),
        ("M", 1e6),
        ("G", 1e9),
        ("T", 1e12),
        ("P", 1e15),
    ];
    for (suffix, factor) in SUFFIXES {
        if let Some(number) = text.strip_suffix(suffix) {
            return number.parse::<f64>().ok().map(|n| n * factor);
        }
    }
    text.parse::<f64>().ok()
}

/// `text` as cpu millicores.
pub fn millicores(text: &str) -> Option<i64> {
    parse(text).map(|cores| (cores * 1000.0).round() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities() {
        assert_eq!(millicores("100m"), Some(100));
        assert_eq!(millicores("2"), Some(2000));
        assert_eq!(millicores("0.5"), Some(500));
        assert_eq!(parse("128Mi"), Some(134_217_728.0));
        assert_eq!(parse("1G"), Some(1e9));
        assert_eq!(parse("2e3"), Some(2000.0));
        assert_eq!(parse("lots"), None);
    }
}
