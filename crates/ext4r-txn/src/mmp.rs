//! Multiple-mount protection for a writer: the open and close halves of
//! the protocol the kernel (`fs/ext4/mmp.c`) and e2fsprogs
//! (`lib/ext2fs/mmp.c`) share, for a filesystem with the `mmp` feature
//! that several hosts can reach (shared storage), where the writers' lock
//! of [`crate::device::lock`] — one host's — cannot help.
//!
//! Taking the filesystem ([`MmpClaim::start`]): the MMP block is read
//! from the medium ([`BlockDevice::read_fresh`]). A clean sequence goes
//! on; e2fsck's sequence, or one above the largest a mount uses, is
//! refused at once; any other sequence is a mount that may be live, so
//! the claim waits twice the check interval and a second (at most the
//! interval and a minute) and is refused if the sequence moved. Then a
//! random sequence of its own is written, the same wait lets any other
//! claimant that raced it write over it, and the claim is refused if
//! that happened. Finally e2fsck's sequence is written: the kernel and
//! every e2fsprogs tool refuse the filesystem while it stands, whatever
//! its age, so a long-running writer needs no thread rewriting the block
//! every interval (e2fsprogs' tools run without one too).
//!
//! Letting go ([`MmpClaim::stop`], or dropping the claim): if the block
//! is still what the claim last wrote, it is written back with the clean
//! sequence; if someone changed it, nothing is written and the caller
//! hears of it. A writer killed before it lets go leaves e2fsck's
//! sequence, which `tune.ext4r -f -E clear_mmp` ([`reset`]) clears, as
//! tune2fs's does.
//!
//! Readers take no part, as e2fsprogs' read-only opens take none.

use crate::csum::Checksums;
use crate::device::BlockDevice;
use crate::error::{Error, Location, Result};
use ext4r_format::features::{Incompat, RoCompat};
use ext4r_format::mmp::{
    MmpState, MmpStruct, MMP_MIN_CHECK_INTERVAL, MMP_SEQ_CLEAN, MMP_SEQ_FSCK, MMP_SEQ_MAX, MMP_SIZE,
};
use ext4r_format::num;
use ext4r_format::superblock::Superblock;
use std::sync::Arc;
use std::time::Duration;

/// Why the filesystem is taken to be in use elsewhere: e2fsprogs' words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MmpBusy {
    /// e2fsck's sequence (`EXT2_ET_MMP_FSCK_ON`): e2fsck, or one of our
    /// writers, has it — or died holding it.
    Fsck,
    /// A sequence no one writes (`EXT2_ET_MMP_UNKNOWN_SEQ`).
    Unknown,
    /// The sequence moved while we watched (`EXT2_ET_MMP_FAILED`): a
    /// mount or another claimant is live.
    Active,
}

impl std::fmt::Display for MmpBusy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            MmpBusy::Fsck => "e2fsck being run",
            MmpBusy::Unknown => "undergoing an unknown operation",
            MmpBusy::Active => "device currently active",
        })
    }
}

/// What the MMP block said about who has the filesystem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MmpInfo {
    /// `mmp_nodename`.
    pub node: String,
    /// `mmp_bdevname`.
    pub device: String,
    /// `mmp_time`: seconds since the epoch of the last update.
    pub time: u64,
}

impl MmpInfo {
    fn of(m: &MmpStruct) -> Self {
        MmpInfo {
            node: String::from_utf8_lossy(m.nodename()).into_owned(),
            device: String::from_utf8_lossy(m.bdevname()).into_owned(),
            time: m.mmp_time.get(),
        }
    }
}

/// How a claim is taken: names written into the block, the clock, and
/// the waits (a test passes one that does not sleep).
pub struct MmpOptions<'a> {
    /// The device as the tool names it (`mmp_bdevname`, cut at 32 bytes).
    pub device_name: &'a str,
    /// Seconds since the epoch, for `mmp_time`.
    pub now: u64,
    /// Waits this long (`std::thread::sleep` for real use).
    pub sleep: &'a mut dyn FnMut(Duration),
}

