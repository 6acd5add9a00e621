//! ext4r's checker: e2fsck's passes as a library.
//!
//! [`check`] reads a filesystem through the ext4r engine and reports every
//! inconsistency it finds, writing nothing:
//!
//! - pass 0: superblock, group descriptors (locations, counts, checksums,
//!   uninit flags), journal superblock;
//! - pass 1: every in-use inode (mode, flags, extent trees and block maps,
//!   sizes, `i_blocks`, xattrs), gathering the blocks each one claims;
//! - pass 1b: blocks claimed twice;
//! - pass 2: directory blocks (entries, `.`/`..`, file types, checksums);
//! - pass 3: connectivity (unreachable directories, `..` entries, loops,
//!   lost+found);
//! - pass 4: link counts and unattached inodes;
//! - pass 5: block and inode bitmaps, free counts, bitmap checksums.
//!
//! Groups flagged `INODE_UNINIT`/`BLOCK_UNINIT` and inode-table tails past
//! `bg_itable_unused` are computed, never read. Every number read from
//! disk is checked before use: a damaged image yields problems, never a
//! panic or an unbounded allocation.
#![deny(unsafe_code)]
#![cfg_attr(not(test), warn(clippy::cast_possible_truncation))]
#![warn(unreachable_pub)]
#![warn(missing_docs)]
#![warn(clippy::missing_errors_doc)]

mod ahead;
mod backup;
mod badblocks;
mod bb_tree;
mod bigalloc_map;
mod check;
mod claims;
mod codes;
mod crc_lanes;
mod ctx;
mod device_size;
mod dot;
mod dup;
mod ea_region;
mod encoded_name;
mod error;
mod extent_depth;
mod extent_rebuild;
mod external_journal;
mod features;
mod fix;
mod garbage;
mod gdesc;
mod guard;
mod htree;
mod htree_root;
mod idata_extents;
mod inline_dir;
mod inode_map;
mod journal_check;
mod journal_fix;
mod journal_hint;
mod journal_move;
mod lost_found;
mod mmp;
mod observe;
mod options;
mod ordered;
mod orphan;
mod orphan_blocks;
mod orphan_file;
mod pass0;
mod pass1;
mod pass1_extents;
mod pass1_map;
mod pass1_rules;
mod pass1_xattr;
mod pass2;
mod pass34;
mod pass3a;
mod pass5;
mod pass5_said;
mod pathname;
mod problem;
mod prompt;
mod quota;
mod quota_hide;
mod quota_usage;
mod really_dir;
mod rehash;
mod relocate;
mod repair;
mod report;
mod resize_inode;
mod salvage;
mod super_rules;
mod symlink;
mod writer;

pub use check::{check, check_shared};
pub use codes::{
    no_nomsg, no_prompt, preen_silent, question_spacing, trailing_newlines, ProblemCode,
};
pub use device_size::{size_mismatch, SizeMismatch};
pub use error::Error;
pub use features::Unsupported;
pub use fix::plan::ExtentTree;
pub use fix::super_edit::SuperEdit;
pub use fix::{Fix, Owner};
pub use observe::{Action, Forced, JournalRecovered, Observer, Quiet};
pub use options::{ExternalJournal, Options};
pub use problem::{Key, Latch, On, Problem, Problems, Seen, Severity, Subject};
pub use prompt::{preen_word, prompt};
pub use rehash::Rebuilt;
pub use repair::{preen_halt, repair, repair_interactive, Answer, Ask, Mode, RepairReport};
pub use report::{Report, Summary};
pub use writer::apply as apply_fixes;

/// The workspace README's Rust examples, compiled (and run where they can
/// be) as doc tests so that they stay true (here, in a crate that is not
/// published: the README lies outside every crate).
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;
