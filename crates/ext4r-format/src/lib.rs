#![doc = include_str!("../README.md")]
#![cfg_attr(not(feature = "std"), no_std)]
#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![warn(unreachable_pub)]
#![cfg_attr(not(test), warn(clippy::cast_possible_truncation))]
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
pub mod num;
pub mod orphan;
pub mod partition;
pub mod quota;
pub mod superblock;
pub mod types;
pub mod xattr;

pub use error::FormatError;
pub use types::{BlockNr, GroupNr, InodeNr};