/// The filesystem taken for writing under multiple-mount protection;
/// let go by [`MmpClaim::stop`] or, errors unreported, on drop.
pub struct MmpClaim {
    dev: Arc<dyn BlockDevice>,
    /// Byte offset of the MMP block.
    at: u64,
    block_size: usize,
    csum: Checksums,
    /// The block as the claim last wrote it.
    ours: Vec<u8>,
    stopped: bool,
}

impl std::fmt::Debug for MmpClaim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MmpClaim")
            .field("at", &self.at)
            .field("stopped", &self.stopped)
            .finish_non_exhaustive()
    }
}

/// The MMP block's byte offset, if the superblock places it inside the
/// filesystem (`ext2fs_mmp_read`'s range check).
fn mmp_offset(sb: &Superblock) -> Result<(u64, usize)> {
    let b = sb.s_mmp_block.get();
    let bs = sb.block_size().unwrap_or(1024);
    if b <= u64::from(sb.s_first_data_block.get()) || b >= sb.blocks_count() {
        return Err(Error::corrupt(
            "superblock",
            ext4r_format::FormatError::invalid(
                "mmp block",
                format!("block {b} is outside the filesystem"),
            ),
        ));
    }
    Ok((b * u64::from(bs), bs as usize))
}

/// Reads and parses the MMP block from the medium; a bad magic or (with
/// metadata_csum) checksum is corruption, which e2fsck repairs.
fn read(dev: &dyn BlockDevice, sb: &Superblock, at: u64, bs: usize) -> Result<MmpStruct> {
    let mut buf = vec![0u8; bs];
    dev.read_fresh(&mut buf, at)?;
    let place = || Location::block(at / bs as u64).of("mmp block");
    let m = MmpStruct::parse(&buf).map_err(|e| Error::corrupt(place(), e))?;
    if sb.has_ro_compat(RoCompat::METADATA_CSUM) {
        m.verify_checksum(sb.csum_seed())
            .map_err(|e| Error::corrupt(place(), e))?;
    }
    Ok(m)
}

/// A sequence no mount has used yet: random, at most [`MMP_SEQ_MAX`].
fn new_seq(now: u64) -> u32 {
    let mut b = [0u8; 4];
    let random = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut b))
        .is_ok();
    let mut seq = if random {
        u32::from_le_bytes(b)
    } else {
        num::lo32(now) ^ std::process::id().rotate_left(16)
    };
    // Above the largest only the two special values mean anything.
    while seq > MMP_SEQ_MAX {
        seq = seq.wrapping_mul(0x9E37_79B9).wrapping_add(1) >> 1;
    }
    seq
}

fn busy(why: MmpBusy, m: &MmpStruct) -> Error {
    Error::MmpInUse {
        why,
        info: MmpInfo::of(m),
    }
}

