//! On-disk structures of ext2/3/4 and jbd2, and the arithmetic that places them.
//!
//! This crate knows bytes and nothing else: it parses and serialises, computes
//! checksums and geometry, and never performs I/O or decides policy. Every
//! structure is a `#[repr(C)]` zerocopy type whose field names follow the Linux
//! kernel's (`s_blocks_count_lo`), so a reader can hold this code next to
//! `Documentation/filesystems/ext4/` and the kernel headers.
//!
//! Multi-byte ext4 fields are little-endian (`zerocopy::little_endian`); jbd2's
//! are big-endian. Values split into `_lo`/`_hi` halves are joined by accessor
//! methods, which take the feature flags into account where the format does.
#![cfg_attr(not(feature = "std"), no_std)]
#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![warn(clippy::missing_errors_doc)]

extern crate alloc;

/// What `std`'s prelude would bring, from `alloc`: the crate builds
/// without `std` (`--no-default-features`) for kernels and bootloaders.
mod prelude {
    #[allow(unused_imports)]
    pub(crate) use alloc::{
        borrow::ToOwned,
        boxed::Box,
        format,
        string::{String, ToString},
        vec,
        vec::Vec,
    };
}

pub mod acl;
pub mod blockmap;
pub mod checksum;
pub mod dir;
pub mod error;
pub mod extent;
pub mod features;
pub mod geometry;
pub mod group_desc;
pub mod htree;
pub mod inode;
pub mod jbd2;
pub mod mmp;
pub mod orphan;
pub mod superblock;
pub mod types;
pub mod xattr;

pub use error::FormatError;
pub use types::{BlockNr, GroupNr, InodeNr};
