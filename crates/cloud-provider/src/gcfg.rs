//! The INI dialect upstream CCMs read their cloud configs with (Go's
//! `gcfg`, used by cloud-provider-aws and Rancher's CCM):
//! `[section]` and `[section "subsection"]` headers, `key = value` lines,
//! `;` and `#` comments, double-quoted values with backslash escapes, and a
//! bare `key` meaning `true`. Section and key names are case-insensitive.
//!
//! Values may be secrets, so no error of this module holds any text of a
//! value, nor of a line it cannot read: errors name the line and, where the
//! line has one, the key. Providers follow the same rule with
//! [`Entry::shown_key`].

/// One `[section]` or `[section "subsection"]` and what follows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    /// The section name as written.
    pub name: String,
    /// The quoted subsection, if any.
    pub subsection: Option<String>,
    /// The 1-based line of the header.
    pub line: usize,
    /// The variables, in file order.
    pub entries: Vec<Entry>,
}

impl Section {
    /// `Name` or `Name "subsection"`, as written in its header.
    pub fn display_name(&self) -> String {
        match &self.subsection {
            Some(sub) => format!("{} \"{sub}\"", self.name),
            None => self.name.clone(),
        }
    }
}

/// One `key = value` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The key as written.
    pub key: String,
    /// The value; `None` for a bare `key`.
    pub value: Option<String>,
    /// The 1-based line.
    pub line: usize,
}

impl Entry {
    /// The key as an error message may show it: `` `key` `` for a
    /// `key = value` line. A bare word is not shown, since it may be a
    /// secret wrapped onto its own line (`token =` above it).
    pub fn shown_key(&self) -> String {
        shown_key(&self.key, self.value.is_some())
    }
}

fn shown_key(key: &str, has_value: bool) -> String {
    if has_value {
        format!("`{key}`")
    } else {
        "a bare key (a line without `=`, not shown: it may be a wrapped value)".to_owned()
    }
}

/// A line the parser cannot read. Its message names the key when the line
/// has a readable one, never a value nor the line's text: a typo beside a
/// secret must not print the secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SyntaxError {
    /// A `[` without its `]`, a header with an invalid name, or a
    /// subsection that is not a well-formed quoted string.
    #[error("malformed section header (expected [Name] or [Name \"subsection\"])")]
    BadHeader {
        /// Where.
        line: usize,
    },
    /// A variable before the first section header.
    #[error("{} appears before any [section] header", match key {
        Some(key) => shown_key(key, true),
        None => shown_key("", false),
    })]
    OutsideSection {
        /// Where.
        line: usize,
        /// The key; `None` for a bare word, which is not kept.
        key: Option<String>,
    },
    /// A line that is neither a header, a variable nor a comment: what is
    /// left of its `=` (or the whole line, without one) is not a key name.
    #[error(
        "expected `key = value` with a key of letters, digits, `-`, `_` or `.` (the line is not shown: it may hold a secret)"
    )]
    BadLine {
        /// Where.
        line: usize,
    },
    /// A quoted value without its closing quote.
    #[error("the value of `{key}` has an unterminated quote")]
    UnterminatedQuote {
        /// Where.
        line: usize,
        /// The key whose value it is.
        key: String,
    },
    /// A backslash escape gcfg does not know, or a backslash ending the
    /// value.
    #[error("the value of `{key}` has an unknown escape (known: \\\" \\\\ \\n \\t \\b)")]
    BadEscape {
        /// Where.
        line: usize,
        /// The key whose value it is.
        key: String,
    },
}

impl SyntaxError {
    /// The 1-based line at fault.
    pub fn line(&self) -> usize {
        match self {
            Self::BadHeader { line }
            | Self::OutsideSection { line, .. }
            | Self::BadLine { line }
            | Self::UnterminatedQuote { line, .. }
            | Self::BadEscape { line, .. } => *line,
        }
    }
}

