//! Inodes: their fields, their extent trees (in the inode and in blocks),
//! their block maps, and files pointed at blocks someone else owns.

use std::mem::offset_of;

use anyhow::Result;
use ext4r_format::extent::{Extent, ExtentHeader as Eh, ExtentIdx, EXTENT_MAGIC, EXT_INIT_MAX_LEN};
use ext4r_format::inode::{mode, Inode as I, InodeFlags as F};

use super::{Ctx, Stamp};
use crate::damage::layout::Ino;

const I_FIELDS: &[(&str, usize, usize)] = &[
    ("i_mode", offset_of!(I, i_mode), 2),
    ("i_uid", offset_of!(I, i_uid), 2),
    ("i_size_lo", offset_of!(I, i_size_lo), 4),
    ("i_atime", offset_of!(I, i_atime), 4),
    ("i_ctime", offset_of!(I, i_ctime), 4),
    ("i_mtime", offset_of!(I, i_mtime), 4),
    ("i_dtime", offset_of!(I, i_dtime), 4),
    ("i_gid", offset_of!(I, i_gid), 2),
    ("i_links_count", offset_of!(I, i_links_count), 2),
    ("i_blocks_lo", offset_of!(I, i_blocks_lo), 4),
    ("i_flags", offset_of!(I, i_flags), 4),
    ("i_generation", offset_of!(I, i_generation), 4),
    ("i_file_acl_lo", offset_of!(I, i_file_acl_lo), 4),
    ("i_size_high", offset_of!(I, i_size_high), 4),
    ("l_i_blocks_high", offset_of!(I, l_i_blocks_high), 2),
    ("l_i_file_acl_high", offset_of!(I, l_i_file_acl_high), 2),
    ("i_extra_isize", offset_of!(I, i_extra_isize), 2),
    ("i_crtime", offset_of!(I, i_crtime), 4),
    ("i_projid", offset_of!(I, i_projid), 4),
];

/// Offset of i_block in the record.
const I_BLOCK: u64 = offset_of!(I, i_block) as u64;
/// An extent node's header, and each entry after it.
const NODE: usize = size_of::<Eh>();
const ENTRY: usize = size_of::<Extent>();

pub fn describe(i: &Ino) -> String {
    let kind = match i.inode.file_type() {
        mode::S_IFREG => "file",
        mode::S_IFDIR => "directory",
        mode::S_IFLNK => "symlink",
        _ => "inode",
    };
    format!("{kind} {} (inode {})", i.path, i.ino)
}

/// An inode to damage: mostly objects of the tree, sometimes a directory
/// near the root or a special inode (journal, resize, quota, orphan file).
fn pick_inode<'l>(c: &mut Ctx<'l>) -> Option<&'l Ino> {
    let l = c.l;
    let first = l.sb.first_ino();
    let pool: Vec<&Ino> = match c.rng.below(10) {
        0 => l
            .inodes
            .iter()
            .filter(|i| i.ino < first || i.paths == 0)
            .collect(),
        1 => l
            .inodes
            .iter()
            .filter(|i| i.inode.is_dir() && i.path.matches('/').count() <= 1)
            .collect(),
        _ => l
            .inodes
            .iter()
            .filter(|i| i.ino >= first && i.paths > 0)
            .collect(),
    };
    c.rng.pick(&pool).copied()
}

