//! The ext4r engine: devices, layout decisions and (growing over the coming
//! releases) the block cache, allocator, journal, inodes, extents,
//! directories and xattrs that programs embed to make, read and change
//! ext2/3/4 filesystems.
//!
//! Formatting is a library call:
//!
//! ```
//! use ext4r::device::MemDevice;
//! use ext4r::mkfs::{format, MkfsOptions};
//!
//! let dev = MemDevice::new(64 << 20);
//! let opts = MkfsOptions { size_bytes: 64 << 20, now: 1_700_000_000, ..Default::default() };
//! let summary = format(&dev, &opts, true).unwrap();
//! assert_eq!(summary.block_size, 1024); // small filesystems get 1 KiB blocks
//! ```
#![deny(unsafe_code)]
#![warn(missing_docs)]
#![warn(clippy::missing_errors_doc)]

pub use ext4r_txn::device;
pub use ext4r_txn::error;
pub mod fs;
pub use ext4r_txn::journal;
pub mod localtime;
pub mod mkfs;
pub use ext4r_txn::mmp;
pub mod populate;
pub mod quota;
pub mod resize;
pub mod safety;
pub mod tune;
pub mod write;

pub use error::{Error, Result};

/// The README's Rust examples, compiled (and run where they can be) as
/// doc tests so that they stay true.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;
