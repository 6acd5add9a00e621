#![doc = include_str!("../README.md")]
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
pub mod safety;
pub mod tune;
pub mod write;

pub use error::{Error, Result};
