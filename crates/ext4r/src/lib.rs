#![doc = include_str!("../README.md")]
#![deny(unsafe_code)]
#![warn(missing_docs)]
#![warn(clippy::missing_errors_doc)]
#![cfg_attr(not(test), warn(clippy::cast_possible_truncation))]
#![warn(unreachable_pub)]

pub use ext4r_txn::device;
pub use ext4r_txn::error;
pub mod fs;
pub use ext4r_txn::journal;
pub mod journal_create;
pub mod localtime;
pub(crate) mod meta;
pub mod mkfs;
mod object;
pub use ext4r_txn::mmp;
pub mod populate;
pub use ext4r_format::quota;
pub mod quota_write;
pub mod resize;
pub mod safety;
pub mod support;
pub mod tune;
pub mod write;

pub use error::{Error, Result};
/// The on-disk format crate, for the structures the API hands out.
pub use ext4r_format as format;
pub use ext4r_format::inode::{Inode, InodeFlags, Timestamp};
pub use ext4r_format::types::InodeNr;

/// What may cross threads, checked when the crate compiles: the read-only
/// filesystem is shared by reference (`Send + Sync`, e.g. in an `Arc`);
/// the writable one moves between threads (`Send`) and is shared behind a
/// `Mutex` (its operations take `&mut self`).
const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    const fn send<T: Send>() {}
    send_sync::<fs::Filesystem>();
    send::<write::WriteFs>();
};
