//! The process runtime's image mapping: which host root an image reference runs from. Nothing is
//! pulled; an image without a rule is `ErrImagePull` (then `ImagePullBackOff`), as for a registry
//! that does not have it. Pure: parsing references and matching rules.

use std::path::PathBuf;

use regex::Regex;
use serde::Deserialize;

/// What an image's containers run from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ImageRoot {
    /// The host filesystem: the container's command runs a host program (general images such
    /// as busybox, debian, python, alpine).
    Host,
    /// A host program is the image's entrypoint (a container without `command` runs it with its
    /// `args`); the filesystem is the host's.
    Program(PathBuf),
    /// A prepared directory tree (e.g. a Python virtual environment): its `bin` goes first on
    /// PATH and `VIRTUAL_ENV` names it; the rest of the filesystem is the host's.
    Tree(PathBuf),
}

/// A rule as written in the file: exactly one of `host: true`, `program` and `tree`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RuleText {
    #[serde(default)]
    exact: Option<String>,
    #[serde(default)]
    repository: Option<String>,
    #[serde(default, with = "tag_pattern")]
    tag: Option<Regex>,
    #[serde(default)]
    host: bool,
    #[serde(default)]
    program: Option<PathBuf>,
    #[serde(default)]
    tree: Option<PathBuf>,
    #[serde(default)]
    default_command: Vec<String>,
}

impl TryFrom<RuleText> for ImageRule {
    type Error = String;
    fn try_from(t: RuleText) -> Result<ImageRule, String> {
        let root = match (t.host, t.program, t.tree) {
            (true, None, None) => ImageRoot::Host,
            (false, Some(p), None) => ImageRoot::Program(p),
            (false, None, Some(p)) => ImageRoot::Tree(p),
            _ => return Err("exactly one of host: true, program and tree must be given".to_owned()),
        };
        Ok(ImageRule {
            exact: t.exact,
            repository: t.repository,
            tag: t.tag,
            root,
            default_command: t.default_command,
        })
    }
}

/// One rule of the mapping; the first rule that matches an image wins.
#[derive(Clone, Debug, Deserialize)]
#[serde(try_from = "RuleText")]
pub struct ImageRule {
    /// The whole reference must equal this (after normalisation, e.g. `busybox` is
    /// `docker.io/library/busybox:latest`).
    pub exact: Option<String>,
    /// The repository must equal this (normalised; any tag or digest).
    pub repository: Option<String>,
    /// With `repository`: the tag must match this regular expression (anchored).
    pub tag: Option<Regex>,
    /// What the image runs from.
    pub root: ImageRoot,
    /// The image's default command (its ENTRYPOINT + CMD), used when a container has neither
    /// `command` nor, for [`ImageRoot::Program`], a program.
    pub default_command: Vec<String>,
}

mod tag_pattern {
    use regex::Regex;
    use serde::{Deserialize, Deserializer};

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Regex>, D::Error> {
        let text: Option<String> = Option::deserialize(d)?;
        text.map(|t| Regex::new(&format!("^(?:{t})$")).map_err(serde::de::Error::custom))
            .transpose()
    }
}

/// The runtime configuration of process nodes: the image rules, in order.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ImageMap {
    pub images: Vec<ImageRule>,
}

/// A parsed image reference.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImageRef {
    /// `registry/path` with Docker Hub's defaults filled in (`docker.io/library/busybox`).
    pub repository: String,
    /// The tag (`latest` when neither tag nor digest is given); empty with a digest only.
    pub tag: String,
    /// `sha256:...` when given.
    pub digest: Option<String>,
}

impl ImageRef {
    /// Parses `reference` as container runtimes do; None for an empty or malformed one.
    pub fn parse(reference: &str) -> Option<ImageRef> {
        let reference = reference.trim();
        if reference.is_empty() || reference.contains(char::is_whitespace) {
            return None;
        }
        let (rest, digest) = match reference.split_once('@') {
            Some((rest, digest)) => (rest, Some(digest.to_owned())),
            None => (reference, None),
        };
        // A tag is after the last ':' that follows the last '/'.
        let slash = rest.rfind('/').map_or(0, |i| i + 1);
        let (name, tag) = match rest[slash..].rfind(':') {
            Some(i) => (&rest[..slash + i], rest[slash + i + 1..].to_owned()),
            None => (rest, String::new()),
        };
        if name.is_empty() || name.ends_with('/') {
            return None;
        }
        let tag = if tag.is_empty() && digest.is_none() {
            "latest".to_owned()
        } else {
            tag
        };
        let first = name.split('/').next().unwrap_or_default();
        let has_registry = name.contains('/')
            && (first.contains('.') || first.contains(':') || first == "localhost");
        let repository = match (has_registry, name.contains('/')) {
            (true, _) => name.to_owned(),
            (false, true) => format!("docker.io/{name}"),
            (false, false) => format!("docker.io/library/{name}"),
        };
        Some(ImageRef {
            repository,
            tag,
            digest,
        })
    }

    /// The normalised reference (`docker.io/library/busybox:latest`).
    pub fn full(&self) -> String {
        let mut text = self.repository.clone();
        if !self.tag.is_empty() {
            text.push(':');
            text.push_str(&self.tag);
        }
        if let Some(digest) = &self.digest {
            text.push('@');
            text.push_str(digest);
        }
        text
    }
}

impl ImageRule {
    fn matches(&self, image: &ImageRef) -> bool {
        if let Some(exact) = &self.exact {
            return ImageRef::parse(exact).is_some_and(|e| e == *image);
        }
        let Some(repository) = &self.repository else {
            return false;
        };
        let wanted = ImageRef::parse(repository).map(|r| r.repository);
        if wanted.as_deref() != Some(image.repository.as_str()) {
            return false;
        }
        self.tag.as_ref().is_none_or(|tag| tag.is_match(&image.tag))
    }

