//! ext4r's write layer: every change to an existing ext2/3/4 filesystem
//! goes through this crate.
//!
//! It sits between the on-disk format (`ext4r-format`, bytes only) and the
//! engine (`ext4r`: files, directories, mkfs, tune) and owns:
//!
//! - [`device`]: the [`BlockDevice`](device::BlockDevice) trait with file,
//!   memory and fault-injecting implementations;
//! - [`journal`]: jbd2 recovery (finding and replaying what a crash left in
//!   the journal);
//! - [`csum`]: the one place metadata checksums are stamped;
//! - [`groups`]: descriptors, bitmaps and free counts;
//! - [`alloc`]: the one block allocator (libext2fs' searches and a
//!   goal-directed one);
//! - [`map`]: the one walker of an inode's block pointers;
//! - [`volume`] and [`txn`]: a filesystem opened for changing, and the
//!   transactions every change is made in, committed through the jbd2
//!   journal or in place in a safe order;
//! - [`flush`]: the superblock and descriptor backups, as libext2fs writes
//!   them;
//! - [`error`]: the error type shared with the engine.
#![deny(unsafe_code)]
#![warn(missing_docs)]
#![warn(unreachable_pub)]
#![cfg_attr(not(test), warn(clippy::cast_possible_truncation))]
#![warn(clippy::missing_errors_doc)]

pub mod alloc;
pub mod bitmap;
pub mod bulk;
pub mod csum;
pub mod device;
pub mod error;
pub mod flush;
pub mod groups;
pub mod journal;
pub mod map;
pub mod mmp;
mod ranges;
pub mod txn;
pub mod volume;

/// Test helpers for this crate's tests and the crates above (temp dirs,
/// loop devices, mounts); not part of the API.
#[doc(hidden)]
pub mod testutil;

pub use error::{Error, Result};
