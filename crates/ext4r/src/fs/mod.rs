//! Reading a filesystem: open an image or device, look up paths, list
//! directories, read files, symlinks and xattrs.
//!
//! Everything here reads through a [`BlockDevice`](crate::device::BlockDevice) and writes nothing. Every
//! number taken from disk is checked before it is used to address anything,
//! so a damaged image gives an [`Error::Corrupt`](crate::Error::Corrupt) that says where, never a
//! panic.
//!
//! ```
//! use ext4r::device::MemDevice;
//! use ext4r::fs::Filesystem;
//! use ext4r::mkfs::{format, MkfsOptions};
//!
//! let dev = MemDevice::new(8 << 20);
//! let opts = MkfsOptions { size_bytes: 8 << 20, now: 1_700_000_000, ..Default::default() };
//! format(&dev, &opts, true).unwrap();
//!
//! let fs = Filesystem::open(dev).unwrap();
//! let names: Vec<String> = fs
//!     .read_dir_path("/")
//!     .unwrap()
//!     .iter()
//!     .map(|e| e.name_lossy())
//!     .collect();
//! assert_eq!(names, [".", "..", "lost+found"]);
//! ```

mod dir;
mod file;
mod inode;
mod volume;
mod xattr;

pub use dir::{DirEntryInfo, FileKind};
pub use ext4r_txn::map::Run;
pub use file::FileReader;
pub use inode::{InodeInfo, Metadata};
pub use volume::{Filesystem, OpenOptions};
pub use xattr::Xattr;
