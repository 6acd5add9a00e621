//! More of e2fsck's per-inode rules in pass 1 (e2fsck/pass1.c): the
//! reserved inodes' modes, the quota and orphan-file inodes, flags that
//! disagree with the features or with what the inode holds, timestamps
//! from before 1970 stored the old way, and the encryption context.

use crate::codes::ProblemCode;
use crate::problem::Subject;
use ext4r_format::features::{Compat, Incompat, RoCompat};
use ext4r_format::inode::{ino as special, Inode, InodeFlags};
use ext4r_format::InodeNr;

use crate::ctx::Ctx;
use crate::fix::Fix;

const S_IFMT: u16 = 0o170_000;
const S_IFREG: u16 = 0o100_000;
const S_IFDIR: u16 = 0o040_000;

/// The reserved quota inodes (user, group), whatever the superblock names.
fn quota_reserved(ino: u32) -> bool {
    ino == special::USR_QUOTA || ino == special::GRP_QUOTA
}

/// Whether the inode holds anything (e2fsck's "is not in use, but
/// contains data" test).
fn holds_data(inode: &Inode) -> bool {
    inode.links_count() != 0 || inode.i_blocks_lo.get() != 0 || inode.block_words()[0] != 0
}

/// Reserved inodes below `s_first_ino` other than the bad-block list, the
/// root and the journal: a quota inode the superblock does not use must
/// be empty; the others have no mode (the boot loader inode may be a
/// file, the resize inode is one).
pub(crate) fn reserved(c: &mut Ctx, ino: u32, inode: &Inode, rec: &[u8]) {
    if quota_reserved(ino) {
        // Named by the superblock with the feature on, it is judged as a
        // special inode; otherwise it must hold nothing.
        if holds_data(inode) {
            c.report(Subject::Inode(ino)).error_fix(
                1,
                ProblemCode::PR_1_QUOTA_INODE_NOT_CLEAR,
                format!("Quota inode {ino} is not in use, but contains data."),
                Fix::ZeroInode(ino),
            );
        }
        return;
    }
    let mode = inode.mode();
    let bad = match ino {
        special::BOOT_LOADER => mode & S_IFMT == S_IFDIR,
        special::RESIZE => mode != 0 && mode & S_IFMT != S_IFREG,
        _ => mode != 0,
    };
    if bad {
        // e2fsck's %Q with no directory: the reserved inode's name.
        let name = crate::pathname::path_in(c.fs(), 0, ino);
        c.report(Subject::Inode(ino)).error_fix(
            1,
            ProblemCode::PR_1_RESERVED_BAD_MODE,
            format!("Reserved inode {ino} ({name}) has invalid mode."),
            Fix::InodeMode(ino, 0),
        );
    }
    if ino != special::RESIZE {
        reserved_blocks(
            c,
            ino,
            inode,
            rec,
            if bad && c.repairing() { 0 } else { mode },
        );
    }
}

