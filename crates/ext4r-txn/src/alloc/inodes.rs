//! The one search for a free inode.
//!
//! Written once over an [`InodeSpace`], as the block searches are over a
//! [`FreeSpace`](super::FreeSpace): the group table's inode bitmaps (a
//! filesystem being changed: the write API, tune), mkfs's plan of the
//! inodes it makes, and a checker's map of the inodes its first pass found
//! in use (the on-disk bitmaps cannot be trusted there).

use crate::error::Result;
use ext4r_format::num;

/// Which inodes are in use, as the search needs it.
pub trait InodeSpace {
    /// Inodes per group.
    fn inodes_per_group(&self) -> u32;
    /// Groups in the filesystem.
    fn group_count(&self) -> u32;
    /// The first inode that may be handed out (`s_first_ino`): those below
    /// it are reserved.
    fn first_ino(&self) -> u32;
    /// Whether group `g` may hold a free inode: a group known to be full
    /// (by its free count) is skipped without reading its map.
    fn may_hold(&self, g: u32) -> bool;
    /// The first free inode of group `g` at or after index `from` (0-based
    /// within the group).
    ///
    /// # Errors
    /// I/O or corruption errors of a map read from disk on demand.
    fn first_free_in(&self, g: u32, from: u32) -> Result<Option<u32>>;
}

/// The first free inode in group order from `start_group`, wrapping once,
/// never a reserved one (`ext2fs_new_inode`'s search; the caller chooses
/// the start group: the parent's for a file, an Orlov pick for a
/// directory, group 0 for libext2fs' own allocations).
///
/// # Errors
/// The map's read errors.
pub fn find_free_inode(
    space: &(impl InodeSpace + ?Sized),
    start_group: u32,
) -> Result<Option<u32>> {
    let gc = space.group_count().max(1);
    let ipg = space.inodes_per_group();
    let first_ino = space.first_ino().max(1);
    for k in 0..gc {
        let g = (start_group % gc + k) % gc;
        if !space.may_hold(g) {
            continue;
        }
        let base = u64::from(g) * u64::from(ipg);
        // Inodes below s_first_ino (group 0's first ones) are reserved.
        let from = u64::from(first_ino - 1).saturating_sub(base);
        if from >= u64::from(ipg) {
            continue;
        }
        // from < ipg, a u32.
        if let Some(i) = space.first_free_in(g, num::sat_u32(from))? {
            if i < ipg {
                return Ok(u32::try_from(base + u64::from(i) + 1).ok());
            }
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Groups of 8 inodes; `used` per group as a bit mask; full groups
    /// skipped by count.
    struct Masks(Vec<u8>, u32);

    impl InodeSpace for Masks {
        fn inodes_per_group(&self) -> u32 {
            8
        }
        fn group_count(&self) -> u32 {
            self.0.len() as u32
        }
        fn first_ino(&self) -> u32 {
            self.1
        }
        fn may_hold(&self, g: u32) -> bool {
            self.0[g as usize] != 0xff
        }
        fn first_free_in(&self, g: u32, from: u32) -> Result<Option<u32>> {
            Ok((from..8).find(|i| self.0[g as usize] & (1 << i) == 0))
        }
    }

    #[test]
    fn reserved_inodes_are_never_handed_out() {
        // Group 0 free but for the reserved inodes 1..=10 (indexes 0..=9 span
        // into group 1).
        let m = Masks(vec![0, 0, 0], 11);
        assert_eq!(find_free_inode(&m, 0).unwrap(), Some(11));
    }

    #[test]
    fn the_search_starts_at_the_group_and_wraps_once() {
        let m = Masks(vec![0, 0b0000_0111, 0xff], 1);
        assert_eq!(find_free_inode(&m, 1).unwrap(), Some(8 + 3 + 1));
        assert_eq!(find_free_inode(&m, 2).unwrap(), Some(1));
        let full = Masks(vec![0xff, 0xff], 1);
        assert_eq!(find_free_inode(&full, 1).unwrap(), None);
    }
}
