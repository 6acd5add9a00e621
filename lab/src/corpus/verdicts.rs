//! `verdicts.tsv`: what e2fsck 1.47.0 does on each corpus image, and the rule
//! that turns it into the verdict a checker's `-fn` run must agree with.
//!
//! The rule (the fsck issue's, plus what to do where e2fsck itself failed):
//! 1. Normally the expected class is that of `e2fsck_fn`. Where `e2fsck -fn`
//!    exits 0 but `e2fsck -fy` exits 1 (the -n run tolerated problems it would
//!    still fix: free counts, optimisations, skipped journal replay), both clean
//!    and errors agree.
//! 2. Where e2fsck 1.47.0 itself timed out (124, or a `-fn TIMEOUT` note) or
//!    crashed (`-fn CRASH` note: its handler turns SIGSEGV into exit 8), its -fn
//!    exit is no verdict. The expected class then comes from the upstream test's
//!    expected first exit (`upstream_expect_exit=F/S`: 0 → clean, 1..7 → errors,
//!    since what -y fixes -n must report; 8 → operational error), or failing
//!    that from `e2fsck_fy` (1 → errors, 0 → clean).
//! 3. An image whose test needs an external journal (`-j journal.img`) is
//!    checked with `-j` when the corpus holds `journal.gz` (expected: the upstream
//!    exit); without it there is no fair verdict, so it is skipped.
//! 4. Where the upstream test fails under e2fsck 1.47.0 (`harness(1.47.0)=failed`:
//!    a bug fixed since, as f_ea_inode_fast_symlink's, whose target 1.47.0 reads
//!    as block numbers and clears), the upstream test's expected first exit agrees
//!    too, beside 1.47.0's own.

use anyhow::{bail, Context, Result};

use super::class::Class;

/// One row of verdicts.tsv.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub test: String,
    /// Exit of `e2fsck -fn` on the pristine image (124: timed out).
    pub fn_exit: i32,
    /// Exit of `e2fsck -fy` on a copy.
    pub fy_exit: i32,
    /// Exit of `e2fsck -fn` on that repaired copy.
    pub fn_after: i32,
    pub notes: String,
}

const HEADER: [&str; 5] = ["test", "e2fsck_fn", "e2fsck_fy", "e2fsck_fn_after", "notes"];

/// Parses the whole file: a header naming the five columns, then one row per
/// image. Errors name the line.
pub fn parse(text: &str) -> Result<Vec<Verdict>> {
    let mut lines = text.lines().enumerate();
    let header: Vec<&str> = lines
        .next()
        .context("verdicts.tsv is empty")?
        .1
        .split('\t')
        .collect();
    if header != HEADER {
        bail!("verdicts.tsv: unexpected header {header:?}, want {HEADER:?}");
    }
    let mut out = Vec::new();
    for (i, line) in lines {
        if line.trim().is_empty() {
            continue;
        }
        let n = i + 1;
        let cols: Vec<&str> = line.split('\t').collect();
        if !(4..=5).contains(&cols.len()) {
            bail!("verdicts.tsv:{n}: {} columns, want 5", cols.len());
        }
        let int = |j: usize| -> Result<i32> {
            cols[j]
                .trim()
                .parse()
                .with_context(|| format!("verdicts.tsv:{n}: {}: bad exit {:?}", HEADER[j], cols[j]))
        };
        let test = cols[0].trim();
        if test.is_empty() || test.contains('/') || test.starts_with('.') {
            bail!("verdicts.tsv:{n}: bad test name {test:?}");
        }
        out.push(Verdict {
            test: test.to_string(),
            fn_exit: int(1)?,
            fy_exit: int(2)?,
            fn_after: int(3)?,
            notes: cols.get(4).unwrap_or(&"").trim().to_string(),
        });
    }
    if out.is_empty() {
        bail!("verdicts.tsv has no rows");
    }
    Ok(out)
}

/// Where an expected class came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Basis {
    /// e2fsck 1.47.0's own -fn exit.
    E2fsck,
    /// e2fsck 1.47.0 timed out or crashed on it: the upstream expected exit.
    Upstream,
}

/// The verdict a checker's `-fn` run must agree with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Expected {
    pub class: Class,
    /// A second class that also agrees (rule 1: errors where -fn said clean).
    pub also: Option<Class>,
    pub basis: Basis,
}

impl Expected {
    pub fn agrees(&self, got: Class) -> bool {
        got == self.class || self.also == Some(got)
    }
}

impl std::fmt::Display for Expected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.class)?;
        if let Some(also) = self.also {
            write!(f, "|{also}")?;
        }
        if self.basis == Basis::Upstream {
            f.write_str(" (upstream)")?;
        }
        Ok(())
    }
}

impl Verdict {
    /// The value of a `key=value` note, e.g. `upstream_expect_exit` → `1/0`.
    pub fn note(&self, key: &str) -> Option<&str> {
        self.notes.split(';').find_map(|n| {
            let (k, v) = n.trim().split_once('=')?;
            (k == key).then_some(v.trim())
        })
    }

