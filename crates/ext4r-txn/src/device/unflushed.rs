//! A device whose cache flushes do nothing: for filling a filesystem that
//! is of no use unless it is finished (`mkfs -d`; mke2fs -d does not flush
//! either), where the commits' flushes would only cost time. The caller
//! flushes the inner device once at the end.

use std::sync::Arc;

use super::{BlockDevice, IoStats};
use crate::error::Result;

/// `inner` with `flush` a no-op; everything else goes through.
#[derive(Debug)]
pub struct Unflushed<D: BlockDevice + ?Sized>(pub Arc<D>);

impl<D: BlockDevice + ?Sized> BlockDevice for Unflushed<D> {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.0.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.0.write_at(buf, offset)
    }
    fn flush(&self) -> Result<()> {
        Ok(())
    }
    fn size(&self) -> u64 {
        self.0.size()
    }
    fn logical_sector_size(&self) -> u32 {
        self.0.logical_sector_size()
    }
    fn discard(&self, offset: u64, len: u64) -> Result<bool> {
        self.0.discard(offset, len)
    }
    fn discard_zeroes_data(&self) -> bool {
        self.0.discard_zeroes_data()
    }
    fn zeroout(&self, offset: u64, len: u64) -> Result<()> {
        self.0.zeroout(offset, len)
    }
    fn read_only(&self) -> bool {
        self.0.read_only()
    }
    fn will_need(&self, offset: u64, len: u64) {
        self.0.will_need(offset, len)
    }
    fn resident(&self, offset: u64, len: u64) -> Option<bool> {
        self.0.resident(offset, len)
    }
    fn stats(&self) -> IoStats {
        self.0.stats()
    }
}
