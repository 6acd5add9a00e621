//! The read path on mutated images: open a filesystem from a sparse image
//! (see the format and why in crates/ext4r/tests/common/fs_walk.rs), walk
//! the tree from the root and the reserved inodes, and read everything:
//! metadata, block runs, contents, directory entries, symlinks, xattrs,
//! path lookups. Errors are expected; a panic, hang or unbounded allocation
//! is a bug. Seeds: fuzz/corpus/fs_walk/seed-* (made by
//! fuzz/seeds/make_fs_walk_seeds.sh); more from the e2fsprogs test images
//! with fuzz/seeds/e2fsprogs_seeds.sh.
#![no_main]

use libfuzzer_sys::fuzz_target;

include!("../../crates/ext4r/tests/common/fs_walk.rs");

fuzz_target!(|data: &[u8]| {
    let _ = walk_input(data);
});