    /// A rule giving every image of `repository` the host filesystem.
    pub fn host_repository(repository: &str, default_command: &[&str]) -> ImageRule {
        ImageRule {
            exact: None,
            repository: Some(repository.to_owned()),
            tag: None,
            root: ImageRoot::Host,
            default_command: default_command.iter().map(|s| (*s).to_owned()).collect(),
        }
    }
}

impl Default for ImageMap {
    /// General-purpose images run host tools: busybox, alpine, debian, ubuntu, python.
    fn default() -> Self {
        ImageMap {
            images: vec![
                ImageRule::host_repository("busybox", &["sh"]),
                ImageRule::host_repository("alpine", &["/bin/sh"]),
                ImageRule::host_repository("debian", &["bash"]),
                ImageRule::host_repository("ubuntu", &["bash"]),
                ImageRule::host_repository("python", &["python3"]),
            ],
        }
    }
}

/// Why an image cannot be used: the message of the kubelet's ErrImagePull.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PullError(pub String);

impl ImageMap {
    /// Reads a mapping from YAML or JSON text (see docs/embedded-cluster.md).
    pub fn from_yaml(text: &str) -> Result<ImageMap, String> {
        let map: ImageMap = serde_norway::from_str(text).map_err(|e| e.to_string())?;
        for (index, rule) in map.images.iter().enumerate() {
            match (&rule.exact, &rule.repository) {
                (Some(_), None) | (None, Some(_)) => {}
                _ => {
                    return Err(format!(
                        "images[{index}]: exactly one of exact and repository must be given"
                    ));
                }
            }
            if rule.exact.is_some() && rule.tag.is_some() {
                return Err(format!(
                    "images[{index}]: tag goes with repository, not exact"
                ));
            }
        }
        Ok(map)
    }

    /// The rule for `reference`, or the pull error a node without that image reports.
    pub fn resolve(&self, reference: &str) -> Result<&ImageRule, PullError> {
        let Some(image) = ImageRef::parse(reference) else {
            return Err(PullError(format!(
                "Failed to apply default image tag \"{reference}\": couldn't parse image name \"{reference}\": invalid reference format"
            )));
        };
        self.images
            .iter()
            .find(|rule| rule.matches(&image))
            .ok_or_else(|| {
                PullError(format!(
                    "failed to pull and unpack image \"{}\": failed to resolve reference \"{}\": {} not found in the process runtime's image map",
                    image.full(),
                    image.full(),
                    image.full()
                ))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_are_normalised() {
        let r = ImageRef::parse("busybox").unwrap();
        assert_eq!(r.full(), "docker.io/library/busybox:latest");
        let r = ImageRef::parse("quay.io/airship/cinder:2025.1-ubuntu").unwrap();
        assert_eq!(r.repository, "quay.io/airship/cinder");
        assert_eq!(r.tag, "2025.1-ubuntu");
        let r = ImageRef::parse("localhost:5000/op@sha256:abc").unwrap();
        assert_eq!(r.repository, "localhost:5000/op");
        assert_eq!(r.tag, "");
        assert_eq!(r.digest.as_deref(), Some("sha256:abc"));
        assert_eq!(
            ImageRef::parse("bitnami/redis:7").unwrap().repository,
            "docker.io/bitnami/redis"
        );
        assert!(ImageRef::parse("").is_none());
        assert!(ImageRef::parse("bad ref").is_none());
        assert!(ImageRef::parse("repo/:tag").is_none());
    }

    #[test]
    fn first_matching_rule_wins_and_unmapped_images_fail_to_pull() {
        let map = ImageMap::from_yaml(
            r#"
images:
  - exact: quay.io/x/op:v1
    program: /usr/bin/true
  - repository: quay.io/airship/cinder
    tag: "2025\\..*"
    tree: /opt/venv
  - repository: busybox
    host: true
    defaultCommand: [sh]
"#,
        )
        .unwrap();
        assert_eq!(
            map.resolve("quay.io/x/op:v1").unwrap().root,
            ImageRoot::Program("/usr/bin/true".into())
        );
        assert!(map.resolve("quay.io/x/op:v2").is_err());
        assert_eq!(
            map.resolve("quay.io/airship/cinder:2025.1").unwrap().root,
            ImageRoot::Tree("/opt/venv".into())
        );
        assert!(map.resolve("quay.io/airship/cinder:2024.2").is_err());
        assert_eq!(
            map.resolve("docker.io/library/busybox:1.36").unwrap().root,
            ImageRoot::Host
        );
        let error = map.resolve("nosuch/image:1").unwrap_err();
        assert!(error.0.contains("docker.io/nosuch/image:1"), "{error:?}");
        assert!(
            map.resolve("a b")
                .unwrap_err()
                .0
                .contains("invalid reference format")
        );
    }

    #[test]
    fn bad_mappings_are_refused() {
        assert!(ImageMap::from_yaml("images: [{host: true}]").is_err());
        assert!(ImageMap::from_yaml("images: [{exact: a, repository: b, host: true}]").is_err());
        assert!(ImageMap::from_yaml("images: [{repository: a, tag: '(', host: true}]").is_err());
        assert!(ImageMap::from_yaml("images: [{repository: a, host: true, extra: 1}]").is_err());
        assert!(ImageMap::from_yaml("images: [{repository: a, host: true, tree: /x}]").is_err());
        assert!(ImageMap::from_yaml("images: [{repository: a}]").is_err());
        assert!(ImageMap::default().resolve("python:3.12").is_ok());
    }
}
