//! The image-tag vs `spec.openStackRelease` check the Database step runs before it advances
//! release tracking: a tag naming another release would run the wrong cinder-manage against the
//! schema. A digest-pinned image or an unparseable tag carries no comparable release and is
//! left to the explicit declaration; a point release, a `v` and a patch suffix (`2026.1.2`,
//! `v2026.1`, `2026.1-p1`) still match `2026.1`.

use super::release::Release;
use crate::conditions::{Cond, kind, reason};
use crate::crd::cinder::ImageSpec;

/// The result of the check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ImageReleaseCheck {
    /// The tag names the declared release.
    Matches,
    /// Nothing to compare (digest-pinned, or the tag names no release).
    Skipped,
    /// The tag names another release.
    Mismatch {
        tag_release: String,
        spec_release: String,
    },
}

impl ImageReleaseCheck {
    /// DatabaseReady=False / ImageReleaseMismatch for a mismatch (the step then requeues).
    pub(crate) fn condition(&self) -> Option<Cond> {
        match self {
            ImageReleaseCheck::Mismatch {
                tag_release,
                spec_release,
            } => Some(Cond::false_(
                kind::DATABASE_READY,
                reason::IMAGE_RELEASE_MISMATCH,
                format!(
                    "image tag names release {tag_release} but spec.openStackRelease is {spec_release}"
                ),
            )),
            _ => None,
        }
    }
}

/// Compares a tag-pinned image against the declared release.
pub(crate) fn check_image_release(
    image: &ImageSpec,
    open_stack_release: &str,
) -> ImageReleaseCheck {
    if image.digest.is_some() {
        return ImageReleaseCheck::Skipped;
    }
    let Some(tag_release) = image.tag.as_deref().and_then(Release::from_tag) else {
        return ImageReleaseCheck::Skipped;
    };
    match Release::parse(open_stack_release) {
        Some(spec) if spec == tag_release => ImageReleaseCheck::Matches,
        _ => ImageReleaseCheck::Mismatch {
            tag_release: tag_release.to_string(),
            spec_release: open_stack_release.to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn img(tag: Option<&str>, digest: Option<&str>) -> ImageSpec {
        ImageSpec {
            repository: "r".into(),
            tag: tag.map(Into::into),
            digest: digest.map(Into::into),
        }
    }

    #[test]
    fn documented_examples() {
        assert_eq!(
            check_image_release(&img(Some("2026.1"), None), "2026.1"),
            ImageReleaseCheck::Matches
        );
        assert_eq!(
            check_image_release(&img(Some("2026.1-p1"), None), "2026.1"),
            ImageReleaseCheck::Matches
        );
        for tag in ["2025.2.1", "v2025.2"] {
            assert_eq!(
                check_image_release(&img(Some(tag), None), "2025.2"),
                ImageReleaseCheck::Matches,
                "{tag}"
            );
        }
        assert!(matches!(
            check_image_release(&img(Some("v2026.1"), None), "2025.2"),
            ImageReleaseCheck::Mismatch { .. }
        ));
        assert_eq!(
            check_image_release(&img(None, Some("sha256:abc")), "2026.1"),
            ImageReleaseCheck::Skipped
        );
        assert_eq!(
            check_image_release(&img(Some("latest"), None), "2026.1"),
            ImageReleaseCheck::Skipped
        );
        let m = check_image_release(&img(Some("2025.2"), None), "2026.1");
        assert_eq!(
            m,
            ImageReleaseCheck::Mismatch {
                tag_release: "2025.2".into(),
                spec_release: "2026.1".into()
            }
        );
        let c = m.condition().unwrap();
        assert_eq!(
            (c.type_, c.status, c.reason),
            ("DatabaseReady", false, "ImageReleaseMismatch")
        );
        assert!(ImageReleaseCheck::Matches.condition().is_none());
    }
}
