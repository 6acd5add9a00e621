//! Pass 1's extended attributes, as e2fsck's `check_ext_attr` and
//! `check_large_ea_inode` judge them: the in-inode area, the xattr block
//! (shared by reference count), and references to EA inodes.
//!
//! A block found bad is cleared from every inode naming it: e2fsck does
//! not remember a bad block as checked, so each later inode validates it
//! again and clears it too. (Remembering it as valid after the first
//! inode's repair left the other sharers pointing at it, one more round
//! each.)

use crate::codes::ProblemCode;
use crate::problem::Subject;
use ext4r_format::features::Compat;
use ext4r_format::inode::{Inode, InodeFlags};
use ext4r_format::xattr::{
    parse_xattr_block, parse_xattr_ibody, verify_xattr_block_checksum, xattr_ea_inode_entry_hash,
    xattr_entry_hash, XattrEntries,
};
use ext4r_format::{BlockNr, InodeNr};

use crate::ctx::{Ctx, XattrBlock};
use crate::fix::Fix;

/// Checks in-inode and block xattrs; returns the blocks the xattr block
/// adds to `i_blocks` (0 or 1) and whether any value lives in an EA inode.
/// `inline`: the inode keeps inline data that e2fsck reads through its
/// xattrs (the flag, the feature, not a reserved inode); see
/// [`restampable`].
#[inline]
pub(crate) fn xattrs(
    c: &mut Ctx,
    ino: u32,
    inode: &Inode,
    rec: &[u8],
    inline: bool,
) -> (u64, bool) {
    // Most inodes have neither an in-inode area nor a block: nothing to
    // check, count or note, decided without the calls below (whose frames
    // were most of this function's time).
    if inode.file_acl(c.wide()).0 == 0 && ext4r_format::xattr::ibody_entries_at(rec).is_none() {
        return (0, false);
    }
    some_xattrs(c, ino, inode, rec, inline)
}

/// [`xattrs`] for an inode with an xattr area or block.
#[inline(never)]
fn some_xattrs(c: &mut Ctx, ino: u32, inode: &Inode, rec: &[u8], inline: bool) -> (u64, bool) {
    let (n, ea) = xattrs_inner(c, ino, inode, rec, inline);
    // Always looked at: the EA inodes named are noted for pass 4.
    let refs = has_ea_inode_refs(c, inode, rec);
    (n, ea || refs)
}

/// Whether the inode's xattrs keep values in EA inodes; those inodes are
/// noted as referenced (pass 4 leaves them out of the link count).
fn has_ea_inode_refs(c: &mut Ctx, inode: &Inode, rec: &[u8]) -> bool {
    let mut refs = Vec::new();
    let mut block_refs = false;
    // The in-inode area: after the fixed part and its 4-byte magic.
    if let Some(x) = rec.get(0x80..0x82) {
        let start = 128 + usize::from(u16::from_le_bytes([x[0], x[1]]));
        if rec.get(start..start + 4) == Some(&0xEA02_0000u32.to_le_bytes()[..]) {
            value_inums(&rec[start + 4..], &mut refs);
        }
    }
    let blk = inode.file_acl(c.wide()).0;
    if blk != 0 && c.valid_range(blk, 1) {
        let mut buf = vec![0u8; c.geo().block_size as usize];
        if c.fs()
            .device()
            .read_at(&mut buf, blk * u64::from(c.geo().block_size))
            .is_ok()
            && buf[..4] == 0xEA02_0000u32.to_le_bytes()
        {
            let mut named = Vec::new();
            value_inums(&buf[32..], &mut named);
            block_refs = !named.is_empty();
            // A shared block's entries count once, when it is first seen.
            if c.xattr_block(blk).is_none_or(|x| x.counted <= 1) {
                refs.extend(named);
            }
        }
    }
    let any = !refs.is_empty();
    c.add_ea_refs(refs);
    block_refs || any
}