impl MmpClaim {
    /// Takes the filesystem whose superblock is `sb` for writing, as
    /// `ext2fs_mmp_start` does (see the module docs); `None` when it has
    /// no multiple-mount protection. Sleeps twice the check interval and a
    /// second, twice when another host's mount may be live.
    ///
    /// # Errors
    /// [`Error::MmpInUse`] when another host, a mount or e2fsck has it;
    /// [`Error::Corrupt`] for an MMP block outside the filesystem, with a
    /// bad magic or checksum (e2fsck resets it); I/O errors.
    pub fn start(
        dev: &Arc<dyn BlockDevice>,
        sb: &Superblock,
        o: MmpOptions<'_>,
    ) -> Result<Option<MmpClaim>> {
        if !sb.has_incompat(Incompat::MMP) {
            return Ok(None);
        }
        let (at, bs) = mmp_offset(sb)?;
        let first = read(dev.as_ref(), sb, at, bs)?;
        let mut interval = sb.s_mmp_update_interval.get().max(MMP_MIN_CHECK_INTERVAL);
        let seq = match first.state() {
            MmpState::Clean => MMP_SEQ_CLEAN,
            MmpState::Fsck => return Err(busy(MmpBusy::Fsck, &first)),
            MmpState::Unknown(_) => return Err(busy(MmpBusy::Unknown, &first)),
            MmpState::InUse(seq) => {
                interval = interval.max(first.mmp_check_interval.get());
                seq
            }
        };
        let wait = Duration::from_secs(u64::from((2 * interval + 1).min(interval + 60)));
        if seq != MMP_SEQ_CLEAN {
            (o.sleep)(wait);
            let again = read(dev.as_ref(), sb, at, bs)?;
            if again.mmp_seq.get() != seq {
                return Err(busy(MmpBusy::Active, &again));
            }
        }
        let host = rustix::system::uname();
        let mine = new_seq(o.now);
        let mut claim = MmpClaim {
            dev: Arc::clone(dev),
            at,
            block_size: bs,
            csum: Checksums::new(sb),
            ours: Vec::new(),
            // Nothing to undo until the first write.
            stopped: true,
        };
        let mut m = MmpStruct::new(
            mine,
            o.now,
            host.nodename().to_bytes(),
            o.device_name.as_bytes(),
            interval,
        );
        claim.write(&m)?;
        claim.stopped = false;
        (o.sleep)(wait);
        let seen = read(dev.as_ref(), sb, at, bs)?;
        if seen.mmp_seq.get() != mine {
            // Another claimant wrote over ours: it is theirs (and ours
            // must not be "cleaned" over theirs on drop).
            claim.stopped = true;
            return Err(busy(MmpBusy::Active, &seen));
        }
        m.mmp_seq.set(MMP_SEQ_FSCK);
        claim.write(&m)?;
        Ok(Some(claim))
    }

    /// Writes `m` as the MMP block (checksum stamped by the write layer's
    /// one place) and flushes it to the medium, where other hosts look.
    fn write(&mut self, m: &MmpStruct) -> Result<()> {
        let mut m = m.clone();
        self.csum.stamp_mmp(&mut m);
        let mut buf = vec![0u8; self.block_size];
        buf[..MMP_SIZE].copy_from_slice(&m.to_bytes());
        self.dev.write_at(&buf, self.at)?;
        self.dev.flush()?;
        self.ours = buf;
        Ok(())
    }

    /// Lets the filesystem go, as `ext2fs_mmp_stop` does: the clean
    /// sequence written over the claim's block, if that is still there.
    ///
    /// # Errors
    /// [`Error::MmpInUse`] (`Active`) when someone changed the block
    /// meanwhile (nothing is written then); I/O errors.
    pub fn stop(mut self) -> Result<()> {
        self.release()
    }

    fn release(&mut self) -> Result<()> {
        if self.stopped {
            return Ok(());
        }
        self.stopped = true;
        let mut now = vec![0u8; self.block_size];
        self.dev.read_fresh(&mut now, self.at)?;
        if now[..MMP_SIZE] != self.ours[..MMP_SIZE] {
            let m = MmpStruct::parse(&now).unwrap_or_else(|_| MmpStruct::zeroed());
            return Err(busy(MmpBusy::Active, &m));
        }
        let mut m = MmpStruct::parse(&self.ours)
            .map_err(|e| Error::corrupt(Location::block(self.at / self.block_size as u64), e))?;
        m.mmp_seq.set(MMP_SEQ_CLEAN);
        self.write(&m)
    }
}

impl Drop for MmpClaim {
    fn drop(&mut self) {
        // A run that ended early (an error, a refusal) still lets go; what
        // could go wrong here was reported by `stop` where it was called.
        let _ = self.release();
    }
}

