//! Newtypes for block, inode and group numbers, so they cannot be mixed up.

#[allow(unused_imports)]
use crate::prelude::*;

use core::fmt;

macro_rules! number {
    ($(#[$doc:meta])* $name:ident, $int:ty, $prefix:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
        pub struct $name(pub $int);

        impl $name {
            /// The raw number.
            pub const fn get(self) -> $int {
                self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($prefix, "{}"), self.0)
            }
        }

        impl From<$int> for $name {
            fn from(v: $int) -> Self {
                $name(v)
            }
        }
    };
}

number!(
    /// A filesystem block number (absolute, 0-based, up to 2^64 with 64bit).
    BlockNr, u64, "block "
);
number!(
    /// An inode number (1-based; 0 means "none").
    InodeNr, u32, "inode "
);
number!(
    /// A block group number.
    GroupNr, u32, "group "
);