/// e2fsck's check_ea_in_inode on the in-inode area (`area`: from its
/// magic to the end of the inode), step by step: each entry's header must
/// not overlap what came before, its name and value must fit in what is
/// left, its value must not overlap, and its hash must be right (or 0);
/// then the terminator must not overlap. The first that fails, in
/// e2fsck's words. (Values kept in EA inodes are judged elsewhere.)
fn ibody_scan(ino: u32, area: &[u8]) -> Option<(ProblemCode, String)> {
    let size = area.len();
    let collision = || {
        Some((
            ProblemCode::PR_1_INODE_EA_ALLOC_COLLISION,
            format!("Inode {ino} extended attribute is corrupt (allocation collision)."),
        ))
    };
    let said = |code, what: &str, n: u64| {
        Some((
            code,
            format!("Extended attribute in inode {ino} has a {what} ({n}) which is invalid"),
        ))
    };
    if size < 4 {
        return None;
    }
    // e2fsck's region: allocated ranges, none may overlap another or lie
    // past the area.
    let mut taken: Vec<(usize, usize)> = vec![(0, 4)];
    let mut take = |at: usize, n: usize| -> bool {
        let end = at.saturating_add(n);
        if end > size || taken.iter().any(|&(a, b)| at < b && a < end) {
            return false;
        }
        taken.push((at, end));
        true
    };
    let pad = |n: usize| (n + 3) & !3;
    let mut remain = size - 4;
    let mut at = 4usize;
    while remain >= 16 && area.get(at..at + 4).is_some_and(|w| w != [0; 4]) {
        let e = &area[at..at + 16];
        let name_len = usize::from(e[0]);
        let value_offs = usize::from(u16::from_le_bytes([e[2], e[3]]));
        let value_inum = u32::from_le_bytes([e[4], e[5], e[6], e[7]]);
        let value_size = u32::from_le_bytes([e[8], e[9], e[10], e[11]]);
        let stored = u32::from_le_bytes([e[12], e[13], e[14], e[15]]);
        if !take(at, 16 + pad(name_len)) {
            return collision();
        }
        remain -= 16;
        if pad(name_len) > remain {
            return said(ProblemCode::PR_1_ATTR_NAME_LEN, "namelen", name_len as u64);
        }
        remain -= pad(name_len);
        if value_inum == 0 {
            if value_size as usize > remain {
                return said(
                    ProblemCode::PR_1_ATTR_VALUE_SIZE,
                    "value size",
                    u64::from(value_size),
                );
            }
            let vsize = value_size as usize;
            if vsize > 0 && !take(4 + value_offs, pad(vsize)) {
                return collision();
            }
            let name = area.get(at + 16..at + 16 + name_len).unwrap_or(&[]);
            let value = area
                .get(4 + value_offs..4 + value_offs + pad(vsize))
                .unwrap_or(&[]);
            let ok = stored == 0
                || [false, true]
                    .iter()
                    .any(|&signed| xattr_entry_hash(name, value, signed) == stored);
            if !ok {
                return said(ProblemCode::PR_1_ATTR_HASH, "hash", u64::from(stored));
            }
            remain -= vsize;
        }
        at += 16 + pad(name_len);
    }
    if !take(at, 4) {
        return collision();
    }
    None
}

/// Whether libext2fs's `ext2fs_xattrs_read` takes the inode's xattrs
/// (the in-inode area, then the xattr block), as far as it asks more than
/// the kernel: the entries and their values must fit the area together,
/// and a value kept in place must end inside it even when it is empty
/// (`e_value_offs + e_value_size` at most the area's size), where the
/// kernel looks at the offset of a non-empty value only. e2fsck finds
/// an inline-data inode's `system.data` through that call: an empty value
/// with its offset past the area is "extended attribute not found" to it
/// (damage seed 331, case 15), and a repair that kept the attribute left
/// an inode e2fsck truncates.
pub(crate) fn libext2fs_reads(c: &Ctx, inode: &Inode, rec: &[u8]) -> bool {
    let extra = usize::from(inode.i_extra_isize.get());
    if let Some(area) = rec.get(128 + extra..) {
        if area.get(..4) == Some(&0xEA02_0000u32.to_le_bytes()[..])
            && !values_fit(&area[4..], area.len() - 4)
        {
            return false;
        }
    }
    let blk = inode.file_acl(c.wide()).0;
    let Some(buf) = (blk != 0).then(|| c.read_block(blk)).flatten() else {
        return true;
    };
    // A block's offsets count from its start, its entries after the
    // 32-byte header.
    buf.get(32..)
        .is_none_or(|entries| values_fit(entries, buf.len()))
}

