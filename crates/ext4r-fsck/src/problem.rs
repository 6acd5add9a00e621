//! Problems the checker finds, in words an e2fsck user recognises.

/// How a problem counts towards the verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    /// An inconsistency: leaving it unfixed makes the exit code 4.
    Error,
    /// Reported, but leaving it alone is fine (e2fsck's `PR_NO_OK`: the
    /// superblock's summary counts, optimisations, a missing file type).
    Harmless,
}

/// One finding: which pass, e2fsck's problem name, and a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The pass that found it (0 = superblock and descriptors, 1–5 as
    /// e2fsck's passes).
    pub pass: u8,
    /// e2fsck's name for the problem (`PR_1_BAD_I_BLOCKS`), so that the
    /// report can be compared with e2fsck's.
    pub code: &'static str,
    /// Whether it is an error.
    pub severity: Severity,
    /// What and where, in e2fsck's words.
    pub message: String,
}

/// Collected problems with a cap on how many messages are kept, so a badly
/// damaged volume cannot make the report grow without bound.
#[derive(Debug, Default)]
pub struct Problems {
    list: Vec<Problem>,
    errors: u64,
    dropped: u64,
}

/// Messages kept in full; beyond this only the counts grow.
const KEEP: usize = 10_000;

impl Problems {
    /// Records an error.
    pub fn error(&mut self, pass: u8, code: &'static str, message: String) {
        self.push(pass, code, Severity::Error, message);
    }

    /// Records a harmless finding.
    pub fn harmless(&mut self, pass: u8, code: &'static str, message: String) {
        self.push(pass, code, Severity::Harmless, message);
    }

    fn push(&mut self, pass: u8, code: &'static str, severity: Severity, message: String) {
        if severity == Severity::Error {
            self.errors += 1;
        }
        if self.list.len() < KEEP {
            self.list.push(Problem {
                pass,
                code,
                severity,
                message,
            });
        } else {
            self.dropped += 1;
        }
    }

    /// Number of errors found (also those whose message was dropped).
    pub fn errors(&self) -> u64 {
        self.errors
    }

    /// Messages not kept because of the cap.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// The kept problems in the order found.
    pub fn list(&self) -> &[Problem] {
        &self.list
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn harmless_findings_do_not_count_as_errors_and_the_list_is_capped() {
        let mut p = Problems::default();
        p.harmless(5, "PR_5_FREE_BLOCK_COUNT", "x".into());
        assert_eq!(p.errors(), 0);
        for i in 0..(KEEP + 5) {
            p.error(1, "PR_1_X", i.to_string());
        }
        assert_eq!(p.errors(), (KEEP + 5) as u64);
        assert_eq!(p.list().len(), KEEP);
        assert_eq!(p.dropped(), 6);
    }
}
