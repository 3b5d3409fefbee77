//! Who made a request, as kube-apiserver's `user.Info`: what
//! authentication answers, authorization decides for, and admission
//! records (a CertificateSigningRequest's requester).

/// Who made a request, as kube-apiserver's `user.Info`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct UserInfo {
    pub(crate) name: String,
    pub(crate) uid: String,
    pub(crate) groups: Vec<String>,
    pub(crate) extra: Vec<(String, Vec<String>)>,
}

impl UserInfo {
    /// `system:anonymous` in `system:unauthenticated`.
    pub(crate) fn anonymous() -> Self {
        Self {
            name: "system:anonymous".to_owned(),
            groups: vec!["system:unauthenticated".to_owned()],
            ..Self::default()
        }
    }

    /// With `system:authenticated`, as every authenticated user gets it.
    pub(crate) fn authenticated(mut self) -> Self {
        if !self.groups.iter().any(|g| g == "system:authenticated") {
            self.groups.push("system:authenticated".to_owned());
        }
        self
    }
}
