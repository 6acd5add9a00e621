//! Where the e2fsprogs test images are (`../shared/corpus/e2fsprogs`,
//! read in place, never copied): beside the repository, or at the
//! workplace's path when the repository is a worktree elsewhere. Shared by
//! the test crates that read it (`#[path]` from `crates/*/tests`).

use std::path::{Path, PathBuf};

/// The corpus directory, or `None` when this machine has none (the tests
/// that need it then skip, saying so).
pub fn corpus_dir() -> Option<PathBuf> {
    // Every crate's manifest is two levels below the repository.
    let beside = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus/e2fsprogs");
    [beside, PathBuf::from("/work/shared/corpus/e2fsprogs")]
        .into_iter()
        .find(|p| p.is_dir())
}
