//! Names in a casefolded directory of a filesystem whose encoding is
//! strict must be valid UTF-8 (e2fsck's PR_2_BAD_ENCODED_NAME; without
//! the strict flag e2fsck does not look, nor do we). libext2fs checks a
//! name up to its first NUL byte against its Unicode tables: what does
//! not decode is invalid, and from there on the name's bytes (up to a
//! NUL) become '.', as e2fsck rewrites them.

use crate::codes::ProblemCode;
use crate::ctx::{Ctx, DirBlock};
use crate::fix::Fix;

/// `s_encoding_flags`: reject names that are not valid in the encoding.
const STRICT: u16 = 0x0001;

/// Where a name stops being valid UTF-8 (None: it is valid).
fn first_invalid(name: &[u8]) -> Option<usize> {
    let end = name.iter().position(|&x| x == 0).unwrap_or(name.len());
    std::str::from_utf8(&name[..end])
        .err()
        .map(|e| e.valid_up_to())
}

/// Checks the entry `name` at (`b`, `off`) of directory `d` (`slot` 0
/// and 1 are `.` and `..`).
pub(crate) fn check(c: &mut Ctx, d: usize, slot: usize, b: &DirBlock, off: usize, name: &[u8]) {
    let dir = &c.dirs()[d];
    if slot < 2 || dir.encrypted() || !dir.casefold() || c.sb().s_encoding_flags.get() & STRICT == 0
    {
        return;
    }
    let Some(pos) = first_invalid(name) else {
        return;
    };
    let (ino, owner) = (dir.ino, dir.owner());
    let msg = format!(
        "Entry '{}' in {} ({ino}) has illegal UTF-8 characters in its name.",
        crate::pathname::safe(name),
        crate::pathname::dir_path(c.fs(), ino)
    );
    let mut fixed = name.to_vec();
    for x in fixed[pos..].iter_mut().take_while(|x| **x != 0) {
        *x = b'.';
    }
    if b.phys != 0 {
        c.report(b.entry_at(off)).error_fix(
            2,
            ProblemCode::PR_2_BAD_ENCODED_NAME,
            msg,
            Fix::DirEntryRename(b.phys, off, fixed, owner),
        );
    } else {
        c.report(b.entry_at(off))
            .error(2, ProblemCode::PR_2_BAD_ENCODED_NAME, msg);
    }
}

#[cfg(test)]
mod tests {
    use super::first_invalid;

    #[test]
    fn names_are_judged_up_to_a_nul() {
        assert_eq!(first_invalid(b"plain"), None);
        assert_eq!(first_invalid("caf\u{e9}".as_bytes()), None);
        assert_eq!(first_invalid(b"ab\xffcd"), Some(2));
        assert_eq!(first_invalid(b"ab\0\xff"), None);
        assert_eq!(first_invalid(b"\xc3"), Some(0));
    }
}
