//! `--tls-curve-preferences` and `--webhook-tls-curve-preferences` (1.36):
//! checked as upstream's `cliflag.TLSCurvePreferences` checks a list, then
//! noted as changing nothing, since rustls offers its own safe set.
//!
//! Upstream also refuses an ID the Go release it was built with does not
//! name; that set differs between Go releases, so any ID in range is taken
//! here.

use std::collections::BTreeSet;

use super::Int32List;

/// The note for `flag` set to `ids`, or why the list is refused.
pub(super) fn check(flag: &str, ids: Option<&Int32List>) -> Result<Option<String>, String> {
    let Some(ids) = ids.filter(|ids| !ids.0.is_empty()) else {
        return Ok(None);
    };
    let mut seen = BTreeSet::new();
    for id in &ids.0 {
        if !(1..=65535).contains(id) {
            return Err(format!(
                "--{flag}: curve preference {id} is out of range (must be 1-65535)"
            ));
        }
        if !seen.insert(*id) {
            return Err(format!("--{flag}: duplicate curve preference {id}"));
        }
    }
    Ok(Some(format!(
        "--{flag}: upstream limits Go's key exchanges to these CurveIDs; rustls offers its own \
         safe set (X25519, P-256, P-384), so this changes nothing"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(ids: &[i32]) -> Int32List {
        Int32List(ids.to_vec())
    }

    #[test]
    fn an_empty_list_says_nothing_and_a_good_one_changes_nothing() {
        assert_eq!(check("tls-curve-preferences", None), Ok(None));
        assert_eq!(check("tls-curve-preferences", Some(&list(&[]))), Ok(None));
        let note = check("webhook-tls-curve-preferences", Some(&list(&[29, 23])))
            .expect("in range")
            .expect("a note");
        assert!(
            note.starts_with("--webhook-tls-curve-preferences: "),
            "{note}"
        );
        assert!(note.ends_with("so this changes nothing"), "{note}");
    }

    #[test]
    fn out_of_range_and_repeated_ids_are_refused_in_upstreams_words() {
        assert_eq!(
            check("tls-curve-preferences", Some(&list(&[23, 0]))),
            Err(
                "--tls-curve-preferences: curve preference 0 is out of range (must be 1-65535)"
                    .into()
            )
        );
        assert_eq!(
            check("tls-curve-preferences", Some(&list(&[65536]))),
            Err(
                "--tls-curve-preferences: curve preference 65536 is out of range (must be 1-65535)"
                    .into()
            )
        );
        assert_eq!(
            check("webhook-tls-curve-preferences", Some(&list(&[23, 29, 23]))),
            Err("--webhook-tls-curve-preferences: duplicate curve preference 23".into())
        );
    }
}