/// Writes a fresh, clean MMP block, as `tune2fs -f -E clear_mmp` does
/// (`ext2fs_mmp_reset`): for a filesystem whose last writer died holding
/// it. The caller has made sure no one else has it.
///
/// # Errors
/// [`Error::Corrupt`] for an MMP block outside the filesystem, I/O errors.
pub fn reset(dev: &dyn BlockDevice, sb: &Superblock, device_name: &str) -> Result<()> {
    let (at, bs) = mmp_offset(sb)?;
    let host = rustix::system::uname();
    let interval = sb.s_mmp_update_interval.get().max(MMP_MIN_CHECK_INTERVAL);
    let m = MmpStruct::new(
        MMP_SEQ_CLEAN,
        0,
        host.nodename().to_bytes(),
        device_name.as_bytes(),
        interval,
    );
    let mut m = m;
    Checksums::new(sb).stamp_mmp(&mut m);
    let mut buf = vec![0u8; bs];
    buf[..MMP_SIZE].copy_from_slice(&m.to_bytes());
    dev.write_at(&buf, at)?;
    dev.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::MemDevice;
    use crate::testutil::{run, tool, TempDir};

    /// An mke2fs image with mmp (metadata_csum on or off) in memory, its
    /// superblock and the MMP block's offset.
    fn image(csum: bool) -> Option<(Arc<MemDevice>, Superblock, u64)> {
        tool("mke2fs")?;
        let dir = TempDir::new("mmp");
        let p = dir.join("m.img");
        let features = if csum { "mmp" } else { "mmp,^metadata_csum" };
        let path = p.to_str()?;
        run(
            "mke2fs",
            &["-q", "-F", "-t", "ext4", "-O", features, path, "8M"],
        )
        .ok()?;
        let bytes = std::fs::read(&p).ok()?;
        let sb = Superblock::parse(&bytes[1024..2048]).ok()?;
        let at = sb.s_mmp_block.get() * u64::from(sb.block_size()?);
        Some((Arc::new(MemDevice::from_bytes(&bytes)), sb, at))
    }

    fn block(dev: &MemDevice, at: u64) -> MmpStruct {
        let mut b = vec![0u8; MMP_SIZE];
        dev.read_at(&mut b, at).unwrap();
        MmpStruct::parse(&b).unwrap()
    }

    /// Another host's write of sequence `seq`.
    fn put_seq(dev: &MemDevice, sb: &Superblock, at: u64, seq: u32) {
        let mut m = block(dev, at);
        m.mmp_seq.set(seq);
        m.update_checksum(sb.csum_seed());
        dev.write_at(&m.to_bytes(), at).unwrap();
    }

    fn start(
        dev: &Arc<MemDevice>,
        sb: &Superblock,
        sleep: &mut dyn FnMut(Duration),
    ) -> Result<Option<MmpClaim>> {
        let d: Arc<dyn BlockDevice> = dev.clone();
        MmpClaim::start(
            &d,
            sb,
            MmpOptions {
                device_name: "img",
                now: 1_700_000_000,
                sleep,
            },
        )
    }

    #[test]
    fn a_clean_filesystem_is_taken_and_given_back() {
        for csum in [true, false] {
            let Some((dev, sb, at)) = image(csum) else {
                println!("skipped: mke2fs not found");
                return;
            };
            let mut slept = Vec::new();
            let claim = start(&dev, &sb, &mut |d| slept.push(d)).unwrap().unwrap();
            // One wait after writing its own sequence: 2 * 5 + 1 s.
            assert_eq!(slept, [Duration::from_secs(11)]);
            let m = block(&dev, at);
            assert_eq!(m.state(), MmpState::Fsck);
            assert_eq!(m.bdevname(), b"img");
            assert_eq!(m.mmp_time.get(), 1_700_000_000);
            if csum {
                m.verify_checksum(sb.csum_seed()).unwrap();
            }
            claim.stop().unwrap();
            let m = block(&dev, at);
            assert_eq!(m.state(), MmpState::Clean);
            if csum {
                m.verify_checksum(sb.csum_seed()).unwrap();
            }
            // Dropped without stop: given back all the same.
            drop(start(&dev, &sb, &mut |_| {}).unwrap().unwrap());
            assert_eq!(block(&dev, at).state(), MmpState::Clean);
        }
    }

    #[test]
    fn e2fsck_and_unknown_sequences_are_refused_at_once() {
        let Some((dev, sb, at)) = image(true) else {
            println!("skipped: mke2fs not found");
            return;
        };
        for (seq, why) in [
            (MMP_SEQ_FSCK, MmpBusy::Fsck),
            (MMP_SEQ_FSCK + 7, MmpBusy::Unknown),
        ] {
            put_seq(&dev, &sb, at, seq);
            let before = dev.to_vec().unwrap();
            let mut slept = 0;
            match start(&dev, &sb, &mut |_| slept += 1) {
                Err(Error::MmpInUse { why: w, info }) => {
                    assert_eq!(w, why);
                    assert!(!info.node.is_empty());
                }
                other => panic!("{other:?}"),
            }
            assert_eq!(slept, 0);
            assert!(dev.to_vec().unwrap() == before, "nothing written");
        }
        // tune -f -E clear_mmp's way out.
        reset(dev.as_ref(), &sb, "img").unwrap();
        let m = block(&dev, at);
        assert_eq!((m.state(), m.mmp_time.get()), (MmpState::Clean, 0));
        m.verify_checksum(sb.csum_seed()).unwrap();
    }

    #[test]
    fn a_live_sequence_is_watched_before_anything_is_written() {
        let Some((dev, sb, at)) = image(true) else {
            println!("skipped: mke2fs not found");
            return;
        };
        // A mount on another host, updating while we wait: refused, and
        // its block left as it wrote it.
        put_seq(&dev, &sb, at, 41);
        let other = dev.clone();
        let sb2 = sb.clone();
        let r = start(&dev, &sb, &mut |_| put_seq(&other, &sb2, at, 42));
        assert!(
            matches!(
                r,
                Err(Error::MmpInUse {
                    why: MmpBusy::Active,
                    ..
                })
            ),
            "{r:?}"
        );
        assert_eq!(block(&dev, at).mmp_seq.get(), 42);
        // The same sequence over the wait: a host that died; taken after
        // two waits.
        let mut slept = 0;
        let claim = start(&dev, &sb, &mut |_| slept += 1).unwrap().unwrap();
        assert_eq!(slept, 2);
        claim.stop().unwrap();
        // Another claimant writing over ours during the second wait wins:
        // refused, and its block is not "cleaned" on the way out.
        let mut calls = 0;
        let other = dev.clone();
        let r = start(&dev, &sb, &mut |_| {
            calls += 1;
            put_seq(&other, &sb2, at, 7);
        });
        assert!(
            matches!(
                r,
                Err(Error::MmpInUse {
                    why: MmpBusy::Active,
                    ..
                })
            ),
            "{r:?}"
        );
        assert_eq!(calls, 1);
        assert_eq!(block(&dev, at).mmp_seq.get(), 7);
        // A block changed under a held claim is not overwritten at stop.
        put_seq(&dev, &sb, at, MMP_SEQ_CLEAN);
        let claim = start(&dev, &sb, &mut |_| {}).unwrap().unwrap();
        put_seq(&dev, &sb, at, 9);
        assert!(matches!(claim.stop(), Err(Error::MmpInUse { .. })));
        assert_eq!(block(&dev, at).mmp_seq.get(), 9);
    }

    #[test]
    fn damage_and_absence() {
        let Some((dev, sb, at)) = image(true) else {
            println!("skipped: mke2fs not found");
            return;
        };
        let mut bad = sb.clone();
        bad.s_feature_incompat
            .set(sb.s_feature_incompat.get() & !Incompat::MMP.bits());
        assert!(start(&dev, &bad, &mut |_| {}).unwrap().is_none());
        // A damaged checksum, then magic: corruption (e2fsck resets it).
        let mut b = [0u8; 1];
        dev.read_at(&mut b, at + 100).unwrap();
        dev.write_at(&[b[0] ^ 1], at + 100).unwrap();
        assert!(matches!(
            start(&dev, &sb, &mut |_| {}),
            Err(Error::Corrupt { .. })
        ));
        dev.write_at(&[0; 4], at).unwrap();
        assert!(matches!(
            start(&dev, &sb, &mut |_| {}),
            Err(Error::Corrupt { .. })
        ));
        let mut outside = sb.clone();
        outside.s_mmp_block.set(sb.blocks_count() + 1);
        assert!(matches!(
            start(&dev, &outside, &mut |_| {}),
            Err(Error::Corrupt { .. })
        ));
    }
}
