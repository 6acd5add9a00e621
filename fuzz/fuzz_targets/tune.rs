//! tune.ext4r's metadata rewrites on mutated images: the input is the same
//! sparse image as `fs_walk`'s (so its seeds serve), and its last byte also
//! picks the change (checksums off or on, uninit_bg off or on, a new UUID,
//! dir_index off, a journal added or removed, quotas, a larger inode
//! size). A refusal or an error is fine; a panic, hang or unbounded
//! allocation is a bug.
//!
//! ```text
//! cargo +nightly fuzz run tune fuzz/corpus/tune fuzz/corpus/fs_walk -- -max_total_time=600
//! ```
#![no_main]

use ext4r::tune::{tune, TuneEnv, TuneOptions};
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
    let Some(&pick) = data.last() else {
        return;
    };
    let Some((dev, _)) = sparse_device(data) else {
        return;
    };
    let mut o = TuneOptions::default();
    match pick % 9 {
        0 => o.features = Some("^metadata_csum".into()),
        1 => o.features = Some("metadata_csum".into()),
        2 => o.features = Some("^uninit_bg".into()),
        3 => o.features = Some("uninit_bg".into()),
        4 => o.uuid = Some("22222222-3333-4444-5555-666666666666".into()),
        5 => o.features = Some("^dir_index".into()),
        6 => o.features = Some("^has_journal".into()),
        7 => o.inode_size = Some(512),
        _ => o.features = Some("has_journal,quota".into()),
    }
    let dev: Arc<dyn BlockDevice> = Arc::new(dev);
    let mut env = TuneEnv::new("fuzz.img", 1_700_000_000);
    env.random = Box::new(|| [7u8; 16]);
    let _ = tune(dev, &o, &mut env);
});
