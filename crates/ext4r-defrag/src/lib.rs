//! ext4r's defragmenter, the library behind `e4defrag-r`.
//!
//! - **Scoring** ([`stat`], [`score`]): e4defrag's `-c` report computed
//!   exactly as e4defrag 1.47 computes it, on a mounted filesystem
//!   ([`mounted::MountedFs`], FIEMAP) or on an unmounted image or device
//!   ([`image::ImageFs`], the engine's read path, nothing mounted), plus
//!   figures to act on (small extents, largest free extent, e2freefrag's
//!   histogram in [`freespace`]).
//! - **Online moves** ([`online`]): files of a mounted filesystem rewritten
//!   through the kernel's `EXT4_IOC_MOVE_EXT` into donor files, without the
//!   journal-commit stall e4defrag suffers, worst files first, with a time
//!   limit; and relevant-file placement ([`online::relevant`]), which lays
//!   out the files of a directory contiguously in the order they are read.
//! - **Offline moves** ([`offline`]): files of an unmounted filesystem
//!   moved through the write layer (`ext4r_txn`): data copied first, the
//!   mapping switched in one journaled transaction; the same planning
//!   ([`online::plan`], [`online::Mover`]); `-r` placement without the
//!   kernel in the way; and free-space defragmentation
//!   ([`offline::compact`]).
#![deny(unsafe_code)]
#![warn(missing_docs)]
#![warn(unreachable_pub)]
#![cfg_attr(not(test), warn(clippy::cast_possible_truncation))]
#![warn(clippy::missing_errors_doc)]

pub mod error;
pub mod extent;
pub mod freespace;
pub mod image;
pub mod mounted;
pub mod offline;
pub mod online;
pub mod score;
pub mod source;
pub mod stat;
pub mod target;

mod sys;

pub use error::{Error, Result};
