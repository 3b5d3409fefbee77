//! Bearer tokens: kube-apiserver's static token file (`--token-auth-file`)
//! and the ServiceAccount tokens this server issues through TokenRequest.

use std::collections::HashMap;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::error::Error;
use crate::user::UserInfo;

/// The group of the users who may do anything.
pub(crate) const MASTERS: &str = "system:masters";

/// The users of a token file, by token. Its `Debug` shows no token.
#[derive(Clone, Default)]
pub(crate) struct StaticTokens {
    users: HashMap<String, UserInfo>,
    /// The first token (in file order) of a `system:masters` user.
    admin: Option<String>,
}

impl std::fmt::Debug for StaticTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StaticTokens")
            .field("users", &self.users.len())
            .finish_non_exhaustive()
    }
}

impl StaticTokens {
    /// Reads kube-apiserver's static token CSV: `token,user,uid[,"g1,g2"]`
    /// per record; blank lines and records with an empty token are skipped,
    /// and a repeated token keeps its last user, as kube-apiserver does.
    ///
    /// # Errors
    ///
    /// [`Error::TokenFileRead`] when the file cannot be read,
    /// [`Error::TokenFile`] naming the line of a malformed record (never its
    /// token).
    pub(crate) fn read(path: &Path) -> Result<Self, Error> {
        let text = std::fs::read_to_string(path).map_err(|source| Error::TokenFileRead {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(&text, path)
    }

    fn parse(text: &str, path: &Path) -> Result<Self, Error> {
        let mut tokens = Self::default();
        for (index, line) in text.lines().enumerate() {
            let line = line.strip_suffix('\r').unwrap_or(line);
            if line.is_empty() {
                continue;
            }
            let bad = |reason: String| Error::TokenFile {
                path: PathBuf::from(path),
                line: index + 1,
                reason,
            };
            let fields = csv_record(line).map_err(|r| bad(r.to_owned()))?;
            if fields.len() < 3 {
                return Err(bad(format!(
                    "a record needs at least 3 columns (token, user name, user uid), found {}",
                    fields.len()
                )));
            }
            let token = fields[0].clone();
            if token.is_empty() {
                continue;
            }
            let groups: Vec<String> = match fields.get(3) {
                Some(groups) => groups.split(',').map(str::to_owned).collect(),
                None => Vec::new(),
            };
            if tokens.admin.is_none() && groups.iter().any(|g| g == MASTERS) {
                tokens.admin = Some(token.clone());
            }
            tokens.users.insert(
                token,
                UserInfo {
                    name: fields[1].clone(),
                    uid: fields[2].clone(),
                    groups,
                    extra: Vec::new(),
                },
            );
        }
        Ok(tokens)
    }

    /// The user of `token`, as the file says (without `system:authenticated`).
    pub(crate) fn user(&self, token: &str) -> Option<&UserInfo> {
        self.users.get(token)
    }

    /// The token the kubeconfig and [`client`](crate::TestApiServer::client)
    /// use: the file's first `system:masters` token, or else a token from
    /// `mint` (token, uid), added for `system:apiserver` in `system:masters`
    /// (kube-apiserver's own loopback identity).
    pub(crate) fn admin_token(
        &mut self,
        mint: impl FnOnce() -> std::io::Result<(String, String)>,
    ) -> std::io::Result<String> {
        if let Some(admin) = &self.admin {
            return Ok(admin.clone());
        }
        let (token, uid) = mint()?;
        self.users.insert(
            token.clone(),
            UserInfo {
                name: "system:apiserver".to_owned(),
                uid,
                groups: vec![MASTERS.to_owned()],
                extra: Vec::new(),
            },
        );
        self.admin = Some(token.clone());
        Ok(token)
    }
}

/// One CSV record on one line, by the rules of Go's `encoding/csv` with
/// `TrimLeadingSpace`: fields may be quoted, `""` inside quotes is a quote.
fn csv_record(line: &str) -> Result<Vec<String>, &'static str> {
    let mut fields = Vec::new();
    let mut rest = line;
    loop {
        rest = rest.trim_start_matches([' ', '\t']);
        let field;
        if let Some(quoted) = rest.strip_prefix('"') {
            let mut value = String::new();
            let mut chars = quoted.char_indices();
            let mut end = None;
            while let Some((i, c)) = chars.next() {
                if c != '"' {
                    value.push(c);
                    continue;
                }
                if quoted[i + 1..].starts_with('"') {
                    value.push('"');
                    chars.next();
                } else {
                    end = Some(i + 1);
                    break;
                }
            }
            let end = end.ok_or("a quoted field does not end on its line")?;
            rest = &quoted[end..];
            field = value;
            if !(rest.is_empty() || rest.starts_with(',')) {
                return Err("extraneous or missing \" in a quoted field");
            }
        } else {
            let end = rest.find(',').unwrap_or(rest.len());
            if rest[..end].contains('"') {
                return Err("bare \" in a non-quoted field");
            }
            field = rest[..end].to_owned();
            rest = &rest[end..];
        }
        fields.push(field);
        match rest.strip_prefix(',') {
            Some(next) => rest = next,
            None => return Ok(fields),
        }
    }
}

/// A ServiceAccount token this server issued.
#[derive(Debug, Clone)]
pub(crate) struct Issued {
    pub(crate) namespace: String,
    pub(crate) name: String,
    /// The ServiceAccount's uid: the token dies with the account.
    pub(crate) uid: String,
    pub(crate) audiences: Vec<String>,
    pub(crate) expires: SystemTime,
    /// The `JTI=` credential id kube-apiserver reports in `user.extra`.
    pub(crate) credential_id: String,
}

/// The ServiceAccount tokens issued so far, by token. Its `Debug` shows
/// no token.
#[derive(Default)]
pub(crate) struct IssuedTokens {
    tokens: HashMap<String, Issued>,
}

impl std::fmt::Debug for IssuedTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IssuedTokens")
            .field("tokens", &self.tokens.len())
            .finish()
    }
}

