//! The question e2fsck asks for each problem ("Fix", "Clear", "Connect to
//! /lost+found"...), so that an interactive run reads like e2fsck's.

/// The prompt e2fsck puts after a problem's message (its `prompt[]` word
/// for the problem), "Fix" for the problems it asks that way and for those
/// it does not ask about.
pub fn prompt(code: &str) -> &'static str {
    match code {
        "PR_0_BB_NOT_GROUP"
        | "PR_0_IB_NOT_GROUP"
        | "PR_0_ITABLE_NOT_GROUP"
        | "PR_1_BB_CONFLICT"
        | "PR_1_IB_CONFLICT"
        | "PR_1_ITABLE_CONFLICT"
        | "PR_1_IB_BAD_BLOCK"
        | "PR_1_BB_BAD_BLOCK" => "Relocate",
        "PR_0_CLEAR_RESIZE_INODE"
        | "PR_0_JOURNAL_BAD_INODE"
        | "PR_0_JOURNAL_HAS_JOURNAL"
        | "PR_0_JOURNAL_RECOVER_SET"
        | "PR_1_BAD_EA_BLOCK"
        | "PR_1_EA_BAD_VALUE"
        | "PR_1_EXTENT_BAD_START_BLK"
        | "PR_1_EXTENT_END_OUT_OF_BOUNDS"
        | "PR_1_EXTENT_HEADER_INVALID"
        | "PR_1_ILLEGAL_BLOCK_NUM"
        | "PR_1_INODE_EA_ALLOC_COLLISION"
        | "PR_1_INVALID_BAD_INODE"
        | "PR_1_JOURNAL_INODE_NOT_CLEAR"
        | "PR_1_OUT_OF_ORDER_EXTENTS"
        | "PR_1_QUOTA_BAD_MODE"
        | "PR_1_ROOT_NO_DIR"
        | "PR_1_SET_IMMUTABLE"
        | "PR_1_SPECIAL_EXTENTS_IDATA"
        | "PR_1_TOOBIG_DIR"
        | "PR_2_BAD_ENCRYPTED_NAME"
        | "PR_2_BAD_INO"
        | "PR_2_BAD_MODE"
        | "PR_2_BB_INODE"
        | "PR_2_CLEAR_FILETYPE"
        | "PR_2_FADDR_ZERO"
        | "PR_2_FILE_ACL_ZERO"
        | "PR_2_INVALID_SYMLINK"
        | "PR_2_I_FILE_ACL_HI_ZERO"
        | "PR_2_LINK_DIR"
        | "PR_2_LINK_DOT"
        | "PR_2_LINK_ROOT"
        | "PR_2_UNUSED_INODE"
        | "PR_3_LPF_ENCRYPTED" => "Clear",
        "PR_0_JOURNAL_UNSUPP_INCOMPAT" => "Abort",
        "PR_0_RESIZE_INODE_INVALID" => "Recreate",
        "PR_1D_CLONE_QUESTION" => "Clone multiply-claimed blocks",
        "PR_1_CASEFOLD_FEATURE" | "PR_1_CASEFOLD_NONDIR" => "Clear flag",
        "PR_1_CLEAR_EXTENT_INLINE_DATA_INODE"
        | "PR_1_MISSING_EXTENT_HEADER"
        | "PR_1_READ_EXTENT"
        | "PR_1_BADBLOCKS_IN_BADBLOCKS"
        | "PR_1_TOO_MANY_BAD_BLOCKS" => "Clear inode",
        "PR_1_HTREE_BADROOT"
        | "PR_1_HTREE_DEPTH"
        | "PR_1_HTREE_HASHV"
        | "PR_1_HTREE_INCOMPAT"
        | "PR_1_HTREE_SET"
        | "PR_2_HTREE_BADBLK"
        | "PR_2_HTREE_BAD_COUNT"
        | "PR_2_HTREE_BAD_LIMIT"
        | "PR_2_HTREE_CLEAR"
        | "PR_2_HTREE_HASH_ORDER"
        | "PR_2_HTREE_NODE_CSUM_INVALID"
        | "PR_2_HTREE_ROOT_CSUM_INVALID"
        | "PR_2_UNEXPECTED_HTREE_BLOCK" => "Clear HTree index",
        "PR_1_INLINE_DATA_NO_ATTR" => "Truncate",
        "PR_6_ORPHAN_FILE_CORRUPTED" => "Recreate",
        "PR_6_ORPHAN_BLOCK_DIRTY" | "PR_4_ZERO_LEN_INODE" => "Clear",
        "PR_2_DIR_CORRUPTED" => "Salvage",
        "PR_2_READ_DIRBLOCK" => "Continue",
        "PR_2_SPLIT_DOT" => "Split",
        "PR_3_EXPAND_LF_DIR" => "Expand",
        "PR_3_LPF_NOTDIR" => "Unlink",
        "PR_3_NO_LF_DIR" => "Create",
        "PR_3_NO_ROOT_INODE" | "PR_2_DIRECTORY_HOLE" => "Allocate",
        "PR_3_UNCONNECTED_DIR" | "PR_4_UNATTACHED_INODE" => "Connect to /lost+found",
        // PROMPT_NULL: the message is the question.
        "PR_3_LPF_NO_SPACE" | "PR_6_RECREATE_JOURNAL" | "PR_6_UPDATE_QUOTAS" => "",
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
        assert_eq!(prompt("PR_4_UNATTACHED_INODE"), "Connect to /lost+found");
        assert_eq!(prompt("PR_2_BAD_INO"), "Clear");
        assert_eq!(prompt("PR_5_FREE_BLOCK_COUNT_GROUP"), "Fix");
        assert_eq!(preen_word(prompt("PR_2_UNUSED_INODE")), "CLEARED");
        assert_eq!(preen_word(prompt("PR_4_UNATTACHED_INODE")), "RECONNECTED");
        assert_eq!(preen_word(prompt("PR_1_BAD_I_SIZE")), "FIXED");
    }
}
