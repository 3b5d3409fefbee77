//! `--vmodule`: klog's per-file verbosity, matched here against the stem of
//! the Rust source file a line comes from (`route*=4` matches
//! `route.rs` and `routes.rs`).

/// One `--vmodule` entry: a glob over source file names and its level.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ModuleLevel {
    pub(crate) pattern: String,
    pub(crate) level: u8,
}

/// The `--vmodule` entries, first match wins as in klog.
#[derive(Debug, Clone, Default)]
pub(super) struct Modules {
    entries: Vec<ModuleLevel>,
}

impl Modules {
    pub(super) fn new(entries: &[ModuleLevel]) -> Self {
        Self {
            entries: entries.to_vec(),
        }
    }

    /// The verbosity for lines from `file`, if an entry matches it.
    pub(super) fn level_for(&self, file: Option<&str>) -> Option<u8> {
        if self.entries.is_empty() {
            return None;
        }
        let file = file?;
        let name = file.rsplit('/').next().unwrap_or(file);
        let stem = name.strip_suffix(".rs").unwrap_or(name);
        self.entries
            .iter()
            .find(|e| glob_match(e.pattern.as_bytes(), stem.as_bytes()))
            .map(|e| e.level)
    }
}

/// Go's `filepath.Match` for the `*` and `?` that klog documents.
fn glob_match(pattern: &[u8], text: &[u8]) -> bool {
    // Iterative matching with one backtrack point: linear in practice and
    // bounded by pattern × text.
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match pattern.get(p) {
            Some(b'*') => {
                star = Some((p, t));
                p += 1;
            }
            Some(&c) if c == b'?' || c == text[t] => {
                p += 1;
                t += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    p = sp + 1;
                    t = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
mod tests {
    use super::{ModuleLevel, Modules, glob_match};

    #[test]
    fn globs_match_as_filepath_match() {
        assert!(glob_match(b"route*", b"route"));
        assert!(glob_match(b"route*", b"routes"));
        assert!(glob_match(b"*ule", b"schedule"));
        assert!(glob_match(b"n?de", b"node"));
        assert!(!glob_match(b"route", b"routes"));
        assert!(!glob_match(b"s*x", b"schedule"));
    }

    #[test]
    fn the_first_matching_entry_sets_the_level() {
        let modules = Modules::new(&[
            ModuleLevel {
                pattern: "schedule".into(),
                level: 5,
            },
            ModuleLevel {
                pattern: "*".into(),
                level: 1,
            },
        ]);
        assert_eq!(
            modules.level_for(Some("crates/controllers/src/route/schedule.rs")),
            Some(5)
        );
        assert_eq!(modules.level_for(Some("src/node.rs")), Some(1));
        assert_eq!(Modules::default().level_for(Some("src/node.rs")), None);
    }
}