pub fn fields(c: &mut Ctx<'_>) -> Result<Option<String>> {
    let Some(i) = pick_inode(c) else {
        return Ok(None);
    };
    let l = c.l;
    let isz = l.geo.inode_size as usize;
    if c.rng.chance(1, 4) {
        let what = match c.rng.below(8) {
            0 => {
                c.img.write(i.offset, &vec![0u8; isz])?;
                "record zeroed".to_string()
            }
            1 => {
                let junk: Vec<u8> = (0..isz).map(|_| c.rng.next() as u8).collect();
                c.img.write(i.offset, &junk)?;
                "record filled with random bytes".to_string()
            }
            _ => c.scribble(i.offset, isz)?,
        };
        return Ok(Some(format!("{}: {what}", describe(i))));
    }
    let fields: Vec<_> = I_FIELDS.iter().filter(|f| f.1 + f.2 <= isz).collect();
    let &&(name, off, width) = c.rng.pick(&fields).unwrap_or(&&I_FIELDS[0]);
    let old = c.get_le(i.offset + off as u64, width)?;
    let bs = l.bs;
    let extra: Vec<u64> = match name {
        "i_mode" => [
            mode::S_IFREG,
            mode::S_IFDIR,
            mode::S_IFLNK,
            mode::S_IFCHR,
            mode::S_IFIFO,
            mode::S_IFSOCK,
            mode::S_IFBLK,
        ]
        .iter()
        .map(|&t| (old & !u64::from(mode::S_IFMT)) | u64::from(t))
        .collect(),
        "i_size_lo" => vec![old + bs, old.saturating_sub(1), bs * 1000, old + 1],
        "i_links_count" => vec![0, 1, old + 1, 65000],
        "i_blocks_lo" => vec![old + bs / 512, old.saturating_sub(bs / 512), old * 8],
        "i_flags" => [
            F::EXTENTS,
            F::INLINE_DATA,
            F::INDEX,
            F::HUGE_FILE,
            F::EA_INODE,
            F::IMMUTABLE,
            F::APPEND,
            F::COMPR,
            F::ENCRYPT,
            F::CASEFOLD,
            F::VERITY,
            F::TOPDIR,
            F::EOFBLOCKS,
        ]
        .iter()
        .map(|f| old ^ u64::from(f.bits()))
        .collect(),
        "i_dtime" => vec![u64::from(i.inode.i_mtime.get()), 1],
        "i_file_acl_lo" => {
            let mut v = vec![l.geo.blocks_count + 5, l.primary_meta().0];
            if let Some(b) = c.other_files_block(i.ino) {
                v.push(b);
            }
            if let Some(x) = l
                .inodes
                .iter()
                .find(|x| x.xattr_block != 0 && x.ino != i.ino)
            {
                v.push(x.xattr_block);
            }
            v
        }
        "i_extra_isize" => vec![0, 1, 3, 30, 34, 36, 128, (isz as u64) - 124],
        "i_size_high" => vec![1, 0x80],
        _ => Vec::new(),
    };
    let restamp = c.restamp_chosen();
    let what = c.field(i.offset + off as u64, width, &extra)?;
    let note = c.finish(Stamp::Inode(i.ino), restamp)?;
    Ok(Some(format!("{} {name}: {what}{note}", describe(i))))
}

/// A node of an inode's extent tree: the root in i_block or a block.
pub fn extent(c: &mut Ctx<'_>) -> Result<Option<String>> {
    let l = c.l;
    let with_blocks = c.rng.chance(1, 2);
    let pool: Vec<&Ino> = l
        .inodes
        .iter()
        .filter(|i| i.has_extents() && !i.runs.is_empty())
        .filter(|i| !with_blocks || !i.ext_blocks.is_empty())
        .collect();
    let pool = if pool.is_empty() {
        l.inodes
            .iter()
            .filter(|i| i.has_extents() && !i.runs.is_empty())
            .collect()
    } else {
        pool
    };
    let Some(&i) = c.rng.pick(&pool) else {
        return Ok(None);
    };
    let (off, len, stamp, where_) = match c.rng.pick(&i.ext_blocks) {
        Some(&(b, depth)) if c.rng.chance(2, 3) => (
            b * l.bs,
            l.bs as usize,
            Stamp::ExtBlock(b, i.ino),
            format!("extent block {b} (depth {depth})"),
        ),
        _ => (
            i.offset + I_BLOCK,
            60,
            Stamp::Inode(i.ino),
            "extent root in the inode".to_string(),
        ),
    };
    let (_, at, w) = field!(Eh, eh_entries);
    let entries = c.get_le(off + at, w)?;
    let (_, at, w) = field!(Eh, eh_depth);
    let depth = c.get_le(off + at, w)?;
    if c.rng.chance(1, 4) {
        let what = c.scribble(off, (NODE + ENTRY * entries as usize).min(len))?;
        return Ok(Some(format!("{}, {where_}: {what}", describe(i))));
    }
    let restamp = c.restamp_chosen();
    let (name, what) = if entries == 0 || c.rng.chance(3, 10) {
        let (_, at, w) = field!(Eh, eh_max);
        let max = c.get_le(off + at, w)?;
        let ((name, foff, width), extra) = match c.rng.below(5) {
            0 => (field!(Eh, eh_magic), vec![u64::from(EXTENT_MAGIC) + 1, 0]),
            1 => (field!(Eh, eh_entries), vec![max + 1, 0, entries + 1]),
            2 => (field!(Eh, eh_max), vec![max + 1, max.saturating_sub(1), 0]),
            3 => (
                field!(Eh, eh_depth),
                vec![depth + 1, depth.wrapping_sub(1) & 0xffff, 0, 5, 6],
            ),
            _ => (field!(Eh, eh_generation), vec![1]),
        };
        (name.to_string(), c.field(off + foff, width, &extra)?)
    } else {
        let k = c.rng.below(entries.min(((len - NODE) / ENTRY) as u64));
        let e = off + (NODE + ENTRY * k as usize) as u64;
        let mut blocks = c.meta_blocks();
        blocks.push(c.any_block());
        blocks.push(l.geo.blocks_count + 5);
        if let Some(b) = c.other_files_block(i.ino) {
            blocks.push(b);
        }
        // ee_block and ei_block: the same first word.
        let (_, at, w) = field!(Extent, ee_block);
        let old_block = c.get_le(e + at, w)?;
        let logicals = vec![
            old_block + 1,
            old_block.saturating_sub(1),
            0,
            0xffff_ffff,
            old_block + (1 << 20),
        ];
        let ((name, foff, width), extra) = if depth == 0 {
            let (_, at, w) = field!(Extent, ee_len);
            let len = c.get_le(e + at, w)?;
            let unwritten = u64::from(EXT_INIT_MAX_LEN);
            match c.rng.below(4) {
                0 => (field!(Extent, ee_block), logicals),
                1 => (
                    field!(Extent, ee_len),
                    vec![0, len + 1, len | unwritten, unwritten, 0xffff],
                ),
                2 => (field!(Extent, ee_start_hi), vec![1, 0xffff]),
                _ => (field!(Extent, ee_start_lo), blocks),
            }
        } else {
            if let Some(&(b, _)) = c.rng.pick(&i.ext_blocks) {
                blocks.push(b);
            }
            match c.rng.below(3) {
                0 => (field!(ExtentIdx, ei_block), logicals),
                1 => (field!(ExtentIdx, ei_leaf_lo), blocks),
                _ => (field!(ExtentIdx, ei_leaf_hi), vec![1, 0xffff]),
            }
        };
        (
            format!("entry {k} {name}"),
            c.field(e + foff, width, &extra)?,
        )
    };
    let note = c.finish(stamp, restamp)?;
    Ok(Some(format!(
        "{}, {where_} {name}: {what}{note}",
        describe(i)
    )))
}

