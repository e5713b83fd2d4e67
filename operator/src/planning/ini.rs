//! A small ordered INI document (oslo.config / Python logging syntax): sections in insertion
//! order with `DEFAULT` first, keys in insertion order, and the control-character check every
//! rendered section, key and value passes.

/// An ordered INI document.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct IniDoc {
    sections: Vec<(String, Vec<(String, String)>)>,
}

/// A section, key or value carried a control character (a newline would inject config).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{what} in section [{section}] carries a control character")]
pub struct ControlCharacter {
    pub section: String,
    /// `section name`, `key <name>` or `value of <key>` (never the value itself).
    pub what: String,
}

/// True when `s` carries a character below U+0020 (other than none) or DEL.
pub(crate) fn has_control(s: &str) -> bool {
    s.chars().any(char::is_control)
}

impl IniDoc {
    pub(crate) fn new() -> Self {
        IniDoc::default()
    }

    fn section_mut(&mut self, section: &str) -> &mut Vec<(String, String)> {
        let idx = match self.sections.iter().position(|(s, _)| s == section) {
            Some(i) => i,
            None => {
                self.sections.push((section.to_string(), Vec::new()));
                self.sections.len() - 1
            }
        };
        &mut self.sections[idx].1
    }

    /// Sets `key` in `section` (replacing an earlier value in place).
    pub(crate) fn set(&mut self, section: &str, key: &str, value: impl Into<String>) {
        let value = value.into();
        let entries = self.section_mut(section);
        match entries.iter_mut().find(|(k, _)| k == key) {
            Some(entry) => entry.1 = value,
            None => entries.push((key.to_string(), value)),
        }
    }

    /// The value of `key` in `section`.
    #[cfg(test)]
    fn get(&self, section: &str, key: &str) -> Option<&str> {
        self.sections
            .iter()
            .find(|(s, _)| s == section)
            .and_then(|(_, e)| e.iter().find(|(k, _)| k == key))
            .map(|(_, v)| v.as_str())
    }

    /// Every `(section, key)` set.
    pub(crate) fn keys(&self) -> impl Iterator<Item = (&str, &str)> {
        self.sections
            .iter()
            .flat_map(|(s, e)| e.iter().map(move |(k, _)| (s.as_str(), k.as_str())))
    }

    /// Refuses a control character anywhere.
    pub(crate) fn check(&self) -> Result<(), ControlCharacter> {
        for (section, entries) in &self.sections {
            if has_control(section) {
                return Err(ControlCharacter {
                    section: section.escape_debug().to_string(),
                    what: "section name".into(),
                });
            }
            for (k, v) in entries {
                if has_control(k) {
                    return Err(ControlCharacter {
                        section: section.clone(),
                        what: format!("key {}", k.escape_debug()),
                    });
                }
                if has_control(v) {
                    return Err(ControlCharacter {
                        section: section.clone(),
                        what: format!("value of {k}"),
                    });
                }
            }
        }
        Ok(())
    }

    /// The text, `DEFAULT` first, one blank line between sections.
    pub(crate) fn render(&self) -> Result<String, ControlCharacter> {
        self.check()?;
        let mut order: Vec<&(String, Vec<(String, String)>)> = self.sections.iter().collect();
        order.sort_by_key(|(s, _)| s != "DEFAULT");
        let mut out = String::new();
        for (i, (section, entries)) in order.into_iter().enumerate() {
            if i > 0 {
                out.push('\n');
            }
            out.push_str(&format!("[{section}]\n"));
            for (k, v) in entries {
                out.push_str(&format!("{k} = {v}\n"));
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// (section, key, value) with a control character in one of them, each refused wherever it
    /// stands (shared with the config render's tests).
    pub(crate) const CONTROL_CHARACTERS: [(&str, &str, &str); 5] = [
        ("a\nb", "k", "v"),
        ("s", "k\r", "v"),
        ("s", "k\u{7f}", "v"),
        ("s", "k", "v\n[evil]"),
        ("s", "k", "tab\there"),
    ];

    #[test]
    fn renders_default_first_and_replaces_in_place() {
        let mut d = IniDoc::new();
        d.set("database", "max_pool_size", "5");
        d.set("DEFAULT", "host", "c");
        d.set("database", "max_pool_size", "7");
        assert_eq!(
            d.render().unwrap(),
            "[DEFAULT]\nhost = c\n\n[database]\nmax_pool_size = 7\n"
        );
        assert_eq!(d.get("database", "max_pool_size"), Some("7"));
    }

    #[test]
    fn control_characters_are_refused_anywhere() {
        for (s, k, v) in CONTROL_CHARACTERS {
            let mut d = IniDoc::new();
            d.set(s, k, v);
            assert!(d.render().is_err(), "{s:?} {k:?} {v:?}");
        }
        let mut d = IniDoc::new();
        d.set("s", "k", "secret\nvalue");
        assert!(!d.render().unwrap_err().to_string().contains("secret"));
    }
}
