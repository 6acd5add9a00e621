//! Whether e2fsck finds an inline-data inode's `system.data` attribute.
//!
//! e2fsck's pass 1 asks libext2fs (`ext2fs_xattrs_read_inode`, then
//! `ext2fs_xattr_get`) before anything else of the inode's xattrs; any
//! xattr error there, or no such attribute, and it truncates the inline
//! data (PR_1_INLINE_DATA_NO_ATTR). That reader's rules are not the
//! kernel's, which the engine's parser follows: it refuses an empty value
//! whose offset points past the area (the kernel ignores the offset of an
//! empty value), counts every value against what is left of the area, and
//! lets the entries end without a terminator when less than an entry's
//! room is left. Judging by the kernel's rules left such an inode to a
//! second e2fsck (damage seed 263 case 161: an empty `system.data` whose
//! offset gained a bit).
//!
//! Where libext2fs fails with an error e2fsck's test does not list (an
//! unreadable inode, a hash it cannot match on an in-inode value, which
//! sends it to read inode 0), e2fsck stops: [`Lookup::Unknown`], and the
//! caller keeps its own rule.

use ext4r_format::inode::{Inode, InodeFlags};
use ext4r_format::xattr::{
    verify_xattr_block_checksum, xattr_ea_inode_entry_hash, xattr_entry_hash, xattr_name_is,
    xattr_prefix, XATTR_MAGIC,
};
use ext4r_format::{BlockNr, InodeNr};

use crate::ctx::Ctx;

/// What e2fsck's lookup of `system.data` comes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Lookup {
    /// The xattrs read and one is named `system.data`.
    Found,
    /// An xattr error, or no such attribute: e2fsck truncates.
    Missing,
    /// An error e2fsck does not expect there: it stops.
    Unknown,
}

/// `EXT2_EXT_ATTR_MAGIC_v1`, which libext2fs's block header check lets by
/// (its xattr reader then refuses it).
const MAGIC_V1: u32 = 0xEA01_0000;
/// The fixed part of an entry.
const ENTRY: usize = 16;
/// libext2fs's cap on a value kept in an EA inode.
const EA_INODE_VALUE_MAX: u32 = 64 * 1024;

/// Why a read stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stop {
    /// One of the xattr errors e2fsck truncates on.
    Xattr,
    /// Any other error: e2fsck aborts.
    Other,
}

fn pad(n: usize) -> usize {
    (n + 3) & !3
}

fn word(buf: &[u8], at: usize) -> u32 {
    buf.get(at..at + 4)
        .map_or(0, |w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
}

/// What the reader needs beyond the bytes: the inode the attributes
/// belong to and the EA inodes their values may be kept in.
pub(crate) struct Env<'a> {
    /// The ea_inode feature.
    pub ea_inode: bool,
    /// The inode whose attributes are read.
    pub owner: u32,
    /// Its generation (an old Lustre reference names it).
    pub generation: u32,
    /// Inode `n` as libext2fs reads it; `None` when it cannot (a number
    /// out of range, an unreadable table, a checksum it does not ignore).
    pub inode: &'a dyn Fn(u32) -> Option<Inode>,
}

