//! A window of another device: a filesystem that starts at an offset, as a
//! partition inside a whole-disk image does.

use super::{check_range, BlockDevice, IoStats};
use crate::error::{Error, Result};
use ext4r_format::num;
use ext4r_format::partition::{self, Mbr, Partition, SECTOR};

/// Bytes `start..start + len` of device `D`, seen as a device of its own:
/// offsets are relative to `start` and nothing outside the window is read
/// or written.
///
/// ```
/// use ext4r_txn::device::{BlockDevice, MemDevice, OffsetDevice};
///
/// let disk = MemDevice::new(8 << 20);
/// let part = OffsetDevice::new(&disk, 1 << 20, 4 << 20)?;
/// part.write_at(b"ext4", 0)?;
/// let mut b = [0u8; 4];
/// disk.read_at(&mut b, 1 << 20)?;
/// assert_eq!(&b, b"ext4");
/// assert!(part.write_at(b"x", 4 << 20).is_err()); // past the window
/// # Ok::<(), ext4r_txn::Error>(())
/// ```
#[derive(Debug)]
pub struct OffsetDevice<D> {
    inner: D,
    start: u64,
    len: u64,
}

impl<D: BlockDevice> OffsetDevice<D> {
    /// The window `start..start + len` of `inner`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `start` or `len` is not a multiple of
    /// the device's logical sector size, or `len` is 0;
    /// [`Error::OutOfRange`] when the window does not lie within `inner`.
    pub fn new(inner: D, start: u64, len: u64) -> Result<Self> {
        let sector = u64::from(inner.logical_sector_size().max(1));
        if start % sector != 0 || len % sector != 0 || len == 0 {
            return Err(Error::InvalidArgument(format!(
                "a window at byte {start} of {len} bytes is not whole {sector}-byte sectors"
            )));
        }
        check_range(start, len, inner.size())?;
        Ok(OffsetDevice { inner, start, len })
    }

    /// Partition `number` (1-based, as Linux numbers them) of the MBR or
    /// GPT partition table on `inner`, as a device.
    ///
    /// # Errors
    /// [`Error::NotFound`] when there is no partition table or no such
    /// partition; [`Error::Corrupt`] for a GPT that fails its checks (the
    /// backup GPT is not consulted); [`Error::OutOfRange`] for a partition
    /// that ends past the device; I/O errors.
    pub fn partition(inner: D, number: u32) -> Result<Self> {
        let found = partitions(&inner)?
            .into_iter()
            .find(|p| p.number == number)
            .ok_or_else(|| Error::NotFound(format!("partition {number}")))?;
        Self::new(inner, found.start, found.len)
    }

    /// Where the window starts on the device beneath.
    pub fn start(&self) -> u64 {
        self.start
    }

    /// The device beneath.
    pub fn inner(&self) -> &D {
        &self.inner
    }

    /// The device beneath, given back.
    pub fn into_inner(self) -> D {
        self.inner
    }
}

/// The partitions of the table on `dev`: the MBR's primary entries, or the
/// GPT's used entries when the MBR is protective. Empty when sector 0 has
/// no boot signature.
///
/// # Errors
/// [`Error::Corrupt`] for a GPT header or entry array that fails its
/// checks; I/O errors.
pub fn partitions<D: BlockDevice + ?Sized>(dev: &D) -> Result<Vec<Partition>> {
    let corrupt = |e| Error::corrupt("partition table", e);
    let mut sector = vec![0u8; num::index(SECTOR)];
    if dev.size() < 2 * SECTOR {
        return Ok(Vec::new());
    }
    dev.read_at(&mut sector, 0)?;
    match partition::mbr(&sector).map_err(corrupt)? {
        Mbr::None => Ok(Vec::new()),
        Mbr::Primary(p) => Ok(p),
        Mbr::Protective => {
            dev.read_at(&mut sector, SECTOR)?;
            let h = partition::gpt_header(&sector).map_err(corrupt)?;
            let bytes = partition::gpt_array_bytes(&h);
            let at = h
                .entries_lba
                .get()
                .checked_mul(SECTOR)
                .filter(|&at| check_range(at, bytes, dev.size()).is_ok())
                .ok_or_else(|| {
                    corrupt(ext4r_format::FormatError::invalid(
                        "GPT header",
                        format!("entries at LBA {} past the device", h.entries_lba.get()),
                    ))
                })?;
            let mut array = vec![0u8; num::index(bytes)];
            dev.read_at(&mut array, at)?;
            partition::gpt_entries(&h, &array).map_err(corrupt)
        }
    }
}