/// A pointer of an ext2/3 block map: in i_block or in an indirect block.
pub fn blockmap(c: &mut Ctx<'_>) -> Result<Option<String>> {
    let l = c.l;
    // Mostly files of the tree; sometimes the resize inode or the journal.
    let files = c.rng.chance(4, 5);
    let first = l.sb.first_ino();
    let mapped = |files: bool| -> Vec<&Ino> {
        l.inodes
            .iter()
            .filter(|i| i.block_mapped() && (!files || i.ino >= first))
            .collect()
    };
    let pool = match mapped(files) {
        p if p.is_empty() => mapped(false),
        p => p,
    };
    let Some(&i) = c.rng.pick(&pool) else {
        return Ok(None);
    };
    let (slot_off, where_) = match c.rng.pick(&i.ind_blocks) {
        Some(&(b, level)) if c.rng.chance(1, 2) => {
            if c.rng.chance(1, 4) {
                let what = c.scribble(b * l.bs, l.bs as usize)?;
                return Ok(Some(format!(
                    "{}, level-{level} indirect block {b}: {what}",
                    describe(i)
                )));
            }
            // Mostly slots in use: the front of the block.
            let used = c
                .img
                .block(b)?
                .chunks(4)
                .take_while(|w| w != &[0, 0, 0, 0])
                .count();
            let k = c.rng.below(used.max(1) as u64 + 2).min(l.bs / 4 - 1);
            (
                b * l.bs + 4 * k,
                format!("level-{level} indirect block {b} slot {k}"),
            )
        }
        _ => {
            let words = i.inode.block_words();
            let used: Vec<usize> = (0..15).filter(|&k| words[k] != 0).collect();
            let k = c.rng.pick(&used).copied().unwrap_or(0);
            (i.offset + I_BLOCK + 4 * k as u64, format!("i_block[{k}]"))
        }
    };
    let mut extra = c.meta_blocks();
    extra.push(c.any_block());
    extra.push(l.geo.blocks_count + 5);
    if let Some(b) = c.other_files_block(i.ino) {
        extra.push(b);
    }
    if let Some(&(b, _)) = c.rng.pick(&i.ind_blocks) {
        extra.push(b);
    }
    let what = c.field(slot_off, 4, &extra)?;
    Ok(Some(format!("{}, {where_}: {what}", describe(i))))
}