/// e2fsck's pass 1 on a reserved inode whose mode (`mode`, as repaired)
/// maps no blocks: both inline-data and extents flags, its xattrs, then
/// check_blocks: no index flag, no size past what its map could address,
/// no blocks counted but an xattr block. One that is a file or directory
/// (possible for the boot loader inode, or for any when a damaged
/// descriptor points at the wrong table) has its map walked as
/// check_blocks walks every inode: its blocks are in use (e2fsck marks
/// them; a repair that did not left "+block" bitmap differences).
fn reserved_blocks(c: &mut Ctx, ino: u32, inode: &Inode, rec: &[u8], mode: u16) {
    if matches!(mode & S_IFMT, S_IFREG | S_IFDIR) {
        let flags = inode.flags();
        if !flags.contains(InodeFlags::INLINE_DATA) {
            if c.sb().has_incompat(Incompat::EXTENTS) && flags.contains(InodeFlags::EXTENTS) {
                let _ = crate::pass1_extents::extents(c, ino, inode, false);
            } else {
                let _ = crate::pass1_map::blockmap(c, ino, inode, false);
            }
        }
        return;
    }
    if mode & S_IFMT == 0o120_000 {
        return;
    }
    let kind = ext4r::fs::FileKind::from_mode(mode);
    if let Some((code, msg, fix, _)) = crate::idata_extents::resolve(c, ino, inode, kind, rec.len())
    {
        let cleared = matches!(fix, Fix::ClearInode(_));
        c.report(Subject::Inode(ino)).error_fix(1, code, msg, fix);
        if cleared {
            return;
        }
    }
    let (ea_blocks, _) = crate::pass1_xattr::xattrs(c, ino, inode, rec, false);
    let flags = inode.flags();
    if flags.contains(InodeFlags::INDEX) {
        c.report(Subject::Inode(ino)).error_fix(
            1,
            ProblemCode::PR_1_HTREE_NODIR,
            format!("Inode {ino} has INDEX_FL flag set but is not a directory."),
            Fix::InodeClearFlags(ino, InodeFlags::INDEX.bits()),
        );
    }
    let bs = u64::from(c.geo().block_size);
    let size = inode.size();
    let extents = c.sb().has_incompat(Incompat::EXTENTS) && flags.contains(InodeFlags::EXTENTS);
    let too_big = if extents {
        size > (1u64 << (32 + bs.trailing_zeros())) - 1
    } else {
        size > blockmap_max_bytes(bs)
    };
    if too_big {
        c.report(Subject::Inode(ino)).error_fix(
            1,
            ProblemCode::PR_1_BAD_I_SIZE,
            format!("Inode {ino}, i_size is {size}, should be 0."),
            Fix::InodeSize(ino, 0),
        );
    }
    let huge = c.sb().has_ro_compat(RoCompat::HUGE_FILE);
    let have = inode.blocks_count(huge, c.geo().block_size);
    let blocks = ea_blocks << c.geo().cluster_bits;
    let want = blocks * (bs / 512);
    if have != want && c.sb().s_creator_os.get() != 1 {
        c.report(Subject::Inode(ino)).error_fix(
            1,
            ProblemCode::PR_1_BAD_I_BLOCKS,
            format!("Inode {ino}, i_blocks is {have}, should be {want}."),
            Fix::InodeBlocks(ino, blocks),
        );
    }
}

/// The quota inodes the superblock names (with the quota feature) and the
/// orphan file are regular files.
pub(crate) fn special_mode(c: &mut Ctx, ino: u32, inode: &Inode) {
    let sb = c.sb();
    let quota = sb.has_ro_compat(RoCompat::QUOTA)
        && [
            sb.s_usr_quota_inum.get(),
            sb.s_grp_quota_inum.get(),
            sb.s_prj_quota_inum.get(),
        ]
        .contains(&ino);
    let orphan = sb.has_compat(Compat::ORPHAN_FILE) && sb.s_orphan_file_inum.get() == ino;
    if inode.mode() & S_IFMT == S_IFREG || !(quota || orphan) {
        return;
    }
    let (code, what) = if quota {
        (
            ProblemCode::PR_1_QUOTA_BAD_MODE,
            "Quota inode is not a regular file.".to_string(),
        )
    } else {
        (
            ProblemCode::PR_1_ORPHAN_FILE_BAD_MODE,
            format!("Orphan file inode {ino} is not regular file."),
        )
    };
    c.report(Subject::Inode(ino))
        .error_fix(1, code, what, Fix::InodeMode(ino, S_IFREG));
}