/// libext2fs's walk of an entry list (`entries`, its values' area
/// `values_size` bytes), by its budget: the headers, names and values in
/// place must fit the list's space together, and each value kept in place
/// must end inside its area. False at the first that does not.
fn values_fit(entries: &[u8], values_size: usize) -> bool {
    let pad = |n: usize| (n + 3) & !3;
    let mut remain = entries.len();
    let mut at = 0usize;
    while remain >= 16 && entries.get(at..at + 4).is_some_and(|w| w != [0; 4]) {
        let Some(e) = entries.get(at..at + 16) else {
            break;
        };
        let name = pad(usize::from(e[0]));
        remain -= 16;
        if name > remain {
            return false;
        }
        remain -= name;
        let offs = usize::from(u16::from_le_bytes([e[2], e[3]]));
        let inum = u32::from_le_bytes([e[4], e[5], e[6], e[7]]);
        let size = u32::from_le_bytes([e[8], e[9], e[10], e[11]]) as usize;
        if inum == 0 {
            if size > remain {
                return false;
            }
            if offs.saturating_add(size) > values_size {
                return false;
            }
            remain -= size;
        }
        at += 16 + name;
    }
    true
}

/// The EA inode numbers named by the entry headers at the start of
/// `area`, read raw: an entry the parser rejects (a zero size, say) still
/// holds its EA inode, as e2fsck counts it.
fn value_inums(area: &[u8], out: &mut Vec<u32>) {
    let mut off = 0usize;
    while off + 16 <= area.len() && area[off..off + 4] != [0; 4] {
        let name_len = usize::from(area[off]);
        let inum = u32::from_le_bytes([area[off + 4], area[off + 5], area[off + 6], area[off + 7]]);
        if inum != 0 {
            out.push(inum);
        }
        off += (16 + name_len + 3) & !3;
    }
}

fn xattrs_inner(c: &mut Ctx, ino: u32, inode: &Inode, rec: &[u8], inline: bool) -> (u64, bool) {
    ibody_xattrs(c, ino, inode, rec, inline);
    xattr_block(c, ino, inode)
}

/// The xattrs in the inode's own extra space: references to EA inodes,
/// hashes of an inline-data inode's entries, the area's layout and
/// entries; a bad area is cleared.
fn ibody_xattrs(c: &mut Ctx, ino: u32, inode: &Inode, rec: &[u8], inline: bool) {
    match parse_xattr_ibody(rec) {
        Ok(Some(entries)) => {
            let extra = usize::from(inode.i_extra_isize.get());
            let area = rec.get(128 + extra..).unwrap_or(&[]);
            let restamp = || {
                (inline && !crate::ea_region::collides(area))
                    .then(|| restampable(&entries))
                    .flatten()
            };
            if let Some(found) = ea_inode_reference(c, ino, inode, &entries) {
                report_ea_inode_reference(
                    c,
                    Subject::Inode(ino),
                    found,
                    Fix::ClearIbodyXattrs(ino),
                );
            } else if let Some(hashes) = restamp() {
                let Restamp { name, stored, .. } = &hashes[0];
                c.report(Subject::Inode(ino)).error_fix(
                    1,
                    ProblemCode::EXT4R_1_INLINE_ATTR_HASH,
                    format!(
                        "Extended attribute {name} in inline data inode {ino} has a hash \
                         ({stored}) which is invalid."
                    ),
                    Fix::IbodyXattrHashes(ino, hashes.iter().map(|h| (h.offset, h.hash)).collect()),
                );
            } else if let Some((code, msg)) = ibody_scan(ino, area) {
                c.report(Subject::Inode(ino)).error_fix(
                    1,
                    code,
                    msg,
                    crate::fix::Fix::ClearIbodyXattrs(ino),
                );
            } else if let Some((code, why, _)) = bad_entries(&entries, true) {
                c.report(Subject::Inode(ino)).error_fix(
                    1,
                    code,
                    format!("Inode {ino} has a bad extended attribute area: {why}."),
                    crate::fix::Fix::ClearIbodyXattrs(ino),
                );
            } else if crate::ea_region::collides(area) {
                c.report(Subject::Inode(ino)).error_fix(
                    1,
                    ProblemCode::PR_1_INODE_EA_ALLOC_COLLISION,
                    format!("Inode {ino} extended attribute is corrupt (allocation collision)."),
                    crate::fix::Fix::ClearIbodyXattrs(ino),
                );
            }
        }
        Ok(None) => {}
        Err(e) => {
            let extra = usize::from(inode.i_extra_isize.get());
            let area = rec.get(128 + extra..).unwrap_or(&[]);
            let (code, msg) = ibody_scan(ino, area).unwrap_or_else(|| {
                (
                    ProblemCode::PR_1_ATTR_NAME_LEN,
                    format!("Inode {ino} has a bad extended attribute area: {e}."),
                )
            });
            c.report(Subject::Inode(ino)).error_fix(
                1,
                code,
                msg,
                crate::fix::Fix::ClearIbodyXattrs(ino),
            );
        }
    }
}

