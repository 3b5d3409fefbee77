//! The INI dialect upstream CCMs read their cloud configs with (Go's
//! `gcfg`, used by cloud-provider-aws and Rancher's CCM):
//! `[section]` and `[section "subsection"]` headers, `key = value` lines,
//! `;` and `#` comments, double-quoted values with backslash escapes, and a
//! bare `key` meaning `true`. Section and key names are case-insensitive.

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

/// A line the parser cannot read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SyntaxError {
    /// A `[` without its `]`, or a header with an invalid name.
    #[error("malformed section header (expected [Name] or [Name \"subsection\"])")]
    BadHeader {
        /// Where.
        line: usize,
    },
    /// A variable before the first section header.
    #[error("`{key}` appears before any [section] header")]
    OutsideSection {
        /// Where.
        line: usize,
        /// The key.
        key: String,
    },
    /// A line that is neither a header, a variable nor a comment.
    #[error("expected `key = value`, found `{text}`")]
    BadLine {
        /// Where.
        line: usize,
        /// The line's text.
        text: String,
    },
    /// A quoted value without its closing quote.
    #[error("unterminated quoted value")]
    UnterminatedQuote {
        /// Where.
        line: usize,
    },
    /// A backslash escape gcfg does not know.
    #[error("unknown escape `\\{escape}` (known: \\\" \\\\ \\n \\t \\b)")]
    BadEscape {
        /// Where.
        line: usize,
        /// The character after the backslash.
        escape: char,
    },
}

impl SyntaxError {
    /// The 1-based line at fault.
    pub fn line(&self) -> usize {
        match self {
            Self::BadHeader { line }
            | Self::OutsideSection { line, .. }
            | Self::BadLine { line, .. }
            | Self::UnterminatedQuote { line }
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
        let (key, value) = match trimmed.split_once('=') {
            Some((key, value)) => (key.trim(), Some(parse_value(value, line)?)),
            None => (strip_comment(trimmed).trim(), None),
        };
        if !is_name(key) {
            return Err(SyntaxError::BadLine {
                line,
                text: trimmed.to_owned(),
            });
        }
        let Some(section) = sections.last_mut() else {
            return Err(SyntaxError::OutsideSection {
                line,
                key: key.to_owned(),
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
            (name, Some(unescape(body, line)?))
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
fn parse_value(raw: &str, line: usize) -> Result<String, SyntaxError> {
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
                let escape = chars
                    .next()
                    .ok_or(SyntaxError::BadEscape { line, escape: ' ' })?;
                out.push(escape_char(escape, line)?);
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
        return Err(SyntaxError::UnterminatedQuote { line });
    }
    out.truncate(keep);
    Ok(out)
}

fn unescape(body: &str, line: usize) -> Result<String, SyntaxError> {
    let mut out = String::new();
    let mut chars = body.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            let escape = chars
                .next()
                .ok_or(SyntaxError::BadEscape { line, escape: ' ' })?;
            out.push(escape_char(escape, line)?);
        } else {
            out.push(c);
        }
    }
    Ok(out)
}

fn escape_char(escape: char, line: usize) -> Result<char, SyntaxError> {
    Ok(match escape {
        '"' => '"',
        '\\' => '\\',
        'n' => '\n',
        't' => '\t',
        'b' => '\u{8}',
        other => {
            return Err(SyntaxError::BadEscape {
                line,
                escape: other,
            });
        }
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
    fn errors_carry_their_line() {
        assert_eq!(
            parse("[g]\nk = \"open\n").unwrap_err(),
            SyntaxError::UnterminatedQuote { line: 2 }
        );
        assert_eq!(parse("\n[g\n").unwrap_err().line(), 2);
        assert_eq!(
            parse("k = v\n").unwrap_err(),
            SyntaxError::OutsideSection {
                line: 1,
                key: "k".into()
            }
        );
        assert_eq!(parse("[g]\n= v\n").unwrap_err().line(), 2);
        assert_eq!(
            parse("[g]\nk = a\\qb\n").unwrap_err(),
            SyntaxError::BadEscape {
                line: 2,
                escape: 'q'
            }
        );
    }
}
