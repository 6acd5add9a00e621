//! e2fsck's problem codes as this checker uses them: the plain list kept
//! in `e2fsck-problems.txt` (code and e2fsck's flags), from which the
//! repair takes what e2fsck -p fixes without stopping. Codes of problems
//! e2fsck has no code for start with `EXT4R_` (see PROBLEMS.md).

/// The list: one code per line, then its flags; `#` starts a comment.
const LIST: &str = include_str!("../e2fsck-problems.txt");

/// e2fsck's flags for `code` (None: not one of e2fsck's).
fn flags(code: &str) -> Option<impl Iterator<Item = &'static str>> {
    // A bitmap difference is one problem here, filed under e2fsck's
    // header code (PROMPT_NONE, "Block bitmap differences: "); e2fsck
    // asks its question after the ranges, with the end code's flags.
    let code = match code {
        "PR_5_BLOCK_BITMAP_HEADER" => "PR_5_BLOCK_BITMAP_END",
        "PR_5_INODE_BITMAP_HEADER" => "PR_5_INODE_BITMAP_END",
        c => c,
    };
    LIST.lines().filter(|l| !l.starts_with('#')).find_map(|l| {
        let mut w = l.split_whitespace();
        (w.next() == Some(code)).then_some(w)
    })
}

/// Whether e2fsck -p fixes the problem without stopping: it is marked
/// `PR_PREEN_OK`, or nothing is asked about it (`PROMPT_NONE`).
pub(crate) fn preen_ok(code: &str) -> bool {
    match flags(code) {
        Some(mut f) => f.any(|x| x == "preen_ok" || x == "no_prompt"),
        // ext4r's own: what e2fsck does instead is preen-safe too.
        None => matches!(
            code,
            "EXT4R_1_EXTENT_NODE_DEPTH"
                | "EXT4R_0_JOURNAL_INODE_BACKUP"
                | "EXT4R_1_INLINE_ATTR_HASH"
        ),
    }
}

/// Whether e2fsck fixes the problem without asking (`PROMPT_NONE`, no
/// question following): an interactive run does not ask either.
pub fn no_prompt(code: &str) -> bool {
    flags(code).is_some_and(|mut f| f.any(|x| x == "no_prompt"))
}

/// Where e2fsck puts its question after the message of `code`: `Some(n)`
/// on the message's own line after `n` spaces ("... should be 3.  Fix?"),
/// `None` on the next line (the message ends with a newline, or the code
/// is not e2fsck's).
pub fn question_spacing(code: &str) -> Option<usize> {
    flags(code)?
        .find_map(|x| x.strip_prefix("same_line:"))
        .and_then(|n| n.parse().ok())
}

/// How many newlines end e2fsck's message for `code` when nothing is
/// asked after it (`PROMPT_NONE`): 2 where a blank line follows ("...
/// generating one.\n\n"), else 1. (The messages e2fsck ends without one
/// are pieces of a line, which this checker says whole.)
pub fn trailing_newlines(code: &str) -> usize {
    flags(code)
        .and_then(|mut f| f.find_map(|x| x.strip_prefix("nl:")))
        .and_then(|n| n.parse().ok())
        .unwrap_or(1)
}

/// Whether e2fsck -n keeps quiet about the problem (`PR_NO_NOMSG`: a
/// missing file type, which -n leaves).
pub fn no_nomsg(code: &str) -> bool {
    flags(code).is_some_and(|mut f| f.any(|x| x == "no_nomsg"))
}

/// e2fsck's `PROMPT_*` for `code`, lower case without the prefix
/// ("clear_htree"); `None` for `PROMPT_NONE` and for codes not e2fsck's.
pub(crate) fn prompt_name(code: &str) -> Option<&'static str> {
    flags(code)?.find_map(|x| x.strip_prefix("prompt:"))
}

/// Whether e2fsck -p fixes the problem without a word (`PR_PREEN_NOMSG`:
/// bitmap differences, free counts).
pub fn preen_silent(code: &str) -> bool {
    flags(code).is_some_and(|mut f| f.any(|x| x == "preen_nomsg"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preen_flags_come_from_the_list() {
        assert!(preen_ok("PR_1_BAD_I_SIZE"));
        assert!(preen_ok("PR_0_CLEAR_V2_JOURNAL"));
        assert!(!preen_ok("PR_2_DIR_CORRUPTED"));
        assert!(!preen_ok("PR_1D_CLONE_QUESTION"));
        assert!(!preen_ok("EXT4R_1_EXTENT_ROOT_DEPTH"));
        assert_eq!(question_spacing("PR_4_BAD_REF_COUNT"), Some(2));
        assert_eq!(question_spacing("PR_5_FREE_BLOCK_COUNT_GROUP"), None);
        assert_eq!(question_spacing("EXT4R_1_EXTENT_ROOT_DEPTH"), None);
        assert!(preen_silent("PR_5_BLOCK_USED") && !preen_silent("PR_2_UNUSED_INODE"));
        assert!(no_prompt("PR_2_SET_FILETYPE") && !no_prompt("PR_5_BLOCK_BITMAP_HEADER"));
        assert!(preen_ok("PR_5_BLOCK_BITMAP_HEADER") && preen_silent("PR_5_INODE_BITMAP_HEADER"));
    }
}