impl IssuedTokens {
    /// Remembers `issued` under a new random token and answers the token;
    /// forgets tokens that expired.
    ///
    /// # Errors
    ///
    /// When the system's random source cannot be read.
    pub(crate) fn issue(&mut self, issued: Issued) -> std::io::Result<String> {
        let now = SystemTime::now();
        self.tokens.retain(|_, t| t.expires > now);
        let token = random_token()?;
        self.tokens.insert(token.clone(), issued);
        Ok(token)
    }

    pub(crate) fn get(&self, token: &str) -> Option<&Issued> {
        self.tokens.get(token)
    }

    /// Makes every token of one ServiceAccount expire now; answers how many.
    pub(crate) fn expire(&mut self, namespace: &str, name: &str) -> usize {
        let past = SystemTime::now()
            .checked_sub(Duration::from_secs(1))
            .unwrap_or(SystemTime::UNIX_EPOCH);
        let mut expired = 0;
        for issued in self.tokens.values_mut() {
            if issued.namespace == namespace && issued.name == name && issued.expires > past {
                issued.expires = past;
                expired += 1;
            }
        }
        expired
    }
}

/// `n` bytes from the kernel's random source.
fn random_bytes<const N: usize>() -> std::io::Result<[u8; N]> {
    let mut bytes = [0u8; N];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes)
}

/// 256 random bits, hex-encoded: nothing about the account can be read
/// from or guessed into a token.
pub(crate) fn random_token() -> std::io::Result<String> {
    Ok(random_bytes::<32>()?
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

/// A random (version 4) UUID.
pub(crate) fn random_uuid() -> std::io::Result<String> {
    let mut b = random_bytes::<16>()?;
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    Ok(format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<StaticTokens, Error> {
        StaticTokens::parse(text, Path::new("tokens.csv"))
    }

    #[test]
    fn records_with_and_without_groups() {
        let tokens = parse(
            "t1,alice,u1,\"system:masters,dev\"\n\n  t2, bob ,u2\r\n,nobody,u3\nt4,carol,u4,ops\n",
        )
        .expect("valid");
        let alice = tokens.user("t1").expect("alice");
        assert_eq!(alice.name, "alice");
        assert_eq!(alice.groups, ["system:masters", "dev"]);
        let bob = tokens.user("t2").expect("bob");
        assert_eq!((bob.name.as_str(), bob.groups.len()), ("bob ", 0));
        assert!(tokens.user("").is_none(), "an empty token is skipped");
        assert_eq!(
            tokens.user("t4").map(|u| u.groups.clone()),
            Some(vec!["ops".to_owned()])
        );
        assert_eq!(tokens.admin.as_deref(), Some("t1"));
        assert!(
            !format!("{tokens:?}").contains("t1"),
            "Debug shows no token"
        );
    }

    #[test]
    fn quotes_inside_quoted_fields_are_doubled() {
        assert_eq!(
            csv_record(r#"a,"b ""x"", c",d"#),
            Ok(vec![
                "a".to_owned(),
                r#"b "x", c"#.to_owned(),
                "d".to_owned()
            ])
        );
    }

    #[test]
    fn malformed_records_name_the_line_but_not_the_token() {
        for (text, line) in [
            ("ok,a,1\nsecret-token,only-two\n", 2),
            ("secret-token,a,1,\"unterminated\n", 1),
            ("ok,a,1\n\nsecret-token,a\"b,1\n", 3),
            ("secret-token,a,1,\"g\"x\n", 1),
        ] {
            let err = parse(text).expect_err(text);
            let Error::TokenFile { line: found, .. } = &err else {
                panic!("{err:?}");
            };
            assert_eq!(*found, line, "{text:?}");
            assert!(!err.to_string().contains("secret-token"), "{err}");
        }
    }

    #[test]
    fn without_an_administrator_a_loopback_one_is_minted() {
        let mint = || Ok(("minted".to_owned(), "uid".to_owned()));
        let mut tokens = parse("t1,alice,u1\n").expect("valid");
        assert_eq!(tokens.admin_token(mint).expect("minted"), "minted");
        assert_eq!(
            tokens.user("minted").map(|u| u.name.as_str()),
            Some("system:apiserver")
        );
        let mut with_admin = parse("t1,root,u1,system:masters\n").expect("valid");
        assert_eq!(with_admin.admin_token(mint).expect("the file's"), "t1");
        assert!(with_admin.user("minted").is_none());
    }

    #[test]
    fn tokens_are_random_and_expire_by_account() {
        let a = random_token().expect("random");
        assert_eq!(a.len(), 64);
        assert_ne!(a, random_token().expect("random"));
        let mut issued = IssuedTokens::default();
        let later = SystemTime::now() + Duration::from_secs(600);
        let account = |name: &str| Issued {
            namespace: "ns".into(),
            name: name.into(),
            uid: "u".into(),
            audiences: Vec::new(),
            expires: later,
            credential_id: String::new(),
        };
        let t1 = issued.issue(account("a")).expect("issued");
        let t2 = issued.issue(account("b")).expect("issued");
        assert_eq!(issued.expire("ns", "a"), 1);
        assert!(
            issued
                .get(&t1)
                .is_some_and(|t| t.expires < SystemTime::now())
        );
        assert!(
            issued
                .get(&t2)
                .is_some_and(|t| t.expires > SystemTime::now())
        );
    }
}