/// Parses the whole file into its sections, in order.
pub fn parse(text: &str) -> Result<Vec<Section>, SyntaxError> {
    let mut sections: Vec<Section> = Vec::new();
    for (index, raw) in text.lines().enumerate() {
        let line = index + 1;
        let trimmed = raw.trim();
        if trimmed.is_empty() || trimmed.starts_with(';') || trimmed.starts_with('#') {
            continue;
        }
        if let Some(rest) = trimmed.strip_prefix('[') {
            sections.push(parse_header(rest, line)?);
            continue;
        }
        let (key, raw_value) = match trimmed.split_once('=') {
            Some((key, value)) => (key.trim(), Some(value)),
            None => (strip_comment(trimmed).trim(), None),
        };
        // The key is checked first, so that the errors below only ever name
        // a well-formed key.
        if !is_name(key) {
            return Err(SyntaxError::BadLine { line });
        }
        let value = raw_value
            .map(|raw| parse_value(raw, line, key))
            .transpose()?;
        let Some(section) = sections.last_mut() else {
            return Err(SyntaxError::OutsideSection {
                line,
                key: value.is_some().then(|| key.to_owned()),
            });
        };
        section.entries.push(Entry {
            key: key.to_owned(),
            value,
            line,
        });
    }
    Ok(sections)
}

fn parse_header(rest: &str, line: usize) -> Result<Section, SyntaxError> {
    let bad = || SyntaxError::BadHeader { line };
    let (inside, after) = rest.split_once(']').ok_or_else(bad)?;
    if !strip_comment(after).trim().is_empty() {
        return Err(bad());
    }
    let inside = inside.trim();
    let (name, subsection) = match inside.split_once(char::is_whitespace) {
        None => (inside, None),
        Some((name, quoted)) => {
            let quoted = quoted.trim();
            let body = quoted
                .strip_prefix('"')
                .and_then(|q| q.strip_suffix('"'))
                .ok_or_else(bad)?;
            (name, Some(unescape(body).ok_or_else(bad)?))
        }
    };
    if !is_name(name) {
        return Err(bad());
    }
    Ok(Section {
        name: name.to_owned(),
        subsection,
        line,
        entries: Vec::new(),
    })
}

/// A value: quoted parts are taken literally (escapes aside), unquoted parts
/// end at a comment and lose their surrounding whitespace.
fn parse_value(raw: &str, line: usize, key: &str) -> Result<String, SyntaxError> {
    let bad_escape = || SyntaxError::BadEscape {
        line,
        key: key.to_owned(),
    };
    let mut out = String::new();
    // Length of `out` up to the last character that must be kept: trailing
    // unquoted whitespace is dropped, quoted whitespace is not.
    let mut keep = 0;
    let mut quoted = false;
    let mut chars = raw.trim_start().chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                quoted = !quoted;
                keep = out.len();
            }
            '\\' => {
                let escape = chars.next().and_then(escape_char).ok_or_else(bad_escape)?;
                out.push(escape);
                keep = out.len();
            }
            ';' | '#' if !quoted => break,
            c => {
                out.push(c);
                if quoted || !c.is_whitespace() {
                    keep = out.len();
                }
            }
        }
    }
    if quoted {
        return Err(SyntaxError::UnterminatedQuote {
            line,
            key: key.to_owned(),
        });
    }
    out.truncate(keep);
    Ok(out)
}

/// A subsection's quoted body; `None` on an unknown or dangling escape.
fn unescape(body: &str) -> Option<String> {
    let mut out = String::new();
    let mut chars = body.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            out.push(chars.next().and_then(escape_char)?);
        } else {
            out.push(c);
        }
    }
    Some(out)
}

fn escape_char(escape: char) -> Option<char> {
    Some(match escape {
        '"' => '"',
        '\\' => '\\',
        'n' => '\n',
        't' => '\t',
        'b' => '\u{8}',
        _ => return None,
    })
}

fn strip_comment(s: &str) -> &str {
    s.split([';', '#']).next().unwrap_or_default()
}

