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
    /// The repair, when this version knows one.
    pub fix: Option<crate::fix::Fix>,
}

/// Collected problems with a cap on how many messages are kept, so a badly
/// damaged volume cannot make the report grow without bound.
#[derive(Debug, Default)]
pub struct Problems {
    list: Vec<Problem>,
    overflow_fixes: Vec<crate::fix::Fix>,
    errors: u64,
    dropped: u64,
    /// Keeps every message: a pass-1 worker's findings for a stretch of
    /// inodes, which go through [`Problems::absorb`] (and its cap) later.
    uncapped: bool,
}

/// Messages kept in full; beyond this only the counts grow.
const KEEP: usize = 10_000;

impl Problems {
    /// Records an error.
    pub fn error(&mut self, pass: u8, code: &'static str, message: String) {
        self.push(pass, code, Severity::Error, message, None);
    }

    /// Records an error and its repair.
    pub fn error_fix(
        &mut self,
        pass: u8,
        code: &'static str,
        message: String,
        fix: crate::fix::Fix,
    ) {
        self.push(pass, code, Severity::Error, message, Some(fix));
    }

    /// Records a harmless finding.
    pub fn harmless(&mut self, pass: u8, code: &'static str, message: String) {
        self.push(pass, code, Severity::Harmless, message, None);
    }

    /// Records a harmless finding that a repair run still corrects.
    pub fn harmless_fix(
        &mut self,
        pass: u8,
        code: &'static str,
        message: String,
        fix: crate::fix::Fix,
    ) {
        self.push(pass, code, Severity::Harmless, message, Some(fix));
    }

    fn push(
        &mut self,
        pass: u8,
        code: &'static str,
        severity: Severity,
        message: String,
        fix: Option<crate::fix::Fix>,
    ) {
        if severity == Severity::Error {
            self.errors += 1;
        }
        if self.list.len() < KEEP || self.uncapped {
            self.list.push(Problem {
                pass,
                code,
                severity,
                message,
                fix,
            });
        } else {
            // Past the cap a repair still needs the fix; the words go.
            self.dropped += 1;
            if let Some(f) = fix {
                self.overflow_fixes.push(f);
            }
        }
    }

    /// A list without the cap, for findings that [`Problems::absorb`] adds
    /// to a capped one.
    pub(crate) fn uncapped() -> Self {
        Problems {
            uncapped: true,
            ..Problems::default()
        }
    }

    /// Adds `other`'s findings after these, as if each had been found here
    /// (the cap applies as it would have).
    pub(crate) fn absorb(&mut self, other: Problems) {
        debug_assert_eq!(other.dropped, 0, "absorbed from a capped list");
        for p in other.list {
            self.push(p.pass, p.code, p.severity, p.message, p.fix);
        }
        for f in other.overflow_fixes {
            self.overflow_fixes.push(f);
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

    /// Every repair the problems carry, in the order found.
    pub fn fixes(&self) -> Vec<crate::fix::Fix> {
        self.list
            .iter()
            .filter_map(|p| p.fix.clone())
            .chain(self.overflow_fixes.iter().cloned())
            .collect()
    }

    /// Keeps only the problems `keep` accepts (the error count follows;
    /// for use before the cap is reached).
    pub(crate) fn retain(&mut self, keep: impl Fn(&Problem) -> bool) {
        self.list.retain(|p| keep(p));
        self.errors = self
            .list
            .iter()
            .filter(|p| p.severity == Severity::Error)
            .count() as u64
            + self.dropped;
    }

    /// The repairs of problems past the cap (their messages were dropped).
    pub(crate) fn overflow_fixes(&self) -> &[crate::fix::Fix] {
        &self.overflow_fixes
    }

    /// Errors that no known repair addresses.
    pub fn unfixable(&self) -> impl Iterator<Item = &Problem> {
        self.list
            .iter()
            .filter(|p| p.severity == Severity::Error && p.fix.is_none())
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