/// The inode's xattr block (`i_file_acl`): its address, then (once per
/// block, later inodes sharing the verdict) what it holds and its
/// checksum; a good one is claimed. Returns the blocks it adds to the
/// inode's count.
fn xattr_block(c: &mut Ctx, ino: u32, inode: &Inode) -> (u64, bool) {
    let blk = inode.file_acl(c.wide()).0;
    if blk == 0 {
        return (0, false);
    }
    if !c.sb().has_compat(Compat::EXT_ATTR) || !c.valid_range(blk, 1) {
        // e2fsck marks the inode bad and judges it in pass 2, when an
        // entry names it (process_bad_inode). No entry may name a reserved
        // inode other than the root (the journal, the resize inode, the
        // quota files): e2fsck never says a word of theirs, and leaves it.
        if ino != ext4r_format::inode::ino::ROOT && ino < c.sb().first_ino() {
            return (0, false);
        }
        // Outside the filesystem it is a bad address; without the
        // feature, one that should be zero.
        let (code, msg) = if c.valid_range(blk, 1) {
            (
                ProblemCode::PR_2_FILE_ACL_ZERO,
                format!(
                    "i_file_acl for inode {ino} ({}) is {blk}, should be zero.",
                    crate::pathname::q(ino)
                ),
            )
        } else {
            (
                ProblemCode::PR_2_FILE_ACL_BAD,
                format!(
                    "Extended attribute block for inode {ino} ({}) is invalid ({blk}).",
                    crate::pathname::q(ino)
                ),
            )
        };
        c.report(Subject::Inode(ino))
            .error_fix(2, code, msg, Fix::InodeClearFileAcl(ino));
        return (0, false);
    }
    if let Some(x) = c.xattr_block_mut(blk) {
        x.counted += 1;
        if let Some(code) = x.bad {
            // Judged bad for an earlier inode: judged again (e2fsck marks
            // only good blocks seen), and cleared here too.
            let msg = bad_block_message(code, ino, blk, x.bad_hash);
            c.report(Subject::XattrBlock { ino, block: blk }).error_fix(
                1,
                code,
                msg,
                Fix::InodeClearFileAcl(ino),
            );
            return (0, false);
        }
        return (u64::from(x.valid), false);
    }
    let mut buf = vec![0u8; c.geo().block_size as usize];
    let read = c
        .fs()
        .device()
        .read_at(&mut buf, blk * u64::from(c.geo().block_size));
    let parsed = read
        .as_ref()
        .ok()
        .and_then(|()| parse_xattr_block(&buf).ok());
    let Some((hdr, entries)) = parsed else {
        unparsed_block(c, ino, blk, &buf, read.is_err());
        return (0, false);
    };
    let (bad, bad_hash) = block_entries(c, ino, inode, blk, &entries);
    if bad.is_none()
        && c.csum()
        && verify_xattr_block_checksum(c.sb().csum_seed(), BlockNr(blk), &buf).is_err()
    {
        // As e2fsck: only a block that passes every other check has its
        // checksum rewritten.
        c.report(Subject::XattrBlock { ino, block: blk }).error_fix(
            1,
            ProblemCode::PR_1_EA_BLOCK_ONLY_CSUM_INVALID,
            format!(
                "Inode {ino} extended attribute block {blk} passes checks, but checksum does \
                 not match block."
            ),
            Fix::XattrBlockChecksum(blk),
        );
    }
    c.add_xattr_block(
        blk,
        XattrBlock {
            refcount: hdr.h_refcount.get(),
            counted: 1,
            valid: bad.is_none(),
            bad,
            bad_hash,
        },
    );
    if bad.is_some() {
        // Cleared from the inode: neither claimed nor counted in i_blocks.
        return (0, false);
    }
    c.claim(blk, 1, ino);
    (1, false)
}

