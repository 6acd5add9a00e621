//! One random damage to one kind of metadata. Each kind finds its targets
//! in the [`Layout`] of the base image, picks one with the case's
//! generator, and either writes a plausible but wrong value into a field
//! (then, on half of the metadata_csum cases, stamps the structure's
//! checksum again, as a buggy writer would) or scribbles random bytes or
//! flips bits (media damage: the checksum is left stale). The returned
//! sentence names the structure, the field, the old and new values.

/// A field of one of the format crate's on-disk structures as the
/// mutators name it: `(name, byte offset in the structure, width)`, so that
/// no offset or width is spelled by hand.
macro_rules! field {
    ($t:ty, $f:ident) => {
        (
            stringify!($f),
            ::core::mem::offset_of!($t, $f) as u64,
            $crate::damage::mutate::width_of(|s: &$t| &s.$f),
        )
    };
}

mod dir;
mod inode;
mod journal;
mod meta;
mod xattr;

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use anyhow::{Context, Result};
use ext4r_format::group_desc::{GroupDesc, GroupDescCsum};
use ext4r_format::inode::inode_csum_seed;
use ext4r_format::{BlockNr, InodeNr};

use super::layout::Layout;
use super::rng::Rng;

/// The size of the field that `get` borrows (see `field!`).
pub(crate) fn width_of<T, F>(_get: impl Fn(&T) -> &F) -> usize {
    std::mem::size_of::<F>()
}

/// The kinds of damage, by the metadata they hit.
pub const KINDS: &[&str] = &[
    "superblock",
    "gdt",
    "bitmap",
    "inode",
    "extent",
    "blockmap",
    "dir",
    "htree",
    "xattr",
    "journal",
    "orphan",
    "quota",
    "overlap",
];

/// Whether kind `kind` has targets on an image laid out as `l`, and
/// whether it needs the live snapshot (a journal to replay).
pub fn applicable(kind: &str, l: &Layout) -> bool {
    let has = |f: fn(&super::layout::Ino) -> bool| l.inodes.iter().any(f);
    match kind {
        "extent" => has(|i| i.has_extents() && !i.runs.is_empty()),
        "blockmap" => has(|i| i.block_mapped()),
        "htree" => has(|i| i.htree()),
        "journal" => !l.journal.is_empty(),
        "quota" => l.sb.s_usr_quota_inum.get() != 0 || l.sb.s_grp_quota_inum.get() != 0,
        _ => true,
    }
}

/// An image file opened for writing the damage.
pub struct Img {
    file: File,
    pub bs: u64,
}

impl Img {
    pub fn open(path: &Path, bs: u64) -> Result<Img> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .with_context(|| format!("cannot open {}", path.display()))?;
        Ok(Img { file, bs })
    }
    pub fn read(&self, off: u64, len: usize) -> Result<Vec<u8>> {
        let mut b = vec![0u8; len];
        self.file.read_exact_at(&mut b, off)?;
        Ok(b)
    }
    pub fn write(&self, off: u64, data: &[u8]) -> Result<()> {
        self.file.write_all_at(data, off)?;
        Ok(())
    }
    pub fn block(&self, b: u64) -> Result<Vec<u8>> {
        self.read(b * self.bs, self.bs as usize)
    }
    pub fn put_block(&self, b: u64, data: &[u8]) -> Result<()> {
        self.write(b * self.bs, data)
    }
}

/// Which checksum to bring in line after a plausible value was written.
#[derive(Clone, Copy, Debug)]
pub enum Stamp {
    Super,
    Desc(u32),
    Bitmaps(u32),
    Inode(u32),
    ExtBlock(u64, u32),
    DirBlock(u64, u32),
    DxBlock(u64, u32),
    XattrBlock(u64),
    JournalSb(u64),
    OrphanBlock(u64, u32),
}

pub struct Ctx<'a> {
    pub l: &'a Layout,
    pub img: Img,
    pub rng: &'a mut Rng,
}

