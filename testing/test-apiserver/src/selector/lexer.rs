//! Tokens of the label selector syntax.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Token {
    Word(String),
    Comma,
    Open,
    Close,
    Not,
    Eq,
    DoubleEq,
    NotEq,
    Gt,
    Lt,
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            Self::Word(w) => w.as_str(),
            Self::Comma => ",",
            Self::Open => "(",
            Self::Close => ")",
            Self::Not => "!",
            Self::Eq => "=",
            Self::DoubleEq => "==",
            Self::NotEq => "!=",
            Self::Gt => ">",
            Self::Lt => "<",
        };
        f.write_str(s)
    }
}

fn is_special(c: char) -> bool {
    matches!(c, ',' | '(' | ')' | '!' | '=' | '>' | '<') || c.is_whitespace()
}

pub(super) fn tokenize(text: &str) -> Vec<Token> {
    let mut tokens = Vec::new();
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let token = match c {
            c if c.is_whitespace() => continue,
            ',' => Token::Comma,
            '(' => Token::Open,
            ')' => Token::Close,
            '>' => Token::Gt,
            '<' => Token::Lt,
            '!' if chars.peek().is_some_and(|(_, n)| *n == '=') => {
                chars.next();
                Token::NotEq
            }
            '!' => Token::Not,
            '=' if chars.peek().is_some_and(|(_, n)| *n == '=') => {
                chars.next();
                Token::DoubleEq
            }
            '=' => Token::Eq,
            _ => {
                let mut end = i + c.len_utf8();
                while let Some((j, n)) = chars.peek().copied() {
                    if is_special(n) {
                        break;
                    }
                    end = j + n.len_utf8();
                    chars.next();
                }
                Token::Word(text[i..end].to_owned())
            }
        };
        tokens.push(token);
    }
    tokens
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operators_and_words_split_without_spaces() {
        let tokens = tokenize("a!=b,c==d,!e,f in (g)");
        let shown: Vec<String> = tokens.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            [
                "a", "!=", "b", ",", "c", "==", "d", ",", "!", "e", ",", "f", "in", "(", "g", ")"
            ]
        );
    }
}
