//! The journal (its superblock, and on the live snapshot the descriptor,
//! commit, revoke and data blocks of the transactions still to replay),
//! the orphan list and orphan file, and quota files.

use anyhow::Result;

use ext4r_format::jbd2::{
    block_type, CommitHeader, JournalBlockTag3, JournalHeader, JournalSuperblock as Jsb,
    RevokeHeader, JBD2_MAGIC,
};
use zerocopy::FromBytes;

use super::{Ctx, Stamp};
use crate::damage::mutate::inode::describe;

/// A field (see `field!`) with the values to try in it.
fn with(
    (name, off, width): (&'static str, u64, usize),
    values: Vec<u64>,
) -> (&'static str, u64, usize, Vec<u64>) {
    (name, off, width, values)
}

/// The journal superblock at the front of `b` (a block or its first KiB).
fn jsb_of(b: &[u8]) -> Result<&Jsb> {
    Jsb::ref_from_prefix(b)
        .map(|(s, _)| s)
        .map_err(|_| anyhow::anyhow!("short journal superblock"))
}

impl Ctx<'_> {
    /// [`Ctx::field`] for jbd2's big-endian fields.
    fn field_be(&mut self, off: u64, width: usize, extra: &[u64]) -> Result<String> {
        let b = self.img.read(off, width)?;
        let old = b.iter().fold(0u64, |a, &x| (a << 8) | u64::from(x));
        let new = self.wrong(old, width, extra);
        let out: Vec<u8> = (0..width).rev().map(|i| (new >> (8 * i)) as u8).collect();
        self.img.write(off, &out)?;
        Ok(format!("{old} -> {new}"))
    }
}

