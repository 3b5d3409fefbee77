//! Health answers as k8s.io/apiserver's `healthz` package words them: named
//! checks; the root path (`/healthz`, which anyone may read) lists a
//! failing one as `[-]name failed: reason withheld`, and only the check's
//! own path (`/healthz/name`, authorized as any other path) and the log say
//! why. A stalled object's name or a watch's raw error is no stranger's
//! business.

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

/// One named check's outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Check {
    pub(crate) name: &'static str,
    /// Why it fails: shown only at the check's own path.
    pub(crate) outcome: Result<(), String>,
}

impl Check {
    pub(crate) fn passed(name: &'static str) -> Self {
        Self {
            name,
            outcome: Ok(()),
        }
    }

    pub(crate) fn failed(name: &'static str, reason: String) -> Self {
        Self {
            name,
            outcome: Err(reason),
        }
    }
}

/// Whether the query asks for `verbose`, as Go's `URL.Query()["verbose"]`:
/// the key present, with or without a value.
pub(crate) fn verbose(query: Option<&str>) -> bool {
    query
        .unwrap_or_default()
        .split('&')
        .any(|pair| pair.split('=').next() == Some("verbose"))
}

/// The answer of the root path `/<endpoint>`: `ok`, or with `verbose` each
/// check and `<endpoint> check passed`; when one fails, 500 with each check,
/// failing ones `reason withheld`, and `<endpoint> check failed`. The
/// reasons go to the log.
pub(crate) fn root(endpoint: &str, checks: &[Check], verbose: bool) -> Response {
    let mut listing = String::new();
    let mut reasons = Vec::new();
    for check in checks {
        match &check.outcome {
            Ok(()) => listing.push_str(&format!("[+]{} ok\n", check.name)),
            Err(reason) => {
                listing.push_str(&format!("[-]{} failed: reason withheld\n", check.name));
                reasons.push(format!("{}: {reason}", check.name));
            }
        }
    }
    if !reasons.is_empty() {
        tracing::debug!(failed = %reasons.join("; "), "{endpoint} check failed");
        return text(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("{listing}{endpoint} check failed\n"),
        );
    }
    if verbose {
        text(
            StatusCode::OK,
            format!("{listing}{endpoint} check passed\n"),
        )
    } else {
        text(StatusCode::OK, "ok".to_owned())
    }
}

/// The answer of one check's path: `ok`, or 500 with its reason.
pub(crate) fn single(check: &Check) -> Response {
    match &check.outcome {
        Ok(()) => text(StatusCode::OK, "ok".to_owned()),
        Err(reason) => text(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("internal server error: {reason}\n"),
        ),
    }
}

/// Plain text, as Go's `http.Error` and upstream's handler send it.
fn text(status: StatusCode, body: String) -> Response {
    (
        status,
        [
            (header::CONTENT_TYPE, "text/plain; charset=utf-8"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        body,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn answer(response: Response) -> (StatusCode, String) {
        let status = response.status();
        let body = axum::body::to_bytes(response.into_body(), 1 << 16)
            .await
            .unwrap();
        (status, String::from_utf8(body.to_vec()).unwrap())
    }

    fn stalled() -> [Check; 2] {
        [
            Check::passed("ping"),
            Check::failed(
                "controllers",
                "controller service stalled: its reconcile of default/web has run for 900s".into(),
            ),
        ]
    }

    #[tokio::test]
    async fn a_failing_check_is_named_on_the_root_path_with_its_reason_withheld() {
        for verbose in [false, true] {
            let (status, body) = answer(root("healthz", &stalled(), verbose)).await;
            assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
            assert_eq!(
                body,
                "[+]ping ok\n[-]controllers failed: reason withheld\nhealthz check failed\n"
            );
        }
    }

    #[tokio::test]
    async fn a_check_path_gives_its_reason() {
        let [ping, controllers] = stalled();
        assert_eq!(
            answer(single(&controllers)).await,
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal server error: controller service stalled: its reconcile of default/web has run for 900s\n"
                    .to_owned()
            )
        );
        assert_eq!(
            answer(single(&ping)).await,
            (StatusCode::OK, "ok".to_owned())
        );
    }

    #[tokio::test]
    async fn passing_checks_answer_ok_or_the_verbose_listing() {
        let checks = [Check::passed("ping"), Check::passed("informer-sync")];
        assert_eq!(
            answer(root("readyz", &checks, false)).await,
            (StatusCode::OK, "ok".to_owned())
        );
        assert_eq!(
            answer(root("readyz", &checks, true)).await,
            (
                StatusCode::OK,
                "[+]ping ok\n[+]informer-sync ok\nreadyz check passed\n".to_owned()
            )
        );
    }

    #[test]
    fn verbose_is_the_key_with_or_without_a_value() {
        assert!(verbose(Some("verbose")));
        assert!(verbose(Some("exclude=x&verbose=1")));
        assert!(!verbose(Some("verbosity=1")));
        assert!(!verbose(None));
    }
}
