//! A ceiling on what the searches hand out: a filesystem about to shrink
//! must not take blocks or inodes in the part that goes away (see
//! [`Volume::set_alloc_limits`](crate::volume::Volume::set_alloc_limits)).

use super::{FreeSpace, InodeSpace};
use crate::error::Result;

/// `space` seen as if it ended at block `end` and held `groups` groups of
/// inodes: blocks at or past `end` and inodes of later groups are never
/// found free.
#[derive(Debug, Clone, Copy)]
pub struct Limited<'a, S: ?Sized> {
    space: &'a S,
    end: u64,
    groups: u32,
}

impl<'a, S: ?Sized> Limited<'a, S> {
    /// `space` capped at block `end` and `groups` inode groups (`u64::MAX`
    /// and `u32::MAX`: no cap).
    pub fn new(space: &'a S, end: u64, groups: u32) -> Self {
        Limited { space, end, groups }
    }
}

impl<S: FreeSpace + ?Sized> FreeSpace for Limited<'_, S> {
    fn first_data_block(&self) -> u64 {
        self.space.first_data_block()
    }
    fn blocks_count(&self) -> u64 {
        self.space.blocks_count().min(self.end)
    }
    fn cluster_mask(&self) -> u64 {
        self.space.cluster_mask()
    }
    fn first_free(&self, from: u64, to: u64) -> Result<Option<u64>> {
        let to = to.min(self.blocks_count().saturating_sub(1));
        if from > to {
            return Ok(None);
        }
        self.space.first_free(from, to)
    }
    fn first_used(&self, from: u64, to: u64) -> Result<Option<u64>> {
        self.space.first_used(from, to)
    }
    fn used_end(&self, from: u64, to: u64) -> Result<Option<u64>> {
        self.space.used_end(from, to)
    }
}

impl<S: InodeSpace + ?Sized> InodeSpace for Limited<'_, S> {
    fn inodes_per_group(&self) -> u32 {
        self.space.inodes_per_group()
    }
    fn group_count(&self) -> u32 {
        self.space.group_count().min(self.groups)
    }
    fn first_ino(&self) -> u32 {
        self.space.first_ino()
    }
    fn may_hold(&self, g: u32) -> bool {
        g < self.groups && self.space.may_hold(g)
    }
    fn first_free_in(&self, g: u32, from: u32) -> Result<Option<u32>> {
        self.space.first_free_in(g, from)
    }
}