/// The inode the superblock names as orphan file while the feature is
/// off must be empty. Returns whether it was judged so.
pub(crate) fn stray_orphan_file(c: &mut Ctx, ino: u32, inode: &Inode) -> bool {
    if c.sb().has_compat(Compat::ORPHAN_FILE) || c.sb().s_orphan_file_inum.get() != ino || ino == 0
    {
        return false;
    }
    // e2fsck reaches its orphan file branch only after the bad-block,
    // root, journal and reserved quota inodes' own: a superblock naming
    // one of those (root, say) does not make it an orphan file to clear.
    if quota_reserved(ino) || matches!(ino, special::BAD | special::ROOT | special::JOURNAL) {
        return false;
    }
    if holds_data(inode) {
        c.report(Subject::Inode(ino)).error_fix(
            1,
            ProblemCode::PR_1_ORPHAN_FILE_NOT_CLEAR,
            format!("Orphan file inode {ino} is not in use, but contains data."),
            Fix::ZeroInode(ino),
        );
    }
    true
}

/// What pass 1 goes on with after [`format_flags`].
pub(crate) enum Verdict {
    /// The inode stays; these are the flags it is read with.
    Go(InodeFlags),
    /// The inode is cleared: nothing more to check.
    Cleared,
}

/// Flags that disagree with the features or with `i_block` (e2fsck's
/// tests on EXTENTS_FL and INLINE_DATA_FL, in its order): a flag whose
/// data looks right turns the feature on, else the inode goes; an extent
/// header without the flag gets it; an index flag on a file goes.
#[inline]
pub(crate) fn format_flags(
    c: &mut Ctx,
    ino: u32,
    inode: &Inode,
    flags: InodeFlags,
    has_inline_attr: bool,
) -> Verdict {
    // An extent-mapped file of an extents filesystem with neither the
    // inline-data nor the index flag (nearly every file) passes every
    // test below: decided inline, without the call.
    if flags.contains(InodeFlags::EXTENTS)
        && !flags.intersects(InodeFlags::INLINE_DATA | InodeFlags::INDEX)
        && c.sb().has_incompat(Incompat::EXTENTS)
    {
        return Verdict::Go(flags);
    }
    judged_flags(c, ino, inode, flags, has_inline_attr)
}

/// [`format_flags`] in every case.
#[inline(never)]
fn judged_flags(
    c: &mut Ctx,
    ino: u32,
    inode: &Inode,
    mut flags: InodeFlags,
    has_inline_attr: bool,
) -> Verdict {
    let extents_fs = c.sb().has_incompat(Incompat::EXTENTS);
    // Parsed only where it decides something (not for every extent file).
    let header_ok = || ext4r_format::extent::ExtentNode::parse(&inode.i_block).is_ok();
    if flags.contains(InodeFlags::EXTENTS) && !extents_fs {
        if header_ok() {
            c.report(Subject::Inode(ino)).error_fix(
                1,
                ProblemCode::PR_1_EXTENT_FEATURE,
                format!(
                    "Inode {ino} is in extent format, but superblock is missing EXTENTS feature"
                ),
                Fix::SetIncompat(Incompat::EXTENTS.bits()),
            );
        } else {
            c.report(Subject::Inode(ino)).error_fix(
                1,
                ProblemCode::PR_1_EXTENTS_SET,
                format!(
                    "Inode {ino} has EXTENTS_FL flag set on filesystem without extents support."
                ),
                Fix::ClearInode(ino),
            );
            return Verdict::Cleared;
        }
    }
    let mode = inode.mode() & S_IFMT;
    if extents_fs
        && !flags.intersects(InodeFlags::EXTENTS | InodeFlags::INLINE_DATA)
        && (mode == S_IFREG || mode == S_IFDIR)
        && header_ok()
    {
        c.report(Subject::Inode(ino)).error_fix(
            1,
            ProblemCode::PR_1_UNSET_EXTENT_FL,
            format!("Inode {ino} missing EXTENT_FL, but is in extents format"),
            Fix::InodeSetFlags(ino, InodeFlags::EXTENTS.bits()),
        );
        if c.repairing() {
            flags.insert(InodeFlags::EXTENTS);
        }
    }
    if flags.contains(InodeFlags::INLINE_DATA)
        && !c.sb().has_incompat(Incompat::INLINE_DATA)
        && ino >= c.sb().first_ino()
    {
        if has_inline_attr {
            c.report(Subject::Inode(ino)).error_fix(
                1,
                ProblemCode::PR_1_INLINE_DATA_FEATURE,
                format!(
                    "Inode {ino} has inline data, but superblock is missing INLINE_DATA feature"
                ),
                Fix::SetIncompat(Incompat::INLINE_DATA.bits()),
            );
        } else {
            c.report(Subject::Inode(ino)).error_fix(
                1,
                ProblemCode::PR_1_INLINE_DATA_SET,
                format!(
                    "Inode {ino} has INLINE_DATA_FL flag on filesystem without inline data \
                     support."
                ),
                Fix::ClearInode(ino),
            );
            return Verdict::Cleared;
        }
    }
    if flags.contains(InodeFlags::INDEX) && mode != S_IFDIR {
        c.report(Subject::Inode(ino)).error_fix(
            1,
            ProblemCode::PR_1_HTREE_NODIR,
            format!("Inode {ino} has INDEX_FL flag set but is not a directory."),
            Fix::InodeClearFlags(ino, InodeFlags::INDEX.bits()),
        );
        if c.repairing() {
            flags.remove(InodeFlags::INDEX);
        }
    }
    Verdict::Go(flags)
}