/// A file's blocks pointed at blocks something else owns: the primary
/// superblock and descriptors (e2fsck's "shared with the filesystem
/// metadata"), bitmaps, the inode table, another file, a directory, the
/// journal.
pub fn overlap(c: &mut Ctx<'_>) -> Result<Option<String>> {
    let l = c.l;
    let first = l.sb.first_ino();
    let pool: Vec<&Ino> = l
        .inodes
        .iter()
        .filter(|i| i.inode.is_reg() && i.ino >= first && i.paths > 0 && !i.runs.is_empty())
        .filter(|i| i.has_extents() || i.block_mapped())
        .collect();
    let Some(&i) = c.rng.pick(&pool) else {
        return Ok(None);
    };
    let d0 = &l.descs[0];
    let (target, count, what) = match c.rng.below(7) {
        0 | 1 => {
            let (sb, n) = l.primary_meta();
            (
                sb,
                n,
                "the primary superblock and group descriptors".to_string(),
            )
        }
        2 => (
            d0.block_bitmap(l.wide),
            1,
            "group 0's block bitmap".to_string(),
        ),
        3 => (
            d0.inode_table(l.wide),
            u64::from(l.geo.inode_blocks_per_group()),
            "group 0's inode table".to_string(),
        ),
        4 => {
            let dirs: Vec<&Ino> = l
                .inodes
                .iter()
                .filter(|x| x.inode.is_dir() && !x.runs.is_empty())
                .collect();
            match c
                .rng
                .pick(&dirs)
                .and_then(|x| x.runs.first().map(|r| (x, *r)))
            {
                Some((x, r)) => (r.physical, r.len, format!("directory {}'s blocks", x.path)),
                None => return Ok(None),
            }
        }
        5 if l.journal.len() > 9 => (l.journal[1], 8, "the journal's blocks".to_string()),
        _ => {
            let others: Vec<&Ino> = pool.iter().copied().filter(|x| x.ino != i.ino).collect();
            match c
                .rng
                .pick(&others)
                .and_then(|x| x.runs.first().map(|r| (x, *r)))
            {
                Some((x, r)) => (r.physical, r.len, format!("file {}'s blocks", x.path)),
                None => return Ok(None),
            }
        }
    };
    let desc = if i.has_extents() {
        // A leaf: the root when the tree has depth 0, else a leaf block.
        let leaves: Vec<u64> = i
            .ext_blocks
            .iter()
            .filter(|b| b.1 == 0)
            .map(|b| b.0)
            .collect();
        let (off, stamp) = match c.rng.pick(&leaves) {
            Some(&b) => (b * l.bs, Stamp::ExtBlock(b, i.ino)),
            None => (i.offset + I_BLOCK, Stamp::Inode(i.ino)),
        };
        let (_, at, w) = field!(Eh, eh_entries);
        let entries = c.get_le(off + at, w)?;
        let (_, at, w) = field!(Eh, eh_depth);
        if entries == 0 || c.get_le(off + at, w)? != 0 {
            return Ok(None);
        }
        let e = off + (NODE + ENTRY * c.rng.below(entries) as usize) as u64;
        let (_, at, w) = field!(Extent, ee_block);
        let lblk = c.get_le(e + at, w)?;
        let (_, len_at, len_w) = field!(Extent, ee_len);
        let raw = c.get_le(e + len_at, len_w)?;
        let init_max = u64::from(EXT_INIT_MAX_LEN);
        let (len, unwritten) = if raw > init_max {
            (raw - init_max, init_max)
        } else {
            (raw, 0)
        };
        let n = len.min(count).max(1);
        c.put_le(e + len_at, len_w, n | unwritten)?;
        let (_, at, w) = field!(Extent, ee_start_hi);
        c.put_le(e + at, w, target >> 32)?;
        let (_, at, w) = field!(Extent, ee_start_lo);
        c.put_le(e + at, w, target & 0xffff_ffff)?;
        c.restamp(stamp)?;
        format!("logical {lblk}..{} (of an extent of {len})", lblk + n)
    } else {
        let words = i.inode.block_words();
        let direct = (0..12).take_while(|&k| words[k] != 0).count() as u64;
        let n = direct.min(count).max(1);
        for k in 0..n {
            c.put_le(i.offset + I_BLOCK + 4 * k, size_of::<u32>(), target + k)?;
        }
        c.restamp(Stamp::Inode(i.ino))?;
        format!("logical 0..{n} (direct pointers)")
    };
    Ok(Some(format!(
        "{}: {desc} now at blocks {target}.. ({what})",
        describe(i)
    )))
}
