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
//! - [`error`]: the error type shared with the engine.
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod device;
pub mod error;
pub mod journal;

#[cfg(any(test, feature = "test-util"))]
#[doc(hidden)]
pub mod testutil;

pub use error::{Error, Result};