/// An xattr block that could not be read or parsed, in e2fsck's words for
/// what is wrong: unreadable, not an xattr block, more than one block, or
/// entries that overlap. Cleared from the inode, and remembered bad.
fn unparsed_block(c: &mut Ctx, ino: u32, blk: u64, buf: &[u8], read_failed: bool) {
    let magic = buf[..4] == ext4r_format::xattr::XATTR_MAGIC.to_le_bytes();
    let h_blocks = u32::from_le_bytes([buf[8], buf[9], buf[10], buf[11]]);
    let code = if read_failed {
        ProblemCode::PR_1_READ_EA_BLOCK
    } else if !magic {
        ProblemCode::PR_1_BAD_EA_BLOCK
    } else if h_blocks != 1 {
        ProblemCode::PR_1_EA_MULTI_BLOCK
    } else {
        ProblemCode::PR_1_EA_ALLOC_COLLISION
    };
    c.report(Subject::XattrBlock { ino, block: blk }).error_fix(
        1,
        code,
        bad_block_message(code, ino, blk, 0),
        crate::fix::Fix::InodeClearFileAcl(ino),
    );
    c.add_xattr_block(
        blk,
        XattrBlock {
            refcount: 0,
            counted: 1,
            valid: false,
            bad: Some(code),
            bad_hash: 0,
        },
    );
}

/// The entries of a parsed xattr block: references to EA inodes, hashes,
/// names and values. Returns the problem that makes the block bad (it is
/// cleared from the inode) and the hash it reported.
fn block_entries(
    c: &mut Ctx,
    ino: u32,
    inode: &Inode,
    blk: u64,
    entries: &XattrEntries<'_>,
) -> (Option<ProblemCode>, u32) {
    let mut bad = None;
    let mut bad_hash = 0;
    if let Some(found) = ea_inode_reference(c, ino, inode, entries) {
        if found.2.is_none() {
            bad = Some(found.0);
        }
        report_ea_inode_reference(
            c,
            Subject::XattrBlock { ino, block: blk },
            found,
            Fix::InodeClearFileAcl(ino),
        );
    } else if let Some(stored) = zero_hash_in_block(entries) {
        // e2fsck's check_ext_attr compares a block entry's hash as it is:
        // only an in-inode entry may leave it 0 (older kernels did).
        c.report(Subject::XattrBlock { ino, block: blk }).error_fix(
            1,
            ProblemCode::PR_1_ATTR_HASH,
            format!("Extended attribute in inode {ino} has a hash ({stored}) which is invalid"),
            crate::fix::Fix::InodeClearFileAcl(ino),
        );
        bad = Some(ProblemCode::PR_1_ATTR_HASH);
    } else if let Some((code, _, stored)) = bad_entries(entries, false) {
        c.report(Subject::XattrBlock { ino, block: blk }).error_fix(
            1,
            code,
            bad_block_message(code, ino, blk, stored),
            crate::fix::Fix::InodeClearFileAcl(ino),
        );
        bad = Some(code);
        bad_hash = stored;
    }
    (bad, bad_hash)
}

