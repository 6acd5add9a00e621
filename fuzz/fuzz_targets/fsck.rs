//! The checker on mutated images: the same sparse-image input as `fs_walk`
//! (see crates/ext4r/tests/common/fs_walk.rs), given to `ext4r_fsck::check`
//! with `-f`. Any verdict is fine; a panic, hang or unbounded allocation
//! is a bug. It shares fs_walk's seeds:
//!
//! ```text
//! cargo +nightly fuzz run fsck fuzz/corpus/fs_walk -- -max_total_time=600 -rss_limit_mb=2048 -timeout=10
//! ```
#![no_main]

use libfuzzer_sys::fuzz_target;

include!("../../crates/ext4r/tests/common/fs_walk.rs");

fuzz_target!(
    init: {
        // Start rayon's worker threads, and this thread's latch for calling
        // into them, before the first input: their thread-local
        // registrations live until exit and would otherwise be reported as
        // a leak of whichever input happened to make them.
        use rayon::prelude::*;
        rayon::broadcast(|_| ());
        let _: Vec<u8> = (0..64u8).into_par_iter().map(|x| x ^ 1).collect();
    },
    |data: &[u8]| {
    if let Some((dev, _)) = sparse_device(data) {
        let mut opts = ext4r_fsck::Options::default();
        opts.force = true;
        let mut progress = |_: u8, _: u64, _: u64| {};
        let _ = ext4r_fsck::check(dev, &opts, &mut progress);
    }
});
