//! The question e2fsck asks for each problem ("Fix", "Clear", "Connect to
//! /lost+found"...), so that an interactive run reads like e2fsck's.

use crate::codes::ProblemCode;

/// The prompt e2fsck puts after a problem's message: its `prompt[]` word
/// for the problem's `PROMPT_*` in problem.c (kept as `prompt:WORD` in
/// `e2fsck-problems.txt`), "" for `PROMPT_NULL` (the message is the
/// question), and "Fix" for the problems it does not ask about and for
/// ext4r's own codes.
pub fn prompt(code: ProblemCode) -> &'static str {
    match crate::codes::prompt_name(code) {
        Some("clear") => "Clear",
        Some("relocate") => "Relocate",
        Some("allocate") => "Allocate",
        Some("expand") => "Expand",
        Some("connect") => "Connect to /lost+found",
        Some("create") => "Create",
        Some("salvage") => "Salvage",
        Some("truncate") => "Truncate",
        Some("clear_inode") => "Clear inode",
        Some("abort") => "Abort",
        Some("split") => "Split",
        Some("continue") => "Continue",
        Some("clone") => "Clone multiply-claimed blocks",
        Some("delete") => "Delete file",
        Some("suppress") => "Suppress messages",
        Some("unlink") => "Unlink",
        Some("clear_htree") => "Clear HTree index",
        Some("recreate") => "Recreate",
        Some("optimize") => "Optimize",
        Some("clear_flag") => "Clear flag",
        Some("null") => "",
        _ => "Fix",
    }
}

/// What e2fsck -p says after a problem it fixed (its `preen_msg[]`), for
/// the question word [`prompt`] gives: "Clear" -> "CLEARED".
pub fn preen_word(prompt: &str) -> &'static str {
    match prompt {
        "Clear" => "CLEARED",
        "Relocate" => "RELOCATED",
        "Allocate" => "ALLOCATED",
        "Expand" => "EXPANDED",
        "Connect to /lost+found" => "RECONNECTED",
        "Create" => "CREATED",
        "Salvage" => "SALVAGED",
        "Truncate" => "TRUNCATED",
        "Clear inode" => "INODE CLEARED",
        "Abort" => "ABORTED",
        "Split" => "SPLIT",
        "Continue" => "CONTINUING",
        "Clone multiply-claimed blocks" => "MULTIPLY-CLAIMED BLOCKS CLONED",
        "Delete file" => "FILE DELETED",
        "Suppress messages" => "SUPPRESSED",
        "Unlink" => "UNLINKED",
        "Clear HTree index" => "HTREE INDEX CLEARED",
        "Recreate" => "WILL RECREATE",
        "Optimize" => "WILL OPTIMIZE",
        "Clear flag" => "FLAG CLEARED",
        "" => "",
        _ => "FIXED",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompts_are_e2fscks_words() {
        assert_eq!(
            prompt(ProblemCode::PR_4_UNATTACHED_INODE),
            "Connect to /lost+found"
        );
        assert_eq!(prompt(ProblemCode::PR_2_BAD_INO), "Clear");
        assert_eq!(prompt(ProblemCode::PR_5_FREE_BLOCK_COUNT_GROUP), "Fix");
        assert_eq!(
            preen_word(prompt(ProblemCode::PR_2_UNUSED_INODE)),
            "CLEARED"
        );
        assert_eq!(
            preen_word(prompt(ProblemCode::PR_4_UNATTACHED_INODE)),
            "RECONNECTED"
        );
        assert_eq!(preen_word(prompt(ProblemCode::PR_1_BAD_I_SIZE)), "FIXED");
        assert_eq!(prompt(ProblemCode::PR_1_ZERO_LENGTH_DIR), "Clear");
        assert_eq!(prompt(ProblemCode::PR_1_CASEFOLD_FEATURE), "Clear flag");
        assert_eq!(prompt(ProblemCode::PR_3_NO_LF_DIR), "Create");
        assert_eq!(prompt(ProblemCode::PR_3_NO_ROOT_INODE), "Allocate");
        assert_eq!(prompt(ProblemCode::PR_6_RECREATE_JOURNAL), "");
        assert_eq!(prompt(ProblemCode::EXT4R_1_EXTENT_ROOT_DEPTH), "Fix");
    }
}