    fn has_note(&self, text: &str) -> bool {
        self.notes.split(';').any(|n| n.trim().starts_with(text))
    }

    /// The upstream test's expected exit of its first e2fsck run.
    pub fn upstream_first(&self) -> Option<i32> {
        self.note("upstream_expect_exit")?
            .split('/')
            .next()?
            .parse()
            .ok()
    }

    /// Why e2fsck 1.47.0's `-fn` exit is no verdict, if it is not.
    pub fn e2fsck_failed(&self) -> Option<&'static str> {
        if self.fn_exit == 124 || self.has_note("-fn TIMEOUT") {
            Some("e2fsck 1.47.0 -fn timed out")
        } else if self.has_note("-fn CRASH") {
            Some("e2fsck 1.47.0 -fn crashed")
        } else {
            None
        }
    }

    /// Whether the upstream test runs e2fsck with an external journal (`-j`).
    pub fn needs_external_journal(&self) -> bool {
        self.has_note("external journal") || self.note("FSCK_OPT").is_some_and(|o| o.contains("-j"))
    }

    /// `E2FSCK_TIME=N` when the upstream test sets it (e2fsck's clock override).
    pub fn e2fsck_time(&self) -> Option<&str> {
        self.note("E2FSCK_TIME")
    }

    /// Images e2fsck 1.47.0 repairs to clean with one `-fy`.
    pub fn e2fsck_repairs(&self) -> bool {
        self.fn_after == 0
    }

    /// The expected `-fn` class by rules 1 and 2 of the module docs (rule 3,
    /// the external journal, is the caller's: it depends on the corpus files).
    pub fn expected(&self) -> Expected {
        if self.e2fsck_failed().is_some() {
            let class = self.upstream_class().unwrap_or(if self.fy_exit == 0 {
                Class::Clean
            } else {
                Class::Errors
            });
            return Expected {
                class,
                also: None,
                basis: Basis::Upstream,
            };
        }
        let class = Class::of_code(self.fn_exit);
        let upstream = self
            .has_note("harness(1.47.0)=failed")
            .then(|| self.upstream_class())
            .flatten()
            .filter(|&u| u != class);
        let also = (class == Class::Clean && self.fy_exit == 1)
            .then_some(Class::Errors)
            .or(upstream);
        Expected {
            class,
            also,
            basis: Basis::E2fsck,
        }
    }

    /// The class of the upstream test's expected first exit, if it has one.
    fn upstream_class(&self) -> Option<Class> {
        // What -y fixes, -n must report: 1..7 are errors.
        Some(match self.upstream_first()? {
            c if (1..8).contains(&c) => Class::Errors,
            c => Class::of_code(c),
        })
    }

    /// With the external journal given (`-j`), upstream's expected exit holds.
    pub fn expected_with_journal(&self) -> Expected {
        let class = self.upstream_class().unwrap_or(Class::Clean);
        Expected {
            class,
            also: None,
            basis: Basis::Upstream,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "test\te2fsck_fn\te2fsck_fy\te2fsck_fn_after\tnotes
f_16384_block\t0\t0\t0\tgz=9992; upstream_expect_exit=0/0; harness(1.47.0)=ok
f_bad_inode_csum\t12\t1\t0\tgz=4613; upstream_expect_exit=1/0; exit 12 = 4|8 (aborted)
f_quota_extent_opt\t0\t1\t0\tupstream_expect_exit=1/0; -fn exit 0 although it reported problems (PR_NO_OK/journal-skip)
f_misstable\t124\t1\t0\tgz=17201; upstream_expect_exit=1/0; -fn TIMEOUT (infinite loop)
f_h_badroot\t8\t1\t0\tgz=43165; HTREE-gated; upstream_expect_exit=1/0; harness(1.47.0)=ok; -fn CRASH SIGSEGV
f_illitable\t8\t1\t0\tupstream_expect_exit=1/0
f_ext_journal\t12\t12\t12\tFSCK_OPT=-fy -j journal.img; external journal (-j); upstream_expect_exit=0/0
f_itable_collision\t12\t1\t0\tFSCK_OPT=-fy; E2FSCK_TIME=2147483646; custom runner
j_recover_fast_commit\t4\t0\t0\tFSCK_OPT=-fy
f_nonotes\t0\t0\t0
f_ea_inode_fast_symlink\t4\t1\t4\tgz=13789; upstream_expect_exit=0/0; harness(1.47.0)=failed; not clean after -fy
f_ea_zero_size\t0\t0\t0\tgz=1313; upstream_expect_exit=1/0; harness(1.47.0)=failed
";

    fn rows() -> Vec<Verdict> {
        parse(SAMPLE).unwrap()
    }

    fn row(name: &str) -> Verdict {
        rows().into_iter().find(|v| v.test == name).unwrap()
    }

    #[test]
    fn parses_rows() {
        let v = rows();
        assert_eq!(v.len(), 12);
        assert_eq!(v[1].test, "f_bad_inode_csum");
        assert_eq!((v[1].fn_exit, v[1].fy_exit, v[1].fn_after), (12, 1, 0));
        assert_eq!(v[9].notes, "");
        assert_eq!(v[0].note("upstream_expect_exit"), Some("0/0"));
        assert_eq!(v[0].note("gz"), Some("9992"));
        assert_eq!(v[0].note("nope"), None);
        assert_eq!(v[1].upstream_first(), Some(1));
        assert_eq!(v[9].upstream_first(), None);
        assert_eq!(row("f_itable_collision").e2fsck_time(), Some("2147483646"));
    }

    #[test]
    fn rejects_bad_input() {
        assert!(parse("").is_err());
        assert!(parse("test\te2fsck_fn\n").is_err());
        let head = "test\te2fsck_fn\te2fsck_fy\te2fsck_fn_after\tnotes\n";
        assert!(parse(head).is_err(), "no rows");
        assert!(parse(&format!("{head}f_x\t4\tone\t0\tn\n")).is_err());
        assert!(parse(&format!("{head}f_x\t4\n")).is_err());
        assert!(parse(&format!("{head}../x\t4\t1\t0\tn\n")).is_err());
        let err = parse(&format!("{head}f_a\t0\t0\t0\t\nf_x\t4\t1\n")).unwrap_err();
        assert!(format!("{err:#}").contains(":3:"), "{err:#}");
    }

    #[test]
    fn plain_rows_take_e2fsck_class() {
        let e = row("f_16384_block").expected();
        assert_eq!(
            (e.class, e.also, e.basis),
            (Class::Clean, None, Basis::E2fsck)
        );
        assert!(e.agrees(Class::Clean));
        assert!(!e.agrees(Class::Errors));
        // 12 = 4|8 is errors; an abort-only 8 is not.
        let e = row("f_bad_inode_csum").expected();
        assert_eq!(e.class, Class::Errors);
        assert!(e.agrees(Class::Errors));
        assert!(!e.agrees(Class::Clean));
        assert!(!e.agrees(Class::OpError));
        // -fn errors although -fy changes nothing: still errors only.
        let e = row("j_recover_fast_commit").expected();
        assert_eq!((e.class, e.also), (Class::Errors, None));
        // e2fsck's operational error, no crash note: strict.
        let e = row("f_illitable").expected();
        assert_eq!(
            (e.class, e.also, e.basis),
            (Class::OpError, None, Basis::E2fsck)
        );
        assert!(!e.agrees(Class::Errors));
    }

    #[test]
    fn clean_under_n_but_fixed_under_y_accepts_both() {
        let e = row("f_quota_extent_opt").expected();
        assert_eq!((e.class, e.also), (Class::Clean, Some(Class::Errors)));
        assert!(e.agrees(Class::Clean));
        assert!(e.agrees(Class::Errors));
        assert!(!e.agrees(Class::OpError));
        assert!(!e.agrees(Class::Crash));
        assert!(!e.agrees(Class::Timeout));
    }

    #[test]
    fn where_upstream_fixed_e2fsck_its_verdict_agrees_too() {
        // 1.47.0 finds errors its own fix makes; upstream's e2fsck none.
        let e = row("f_ea_inode_fast_symlink").expected();
        assert_eq!((e.class, e.also), (Class::Errors, Some(Class::Clean)));
        assert!(e.agrees(Class::Clean) && e.agrees(Class::Errors));
        assert!(!e.agrees(Class::Crash));
        // 1.47.0 misses what upstream's finds.
        let e = row("f_ea_zero_size").expected();
        assert_eq!((e.class, e.also), (Class::Clean, Some(Class::Errors)));
        // A test 1.47.0 passes keeps its one verdict.
        assert_eq!(row("f_16384_block").expected().also, None);
    }

    #[test]
    fn e2fsck_failures_fall_back_to_upstream() {
        for name in ["f_misstable", "f_h_badroot"] {
            let v = row(name);
            assert!(v.e2fsck_failed().is_some(), "{name}");
            let e = v.expected();
            assert_eq!(
                (e.class, e.basis),
                (Class::Errors, Basis::Upstream),
                "{name}"
            );
            // e2fsck's own behaviour there does not agree.
            assert!(!e.agrees(Class::Timeout));
            assert!(!e.agrees(Class::Crash));
            assert!(!e.agrees(Class::OpError));
        }
        assert!(row("f_illitable").e2fsck_failed().is_none());
        assert!(row("f_16384_block").e2fsck_failed().is_none());
    }

    #[test]
    fn external_journal() {
        let v = row("f_ext_journal");
        assert!(v.needs_external_journal());
        assert_eq!(v.expected_with_journal().class, Class::Clean);
        assert!(!row("f_itable_collision").needs_external_journal());
        assert!(!row("f_16384_block").needs_external_journal());
        assert!(row("f_itable_collision").e2fsck_repairs());
        assert!(!v.e2fsck_repairs());
    }
}
