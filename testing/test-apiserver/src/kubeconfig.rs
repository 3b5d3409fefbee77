//! The kubeconfig file pointing `kubectl` and kube clients at the server.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::Error;

/// The kubeconfig's cluster, context and user name.
pub(crate) const CONTEXT: &str = "test-apiserver";

/// A kubeconfig for the cluster at `url`, namespace `default`, whose user
/// sends `token` (none: an unauthenticated server).
pub(crate) fn render(url: &str, token: Option<&str>) -> String {
    let user = match token {
        Some(token) => format!("\n    token: {token}"),
        None => " {}".to_owned(),
    };
    format!(
        "apiVersion: v1\n\
         kind: Config\n\
         clusters:\n\
         - name: {CONTEXT}\n  cluster:\n    server: {url}\n\
         contexts:\n\
         - name: {CONTEXT}\n  context:\n    cluster: {CONTEXT}\n    user: {CONTEXT}\n    namespace: default\n\
         current-context: {CONTEXT}\n\
         users:\n\
         - name: {CONTEXT}\n  user:{user}\n\
         preferences: {{}}\n"
    )
}

/// Where the kubeconfig lives; a temporary file is removed on drop.
#[derive(Debug)]
pub(crate) enum KubeconfigFile {
    Temporary(tempfile::TempPath),
    Chosen(PathBuf),
}

impl KubeconfigFile {
    /// Writes the kubeconfig for `url` to `path`, or to a new temporary file.
    pub(crate) fn write(
        url: &str,
        token: Option<&str>,
        path: Option<&Path>,
    ) -> Result<Self, Error> {
        let text = render(url, token);
        match path {
            Some(path) => {
                std::fs::write(path, text).map_err(|source| Error::Kubeconfig {
                    path: path.to_owned(),
                    source,
                })?;
                Ok(Self::Chosen(path.to_owned()))
            }
            None => {
                let fail = |source| Error::Kubeconfig {
                    path: PathBuf::new(),
                    source,
                };
                let mut file = tempfile::Builder::new()
                    .prefix("test-apiserver-")
                    .suffix(".kubeconfig")
                    .tempfile()
                    .map_err(fail)?;
                file.write_all(text.as_bytes()).map_err(fail)?;
                file.flush().map_err(fail)?;
                Ok(Self::Temporary(file.into_temp_path()))
            }
        }
    }

    pub(crate) fn path(&self) -> &Path {
        match self {
            Self::Temporary(p) => p,
            Self::Chosen(p) => p,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kube_parses_the_kubeconfig() {
        let parsed = kube::config::Kubeconfig::from_yaml(&render("http://127.0.0.1:1234", None))
            .expect("valid yaml");
        assert_eq!(parsed.current_context.as_deref(), Some(CONTEXT));
        let cluster = parsed.clusters[0].cluster.as_ref().expect("cluster");
        assert_eq!(cluster.server.as_deref(), Some("http://127.0.0.1:1234"));
        let with_token = kube::config::Kubeconfig::from_yaml(&render("http://x", Some("abc")))
            .expect("valid yaml");
        let user = with_token.auth_infos[0].auth_info.as_ref().expect("user");
        assert!(user.token.is_some());
    }

    #[test]
    fn temporary_kubeconfigs_are_removed_on_drop() {
        let file = KubeconfigFile::write("http://127.0.0.1:1", None, None).expect("writes");
        let path = file.path().to_owned();
        assert!(path.exists());
        drop(file);
        assert!(!path.exists());
    }
}
