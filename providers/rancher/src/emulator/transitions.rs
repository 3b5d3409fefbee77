//! Cattle's service lifecycle: the states a stack or service passes
//! through, which actions each state offers, and the lazy clock that moves
//! a transitional state (`activating`...) on once its delay has passed.
//!
//! Nothing runs in the background: every request, and every look from the
//! test side, first settles whatever transitions are due.

use std::time::Duration;

use tokio::time::Instant;

/// Where a stack or service is in its lifecycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    /// Just created; becomes `inactive`.
    Registering,
    /// Created, not running.
    Inactive,
    /// Being started; becomes `active`.
    Activating,
    /// Running.
    Active,
    /// Being stopped; becomes `inactive`.
    Deactivating,
    /// Being removed; becomes `removed`.
    Removing,
    /// Gone: only listed without `removed_null`.
    Removed,
}

impl Phase {
    /// Its name on the wire.
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Self::Registering => "registering",
            Self::Inactive => "inactive",
            Self::Activating => "activating",
            Self::Active => "active",
            Self::Deactivating => "deactivating",
            Self::Removing => "removing",
            Self::Removed => "removed",
        }
    }

    /// The state a transitional state settles into; `None` when it is
    /// already settled.
    fn settles_to(self) -> Option<Self> {
        match self {
            Self::Registering | Self::Deactivating => Some(Self::Inactive),
            Self::Activating => Some(Self::Active),
            Self::Removing => Some(Self::Removed),
            Self::Inactive | Self::Active | Self::Removed => None,
        }
    }

    /// Whether the object still counts: neither being removed nor removed.
    /// Only live objects hold their name and can be linked to.
    pub(super) fn is_live(self) -> bool {
        !matches!(self, Self::Removing | Self::Removed)
    }
}

/// What a service action asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Action {
    /// `inactive` → `activating` → `active`.
    Activate,
    /// `active` → `deactivating` → `inactive`.
    Deactivate,
    /// Replace a load balancer's links (no state change).
    SetServiceLinks,
    /// → `removing` → `removed`.
    Remove,
}

impl Action {
    /// Every action, in the order they are listed.
    const ALL: [Self; 4] = [
        Self::Activate,
        Self::Deactivate,
        Self::SetServiceLinks,
        Self::Remove,
    ];

    /// The action named `name` (Cattle's lower-case action names).
    pub(super) fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|a| a.as_str() == name)
    }

    /// Its name in `?action=`.
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Self::Activate => "activate",
            Self::Deactivate => "deactivate",
            Self::SetServiceLinks => "setservicelinks",
            Self::Remove => "remove",
        }
    }

    /// Whether a service in `phase` offers this action; `setservicelinks`
    /// only exists on load balancers.
    pub(super) fn allowed(self, phase: Phase, load_balancer: bool) -> bool {
        match self {
            Self::Activate => phase == Phase::Inactive,
            Self::Deactivate => phase == Phase::Active,
            Self::SetServiceLinks => {
                load_balancer && matches!(phase, Phase::Inactive | Phase::Active)
            }
            // Cattle lets a service be removed from any state but the
            // removal itself; upstream deletes whatever it finds.
            Self::Remove => phase.is_live(),
        }
    }

    /// The actions a service in `phase` offers, as rendered in `actions`.
    pub(super) fn offered(phase: Phase, load_balancer: bool) -> Vec<Self> {
        Self::ALL
            .into_iter()
            .filter(|a| a.allowed(phase, load_balancer))
            .collect()
    }
}

/// An object's lifecycle: its state, the transition under way and when it
/// is due, and the moments the rest of the emulator cares about.
#[derive(Debug, Clone)]
pub(super) struct Life {
    phase: Phase,
    /// When the current transitional phase settles.
    due: Option<Instant>,
    /// When it became `active` (for public endpoints); `None` unless active.
    active_since: Option<Instant>,
    /// Its `removed` timestamp, once removed.
    removed: Option<String>,
}

impl Life {
    /// A life in a settled `phase` from now on (`active` counts from now).
    pub(super) fn settled(phase: Phase, now: Instant) -> Self {
        Self {
            phase,
            due: None,
            active_since: (phase == Phase::Active).then_some(now),
            removed: None,
        }
    }

    /// A life that starts in transitional `phase`, due after `delay`.
    pub(super) fn starting(phase: Phase, now: Instant, delay: Duration) -> Self {
        let mut life = Self::settled(Phase::Inactive, now);
        life.enter(phase, now, delay);
        life
    }

    /// The current phase.
    pub(super) fn phase(&self) -> Phase {
        self.phase
    }

    /// Whether a transition is under way (`transitioning: yes`).
    pub(super) fn transitioning(&self) -> bool {
        self.due.is_some()
    }

    /// When it became active, while it is.
    pub(super) fn active_since(&self) -> Option<Instant> {
        self.active_since
    }

    /// Its `removed` timestamp.
    pub(super) fn removed(&self) -> Option<&str> {
        self.removed.as_deref()
    }

    /// Moves into `phase`; a transitional phase settles after `delay`.
    pub(super) fn enter(&mut self, phase: Phase, now: Instant, delay: Duration) {
        self.phase = phase;
        self.active_since = (phase == Phase::Active).then_some(now);
        self.due = phase.settles_to().map(|_| now + delay);
    }

    /// Settles the transition under way if it is due at `now`. At most one
    /// step: no transitional phase settles into another.
    pub(super) fn settle(&mut self, now: Instant) {
        let (Some(due), Some(next)) = (self.due, self.phase.settles_to()) else {
            return;
        };
        if due > now {
            return;
        }
        self.phase = next;
        self.due = None;
        self.active_since = (next == Phase::Active).then_some(due);
        if next == Phase::Removed {
            self.removed = Some(timestamp());
        }
    }
}

/// Now as Cattle writes dates: `2024-01-15T10:00:00Z`.
pub(super) fn timestamp() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let days = i64::try_from(secs / 86_400).unwrap_or_default();
    let rem = secs % 86_400;
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// The calendar date `days` after 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates_match_known_days() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(19_737), (2024, 1, 15));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
    }

    #[test]
    fn only_inactive_services_offer_activate() {
        assert_eq!(
            Action::offered(Phase::Inactive, true),
            [Action::Activate, Action::SetServiceLinks, Action::Remove]
        );
        assert_eq!(Action::offered(Phase::Activating, true), [Action::Remove]);
        assert_eq!(
            Action::offered(Phase::Active, false),
            [Action::Deactivate, Action::Remove]
        );
        assert!(Action::offered(Phase::Removing, true).is_empty());
    }

    #[test]
    fn a_transition_settles_once_due() {
        let now = Instant::now();
        let delay = Duration::from_millis(10);
        let mut life = Life::starting(Phase::Activating, now, delay);
        life.settle(now);
        assert_eq!(life.phase(), Phase::Activating);
        assert!(life.transitioning());
        life.settle(now + delay);
        assert_eq!(life.phase(), Phase::Active);
        assert!(!life.transitioning());
        assert_eq!(life.active_since(), Some(now + delay));
    }
}