impl Ctx<'_> {
    /// See [`wrong`].
    pub fn wrong(&mut self, old: u64, width: usize, extra: &[u64]) -> u64 {
        wrong(self.rng, old, width, extra)
    }

    pub fn get_le(&self, off: u64, width: usize) -> Result<u64> {
        let b = self.img.read(off, width)?;
        Ok(b.iter().rev().fold(0u64, |a, &x| (a << 8) | u64::from(x)))
    }

    pub fn put_le(&self, off: u64, width: usize, v: u64) -> Result<()> {
        let b: Vec<u8> = (0..width).map(|i| (v >> (8 * i)) as u8).collect();
        self.img.write(off, &b)
    }

    /// Writes a plausible wrong value into the little-endian field at
    /// `off`; returns "old -> new".
    pub fn field(&mut self, off: u64, width: usize, extra: &[u64]) -> Result<String> {
        let old = self.get_le(off, width)?;
        let new = self.wrong(old, width, extra);
        self.put_le(off, width, new)?;
        Ok(format!("{old} -> {new}"))
    }

    /// Media damage inside `off..off+len`: a run of random bytes, or one to
    /// four flipped bits. Returns what was done.
    pub fn scribble(&mut self, off: u64, len: usize) -> Result<String> {
        let len = len.max(1);
        let mut data = self.img.read(off, len)?;
        let what = if self.rng.chance(1, 2) {
            let n = 1 + self.rng.below(4);
            let mut bits = Vec::new();
            for _ in 0..n {
                let bit = self.rng.below(8 * len as u64);
                data[(bit / 8) as usize] ^= 1 << (bit % 8);
                bits.push(bit);
            }
            format!("bits {bits:?} flipped")
        } else {
            let start = self.rng.index(len);
            let n = 1 + self.rng.index((len - start).min(64));
            for b in &mut data[start..start + n] {
                *b = self.rng.next() as u8;
            }
            format!("{n} random bytes at +{start}")
        };
        self.img.write(off, &data)?;
        Ok(what)
    }

    /// Whether this plausible damage also gets a fresh checksum (half of
    /// them, where the filesystem has checksums).
    pub fn restamp_chosen(&mut self) -> bool {
        (self.l.csum || self.l.gdt_csum) && self.rng.chance(1, 2)
    }

    /// Brings the checksum of `s` in line with the bytes now on disk.
    pub fn restamp(&self, s: Stamp) -> Result<()> {
        let l = self.l;
        let bs = l.bs;
        match s {
            Stamp::Super => {
                use ext4r_format::superblock::{Superblock, SUPERBLOCK_OFFSET, SUPERBLOCK_SIZE};
                use zerocopy::{FromBytes, IntoBytes};
                if l.csum {
                    // Whatever the feature words now say: the base image
                    // had metadata_csum.
                    let mut b = self.img.read(SUPERBLOCK_OFFSET, SUPERBLOCK_SIZE)?;
                    if let Ok((sb, _)) = Superblock::mut_from_prefix(&mut b) {
                        let c = sb.compute_checksum();
                        sb.s_checksum.set(c);
                        self.img.write(SUPERBLOCK_OFFSET, sb.as_bytes())?;
                    }
                }
            }
            Stamp::Desc(g) => self.restamp_desc(g, |_| Ok(()))?,
            Stamp::Bitmaps(g) => {
                if l.csum {
                    let d = l.descs[g as usize];
                    let bb = self.img.block(d.block_bitmap(l.wide))?;
                    let ib = self.img.block(d.inode_bitmap(l.wide))?;
                    let cpg = (l.geo.blocks_per_group >> l.geo.cluster_bits) as usize;
                    let ipg = l.geo.inodes_per_group as usize;
                    let seed = l.fs_seed;
                    let ds = l.geo.desc_size as usize;
                    self.restamp_desc(g, |d| {
                        let bcs = ext4r_format::group_desc::bitmap_checksum(
                            seed,
                            &bb[..(cpg / 8).min(bb.len())],
                        );
                        let ics = ext4r_format::group_desc::bitmap_checksum(
                            seed,
                            &ib[..(ipg / 8).min(ib.len())],
                        );
                        d.set_block_bitmap_csum(bcs, ds);
                        d.set_inode_bitmap_csum(ics, ds);
                        Ok(())
                    })?;
                }
            }
            Stamp::Inode(ino) => {
                if l.csum {
                    let off = l.inode_offset(ino);
                    let mut rec = self.img.read(off, l.geo.inode_size as usize)?;
                    if ext4r_format::inode::set_inode_checksum(l.fs_seed, InodeNr(ino), &mut rec)
                        .is_ok()
                    {
                        self.img.write(off, &rec)?;
                    }
                }
            }
            Stamp::ExtBlock(b, ino) | Stamp::DirBlock(b, ino) | Stamp::DxBlock(b, ino) => {
                if l.csum {
                    let seed = inode_csum_seed(l.fs_seed, InodeNr(ino), self.generation(ino)?);
                    let mut blk = self.img.block(b)?;
                    let ok = match s {
                        Stamp::ExtBlock(..) => {
                            ext4r_format::extent::set_extent_block_checksum(seed, &mut blk).is_ok()
                        }
                        Stamp::DirBlock(..) => {
                            ext4r_format::dir::set_dir_block_checksum(seed, &mut blk).is_ok()
                        }
                        _ => ext4r_format::htree::set_dx_checksum(seed, &mut blk).is_ok(),
                    };
                    if ok {
                        self.img.put_block(b, &blk)?;
                    }
                }
            }
            Stamp::XattrBlock(b) => {
                if l.csum {
                    let mut blk = self.img.block(b)?;
                    if ext4r_format::xattr::set_xattr_block_checksum(
                        l.fs_seed,
                        BlockNr(b),
                        &mut blk,
                    )
                    .is_ok()
                    {
                        self.img.put_block(b, &blk)?;
                    }
                }
            }
            Stamp::JournalSb(b) => {
                use ext4r_format::jbd2::{JournalIncompat, JournalSuperblock};
                use zerocopy::{FromBytes, IntoBytes};
                let mut jsb = self.img.read(b * bs, 1024)?;
                // Whatever the block type says (damage may have made it v1).
                let csum = (JournalIncompat::CSUM_V2 | JournalIncompat::CSUM_V3).bits();
                if let Ok((sb, _)) = JournalSuperblock::mut_from_prefix(&mut jsb) {
                    if sb.s_feature_incompat.get() & csum != 0 {
                        let c = sb.compute_checksum();
                        sb.s_checksum.set(c);
                        self.img.write(b * bs, sb.as_bytes())?;
                    }
                }
            }
            Stamp::OrphanBlock(b, ino) => {
                if l.csum {
                    let mut blk = self.img.block(b)?;
                    let gen = self.generation(ino)?;
                    if let Ok(c) = ext4r_format::orphan::orphan_block_checksum(
                        l.fs_seed,
                        InodeNr(ino),
                        gen,
                        BlockNr(b),
                        &blk,
                    ) {
                        let at = blk.len() - 4;
                        blk[at..].copy_from_slice(&c.to_le_bytes());
                        self.img.put_block(b, &blk)?;
                    }
                }
            }
        }
        Ok(())
    }

    fn generation(&self, ino: u32) -> Result<u32> {
        let (_, at, width) = field!(ext4r_format::inode::Inode, i_generation);
        Ok(self.get_le(self.l.inode_offset(ino) + at, width)? as u32)
    }

    fn restamp_desc(&self, g: u32, f: impl FnOnce(&mut GroupDesc) -> Result<()>) -> Result<()> {
        let l = self.l;
        let ds = l.geo.desc_size as usize;
        let off = l.desc_offset(g);
        let mut raw = self.img.read(off, ds)?;
        let mut d = GroupDesc::parse(&raw, ds)?;
        f(&mut d)?;
        let kind = if l.csum {
            Some(GroupDescCsum::Crc32c { seed: l.fs_seed })
        } else if l.gdt_csum {
            Some(GroupDescCsum::Crc16 { uuid: l.sb.s_uuid })
        } else {
            None
        };
        if let Some(k) = kind {
            d.update_checksum(g, ds, &k)?;
        }
        d.write(&mut raw, ds)?;
        self.img.write(off, &raw)
    }

    /// Applies a plausible damage's checksum policy: restamps `s` when
    /// chosen, and says so.
    pub fn finish(&mut self, s: Stamp, restamp: bool) -> Result<&'static str> {
        if restamp {
            self.restamp(s)?;
            Ok(" (checksum restamped)")
        } else {
            Ok("")
        }
    }

    /// Blocks a file must not own, for "point it at metadata" values: the
    /// primary superblock, a descriptor block, group 0's bitmaps and first
    /// inode table block.
    pub fn meta_blocks(&mut self) -> Vec<u64> {
        let l = self.l;
        let (sb, n) = l.primary_meta();
        let d = &l.descs[0];
        let desc = sb + 1 + self.rng.below(n.saturating_sub(1).max(1));
        vec![
            sb,
            desc,
            d.block_bitmap(l.wide),
            d.inode_bitmap(l.wide),
            d.inode_table(l.wide),
        ]
    }

    /// A random block inside the filesystem.
    pub fn any_block(&mut self) -> u64 {
        self.rng.range(
            self.l.geo.first_data_block,
            self.l.geo.blocks_count.saturating_sub(1),
        )
    }

    /// A data block of some other file, when there is one.
    pub fn other_files_block(&mut self, not: u32) -> Option<u64> {
        let owners: Vec<&super::layout::Ino> = self
            .l
            .inodes
            .iter()
            .filter(|i| i.ino != not && i.inode.is_reg() && !i.runs.is_empty())
            .collect();
        let o = *self.rng.pick(&owners)?;
        let r = *self.rng.pick(&o.runs)?;
        Some(r.physical + self.rng.below(r.len))
    }
}

