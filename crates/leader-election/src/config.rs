//! [`LeaderElectionConfig`]: the Lease to elect on, the identity, and the
//! three durations, with client-go's defaults and its validation.

use std::time::Duration;

/// How much longer than the retry period a candidate may wait between
/// attempts, as a fraction of it (client-go's `JitterFactor`).
pub const JITTER_FACTOR: f64 = 1.2;

/// What to elect on and how fast, with client-go's defaults.
///
/// The three durations follow client-go's `LeaderElectionConfig`:
///
/// - `lease_duration`: how long a candidate waits, after it last saw the Lease
///   change, before it takes the Lease over. It is written to the Lease as
///   whole seconds (`leaseDurationSeconds`), which is what other candidates
///   honour.
/// - `renew_deadline`: how long the leader may go without a successful renewal
///   before it stops leading. Its fencing check turns false at that point.
/// - `retry_period`: the pause between attempts, jittered by up to
///   [`JITTER_FACTOR`] times itself while acquiring.
///
/// Build one with [`LeaderElectionConfig::new`] and the `with_` methods, then
/// [`validate`](Self::validate) it (done by
/// [`LeaderElector::new`](crate::LeaderElector::new)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderElectionConfig {
    /// Name of the coordination.k8s.io/v1 Lease.
    pub lease_name: String,
    /// Namespace of the Lease.
    pub lease_namespace: String,
    /// This candidate's identity, written to `holderIdentity`. Unique among
    /// the candidates: two processes with one identity both lead.
    pub identity: String,
    /// See the type's documentation. Default 15 s.
    pub lease_duration: Duration,
    /// See the type's documentation. Default 10 s.
    pub renew_deadline: Duration,
    /// See the type's documentation. Default 2 s.
    pub retry_period: Duration,
}

impl LeaderElectionConfig {
    /// client-go's and the cloud-controller-manager's default lease duration.
    pub const DEFAULT_LEASE_DURATION: Duration = Duration::from_secs(15);
    /// client-go's and the cloud-controller-manager's default renew deadline.
    pub const DEFAULT_RENEW_DEADLINE: Duration = Duration::from_secs(10);
    /// client-go's and the cloud-controller-manager's default retry period.
    pub const DEFAULT_RETRY_PERIOD: Duration = Duration::from_secs(2);

    /// A configuration with the default durations.
    pub fn new(
        lease_name: impl Into<String>,
        lease_namespace: impl Into<String>,
        identity: impl Into<String>,
    ) -> Self {
        Self {
            lease_name: lease_name.into(),
            lease_namespace: lease_namespace.into(),
            identity: identity.into(),
            lease_duration: Self::DEFAULT_LEASE_DURATION,
            renew_deadline: Self::DEFAULT_RENEW_DEADLINE,
            retry_period: Self::DEFAULT_RETRY_PERIOD,
        }
    }

    /// Sets the lease duration.
    #[must_use]
    pub fn with_lease_duration(mut self, lease_duration: Duration) -> Self {
        self.lease_duration = lease_duration;
        self
    }

    /// Sets the renew deadline.
    #[must_use]
    pub fn with_renew_deadline(mut self, renew_deadline: Duration) -> Self {
        self.renew_deadline = renew_deadline;
        self
    }

    /// Sets the retry period.
    #[must_use]
    pub fn with_retry_period(mut self, retry_period: Duration) -> Self {
        self.retry_period = retry_period;
        self
    }

    /// Checks what client-go's `NewLeaderElector` checks, plus the names.
    ///
    /// # Errors
    ///
    /// The first rule broken, as a [`ConfigError`]: an empty name, namespace
    /// or identity; a lease duration under one second; a renew deadline not
    /// below the lease duration (as written, in whole seconds); a retry period
    /// of zero, or one whose jittered value (× [`JITTER_FACTOR`]) is not below
    /// the renew deadline.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.lease_name.is_empty() {
            return Err(ConfigError::EmptyLeaseName);
        }
        if self.lease_namespace.is_empty() {
            return Err(ConfigError::EmptyLeaseNamespace);
        }
        if self.identity.is_empty() {
            return Err(ConfigError::EmptyIdentity);
        }
        if self.lease_duration < Duration::from_secs(1) {
            return Err(ConfigError::LeaseDurationTooShort {
                lease_duration: self.lease_duration,
            });
        }
        if self.renew_deadline >= self.written_lease_duration() {
            return Err(ConfigError::RenewDeadlineNotBelowLeaseDuration {
                renew_deadline: self.renew_deadline,
                lease_duration: self.written_lease_duration(),
            });
        }
        if self.retry_period.is_zero() {
            return Err(ConfigError::ZeroRetryPeriod);
        }
        if self.renew_deadline <= self.retry_period.mul_f64(JITTER_FACTOR) {
            return Err(ConfigError::RetryPeriodTooLong {
                retry_period: self.retry_period,
                renew_deadline: self.renew_deadline,
            });
        }
        Ok(())
    }

    /// `leaseDurationSeconds` as this candidate writes it.
    pub(crate) fn lease_duration_seconds(&self) -> i32 {
        i32::try_from(self.lease_duration.as_secs()).unwrap_or(i32::MAX)
    }

    /// The lease duration other candidates will honour: whole seconds, as
    /// written to the Lease.
    fn written_lease_duration(&self) -> Duration {
        Duration::from_secs(self.lease_duration.as_secs())
    }

    /// `namespace/name`, for logs and errors.
    pub(crate) fn lease_key(&self) -> String {
        format!("{}/{}", self.lease_namespace, self.lease_name)
    }
}

