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
    #[serde(default)]
    prepared_by: Option<String>,
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
        if t.prepared_by.is_some() && !matches!(root, ImageRoot::Tree(_)) {
            return Err("preparedBy goes with tree".to_owned());
        }
        Ok(ImageRule {
            exact: t.exact,
            repository: t.repository,
            tag: t.tag,
            root,
            default_command: t.default_command,
            prepared_by: t.prepared_by,
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
    /// With a [`ImageRoot::Tree`]: the command that prepares the tree. The tree is then usable
    /// only once that command has left its stamp (a `.prepared` file) in it; until then the
    /// image fails to pull with a message naming the command.
    pub prepared_by: Option<String>,
}

/// The file a setup command leaves in a tree it has prepared completely.
pub const PREPARED_STAMP: &str = ".prepared";

/// The OpenStack releases whose Cinder the real-Cinder roots hold (`tests/real-cinder/setup.sh`).
pub const REAL_CINDER_RELEASES: [&str; 2] = ["2026.1", "2026.2"];

/// The command that prepares the real-Cinder roots (relative to the repository).
pub const REAL_CINDER_SETUP: &str = "tests/real-cinder/setup.sh";

/// The repository of the Cinder images the operator's samples and defaults name.
pub const CINDER_IMAGE_REPOSITORY: &str = "ghcr.io/c5c3/cinder";

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
            prepared_by: None,
        }
    }

    /// The rules mapping the Cinder image of each of [`REAL_CINDER_RELEASES`] (tag `<release>`
    /// or `<release>-<anything>`, as the operator's release check reads tags) to the root
    /// `<roots>/<release>` that [`REAL_CINDER_SETUP`] prepares.
    pub fn real_cinder(roots: &std::path::Path) -> Vec<ImageRule> {
        REAL_CINDER_RELEASES
            .iter()
            .map(|release| ImageRule {
                exact: None,
                repository: Some(CINDER_IMAGE_REPOSITORY.to_owned()),
                tag: Some(
                    Regex::new(&format!("^(?:{}(?:-.*)?)$", regex::escape(release)))
                        .expect("a release's tag pattern is a valid regex"),
                ),
                root: ImageRoot::Tree(roots.join(release)),
                default_command: Vec::new(),
                prepared_by: Some(REAL_CINDER_SETUP.to_owned()),
            })
            .collect()
    }

    /// Why this rule's root cannot be used yet, as the pull error's message.
    fn unprepared(&self, image: &ImageRef) -> Option<PullError> {
        let (ImageRoot::Tree(dir), Some(command)) = (&self.root, &self.prepared_by) else {
            return None;
        };
        if dir.join(PREPARED_STAMP).is_file() {
            return None;
        }
        Some(PullError(format!(
            "failed to pull and unpack image \"{}\": its root {} is not prepared: run {command}",
            image.full(),
            dir.display()
        )))
    }
}

impl ImageMap {
    /// The default map with the real-Cinder rules ([`ImageRule::real_cinder`]) first.
    pub fn with_real_cinder(roots: &std::path::Path) -> ImageMap {
        let mut map = ImageMap::default();
        let mut images = ImageRule::real_cinder(roots);
        images.append(&mut map.images);
        map.images = images;
        map
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
        let rule = self
            .images
            .iter()
            .find(|rule| rule.matches(&image))
            .ok_or_else(|| {
                PullError(format!(
                    "failed to pull and unpack image \"{}\": failed to resolve reference \"{}\": {} not found in the process runtime's image map",
                    image.full(),
                    image.full(),
                    image.full()
                ))
            })?;
        match rule.unprepared(&image) {
            Some(error) => Err(error),
            None => Ok(rule),
        }
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
    fn real_cinder_images_map_to_prepared_roots_only() {
        let roots = tempfile::tempdir().unwrap();
        let map = ImageMap::with_real_cinder(roots.path());
        let prepared = roots.path().join("2026.1");
        std::fs::create_dir_all(&prepared).unwrap();
        std::fs::write(prepared.join(PREPARED_STAMP), "x").unwrap();
        assert_eq!(
            map.resolve("ghcr.io/c5c3/cinder:2026.1").unwrap().root,
            ImageRoot::Tree(prepared.clone())
        );
        assert_eq!(
            map.resolve("ghcr.io/c5c3/cinder:2026.1-p1").unwrap().root,
            ImageRoot::Tree(prepared)
        );
        // 2026.2's root has no stamp: the pull fails naming the setup command.
        std::fs::create_dir_all(roots.path().join("2026.2/bin")).unwrap();
        let error = map.resolve("ghcr.io/c5c3/cinder:2026.2").unwrap_err();
        assert!(error.0.contains(REAL_CINDER_SETUP), "{error:?}");
        assert!(error.0.contains("2026.2"), "{error:?}");
        // A release without a root is not in the map at all.
        assert!(
            map.resolve("ghcr.io/c5c3/cinder:2025.2")
                .unwrap_err()
                .0
                .contains("not found in the process runtime's image map")
        );
        assert!(map.resolve("ghcr.io/c5c3/cinder:2026.10").is_err());
        assert!(map.resolve("busybox").is_ok());
    }

    #[test]
    fn bad_mappings_are_refused() {
        assert!(
            ImageMap::from_yaml("images: [{repository: a, host: true, preparedBy: x}]").is_err()
        );
        assert!(ImageMap::from_yaml("images: [{host: true}]").is_err());
        assert!(ImageMap::from_yaml("images: [{exact: a, repository: b, host: true}]").is_err());
        assert!(ImageMap::from_yaml("images: [{repository: a, tag: '(', host: true}]").is_err());
        assert!(ImageMap::from_yaml("images: [{repository: a, host: true, extra: 1}]").is_err());
        assert!(ImageMap::from_yaml("images: [{repository: a, host: true, tree: /x}]").is_err());
        assert!(ImageMap::from_yaml("images: [{repository: a}]").is_err());
        assert!(ImageMap::default().resolve("python:3.12").is_ok());
    }
}
