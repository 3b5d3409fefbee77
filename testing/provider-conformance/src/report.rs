//! [`Report`]: what each check found.

use std::fmt;

/// How one check came out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Every assertion of the check held.
    Passed,
    /// An assertion failed: what was expected and what happened.
    Failed(String),
    /// The check does not apply: the capability is absent, or the
    /// emulator cannot produce the situation (the reason says which).
    NotApplicable(String),
}

/// Every check the suite ran, in order, with its outcome.
#[derive(Debug, Clone, Default)]
pub struct Report {
    checks: Vec<(String, Outcome)>,
}

impl Report {
    /// Records `name`'s outcome.
    pub(crate) fn record(&mut self, name: &str, outcome: Outcome) {
        self.checks.push((name.to_owned(), outcome));
    }

    /// Records a check from its result.
    pub(crate) fn result(&mut self, name: &str, result: Result<(), String>) {
        let outcome = match result {
            Ok(()) => Outcome::Passed,
            Err(why) => Outcome::Failed(why),
        };
        self.record(name, outcome);
    }

    /// Every check and its outcome, in the order run.
    pub fn checks(&self) -> &[(String, Outcome)] {
        &self.checks
    }

    /// The outcome of the check called `name`, if it ran.
    pub fn outcome(&self, name: &str) -> Option<&Outcome> {
        self.checks.iter().find(|(n, _)| n == name).map(|(_, o)| o)
    }

    /// The failed checks: name and why.
    pub fn failures(&self) -> Vec<(&str, &str)> {
        self.checks
            .iter()
            .filter_map(|(name, outcome)| match outcome {
                Outcome::Failed(why) => Some((name.as_str(), why.as_str())),
                _ => None,
            })
            .collect()
    }

    /// How many checks passed.
    pub fn passed(&self) -> usize {
        self.checks
            .iter()
            .filter(|(_, o)| *o == Outcome::Passed)
            .count()
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (name, outcome) in &self.checks {
            match outcome {
                Outcome::Passed => writeln!(f, "  pass  {name}")?,
                Outcome::Failed(why) => writeln!(f, "  FAIL  {name}: {why}")?,
                Outcome::NotApplicable(why) => writeln!(f, "  n/a   {name}: {why}")?,
            }
        }
        write!(
            f,
            "{} passed, {} failed, {} not applicable",
            self.passed(),
            self.failures().len(),
            self.checks.len() - self.passed() - self.failures().len()
        )
    }
}