/// A plausible wrong value for a field of `width` bytes holding `old`:
/// zero, off by one, doubled, halved, a bit flipped, all ones, random, or
/// one of the caller's `extra` candidates (twice as likely each). Never
/// `old` itself, always within the width.
pub fn wrong(rng: &mut Rng, old: u64, width: usize, extra: &[u64]) -> u64 {
    let mask = if width >= 8 {
        u64::MAX
    } else {
        (1u64 << (8 * width)) - 1
    };
    let old = old & mask;
    for _ in 0..16 {
        let v = match rng.below(10 + 2 * extra.len() as u64) {
            0 => 0,
            1 => old.wrapping_add(1),
            2 => old.wrapping_sub(1),
            3 => old.wrapping_mul(2),
            4 => old / 2,
            5 => old ^ (1 << rng.below(8 * width.min(8) as u64)),
            6 => mask,
            7 | 8 => rng.next(),
            9 => rng.below(64),
            k => extra[((k - 10) / 2) as usize],
        } & mask;
        if v != old {
            return v;
        }
    }
    (old ^ 1) & mask
}

/// Applies one damage of `kind`; `None` when this image has no target for
/// it. `snap` tells the journal kind that the image is the live snapshot.
pub fn apply(kind: &str, ctx: &mut Ctx<'_>, snap: bool) -> Result<Option<String>> {
    match kind {
        "superblock" => meta::superblock(ctx).map(Some),
        "gdt" => meta::gdt(ctx).map(Some),
        "bitmap" => meta::bitmap(ctx),
        "inode" => inode::fields(ctx),
        "extent" => inode::extent(ctx),
        "blockmap" => inode::blockmap(ctx),
        "overlap" => inode::overlap(ctx),
        "dir" => dir::dir(ctx),
        "htree" => dir::htree(ctx),
        "xattr" => xattr::xattr(ctx),
        "journal" => journal::journal(ctx, snap),
        "orphan" => journal::orphan(ctx),
        "quota" => journal::quota(ctx),
        other => anyhow::bail!("unknown damage kind {other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrong_values_differ_and_fit() {
        let mut rng = Rng::new(5);
        for width in [1usize, 2, 4, 8] {
            for old in [0u64, 1, 0xff, 12345, u64::MAX] {
                let old = if width == 8 {
                    old
                } else {
                    old & ((1 << (8 * width)) - 1)
                };
                for _ in 0..200 {
                    let v = wrong(&mut rng, old, width, &[old, 7, 1 << 40]);
                    assert_ne!(v, old);
                    assert!(width == 8 || v < 1 << (8 * width));
                }
            }
        }
    }
}
