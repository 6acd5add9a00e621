//! What this version does with each on-disk feature: one table that every
//! entry point checks a filesystem against before it reads, moves blocks
//! in or changes it (the read API, the write API, offline
//! defragmentation, resize). A feature is added here once, when the code
//! that keeps it right exists; nothing else keeps a list of its own.
//!
//! Incompatible features change how bytes are laid out: one not in the
//! table for an access is refused. Read-only-compatible ones may be read
//! without understanding them, as the kernel mounts such a filesystem
//! read-only, so reading checks none of them; moving blocks or changing
//! files checks them all.

use ext4r_format::features::{Incompat, RoCompat};

/// What an entry point will do with a filesystem.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Access {
    /// Read it ([`crate::fs::Filesystem`]).
    Read,
    /// Move blocks and rewrite block maps, leaving every file's contents,
    /// names and attributes as they are (offline defragmentation, resize).
    Relocate,
    /// Change files, directories and attributes ([`crate::write::WriteFs`]).
    Write,
}

/// One feature and the accesses that keep it right.
struct Row<F> {
    flag: F,
    read: bool,
    relocate: bool,
    write: bool,
}

const fn row<F>(flag: F, read: bool, relocate: bool, write: bool) -> Row<F> {
    Row {
        flag,
        read,
        relocate,
        write,
    }
}

/// The incompatible features, and who handles each. `RECOVER` is a
/// journal to replay (in memory when reading, on open when writing);
/// `MMP` is refused by the movers and writers (they do not take the
/// multi-mount lock offline); `ENCRYPT` is read only on request
/// ([`crate::fs::OpenOptions::allow_encrypted`]: names and contents stay
/// ciphertext), while writers keep it (encrypted files and directories
/// are refused one by one).
const INCOMPAT: &[Row<Incompat>] = &[
    row(Incompat::FILETYPE, true, true, true),
    row(Incompat::RECOVER, true, true, true),
    row(Incompat::META_BG, true, true, true),
    row(Incompat::EXTENTS, true, true, true),
    row(Incompat::BIT64, true, true, true),
    row(Incompat::MMP, true, false, false),
    row(Incompat::FLEX_BG, true, true, true),
    row(Incompat::EA_INODE, true, true, true),
    row(Incompat::CSUM_SEED, true, true, true),
    row(Incompat::LARGEDIR, true, true, true),
    row(Incompat::INLINE_DATA, true, true, true),
    row(Incompat::ENCRYPT, false, true, true),
    row(Incompat::CASEFOLD, true, true, true),
];

/// The read-only-compatible features movers and writers keep right.
/// `PROJECT` is kept by a mover (a file's project id stays), not yet by
/// a writer (new files would need their parent's id and the project
/// quota charged); `VERITY` files are refused for data changes one by
/// one, and deleting one frees its Merkle tree with its blocks;
/// `READONLY` is refused by every writer with its own message.
const RO_COMPAT: &[Row<RoCompat>] = &[
    row(RoCompat::SPARSE_SUPER, true, true, true),
    row(RoCompat::LARGE_FILE, true, true, true),
    row(RoCompat::HUGE_FILE, true, true, true),
    row(RoCompat::GDT_CSUM, true, true, true),
    row(RoCompat::DIR_NLINK, true, true, true),
    row(RoCompat::EXTRA_ISIZE, true, true, true),
    row(RoCompat::METADATA_CSUM, true, true, true),
    row(RoCompat::BIGALLOC, true, true, true),
    row(RoCompat::ORPHAN_PRESENT, true, true, true),
    row(RoCompat::VERITY, true, true, true),
    row(RoCompat::PROJECT, true, true, false),
];

const fn allowed<F>(r: &Row<F>, access: Access) -> bool {
    match access {
        Access::Read => r.read,
        Access::Relocate => r.relocate,
        Access::Write => r.write,
    }
}

/// The incompatible features `access` handles.
pub const fn incompat(access: Access) -> Incompat {
    let mut out = Incompat::empty();
    let mut i = 0;
    while i < INCOMPAT.len() {
        if allowed(&INCOMPAT[i], access) {
            out = out.union(INCOMPAT[i].flag);
        }
        i += 1;
    }
    out
}

/// The read-only-compatible features `access` handles; every one for
/// [`Access::Read`].
pub const fn ro_compat(access: Access) -> RoCompat {
    if matches!(access, Access::Read) {
        return RoCompat::from_bits_retain(u32::MAX);
    }
    let mut out = RoCompat::empty();
    let mut i = 0;
    while i < RO_COMPAT.len() {
        if allowed(&RO_COMPAT[i], access) {
            out = out.union(RO_COMPAT[i].flag);
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_accesses_nest_as_their_code_does() {
        // A writer moves blocks too; a mover refuses nothing a writer keeps.
        assert!(incompat(Access::Relocate).contains(incompat(Access::Write)));
        assert!(ro_compat(Access::Relocate).contains(ro_compat(Access::Write)));
        assert!(incompat(Access::Read).contains(Incompat::MMP));
        assert!(!incompat(Access::Read).contains(Incompat::ENCRYPT));
        assert!(!incompat(Access::Write).contains(Incompat::MMP));
        assert!(!ro_compat(Access::Write).contains(RoCompat::PROJECT));
        assert!(!ro_compat(Access::Write).contains(RoCompat::QUOTA));
        assert!(ro_compat(Access::Read).contains(RoCompat::QUOTA));
    }
}