/// A [`LeaderElectionConfig`] that cannot elect safely.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// `lease_name` is empty.
    #[error("leader election lease name must not be empty")]
    EmptyLeaseName,
    /// `lease_namespace` is empty.
    #[error("leader election lease namespace must not be empty")]
    EmptyLeaseNamespace,
    /// `identity` is empty: the Lease would look unheld.
    #[error("leader election identity must not be empty")]
    EmptyIdentity,
    /// `lease_duration` is under one second, which the Lease's whole-second
    /// `leaseDurationSeconds` cannot express.
    #[error("leader election lease duration must be at least 1s, got {lease_duration:?}")]
    LeaseDurationTooShort {
        /// The configured lease duration.
        lease_duration: Duration,
    },
    /// `renew_deadline` is not below the lease duration: a leader could still
    /// act after another candidate took over.
    #[error(
        "leader election renew deadline ({renew_deadline:?}) must be less than the lease duration \
         ({lease_duration:?}, in whole seconds)"
    )]
    RenewDeadlineNotBelowLeaseDuration {
        /// The configured renew deadline.
        renew_deadline: Duration,
        /// The lease duration as written to the Lease.
        lease_duration: Duration,
    },
    /// `retry_period` is zero.
    #[error("leader election retry period must be greater than zero")]
    ZeroRetryPeriod,
    /// `retry_period` × [`JITTER_FACTOR`] is not below `renew_deadline`: the
    /// leader would not get a second try before its deadline.
    #[error(
        "leader election renew deadline ({renew_deadline:?}) must be greater than the retry period \
         ({retry_period:?}) times {JITTER_FACTOR}"
    )]
    RetryPeriodTooLong {
        /// The configured retry period.
        retry_period: Duration,
        /// The configured renew deadline.
        renew_deadline: Duration,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> LeaderElectionConfig {
        LeaderElectionConfig::new("cloud-controller-manager", "kube-system", "node-a")
    }

    #[test]
    fn defaults_are_client_go_defaults() {
        let config = config();
        assert_eq!(config.lease_duration, Duration::from_secs(15));
        assert_eq!(config.renew_deadline, Duration::from_secs(10));
        assert_eq!(config.retry_period, Duration::from_secs(2));
        assert_eq!(config.validate(), Ok(()));
        assert_eq!(config.lease_duration_seconds(), 15);
    }

    #[test]
    fn short_test_durations_are_valid() {
        let config = config()
            .with_lease_duration(Duration::from_secs(3))
            .with_renew_deadline(Duration::from_secs(2))
            .with_retry_period(Duration::from_millis(500));
        assert_eq!(config.validate(), Ok(()));
    }

    #[test]
    fn empty_names_are_refused() {
        let mut no_name = config();
        no_name.lease_name.clear();
        assert_eq!(no_name.validate(), Err(ConfigError::EmptyLeaseName));
        let mut no_namespace = config();
        no_namespace.lease_namespace.clear();
        assert_eq!(
            no_namespace.validate(),
            Err(ConfigError::EmptyLeaseNamespace)
        );
        let mut no_identity = config();
        no_identity.identity.clear();
        assert_eq!(no_identity.validate(), Err(ConfigError::EmptyIdentity));
    }

    #[test]
    fn renew_deadline_must_be_below_lease_duration() {
        let equal = config().with_renew_deadline(Duration::from_secs(15));
        assert_eq!(
            equal.validate(),
            Err(ConfigError::RenewDeadlineNotBelowLeaseDuration {
                renew_deadline: Duration::from_secs(15),
                lease_duration: Duration::from_secs(15),
            })
        );
    }

    #[test]
    fn renew_deadline_is_compared_with_the_whole_seconds_written() {
        // 10.9 s is written as 10 s, which other candidates honour.
        let config = config()
            .with_lease_duration(Duration::from_millis(10_900))
            .with_renew_deadline(Duration::from_millis(10_500));
        assert_eq!(
            config.validate(),
            Err(ConfigError::RenewDeadlineNotBelowLeaseDuration {
                renew_deadline: Duration::from_millis(10_500),
                lease_duration: Duration::from_secs(10),
            })
        );
    }

    #[test]
    fn lease_duration_under_a_second_is_refused() {
        let config = config()
            .with_lease_duration(Duration::from_millis(900))
            .with_renew_deadline(Duration::from_millis(500))
            .with_retry_period(Duration::from_millis(100));
        assert_eq!(
            config.validate(),
            Err(ConfigError::LeaseDurationTooShort {
                lease_duration: Duration::from_millis(900)
            })
        );
    }

    #[test]
    fn retry_period_times_jitter_must_be_below_renew_deadline() {
        // 9 s × 1.2 = 10.8 s, not below 10 s: client-go refuses it too.
        let too_long = config().with_retry_period(Duration::from_secs(9));
        assert_eq!(
            too_long.validate(),
            Err(ConfigError::RetryPeriodTooLong {
                retry_period: Duration::from_secs(9),
                renew_deadline: Duration::from_secs(10),
            })
        );
        let zero = config().with_retry_period(Duration::ZERO);
        assert_eq!(zero.validate(), Err(ConfigError::ZeroRetryPeriod));
        let just_fits = config().with_retry_period(Duration::from_millis(8_300));
        assert_eq!(just_fits.validate(), Ok(()));
    }
}