/// gcfg names: a letter, then letters, digits, `-`, `_` or `.`.
fn is_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_sections_subsections_and_values_with_lines() {
        let text = "; comment\n[Global]\nZone = us-east-1a\n\n[ServiceOverride \"1\"]\nURL = \"http://127.0.0.1:5000\" ; moto\n";
        let sections = parse(text).expect("parses");
        assert_eq!(sections.len(), 2);
        assert_eq!(sections[0].name, "Global");
        assert_eq!(sections[0].line, 2);
        assert_eq!(sections[0].entries[0].key, "Zone");
        assert_eq!(sections[0].entries[0].value.as_deref(), Some("us-east-1a"));
        assert_eq!(sections[0].entries[0].line, 3);
        assert_eq!(sections[1].subsection.as_deref(), Some("1"));
        assert_eq!(
            sections[1].entries[0].value.as_deref(),
            Some("http://127.0.0.1:5000")
        );
    }

    #[test]
    fn quoted_values_keep_whitespace_and_comment_characters() {
        let sections = parse("[g]\nk = \"  a;b # c \"\n").expect("parses");
        assert_eq!(sections[0].entries[0].value.as_deref(), Some("  a;b # c "));
    }

    #[test]
    fn unquoted_values_stop_at_comments_and_lose_trailing_space() {
        let sections = parse("[g]\nk = a b   # note\n").expect("parses");
        assert_eq!(sections[0].entries[0].value.as_deref(), Some("a b"));
    }

    #[test]
    fn bare_key_has_no_value() {
        let sections = parse("[g]\nDisableSecurityGroupIngress\n").expect("parses");
        assert_eq!(sections[0].entries[0].value, None);
    }

    #[test]
    fn errors_carry_their_line_and_key() {
        assert_eq!(
            parse("[g]\nk = \"open\n").unwrap_err(),
            SyntaxError::UnterminatedQuote {
                line: 2,
                key: "k".into()
            }
        );
        assert_eq!(parse("\n[g\n").unwrap_err().line(), 2);
        assert_eq!(
            parse("k = v\n").unwrap_err(),
            SyntaxError::OutsideSection {
                line: 1,
                key: Some("k".into()),
            }
        );
        assert_eq!(
            parse("[g]\n= v\n").unwrap_err(),
            SyntaxError::BadLine { line: 2 }
        );
        assert_eq!(
            parse("[g]\nk = a\\qb\n").unwrap_err(),
            SyntaxError::BadEscape {
                line: 2,
                key: "k".into()
            }
        );
        assert_eq!(
            parse("[g]\nk = ab\\").unwrap_err(),
            SyntaxError::BadEscape {
                line: 2,
                key: "k".into()
            }
        );
        assert_eq!(
            parse("[g \"a\\q\"]\n").unwrap_err(),
            SyntaxError::BadHeader { line: 1 }
        );
    }

    /// Every way a line beside a secret can be wrong, and the secret's own
    /// line wrong in every way: no message shows `hunter2`.
    #[test]
    fn no_error_prints_a_value_or_the_bad_line() {
        let secret = "hunter2";
        for (text, line, key) in [
            (
                "[Global]\nsecret = hunter2\nZone us-east-1a hunter2\n",
                3,
                None,
            ),
            ("[Global]\nsecret = hunter2\nsecret hunter2\n", 3, None),
            ("[Global]\nsecret: hunter2\n", 2, None),
            ("[Global]\nmy secret = hunter2\n", 2, None),
            ("[Global]\nsecret = \"hunter2\n", 2, Some("secret")),
            ("[Global]\nsecret = \"hunter2\\q\"\n", 2, Some("secret")),
            ("[Global]\nsecret = hunter2\\", 2, Some("secret")),
            ("secret = hunter2\n", 1, Some("secret")),
            ("hunter2\n[Global]\n", 1, None),
            ("[Global]\nsecret = hunter2\n[hunter2\n", 3, None),
            ("[Global]\nsecret = hunter2\n[g \"hunter2]\n", 3, None),
        ] {
            let err = parse(text).expect_err(text);
            let shown = err.to_string();
            assert_eq!(err.line(), line, "{text:?}: {shown}");
            assert!(!shown.contains(secret), "{text:?}: {shown}");
            assert!(!format!("{err:?}").contains(secret), "{text:?}: {err:?}");
            if let Some(key) = key {
                assert!(shown.contains(&format!("`{key}`")), "{text:?}: {shown}");
            }
        }
    }

    #[test]
    fn a_bare_word_is_not_shown_as_a_key() {
        let sections = parse("[g]\nsecret =\n  hunter2\nk = v\n").expect("parses");
        let [wrapped, named] = &sections[0].entries[1..] else {
            panic!("{sections:?}");
        };
        assert!(
            !wrapped.shown_key().contains("hunter2"),
            "{}",
            wrapped.shown_key()
        );
        assert_eq!(named.shown_key(), "`k`");
    }
}
