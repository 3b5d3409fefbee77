//! Label selectors (`labelSelector`), in the syntax of Kubernetes'
//! `labels.Parse`: `=`, `==`, `!=`, `in`, `notin`, exists, `!`exists, `>`, `<`.

mod fields;
mod lexer;

use serde_json::{Map, Value};

use crate::status::ApiError;

pub(crate) use fields::FieldSelector;
use lexer::{Token, tokenize};

#[derive(Debug, Clone, PartialEq, Eq)]
enum Op {
    In,
    NotIn,
    Exists,
    DoesNotExist,
    GreaterThan(i64),
    LessThan(i64),
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Requirement {
    key: String,
    op: Op,
    values: Vec<String>,
}

/// A parsed label selector; every requirement must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct LabelSelector {
    requirements: Vec<Requirement>,
}

impl LabelSelector {
    /// Parses `labelSelector`.
    ///
    /// # Errors
    ///
    /// 400 BadRequest for a selector Kubernetes would not parse.
    pub(crate) fn parse(text: &str) -> Result<Self, ApiError> {
        parse(text).map_err(|why| {
            ApiError::bad_request(format!(
                "unable to parse requirement: {why} (labelSelector {text:?})"
            ))
        })
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// Whether an object with these labels is selected.
    pub(crate) fn matches(&self, labels: Option<&Map<String, Value>>) -> bool {
        self.requirements.iter().all(|r| {
            let value = labels.and_then(|l| l.get(&r.key)).and_then(Value::as_str);
            match (&r.op, value) {
                (Op::In, Some(v)) => r.values.iter().any(|x| x == v),
                (Op::In, None) => false,
                (Op::NotIn, Some(v)) => !r.values.iter().any(|x| x == v),
                (Op::NotIn, None) => true,
                (Op::Exists, found) => found.is_some(),
                (Op::DoesNotExist, found) => found.is_none(),
                (Op::GreaterThan(n), Some(v)) => v.parse::<i64>().is_ok_and(|v| v > *n),
                (Op::LessThan(n), Some(v)) => v.parse::<i64>().is_ok_and(|v| v < *n),
                (Op::GreaterThan(_) | Op::LessThan(_), None) => false,
            }
        })
    }
}

fn parse(text: &str) -> Result<LabelSelector, String> {
    let tokens = tokenize(text);
    let mut requirements = Vec::new();
    let mut pos = 0;
    if tokens.is_empty() {
        return Ok(LabelSelector::default());
    }
    loop {
        let (requirement, next) = requirement(&tokens, pos)?;
        requirements.push(requirement);
        pos = next;
        match tokens.get(pos) {
            None => break,
            Some(Token::Comma) => pos += 1,
            Some(other) => {
                return Err(format!("found '{other}', expected: ',' or 'end of string'"));
            }
        }
    }
    Ok(LabelSelector { requirements })
}

fn requirement(tokens: &[Token], mut pos: usize) -> Result<(Requirement, usize), String> {
    let negated = tokens.get(pos) == Some(&Token::Not);
    if negated {
        pos += 1;
    }
    let key = match tokens.get(pos) {
        Some(Token::Word(k)) => k.clone(),
        Some(other) => return Err(format!("found '{other}', expected: identifier")),
        None => return Err("found 'end of string', expected: identifier".into()),
    };
    validate_key(&key)?;
    pos += 1;
    let bare = |op| Requirement {
        key: key.clone(),
        op,
        values: Vec::new(),
    };
    if negated {
        return Ok((bare(Op::DoesNotExist), pos));
    }
    let op = match tokens.get(pos) {
        None | Some(Token::Comma) => return Ok((bare(Op::Exists), pos)),
        Some(t) => t.clone(),
    };
    pos += 1;
    match op {
        Token::Eq | Token::DoubleEq | Token::NotEq => {
            let value = single_value(tokens, &mut pos)?;
            let op = if op == Token::NotEq {
                Op::NotIn
            } else {
                Op::In
            };
            Ok((
                Requirement {
                    key,
                    op,
                    values: vec![value],
                },
                pos,
            ))
        }
        Token::Gt | Token::Lt => {
            let value = single_value(tokens, &mut pos)?;
            let n: i64 = value.parse().map_err(|_| {
                format!("for 'Gt', 'Lt' operators, the value must be an integer: {value:?}")
            })?;
            let op = if op == Token::Gt {
                Op::GreaterThan(n)
            } else {
                Op::LessThan(n)
            };
            Ok((bare(op), pos))
        }
        Token::Word(w) if w == "in" || w == "notin" => {
            let values = value_set(tokens, &mut pos)?;
            let op = if w == "in" { Op::In } else { Op::NotIn };
            Ok((Requirement { key, op, values }, pos))
        }
        other => Err(format!(
            "found '{other}', expected: in, notin, =, ==, !=, gt, lt"
        )),
    }
}

/// The value after `=`, `!=`, `>`, `<`; an empty value is allowed.
fn single_value(tokens: &[Token], pos: &mut usize) -> Result<String, String> {
    match tokens.get(*pos) {
        Some(Token::Word(v)) => {
            *pos += 1;
            validate_value(v)?;
            Ok(v.clone())
        }
        None | Some(Token::Comma) => Ok(String::new()),
        Some(other) => Err(format!("found '{other}', expected: identifier")),
    }
}

/// `(a, b, c)`.
fn value_set(tokens: &[Token], pos: &mut usize) -> Result<Vec<String>, String> {
    if tokens.get(*pos) != Some(&Token::Open) {
        return Err("expected: '(' after in/notin".into());
    }
    *pos += 1;
    let mut values = Vec::new();
    loop {
        match tokens.get(*pos) {
            Some(Token::Word(v)) => {
                validate_value(v)?;
                values.push(v.clone());
                *pos += 1;
            }
            Some(Token::Comma | Token::Close) => values.push(String::new()),
            _ => return Err("expected: identifier, ',' or ')' in value set".into()),
        }
        match tokens.get(*pos) {
            Some(Token::Comma) => *pos += 1,
            Some(Token::Close) => {
                *pos += 1;
                return Ok(values);
            }
            _ => return Err("expected: ',' or ')' in value set".into()),
        }
    }
}

/// A label key: an optional DNS-subdomain prefix and `/`, then a name.
pub(crate) fn validate_key(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(prefix) = prefix
        && !crate::validation::is_dns_subdomain(prefix)
    {
        return Err(format!(
            "invalid label key {key:?}: prefix part must be a DNS subdomain"
        ));
    }
    if !is_label_name(name) {
        return Err(format!(
            "invalid label key {key:?}: name part must consist of alphanumeric characters, '-', '_' or '.', \
             and must start and end with an alphanumeric character"
        ));
    }
    Ok(())
}

/// A label value: empty, or a name of at most 63 characters.
pub(crate) fn validate_value(value: &str) -> Result<(), String> {
    if value.is_empty() || is_label_name(value) {
        Ok(())
    } else {
        Err(format!(
            "invalid label value: {value:?}: a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.'"
        ))
    }
}

fn is_label_name(s: &str) -> bool {
    let bytes = s.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes[0].is_ascii_alphanumeric()
        && bytes[bytes.len() - 1].is_ascii_alphanumeric()
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn selects(selector: &str, labels: &Value) -> bool {
        LabelSelector::parse(selector)
            .expect("valid selector")
            .matches(labels.as_object())
    }

    #[test]
    fn equality_and_inequality_treat_missing_labels_as_kubernetes_does() {
        let labels = json!({"app": "web", "tier": "front"});
        assert!(selects("app=web", &labels));
        assert!(selects("app==web,tier=front", &labels));
        assert!(!selects("app!=web", &labels));
        assert!(selects("missing!=x", &labels));
        assert!(!selects("missing=x", &labels));
    }

    #[test]
    fn set_operators_and_existence() {
        let labels = json!({"env": "prod"});
        assert!(selects("env in (prod, staging)", &labels));
        assert!(!selects("env notin (prod)", &labels));
        assert!(selects("other notin (prod)", &labels));
        assert!(selects("env", &labels));
        assert!(selects("!other", &labels));
        assert!(!selects("!env", &labels));
        assert!(selects("", &labels));
    }

    #[test]
    fn numeric_comparisons() {
        assert!(selects("n>3", &json!({"n": "4"})));
        assert!(!selects("n<3", &json!({"n": "4"})));
        assert!(LabelSelector::parse("n>x").is_err());
    }

    #[test]
    fn malformed_selectors_are_bad_requests() {
        for bad in ["a=b=c", "a in b", "=x", "a,", "!", "a in (x", "bad key=x"] {
            let err = LabelSelector::parse(bad).expect_err(bad);
            assert_eq!(err.code, 400, "{bad}");
        }
    }

    #[test]
    fn prefixed_keys_are_valid() {
        assert!(selects(
            "node.kubernetes.io/exclude-from-external-load-balancers",
            &json!({"node.kubernetes.io/exclude-from-external-load-balancers": ""})
        ));
    }
}