pub fn journal(c: &mut Ctx<'_>, snap: bool) -> Result<Option<String>> {
    let l = c.l;
    let Some(&jsb_block) = l.journal.first() else {
        return Ok(None);
    };
    if snap && c.rng.chance(2, 3) {
        if let Some(d) = log_block(c)? {
            return Ok(Some(d));
        }
    }
    let base = jsb_block * l.bs;
    if c.rng.chance(1, 4) {
        let what = c.scribble(base, 0x100)?;
        return Ok(Some(format!(
            "journal superblock (block {jsb_block}): {what}"
        )));
    }
    let raw = c.img.read(base, 1024)?;
    let jsb = jsb_of(&raw)?;
    let maxlen = u64::from(jsb.s_maxlen.get());
    let journal_len = l.journal.len() as u64;
    // The header's fields, at the superblock's s_header.
    let (_, at, _) = field!(Jsb, s_header);
    let header = |(name, off, width): (&'static str, u64, usize)| (name, at + off, width);
    // Bits of the feature words are flipped rather than set.
    let flip = |old: u32, bits: &[u64]| bits.iter().map(|b| u64::from(old) ^ b).collect();
    let fields: Vec<(&str, u64, usize, Vec<u64>)> = vec![
        with(header(field!(JournalHeader, h_magic)), vec![0]),
        with(header(field!(JournalHeader, h_blocktype)), vec![1, 3, 5]),
        with(field!(Jsb, s_blocksize), vec![l.bs * 2, 512, 0]),
        with(
            field!(Jsb, s_maxlen),
            vec![
                maxlen + 1,
                maxlen.saturating_sub(1),
                journal_len + 100,
                1024,
                0,
            ],
        ),
        with(field!(Jsb, s_first), vec![0, 2, maxlen]),
        with(field!(Jsb, s_sequence), vec![0]),
        with(
            field!(Jsb, s_start),
            vec![0, 1, maxlen.saturating_sub(1), maxlen + 5],
        ),
        with(field!(Jsb, s_errno), vec![0xffff_fffb]),
        with(
            field!(Jsb, s_feature_compat),
            flip(jsb.s_feature_compat.get(), &[1]),
        ),
        with(
            field!(Jsb, s_feature_incompat),
            flip(
                jsb.s_feature_incompat.get(),
                &[1, 2, 4, 8, 0x10, 0x20, 0x80],
            ),
        ),
        with(
            field!(Jsb, s_feature_ro_compat),
            flip(jsb.s_feature_ro_compat.get(), &[1]),
        ),
        with(field!(Jsb, s_nr_users), vec![0, 2, 49]),
        with(field!(Jsb, s_checksum_type), vec![0, 1, 4]),
        with(field!(Jsb, s_num_fc_blks), vec![maxlen]),
        with(field!(Jsb, s_checksum), vec![]),
    ];
    let k = c.rng.index(fields.len());
    let (name, off, width, extra) = &fields[k];
    let restamp = *name != "s_checksum" && c.rng.chance(1, 2);
    let what = c.field_be(base + off, *width, extra)?;
    let note = c.finish(Stamp::JournalSb(jsb_block), restamp)?;
    Ok(Some(format!(
        "journal superblock (block {jsb_block}) {name}: {what}{note}"
    )))
}

/// A block of a transaction still to replay: a descriptor's tag, a commit
/// or revoke block, a journalled copy of a metadata block.
fn log_block(c: &mut Ctx<'_>) -> Result<Option<String>> {
    let l = c.l;
    let raw = c.img.block(l.journal[0])?;
    let jsb = jsb_of(&raw)?;
    let (maxlen, first, seq0, start) = (
        u64::from(jsb.s_maxlen.get()),
        u64::from(jsb.s_first.get()),
        jsb.s_sequence.get(),
        u64::from(jsb.s_start.get()),
    );
    if start == 0 || maxlen > l.journal.len() as u64 || first == 0 || first >= maxlen {
        return Ok(None);
    }
    // Walk the live log: headers carry the magic and a sequence at or
    // past s_sequence; the blocks between a descriptor and the next
    // header are journalled data.
    let mut live: Vec<(u64, &str)> = Vec::new();
    let mut idx = start;
    let mut in_desc = false;
    for _ in 0..maxlen.min(100_000) {
        let fsb = l.journal[idx as usize];
        let b = c.img.read(fsb * l.bs, 12)?;
        let h = JournalHeader::ref_from_bytes(&b)
            .map_err(|_| anyhow::anyhow!("short journal block header"))?;
        let is_header = h.h_magic.get() == JBD2_MAGIC;
        let seq = h.h_sequence.get();
        if is_header {
            if seq.wrapping_sub(seq0) > 1_000_000 {
                break;
            }
            let kind = match h.h_blocktype.get() {
                block_type::DESCRIPTOR => "descriptor",
                block_type::COMMIT => "commit",
                block_type::REVOKE => "revoke",
                _ => "header",
            };
            in_desc = kind == "descriptor";
            live.push((idx, kind));
        } else if in_desc {
            live.push((idx, "data"));
        } else {
            break;
        }
        idx += 1;
        if idx >= maxlen {
            idx = first;
        }
        if idx == start {
            break;
        }
    }
    let Some(&(idx, kind)) = c.rng.pick(&live) else {
        return Ok(None);
    };
    let fsb = l.journal[idx as usize];
    let base = fsb * l.bs;
    let head = format!("journal block {idx} (block {fsb}, a live {kind} block)");
    let what = match kind {
        "descriptor" if c.rng.chance(2, 3) => {
            // The first tag: where its data block is replayed to.
            let mut to = c.meta_blocks();
            to.push(c.any_block());
            to.push(l.geo.blocks_count + 3);
            // Tags follow the block's header; read as v3 tags.
            let tag = size_of::<JournalHeader>() as u64;
            if c.rng.chance(3, 4) {
                let (name, off, width) = field!(JournalBlockTag3, t_blocknr);
                let what = c.field_be(base + tag + off, width, &to)?;
                format!("first tag {name}: {what}")
            } else {
                let (name, off, width) = field!(JournalBlockTag3, t_flags);
                let what = c.field_be(base + tag + off, width, &[8, 2, 1, 0])?;
                format!("first tag {name}: {what}")
            }
        }
        "commit" if c.rng.chance(1, 2) => {
            let (name, off, width, extra) = match c.rng.below(3) {
                0 => with(field!(JournalHeader, h_sequence), vec![]),
                1 => with(field!(CommitHeader, h_chksum_type), vec![0, 4]),
                _ => {
                    // The first of the eight checksum words.
                    let (_, off, _) = field!(CommitHeader, h_chksum);
                    ("h_chksum[0]", off, 4, vec![0])
                }
            };
            format!("{name}: {}", c.field_be(base + off, width, &extra)?)
        }
        "revoke" if c.rng.chance(1, 2) => {
            let (name, off, width) = field!(RevokeHeader, r_count);
            let what = c.field_be(base + off, width, &[0, 16, l.bs + 4])?;
            format!("{name}: {what}")
        }
        "data" if c.rng.chance(1, 2) => {
            let junk: Vec<u8> = (0..l.bs).map(|_| c.rng.next() as u8).collect();
            c.img.put_block(fsb, &junk)?;
            "filled with random bytes".to_string()
        }
        _ => c.scribble(base, if kind == "data" { l.bs as usize } else { 64 })?,
    };
    Ok(Some(format!("{head}: {what}")))
}

/// The orphan list in the superblock, or a block of the orphan file.
pub fn orphan(c: &mut Ctx<'_>) -> Result<Option<String>> {
    let l = c.l;
    let ofile = l
        .get(l.sb.s_orphan_file_inum.get())
        .filter(|i| !i.runs.is_empty());
    let live: Vec<u64> = l
        .inodes
        .iter()
        .filter(|i| i.ino >= l.sb.first_ino() && i.paths > 0)
        .map(|i| u64::from(i.ino))
        .collect();
    let one_live = c.rng.pick(&live).copied().unwrap_or(12);
    let count = u64::from(l.sb.s_inodes_count.get());
    match ofile {
        Some(of) if c.rng.chance(2, 3) => {
            let Some(&(lblk, pblk)) = c.rng.pick(&of.blocks().collect::<Vec<_>>()) else {
                return Ok(None);
            };
            let base = pblk * l.bs;
            let head = format!("orphan file (inode {}) block {lblk} (block {pblk})", of.ino);
            if c.rng.chance(1, 4) {
                return Ok(Some(format!(
                    "{head}: {}",
                    c.scribble(base, l.bs as usize)?
                )));
            }
            let restamp = c.restamp_chosen();
            let (name, off, extra) = match c.rng.below(4) {
                0 | 1 => {
                    let k = c.rng.below((l.bs - 8) / 4);
                    (format!("slot {k}"), 4 * k, vec![one_live, count + 1, 2, 11])
                }
                2 => ("ob_magic".to_string(), l.bs - 8, vec![0]),
                _ => ("ob_checksum".to_string(), l.bs - 4, vec![]),
            };
            let what = c.field(base + off, 4, &extra)?;
            let note = c.finish(Stamp::OrphanBlock(pblk, of.ino), restamp)?;
            Ok(Some(format!("{head} {name}: {what}{note}")))
        }
        _ => {
            let restamp = c.restamp_chosen();
            let off =
                1024 + std::mem::offset_of!(ext4r_format::superblock::Superblock, s_last_orphan);
            let what = c.field(off as u64, 4, &[one_live, one_live, 2, count + 1])?;
            let note = c.finish(Stamp::Super, restamp)?;
            let who = l
                .get(c.get_le(off as u64, 4)? as u32)
                .map(describe)
                .unwrap_or_default();
            Ok(Some(format!(
                "superblock s_last_orphan: {what} {who}{note}"
            )))
        }
    }
}

/// A block of a quota file (the header, tree blocks, usage entries).
pub fn quota(c: &mut Ctx<'_>) -> Result<Option<String>> {
    let l = c.l;
    let qs: Vec<_> = [
        l.sb.s_usr_quota_inum.get(),
        l.sb.s_grp_quota_inum.get(),
        l.sb.s_prj_quota_inum.get(),
    ]
    .iter()
    .filter_map(|&q| l.get(q))
    .filter(|i| !i.runs.is_empty())
    .collect();
    let Some(&q) = c.rng.pick(&qs) else {
        return Ok(None);
    };
    let blocks: Vec<(u64, u64)> = q.blocks().collect();
    let Some(&(lblk, pblk)) = c.rng.pick(&blocks) else {
        return Ok(None);
    };
    let base = pblk * l.bs;
    let head = format!("quota file (inode {}) block {lblk} (block {pblk})", q.ino);
    let what = match c.rng.below(4) {
        0 if lblk == 0 => format!("header dqh_magic: {}", c.field(base, 4, &[0])?),
        1 if lblk == 0 => format!("header dqh_version: {}", c.field(base + 4, 4, &[0, 2])?),
        2 => {
            c.img.put_block(pblk, &vec![0u8; l.bs as usize])?;
            "zeroed".to_string()
        }
        _ => c.scribble(base, l.bs as usize)?,
    };
    Ok(Some(format!("{head}: {what}")))
}