/// libext2fs's `read_xattrs_from_buffer`: the entries of `buf` from
/// `first` to its end, values counted from `base`. Sets `found` when an
/// attribute's full name is `system.data` (as C strings compare).
fn read_entries(
    env: &Env<'_>,
    buf: &[u8],
    first: usize,
    base: usize,
    found: &mut bool,
) -> Result<(), Stop> {
    let storage = buf.len().saturating_sub(first);
    // All offsets below are in buf; values_size bounds an offset from base.
    let values_size = storage + (first - base);
    // The end of the names: every name must fit in what is left; fewer
    // bytes left than an entry ends the list as a terminator would.
    let mut remain = storage;
    let mut end = first;
    while remain >= ENTRY && word(buf, end) != 0 {
        remain -= ENTRY;
        let name = pad(usize::from(buf[end]));
        if name > remain {
            return Err(Stop::Xattr);
        }
        remain -= name;
        end += ENTRY + name;
    }
    let mut remain = storage;
    let mut at = first;
    while remain >= ENTRY && word(buf, at) != 0 {
        let e = &buf[at..at + ENTRY];
        let name_len = usize::from(e[0]);
        let index = e[1];
        let offs = usize::from(u16::from_le_bytes([e[2], e[3]]));
        let inum = u32::from_le_bytes([e[4], e[5], e[6], e[7]]);
        let size = u32::from_le_bytes([e[8], e[9], e[10], e[11]]);
        let stored = u32::from_le_bytes([e[12], e[13], e[14], e[15]]);
        remain -= ENTRY + pad(name_len);
        let name = &buf[at + ENTRY..at + ENTRY + name_len];
        if !env.ea_inode && inum != 0 {
            return Err(Stop::Xattr);
        }
        let hash = if inum == 0 {
            let n = size as usize;
            // Offsets are checked even for an empty value.
            if n > remain || offs + n > values_size || (n > 0 && base + offs < end + 4) {
                return Err(Stop::Xattr);
            }
            remain -= n;
            // Hashed as stored, padding included (past the buffer, zeros).
            let from = base + offs;
            let mut value = buf
                .get(from..(from + pad(n)).min(buf.len()))
                .unwrap_or(&[])
                .to_vec();
            value.resize(pad(n), 0);
            [false, true].map(|signed| xattr_entry_hash(name, &value, signed))
        } else {
            if offs != 0 || size > EA_INODE_VALUE_MAX {
                return Err(Stop::Xattr);
            }
            let ea = (env.inode)(inum).ok_or(Stop::Other)?;
            if ea.flags().contains(InodeFlags::INLINE_DATA)
                || !ea.flags().contains(InodeFlags::EA_INODE)
                || ea.links_count() == 0
                || ea.size() != u64::from(size)
            {
                return Err(Stop::Xattr);
            }
            let ea_hash = ea.i_atime.get();
            [false, true].map(|signed| xattr_ea_inode_entry_hash(name, ea_hash, signed))
        };
        if stored != 0 && !hash.contains(&stored) {
            // Perhaps an old Lustre reference: the inode the entry names
            // (none for a value kept here) must point back at the owner.
            let child = (inum != 0).then(|| (env.inode)(inum)).flatten();
            let child = child.ok_or(Stop::Other)?;
            if child.i_mtime.get() != env.owner || child.i_generation.get() != env.generation {
                return Err(Stop::Xattr);
            }
        }
        let prefix = xattr_prefix(index).unwrap_or("").as_bytes();
        if !*found {
            let mut full = prefix.to_vec();
            full.extend_from_slice(name);
            *found = xattr_name_is(&full, b"system.data");
        }
        at += ENTRY + pad(name_len);
    }
    Ok(())
}

/// The in-inode part of `ext2fs_xattrs_read_inode` on inode record `rec`.
fn ibody(env: &Env<'_>, rec: &[u8], found: &mut bool) -> Result<(), Stop> {
    let Some(x) = rec.get(0x80..0x82) else {
        return Ok(());
    };
    let extra = usize::from(u16::from_le_bytes([x[0], x[1]]));
    if extra < 2 || rec.len() <= 128 + extra + 4 {
        return Ok(());
    }
    if extra & 3 != 0 {
        // EXT2_ET_INODE_CORRUPTED, not an xattr error to e2fsck's test.
        return Err(Stop::Other);
    }
    let start = 128 + extra;
    if word(rec, start) != XATTR_MAGIC {
        return Ok(());
    }
    read_entries(env, rec, start + 4, start + 4, found)
}

/// The block part of `ext2fs_xattrs_read_inode`: the address, the header,
/// the checksum (unless `ignore_csum`), then the entries.
fn block(
    c: &Ctx,
    env: &Env<'_>,
    inode: &Inode,
    ignore_csum: bool,
    found: &mut bool,
) -> Result<(), Stop> {
    let blk = inode.file_acl(c.wide()).0;
    if blk == 0 {
        return Ok(());
    }
    if blk < u64::from(c.sb.s_first_data_block.get()) || blk >= c.sb.blocks_count() {
        return Err(Stop::Xattr);
    }
    let bs = c.geo.block_size as usize;
    let mut buf = vec![0u8; bs];
    c.fs.device()
        .read_at(&mut buf, blk * bs as u64)
        .map_err(|_| Stop::Other)?;
    let magic = word(&buf, 0);
    if (magic != XATTR_MAGIC && magic != MAGIC_V1) || word(&buf, 8) != 1 {
        return Err(Stop::Xattr);
    }
    if !ignore_csum
        && c.csum()
        && verify_xattr_block_checksum(c.sb.csum_seed(), BlockNr(blk), &buf).is_err()
    {
        return Err(Stop::Xattr);
    }
    if magic != XATTR_MAGIC {
        return Err(Stop::Xattr);
    }
    read_entries(env, &buf, 32, 0, found)
}