impl<D: BlockDevice> BlockDevice for OffsetDevice<D> {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        check_range(offset, buf.len() as u64, self.len)?;
        self.inner.read_at(buf, self.start + offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        check_range(offset, buf.len() as u64, self.len)?;
        self.inner.write_at(buf, self.start + offset)
    }
    fn flush(&self) -> Result<()> {
        self.inner.flush()
    }
    fn size(&self) -> u64 {
        self.len
    }
    fn logical_sector_size(&self) -> u32 {
        self.inner.logical_sector_size()
    }
    fn discard(&self, offset: u64, len: u64) -> Result<bool> {
        check_range(offset, len, self.len)?;
        self.inner.discard(self.start + offset, len)
    }
    fn discard_zeroes_data(&self) -> bool {
        self.inner.discard_zeroes_data()
    }
    fn zeroout(&self, offset: u64, len: u64) -> Result<()> {
        check_range(offset, len, self.len)?;
        self.inner.zeroout(self.start + offset, len)
    }
    fn read_fresh(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        check_range(offset, buf.len() as u64, self.len)?;
        self.inner.read_fresh(buf, self.start + offset)
    }
    fn read_only(&self) -> bool {
        self.inner.read_only()
    }
    fn will_need(&self, offset: u64, len: u64) {
        // A hint: the part inside the window, moved as reads are.
        let len = len.min(self.len.saturating_sub(offset));
        if len > 0 {
            self.inner.will_need(self.start + offset, len)
        }
    }
    fn resident(&self, offset: u64, len: u64) -> Option<bool> {
        let len = len.min(self.len.saturating_sub(offset));
        self.inner.resident(self.start.checked_add(offset)?, len)
    }
    fn stats(&self) -> IoStats {
        self.inner.stats()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::MemDevice;

    #[test]
    fn window_bounds() {
        let disk = MemDevice::new(4 << 20);
        assert!(OffsetDevice::new(&disk, 1, 512).is_err());
        assert!(OffsetDevice::new(&disk, 0, 0).is_err());
        assert!(OffsetDevice::new(&disk, 3 << 20, 2 << 20).is_err());
        let w = OffsetDevice::new(&disk, 1 << 20, 1 << 20).unwrap();
        assert_eq!(w.size(), 1 << 20);
        w.zeroout(0, 1 << 20).unwrap();
        assert!(w.zeroout(1, 1 << 20).is_err());
        let mut b = [0u8; 1];
        assert!(w.read_at(&mut b, 1 << 20).is_err());
    }

    #[test]
    fn mbr_partition_found() {
        let disk = MemDevice::new(8 << 20);
        let mut s = vec![0u8; 512];
        s[446 + 16 + 4] = 0x83; // slot 2
        s[446 + 16 + 8..446 + 16 + 12].copy_from_slice(&4096u32.to_le_bytes());
        s[446 + 16 + 12..446 + 16 + 16].copy_from_slice(&8192u32.to_le_bytes());
        s[510] = 0x55;
        s[511] = 0xAA;
        disk.write_at(&s, 0).unwrap();
        let p = OffsetDevice::partition(&disk, 2).unwrap();
        assert_eq!((p.start(), p.size()), (2 << 20, 4 << 20));
        assert!(matches!(
            OffsetDevice::partition(&disk, 1),
            Err(Error::NotFound(_))
        ));
    }
}
