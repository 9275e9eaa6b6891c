//! Who a request is: static bearer tokens, kube-apiserver's `--token-auth-file`.

use std::collections::HashMap;
use std::path::Path;

use anyhow::Context as _;
use axum::http::{header, HeaderMap};

/// Static bearer tokens: kube-apiserver's `--token-auth-file`, a CSV of
/// `token,user,uid[,"group1,group2"]`.
#[derive(Clone, Debug, Default)]
pub struct TokenFile {
    users: HashMap<String, String>,
}

impl TokenFile {
    /// Reads and parses the file.
    ///
    /// # Errors
    /// When the file cannot be read or a line is malformed (named by its number).
    pub fn read(path: &Path) -> anyhow::Result<TokenFile> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("read --token-auth-file {}", path.display()))?;
        TokenFile::parse(&text).with_context(|| format!("--token-auth-file {}", path.display()))
    }

    /// Parses the CSV text.
    ///
    /// # Errors
    /// A line with fewer than three fields, or an empty token or user.
    pub fn parse(text: &str) -> anyhow::Result<TokenFile> {
        let mut users = HashMap::new();
        for (index, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let fields: Vec<&str> = line.splitn(4, ',').map(str::trim).collect();
            anyhow::ensure!(
                fields.len() >= 3 && !fields[0].is_empty() && !fields[1].is_empty(),
                "line {}: expected token,user,uid[,\"group1,group2\"]",
                index + 1
            );
            users.insert(
                fields[0].trim_matches('"').to_string(),
                fields[1].trim_matches('"').to_string(),
            );
        }
        anyhow::ensure!(!users.is_empty(), "no tokens");
        Ok(TokenFile { users })
    }

    /// The user whose token the request carries (`Authorization: Bearer TOKEN`).
    pub fn user(&self, headers: &HeaderMap) -> Option<&str> {
        let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
        let (scheme, token) = value.trim().split_once(' ')?;
        if !scheme.eq_ignore_ascii_case("bearer") {
            return None;
        }
        self.users.get(token.trim()).map(String::as_str)
    }

    pub fn authenticates(&self, headers: &HeaderMap) -> bool {
        self.user(headers).is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_files_are_kube_apiservers_csv() {
        let tokens =
            TokenFile::parse("# comment\nt0k3n,alice,1\n\"quoted\",bob,2,\"system:masters,dev\"\n")
                .unwrap();
        let mut headers = HeaderMap::new();
        headers.insert(header::AUTHORIZATION, "Bearer t0k3n".parse().unwrap());
        assert_eq!(tokens.user(&headers), Some("alice"));
        headers.insert(header::AUTHORIZATION, "bearer quoted".parse().unwrap());
        assert_eq!(tokens.user(&headers), Some("bob"));
        headers.insert(header::AUTHORIZATION, "Bearer nope".parse().unwrap());
        assert_eq!(tokens.user(&headers), None);
        headers.insert(header::AUTHORIZATION, "Basic t0k3n".parse().unwrap());
        assert_eq!(tokens.user(&headers), None);
        let error = TokenFile::parse("a,b\n").unwrap_err();
        assert!(error.to_string().contains("line 1"), "{error}");
        assert!(TokenFile::parse("").is_err());
    }
}
