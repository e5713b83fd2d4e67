//! OpenStack release names (`YYYY.1`, `YYYY.2`): parsing, ordering and the one sequential step
//! an upgrade may take (YYYY.1 → YYYY.2 → (YYYY+1).1).

/// A release, ordered by time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Release {
    pub year: u16,
    /// 1 or 2.
    pub half: u8,
}

impl Release {
    /// Parses exactly `YYYY.1` / `YYYY.2`.
    pub(crate) fn parse(s: &str) -> Option<Release> {
        let (y, h) = s.split_once('.')?;
        if y.len() != 4 || !y.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let half = match h {
            "1" => 1,
            "2" => 2,
            _ => return None,
        };
        Some(Release {
            year: y.parse().ok()?,
            half,
        })
    }

    /// The release a tag names: `2026.1`, optionally after a `v` (`v2026.1`), optionally with a
    /// numeric point release (`2025.2.1`), optionally followed by `-…` / `_…` / `+…` (a patch
    /// suffix such as `2026.1-p1`). Anything else carries no comparable release.
    pub(crate) fn from_tag(tag: &str) -> Option<Release> {
        let tag = tag.strip_prefix(['v', 'V']).unwrap_or(tag);
        let head = tag.get(..6)?;
        let mut rest = &tag[6..];
        if let Some(point) = rest.strip_prefix('.') {
            let digits = point.bytes().take_while(u8::is_ascii_digit).count();
            if digits == 0 {
                return None;
            }
            rest = &point[digits..];
        }
        if !(rest.is_empty() || rest.starts_with(['-', '_', '+'])) {
            return None;
        }
        Release::parse(head)
    }

    /// The only release an upgrade from `self` may target.
    pub(crate) fn next(self) -> Release {
        if self.half == 1 {
            Release {
                year: self.year,
                half: 2,
            }
        } else {
            Release {
                year: self.year.saturating_add(1),
                half: 1,
            }
        }
    }
}

impl std::fmt::Display for Release {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:04}.{}", self.year, self.half)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_order_and_next() {
        let r = Release::parse("2026.1").unwrap();
        assert_eq!(r.to_string(), "2026.1");
        assert_eq!(r.next().to_string(), "2026.2");
        assert_eq!(r.next().next().to_string(), "2027.1");
        assert!(Release::parse("2025.2").unwrap() < r);
        for bad in [
            "2026",
            "2026.3",
            "26.1",
            "2026.1-p1",
            "x026.1",
            "2026.01",
            "",
        ] {
            assert_eq!(Release::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn tags_with_patch_suffix() {
        assert_eq!(Release::from_tag("2026.1-p1"), Release::parse("2026.1"));
        assert_eq!(Release::from_tag("2026.2"), Release::parse("2026.2"));
        assert_eq!(Release::from_tag("2026.10"), None);
        assert_eq!(Release::from_tag("latest"), None);
        assert_eq!(Release::from_tag("27.0.0"), None);
    }

    #[test]
    fn tags_with_a_point_release_or_a_v() {
        assert_eq!(Release::from_tag("2025.2.1"), Release::parse("2025.2"));
        assert_eq!(Release::from_tag("2025.2.13-p2"), Release::parse("2025.2"));
        assert_eq!(Release::from_tag("v2026.1"), Release::parse("2026.1"));
        assert_eq!(Release::from_tag("V2026.1.0"), Release::parse("2026.1"));
        assert_eq!(Release::from_tag("2026.1."), None);
        assert_eq!(Release::from_tag("2026.1.x"), None);
        assert_eq!(Release::from_tag("vlatest"), None);
        assert_eq!(Release::from_tag("v"), None);
    }
}
