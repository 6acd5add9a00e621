//! The one object model: inodes, directories (htree-aware lookup and
//! listing), inline data, extended attributes, symlinks and paths, read
//! through a [`Source`]. A source is either a read-only view of a volume
//! ([`crate::fs::Filesystem`]) or a running transaction (what
//! [`crate::write::WriteFs`] changes, its operations not yet committed
//! included). The read API and the write API are two faces over these
//! functions: neither finds a name, follows a path or reads an attribute
//! its own way.
//!
//! Every metadata block read here goes through `source::meta_block` (or
//! `source::verified` after a read of a run), which verifies its checksum
//! where the source verifies — as the kernel does on metadata_csum
//! filesystems — and inodes come from [`Source::inode`], verified the
//! same way.
//!
//! The files stand in layers, each using only those below it: `source`
//! (the trait, verified reads); `dirblock`, `xattr_raw` (records as
//! stored); `htree`, `inline`; `data`, `dir`; `xattr`, `path`.

mod data;
pub(crate) mod dir;
mod dirblock;
pub(crate) mod htree;
pub(crate) mod inline;
pub(crate) mod path;
mod source;
pub(crate) mod xattr;
mod xattr_raw;

pub use source::InodeInfo;
pub(crate) use source::{is_fast_symlink, Source};
