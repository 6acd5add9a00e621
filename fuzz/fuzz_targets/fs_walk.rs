//! The read path on mutated images: open a filesystem from a sparse image
//! (see the format and why in crates/ext4r/tests/common/fs_walk.rs), walk
//! the tree from the root and the reserved inodes, and read everything:
//! metadata, block runs, contents, directory entries, symlinks, xattrs,
//! path lookups. Errors are expected; a panic, hang or unbounded allocation
//! is a bug. Seeds: fuzz/corpus/fs_walk/seed-* (made by
//! fuzz/seeds/make_fs_walk_seeds.sh); more from the e2fsprogs test images
//! with fuzz/seeds/e2fsprogs_seeds.sh.
//!
//! `cargo xtask fuzz --secs 1800 fs_walk` runs it on the committed seeds.
//! The longer runs that found its bugs also used the e2fsprogs images, a
//! corpus directory outside the repository, and tighter limits:
//!
//! ```text
//! fuzz/seeds/e2fsprogs_seeds.sh /tmp/fs_walk_e2fs
//! cargo +nightly fuzz run fs_walk /tmp/fs_walk_work fuzz/corpus/fs_walk /tmp/fs_walk_e2fs -- \
//!     -max_total_time=1800 -rss_limit_mb=2048 -timeout=10 -max_len=131072
//! ```
//!
//! Build without `-O`: cargo-fuzz then keeps overflow checks, and an
//! arithmetic overflow on disk numbers is one of the bugs to find.
//! A crash input goes to crates/ext4r/tests/data/fs_walk/ with a line in
//! tests/fs_regressions.rs saying what now stops it.
#![no_main]

use libfuzzer_sys::fuzz_target;

include!("../../crates/ext4r/tests/common/fs_walk.rs");

fuzz_target!(|data: &[u8]| {
    let _ = walk_input(data);
});
