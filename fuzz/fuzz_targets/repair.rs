//! The repair on mutated images: the same sparse-image input as `fs_walk`
//! (see crates/ext4r/tests/common/fs_walk.rs), repaired in memory with
//! `-fy`. Whatever it fixes or leaves, a panic, hang or unbounded
//! allocation is a bug. It shares fs_walk's seeds:
//!
//! ```text
//! cargo +nightly fuzz run repair fuzz/corpus/repair fuzz/corpus/fs_walk -- -max_total_time=600
//! ```
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::sync::Arc;

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
        let dev: Arc<dyn BlockDevice> = Arc::new(dev);
        let _ = ext4r_fsck::repair(dev, &opts, ext4r_fsck::Mode::Yes, false, &mut progress);
    }
});
