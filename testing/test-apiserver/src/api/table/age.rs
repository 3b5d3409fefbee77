//! Ages as kubectl and kube-apiserver print them (apimachinery's
//! `duration.HumanDuration`): two significant units at most, coarser as the
//! age grows.

use std::time::Duration;

/// `d` the way an AGE column shows it: `45s`, `3m12s`, `17m`, `5h3m`, `2d4h`,
/// `400d`, `3y20d`.
pub(crate) fn human_duration(d: Duration) -> String {
    let seconds = d.as_secs();
    let minutes = seconds / 60;
    let hours = seconds / 3600;
    let days = hours / 24;
    if seconds < 60 * 2 {
        format!("{seconds}s")
    } else if minutes < 10 {
        match seconds % 60 {
            0 => format!("{minutes}m"),
            s => format!("{minutes}m{s}s"),
        }
    } else if minutes < 60 * 3 {
        format!("{minutes}m")
    } else if hours < 8 {
        match minutes % 60 {
            0 => format!("{hours}h"),
            m => format!("{hours}h{m}m"),
        }
    } else if hours < 48 {
        format!("{hours}h")
    } else if hours < 24 * 8 {
        match hours % 24 {
            0 => format!("{days}d"),
            h => format!("{days}d{h}h"),
        }
    } else if hours < 24 * 365 * 2 {
        format!("{days}d")
    } else if hours < 24 * 365 * 8 {
        let years = days / 365;
        match days % 365 {
            0 => format!("{years}y"),
            rest => format!("{years}y{rest}d"),
        }
    } else {
        format!("{}y", days / 365)
    }
}

/// The age of an object created at `created` (RFC 3339), at `now`:
/// `<unknown>` without a creation time, `0s` for one in the future, as
/// kube-apiserver's printers.
pub(crate) fn since(created: Option<&str>, now: jiff::Timestamp) -> String {
    let Some(created) = created.and_then(|c| c.parse::<jiff::Timestamp>().ok()) else {
        return "<unknown>".to_owned();
    };
    let elapsed = now.as_second().saturating_sub(created.as_second());
    human_duration(Duration::from_secs(u64::try_from(elapsed).unwrap_or(0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_keep_at_most_two_units_and_coarsen_as_they_grow() {
        let s = Duration::from_secs;
        let cases = [
            (s(0), "0s"),
            (s(119), "119s"),
            (s(120), "2m"),
            (s(192), "3m12s"),
            (s(600), "10m"),
            (s(179 * 60), "179m"),
            (s(3 * 3600), "3h"),
            (s(5 * 3600 + 3 * 60), "5h3m"),
            (s(47 * 3600), "47h"),
            (s(2 * 86_400 + 4 * 3600), "2d4h"),
            (s(3 * 86_400), "3d"),
            (s(400 * 86_400), "400d"),
            (s((3 * 365 + 20) * 86_400), "3y20d"),
            (s(9 * 365 * 86_400), "9y"),
        ];
        for (d, want) in cases {
            assert_eq!(human_duration(d), want, "{d:?}");
        }
    }

    #[test]
    fn an_age_without_a_creation_time_is_unknown_and_never_negative() {
        let now: jiff::Timestamp = "2026-01-01T00:01:00Z".parse().unwrap();
        assert_eq!(since(None, now), "<unknown>");
        assert_eq!(since(Some("2026-01-01T00:00:00Z"), now), "60s");
        assert_eq!(since(Some("2026-01-02T00:00:00Z"), now), "0s");
    }
}