/// What e2fsck's check_large_ea_inode finds wrong with an entry whose
/// value lives in an EA inode: a number outside the inodes a value can
/// live in, or a target whose hash disagrees (an EA inode: the entry's
/// hash is wrong; not one: the reference is), unless it is a Lustre-style
/// reference back to its parent. The code, its message, and whether the
/// fix is to set the target's missing EA_INODE flag rather than clear.
fn ea_inode_reference(
    c: &Ctx,
    ino: u32,
    parent: &Inode,
    entries: &XattrEntries<'_>,
) -> Option<(ProblemCode, String, Option<u32>)> {
    let first = c.sb().first_ino();
    let last = c.sb().s_inodes_count.get();
    for e in entries.iter().filter_map(Result::ok) {
        let n = e.entry.e_value_inum.get();
        if n == 0 {
            continue;
        }
        let illegal = || {
            (
                ProblemCode::PR_1_ATTR_VALUE_EA_INODE,
                format!("Inode {ino} has illegal extended attribute value inode {n}."),
                None,
            )
        };
        if n < first || n > last {
            return Some(illegal());
        }
        let Ok(target) = c.fs().inode(InodeNr(n)) else {
            continue;
        };
        let t = &target.inode;
        let stored = e.entry.e_hash.get();
        let is_ea = t.flags().contains(InodeFlags::EA_INODE);
        let hash_ok = [false, true]
            .iter()
            .any(|&s| xattr_ea_inode_entry_hash(e.name, t.i_atime.get(), s) == stored);
        let lustre = t.i_mtime.get() == ino && t.i_generation.get() == parent.i_generation.get();
        if !hash_ok && !lustre {
            return Some(if is_ea {
                (
                    ProblemCode::PR_1_ATTR_HASH,
                    format!(
                        "Extended attribute in inode {ino} has a hash ({stored}) which is invalid"
                    ),
                    None,
                )
            } else {
                illegal()
            });
        }
        if !is_ea {
            return Some((
                ProblemCode::PR_1_ATTR_SET_EA_INODE_FL,
                format!("EA inode {n} for parent inode {ino} missing EA_INODE flag."),
                Some(n),
            ));
        }
    }
    None
}

/// The blocks the values in EA inodes add to their owner's `i_blocks`:
/// each value's size in whole clusters, where the entry's hash matches its
/// EA inode (e2fsck's check_large_ea_inode charges nothing otherwise, as
/// for Lustre's old references); and how many values were charged (the
/// inodes quota counts for the owner besides itself).
pub(crate) fn ea_inode_charge(c: &Ctx, inode: &Inode, rec: &[u8]) -> (u64, u64) {
    let cluster = u64::from(c.geo().block_size) << c.geo().cluster_bits;
    let ratio = 1u64 << c.geo().cluster_bits;
    let first = c.sb().first_ino();
    let last = c.sb().s_inodes_count.get();
    let charge = |entries: &XattrEntries<'_>| -> (u64, u64) {
        let mut total = 0;
        let mut inodes = 0;
        for e in entries.iter().filter_map(Result::ok) {
            let n = e.entry.e_value_inum.get();
            if n < first || n > last {
                continue;
            }
            let Ok(t) = c.fs().inode(InodeNr(n)) else {
                continue;
            };
            let stored = e.entry.e_hash.get();
            let hash = t.inode.i_atime.get();
            if [false, true]
                .iter()
                .any(|&s| xattr_ea_inode_entry_hash(e.name, hash, s) == stored)
            {
                total += u64::from(e.entry.e_value_size.get()).div_ceil(cluster) * ratio;
                inodes += 1;
            }
        }
        (total, inodes)
    };
    let mut total = (0, 0);
    let mut add = |(b, n): (u64, u64)| {
        total.0 += b;
        total.1 += n;
    };
    if let Ok(Some(entries)) = parse_xattr_ibody(rec) {
        add(charge(&entries));
    }
    let blk = inode.file_acl(c.wide()).0;
    if blk != 0 && c.valid_range(blk, 1) {
        let mut buf = vec![0u8; c.geo().block_size as usize];
        if c.fs()
            .device()
            .read_at(&mut buf, blk * u64::from(c.geo().block_size))
            .is_ok()
        {
            if let Ok((_, entries)) = parse_xattr_block(&buf) {
                add(charge(&entries));
            }
        }
    }
    total
}

/// Reports [`ea_inode_reference`]'s finding with its fix: the flag set on
/// the target, or `clear` (the inode's xattr block or in-inode area).
fn report_ea_inode_reference(
    c: &mut Ctx,
    subject: Subject,
    found: (ProblemCode, String, Option<u32>),
    clear: Fix,
) {
    let (code, msg, set_flag) = found;
    let fix = match set_flag {
        Some(n) => {
            c.note_ea_flag_missing(n);
            Fix::InodeSetFlags(n, InodeFlags::EA_INODE.bits())
        }
        None => clear,
    };
    c.report(subject).error_fix(1, code, msg, fix);
}