/// A fast symlink (no blocks) marked as extent-mapped loses the flag.
pub(crate) fn fast_symlink_flag(c: &mut Ctx, ino: u32, flags: InodeFlags) {
    if c.sb().has_incompat(Incompat::EXTENTS) && flags.contains(InodeFlags::EXTENTS) {
        c.report(Subject::Inode(ino)).error_fix(
            1,
            ProblemCode::PR_1_FAST_SYMLINK_EXTENT_FL,
            format!("Fast symlink {ino} has EXTENT_FL set."),
            Fix::InodeClearFlags(ino, InodeFlags::EXTENTS.bits()),
        );
    }
}

/// The extra timestamp fields, (seconds offset, extra offset), in the
/// record: atime, ctime, crtime, mtime.
const EXTRA_TIMES: [(usize, usize); 4] = [(0x08, 0x8c), (0x0c, 0x84), (0x90, 0x94), (0x10, 0x88)];

/// Pre-1970 times stored with both epoch bits set (e2fsck's
/// check_inode_extra_negative_epoch): read today as years 2310–2378.
/// e2fsck mends them while the clock is before 2242.
pub(crate) fn negative_epoch(c: &mut Ctx, ino: u32, inode: &Inode, rec: &[u8]) {
    if c.now() >= 2 * (1i64 << 32) || rec.len() <= 128 {
        return;
    }
    if epoch_fields(inode, rec).next().is_some() {
        c.report(Subject::Inode(ino)).harmless_fix(
            1,
            ProblemCode::PR_1_EA_TIME_OUT_OF_RANGE,
            format!("Timestamp(s) on inode {ino} beyond 2310-04-04 are likely pre-1970."),
            Fix::InodeClearEpoch(ino),
        );
    }
}

/// The offsets of the extra fields whose epoch bits say a pre-1970 time
/// was stored the old way.
pub(crate) fn epoch_fields<'a>(inode: &Inode, rec: &'a [u8]) -> impl Iterator<Item = usize> + 'a {
    let end = 128 + usize::from(inode.i_extra_isize.get());
    let word = move |at: usize| {
        rec.get(at..at + 4)
            .map(|x| u32::from_le_bytes([x[0], x[1], x[2], x[3]]))
    };
    EXTRA_TIMES.into_iter().filter_map(move |(secs, extra)| {
        if extra + 4 > end.min(rec.len()) {
            return None;
        }
        let (s, e) = (word(secs)?, word(extra)?);
        (s & (1 << 31) != 0 && e & 3 == 3).then_some(extra)
    })
}