/// e2fsck's `get_inline_data_ea_size` on inode `ino` (record `rec`): its
/// xattrs read as libext2fs reads them, `system.data` looked up.
/// `ignore_csum`: the inode failed its checksum, so e2fsck ignores the
/// checksums of the xattr block and EA inodes read for it.
pub(crate) fn system_data(c: &Ctx, ino: u32, rec: &[u8], ignore_csum: bool) -> Lookup {
    let Ok(inode) = Inode::parse(rec) else {
        return Lookup::Unknown;
    };
    let read = |n: u32| -> Option<Inode> {
        let r = c.fs.inode_record(InodeNr(n)).ok()?;
        if !ignore_csum
            && c.csum()
            && ext4r_format::inode::verify_inode_checksum(c.sb.csum_seed(), InodeNr(n), &r).is_err()
        {
            return None;
        }
        Inode::parse(&r).ok()
    };
    let env = Env {
        ea_inode: c
            .sb
            .has_incompat(ext4r_format::features::Incompat::EA_INODE),
        owner: ino,
        generation: inode.i_generation.get(),
        inode: &read,
    };
    let mut found = false;
    let outcome =
        ibody(&env, rec, &mut found).and_then(|()| block(c, &env, &inode, ignore_csum, &mut found));
    match outcome {
        Ok(()) if found => Lookup::Found,
        Ok(()) | Err(Stop::Xattr) => Lookup::Missing,
        Err(Stop::Other) => Lookup::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn none(_: u32) -> Option<Inode> {
        None
    }

    fn env() -> Env<'static> {
        Env {
            ea_inode: false,
            owner: 12,
            generation: 0,
            inode: &none,
        }
    }

    /// A 256-byte record with i_extra_isize 32 and the in-inode area's
    /// magic; entries start at 164.
    fn record() -> Vec<u8> {
        let mut r = vec![0u8; 256];
        r[0x80] = 32;
        r[160..164].copy_from_slice(&XATTR_MAGIC.to_le_bytes());
        r
    }

    /// Writes an entry at `at` (offset in the record) with the right hash.
    fn entry(r: &mut [u8], at: usize, index: u8, name: &[u8], offs: u16, value: &[u8]) {
        r[at] = name.len() as u8;
        r[at + 1] = index;
        r[at + 2..at + 4].copy_from_slice(&offs.to_le_bytes());
        r[at + 8..at + 12].copy_from_slice(&(value.len() as u32).to_le_bytes());
        r[at + 16..at + 16 + name.len()].copy_from_slice(name);
        let v = 164 + usize::from(offs);
        r[v..v + value.len()].copy_from_slice(value);
        let padded = &r[v..v + pad(value.len())];
        let h = xattr_entry_hash(name, padded, false);
        r[at + 12..at + 16].copy_from_slice(&h.to_le_bytes());
    }

    fn lookup(r: &[u8]) -> Result<bool, Stop> {
        let mut found = false;
        ibody(&env(), r, &mut found).map(|()| found)
    }

    #[test]
    fn a_good_system_data_is_found() {
        let mut r = record();
        entry(&mut r, 164, 7, b"data", 80, b"0123456789");
        assert_eq!(lookup(&r), Ok(true));
        let mut r = record();
        entry(&mut r, 164, 7, b"data", 0, b"");
        assert_eq!(lookup(&r), Ok(true));
    }

    #[test]
    fn an_empty_value_with_its_offset_past_the_area_is_an_error() {
        // Seed 263 case 161: e_value_offs 0 -> 0x1000, e_value_size 0.
        let mut r = record();
        entry(&mut r, 164, 7, b"data", 0, b"");
        r[167] = 0x10;
        assert_eq!(lookup(&r), Err(Stop::Xattr));
        // Up to the end of the area it is still found.
        r[166..168].copy_from_slice(&92u16.to_le_bytes());
        assert_eq!(lookup(&r), Ok(true));
        r[166..168].copy_from_slice(&93u16.to_le_bytes());
        assert_eq!(lookup(&r), Err(Stop::Xattr));
    }

    #[test]
    fn values_are_counted_against_what_is_left() {
        let mut r = record();
        entry(&mut r, 164, 7, b"data", 60, b"0123456789");
        // Ending at the area's end unpadded is fine, past it is not.
        r[172..176].copy_from_slice(&32u32.to_le_bytes());
        let h = {
            let v = r[224..256].to_vec();
            xattr_entry_hash(b"data", &v, false)
        };
        r[176..180].copy_from_slice(&h.to_le_bytes());
        assert_eq!(lookup(&r), Ok(true));
        r[172..176].copy_from_slice(&33u32.to_le_bytes());
        assert_eq!(lookup(&r), Err(Stop::Xattr));
        // A value over the names.
        let mut r = record();
        entry(&mut r, 164, 7, b"data", 60, b"0123456789");
        r[166..168].copy_from_slice(&20u16.to_le_bytes());
        r[176..180].fill(0);
        assert_eq!(lookup(&r), Err(Stop::Xattr));
    }

    #[test]
    fn a_value_padded_past_the_area_is_still_read() {
        // The kernel refuses it; libext2fs checks the unpadded end.
        let mut r = record();
        entry(&mut r, 164, 7, b"data", 88, b"abc");
        r[172..176].copy_from_slice(&4u32.to_le_bytes());
        r[176..180].fill(0);
        assert_eq!(lookup(&r), Ok(true));
        r[166..168].copy_from_slice(&89u16.to_le_bytes());
        r[172..176].copy_from_slice(&3u32.to_le_bytes());
        assert_eq!(lookup(&r), Ok(true));
        assert!(ext4r_format::xattr::parse_xattr_ibody(&r)
            .ok()
            .flatten()
            .is_some_and(|es| es.iter().any(|e| e.is_err())));
    }

    #[test]
    fn names_are_compared_whole_and_as_c_strings() {
        let mut r = record();
        entry(&mut r, 164, 0, b"system.data", 80, b"x");
        assert_eq!(lookup(&r), Ok(true));
        let mut r = record();
        entry(&mut r, 164, 7, b"data\0\0\0\0", 80, b"x");
        assert_eq!(lookup(&r), Ok(true));
        let mut r = record();
        entry(&mut r, 164, 1, b"data", 80, b"x");
        assert_eq!(lookup(&r), Ok(false));
        let mut r = record();
        entry(&mut r, 164, 7, b"datb", 80, b"x");
        assert_eq!(lookup(&r), Ok(false));
    }

    #[test]
    fn the_list_may_end_without_a_terminator_when_no_entry_fits() {
        // 92 bytes of area: an entry with a 64-byte name takes 80, leaving
        // 12 (less than an entry), and no zero word follows.
        let mut r = record();
        let name = [b'n'; 64];
        entry(&mut r, 164, 1, &name, 0, b"");
        r[244..256].fill(0xff);
        assert_eq!(lookup(&r), Ok(false));
        // A name one word longer than what is left is an error.
        r[164] = 80;
        assert_eq!(lookup(&r), Err(Stop::Xattr));
    }

    #[test]
    fn a_hash_that_matches_neither_way_stops_e2fsck() {
        let mut r = record();
        entry(&mut r, 164, 7, b"data", 80, b"0123");
        r[176] ^= 1;
        assert_eq!(lookup(&r), Err(Stop::Other));
        // A hash of 0 is not checked.
        r[176..180].fill(0);
        assert_eq!(lookup(&r), Ok(true));
    }

    #[test]
    fn value_inodes_need_the_feature_and_an_ea_inode() {
        let mut r = record();
        entry(&mut r, 164, 7, b"data", 0, b"");
        r[168..172].copy_from_slice(&13u32.to_le_bytes());
        r[176..180].fill(0);
        assert_eq!(lookup(&r), Err(Stop::Xattr));
        let with = Env {
            ea_inode: true,
            ..env()
        };
        let mut found = false;
        assert_eq!(ibody(&with, &r, &mut found), Err(Stop::Other));
        let plain = |_: u32| Inode::parse(&[0u8; 256]).ok();
        let with = Env {
            ea_inode: true,
            inode: &plain,
            ..env()
        };
        assert_eq!(ibody(&with, &r, &mut found), Err(Stop::Xattr));
    }

    #[test]
    fn the_area_is_found_as_libext2fs_finds_it() {
        let mut r = record();
        entry(&mut r, 164, 7, b"data", 0, b"");
        // A misaligned extra size stops e2fsck.
        r[0x80] = 34;
        assert_eq!(lookup(&r), Err(Stop::Other));
        // One that leaves no room, or no magic: no attributes.
        r[0x80] = 124;
        assert_eq!(lookup(&r), Ok(false));
        r[0x80] = 36;
        assert_eq!(lookup(&r), Ok(false));
        r[0x80] = 0;
        assert_eq!(lookup(&r), Ok(false));
        assert_eq!(lookup(&r[..128]), Ok(false));
    }
}