/// A block entry whose stored hash is 0 where its value's hash is not.
fn zero_hash_in_block(entries: &XattrEntries<'_>) -> Option<u32> {
    entries.iter().filter_map(Result::ok).find_map(|e| {
        let stored = e.entry.e_hash.get();
        let hashes_to_zero = [false, true]
            .iter()
            .any(|&signed| e.compute_hash(signed).is_none_or(|h| h == 0));
        (stored == 0 && !hashes_to_zero).then_some(stored)
    })
}

/// An in-inode entry whose hash is to be rewritten.
struct Restamp {
    /// The entry's offset in the inode record.
    offset: usize,
    /// Its hash as e2fsprogs and the kernel compute it.
    hash: u32,
    /// Its name with the prefix, for the report.
    name: String,
    /// The hash it has.
    stored: u32,
}

/// The in-inode entries of an inline-data inode to restamp, when all an
/// area has wrong is hashes: every entry parses, and the only ones found
/// bad keep their value in the inode with a stored hash (not 0) that
/// matches neither variant. None when there is nothing to restamp or
/// something else is wrong.
///
/// e2fsck would clear the whole area (PR_1_ATTR_HASH) in check_ea_in_inode
/// but never gets there: its test for an inline-data inode without
/// `system.data` reads the xattrs through libext2fs first, whose reader
/// takes a hash it cannot match for an old Lustre reference and reads the
/// value's EA inode, number 0 here: EXT2_ET_BAD_INODE_NUM, not one of the
/// xattr errors that test truncates on, so e2fsck aborts and writes
/// nothing. Clearing the area would take `system.data` with it and the
/// next round truncate the file (damage seed 13 case 34); the hash of an
/// in-inode entry guards nothing the kernel reads, so a new one keeps all
/// e2fsck keeps and leaves nothing for it to find.
fn restampable(entries: &XattrEntries<'_>) -> Option<Vec<Restamp>> {
    let mut out = Vec::new();
    for e in entries.iter() {
        let e = e.ok()?;
        let stored = e.entry.e_hash.get();
        let (Some(hash), Some(signed)) = (e.compute_hash(false), e.compute_hash(true)) else {
            // The value is in an EA inode: ea_inode_reference judged it.
            continue;
        };
        if stored != 0 && stored != hash && stored != signed {
            let prefix = ext4r_format::xattr::xattr_prefix(e.entry.e_name_index).unwrap_or("");
            out.push(Restamp {
                offset: e.offset,
                hash,
                name: format!("{prefix}{}", String::from_utf8_lossy(e.name)),
                stored,
            });
        }
    }
    (!out.is_empty()).then_some(out)
}

/// e2fsck's words for an xattr block judged bad (`hash`: the bad entry's
/// stored hash, for PR_1_ATTR_HASH).
fn bad_block_message(code: ProblemCode, ino: u32, blk: u64, hash: u32) -> String {
    match code {
        ProblemCode::PR_1_READ_EA_BLOCK => {
            format!("Error reading extended attribute block {blk} for inode {ino}.")
        }
        ProblemCode::PR_1_EA_MULTI_BLOCK => {
            format!("Extended attribute block {blk} has h_blocks > 1.")
        }
        ProblemCode::PR_1_EA_ALLOC_COLLISION => {
            format!("Extended attribute block {blk} is corrupt (allocation collision).")
        }
        ProblemCode::PR_1_EA_BAD_NAME => {
            format!("Extended attribute block {blk} is corrupt (invalid name).")
        }
        ProblemCode::PR_1_EA_BAD_VALUE => {
            format!("Extended attribute block {blk} is corrupt (invalid value).")
        }
        ProblemCode::PR_1_ATTR_HASH => {
            format!("Extended attribute in inode {ino} has a hash ({hash}) which is invalid")
        }
        _ => format!("Inode {ino} has a bad extended attribute block {blk}."),
    }
}