/// The encryption context of an inode with the encrypt flag (e2fsck's
/// add_encrypted_file): none makes the flag go, one of a known version
/// but the wrong size makes the inode go. Returns whether it stays.
pub(crate) fn encryption_context(c: &mut Ctx, ino: u32) -> bool {
    let Ok(info) = c.fs().inode(InodeNr(ino)) else {
        return true;
    };
    let ctx = c
        .fs()
        .xattrs(&info)
        .ok()
        .and_then(|xs| xs.into_iter().find(|x| x.name == b"index9.c"))
        .map(|x| x.value);
    let Some(v) = ctx else {
        c.report(Subject::Inode(ino)).error_fix(
            1,
            ProblemCode::PR_1_MISSING_ENCRYPTION_XATTR,
            format!("Inode {ino} has encrypt flag but no encryption extended attribute."),
            Fix::InodeClearFlags(ino, InodeFlags::ENCRYPT.bits()),
        );
        return true;
    };
    // fscrypt_context_v1 is 28 bytes, v2 40; other versions may be valid.
    let corrupt = match v.first() {
        None | Some(0) => true,
        Some(1) => v.len() != 28,
        Some(2) => v.len() != 40,
        Some(_) => false,
    };
    if corrupt {
        c.report(Subject::Inode(ino)).error_fix(
            1,
            ProblemCode::PR_1_CORRUPT_ENCRYPTION_XATTR,
            format!("Encrypted inode {ino} has corrupt encryption extended attribute."),
            Fix::ClearInode(ino),
        );
        return false;
    }
    // The policy is the context without its 16-byte nonce; every policy
    // of a version not known here counts as one (e2fsck's
    // UNRECOGNIZED_ENCRYPTION_POLICY).
    let key = match v.first() {
        Some(1 | 2) => v[..v.len() - 16].to_vec(),
        _ => Vec::new(),
    };
    c.set_policy(ino, key);
    true
}

/// libext2fs's `ext2fs_inode_has_valid_blocks2`, as fixed upstream
/// (e2fsprogs ae7370a5, 2025, "fix fast symlink blocks check", the
/// corpus' f_ea_inode_fast_symlink): whether `i_block` holds block
/// numbers. Directories and regular files do unless their data is
/// inline; other kinds never. A symlink with no xattr block: when
/// `i_blocks` (the low 32 bits, `struct ext2_inode`'s: a high word alone
/// leaves a fast symlink fast, damage seed 353 case 27) is not 0 and the
/// size is not that of a target in `i_block` (e2fsck 1.47.0 trusted
/// `i_blocks` alone, read a fast symlink charged for an xattr inode's
/// value as block numbers and cleared its target). With one, the size
/// and the second word tell, as libext2fs guesses: the raw `i_file_acl`
/// counts, whatever the checks make of it later (f_clear_xattr: a
/// symlink's xattr block without the feature).
pub(crate) fn has_valid_blocks(inode: &Inode, wide: bool) -> bool {
    const I_BLOCK: u64 = ext4r_format::inode::I_BLOCK_SIZE as u64;
    match inode.mode() & 0o170_000 {
        0o040_000 | 0o100_000 => !inode.flags().contains(InodeFlags::INLINE_DATA),
        0o120_000 => {
            let size = inode.size();
            if inode.file_acl(wide).0 == 0 {
                return inode.i_blocks_lo.get() != 0 && !(size != 0 && size < I_BLOCK);
            }
            // `i_size` here: the low word alone.
            let low = u64::from(inode.i_size_lo.get());
            low >= I_BLOCK || (low > 4 && inode.block_words()[1] == 0)
        }
        _ => false,
    }
}

/// The largest file a block map addresses with `bs`-byte blocks.
pub(crate) fn blockmap_max_bytes(bs: u64) -> u64 {
    let p = bs / 4;
    (12 + p + p * p + p * p * p).saturating_mul(bs)
}