/// Entries that fail to parse or whose stored hash matches neither hash
/// variant (`in_inode`: in the inode, where 0 means "not computed"): the
/// first one's code, our words for it, and its stored hash.
fn bad_entries(entries: &XattrEntries<'_>, in_inode: bool) -> Option<(ProblemCode, String, u32)> {
    for e in entries.iter() {
        let e = match e {
            Ok(e) => e,
            // e2fsck's words for what does not fit: the name, or the value.
            Err(err) => {
                let why = err.to_string();
                let code = match (in_inode, why.contains("name")) {
                    (true, true) => ProblemCode::PR_1_ATTR_NAME_LEN,
                    (true, false) => ProblemCode::PR_1_ATTR_VALUE_SIZE,
                    (false, true) => ProblemCode::PR_1_EA_BAD_NAME,
                    (false, false) => ProblemCode::PR_1_EA_BAD_VALUE,
                };
                return Some((code, why, 0));
            }
        };
        // A block entry with no name index (e2fsck's ext_attr_ver 2, the
        // only one ext4 writes) has no prefix to name it by: invalid.
        if !in_inode && e.entry.e_name_index == 0 {
            return Some((
                ProblemCode::PR_1_EA_BAD_NAME,
                format!("entry at offset {} has no name index", e.offset),
                0,
            ));
        }
        let stored = e.entry.e_hash.get();
        // In the inode 0 means "not computed" (older kernels).
        if stored != 0 || !in_inode {
            let ok = [false, true]
                .iter()
                .any(|&signed| e.compute_hash(signed).is_none_or(|h| h == stored));
            if !ok {
                return Some((
                    ProblemCode::PR_1_ATTR_HASH,
                    format!("hash of entry at offset {} does not match", e.offset),
                    stored,
                ));
            }
        }
    }
    None
}

pub(crate) fn finish_xattr_blocks(c: &mut Ctx) {
    let bad: Vec<(u64, u32, u32)> = c
        .xattr_blocks()
        .filter(|(_, x)| x.valid && x.refcount != x.counted)
        .map(|(b, x)| (*b, x.refcount, x.counted))
        .collect();
    for (b, r, n) in bad {
        c.report(Subject::Block(b)).error_fix(
            1,
            ProblemCode::PR_1_EXTATTR_REFCOUNT,
            format!("Extended attribute block {b} has reference count {r}, should be {n}."),
            Fix::XattrRefcount(b, n),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::values_fit;

    /// One entry header: name length, offset, EA inode, value size.
    fn entry(name: &[u8], offs: u16, inum: u32, size: u32) -> Vec<u8> {
        let mut e = vec![name.len() as u8, 7];
        e.extend(offs.to_le_bytes());
        e.extend(inum.to_le_bytes());
        e.extend(size.to_le_bytes());
        e.extend(0u32.to_le_bytes());
        e.extend(name);
        e.resize((e.len() + 3) & !3, 0);
        e
    }

    #[test]
    fn libext2fs_budget_and_offsets() {
        // 92 bytes of in-inode list (256-byte inode, 32 extra bytes).
        let area = |es: &[Vec<u8>]| {
            let mut a: Vec<u8> = es.concat();
            a.resize(92, 0);
            a
        };
        // system.data, empty, at offset 0 and at the area's end: read.
        assert!(values_fit(&area(&[entry(b"data", 0, 0, 0)]), 92));
        assert!(values_fit(&area(&[entry(b"data", 92, 0, 0)]), 92));
        // Empty but past the area: refused (the kernel would read it).
        assert!(!values_fit(&area(&[entry(b"data", 128, 0, 0)]), 92));
        // A value running past the area, and sizes past the budget.
        assert!(!values_fit(&area(&[entry(b"data", 80, 0, 16)]), 92));
        assert!(!values_fit(&area(&[entry(b"data", 40, 0, 80)]), 92));
        // A value in an EA inode keeps no offset in the area.
        assert!(values_fit(&area(&[entry(b"big", 0, 12, 70_000)]), 92));
        // A name longer than what is left.
        let mut long = entry(&[b'n'; 80], 0, 0, 0);
        long.truncate(92);
        assert!(!values_fit(&area(&[long]), 92));
    }
}
