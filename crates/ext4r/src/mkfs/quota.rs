//! Quota files as mke2fs makes them (`-O quota`): one file per quota type,
//! holding one entry per owner of the inodes that exist at that point —
//! the root directory and lost+found. The format is [`crate::quota`]'s;
//! here the file's blocks are allocated in the order they are first
//! written, exactly as mke2fs allocates them through `ext2_file`.

use super::objects::{self, InodeBuf, EXTENTS_FL, IMMUTABLE_FL};
use crate::error::{Error, Result};
pub(crate) use crate::quota::{QuotaFile, Usage};
use ext4r_format::num;
use ext4r_txn::alloc::BlockAlloc;
use std::collections::BTreeMap;

/// Quota types, as bits of `-E quotatype=` (`QUOTA_*_BIT`).
pub(crate) const USR: u8 = 1;
pub(crate) const GRP: u8 = 2;
pub(crate) const PRJ: u8 = 4;

/// Parses `-E quotatype=` (`usr[quota]`, `grp[quota]`, `prj[quota]`, each
/// optionally negated with `^`, separated by `:` or `,`), starting from no
/// types as mke2fs does. Returns the offending word on error.
pub(crate) fn parse_types(list: &str) -> Result<u8, String> {
    let mut bits = 0;
    for word in list.split([':', ',']).filter(|w| !w.is_empty()) {
        let (neg, name) = match word.strip_prefix('^') {
            Some(n) => (true, n),
            None => (false, word),
        };
        let b = match name {
            "usr" | "usrquota" => USR,
            "grp" | "grpquota" => GRP,
            "prj" | "prjquota" => PRJ,
            _ => return Err(word.to_string()),
        };
        if neg {
            bits &= !b;
        } else {
            bits |= b;
        }
    }
    Ok(bits)
}

/// Where a quota file's blocks went.
#[derive(Debug, Clone, Default)]
pub(crate) struct QuotaBlocks {
    /// `(logical, physical)` by logical block.
    pub map: Vec<(u64, u64)>,
    /// The extents the blocks were mapped into, in the order mapped.
    pub extents: Vec<(u64, u64, u64)>,
    /// Clusters allocated (for i_blocks).
    pub clusters: u64,
}

/// Allocates the blocks of `file` as `ext2_file` writes do: each block
/// when it is first written; a block whose logical cluster is already
/// mapped takes its place in that cluster; otherwise the search starts
/// after the previous logical block's, or at the start of the filesystem
/// (`extent_bmap`'s goal when the previous block is unmapped).
pub(crate) fn allocate(a: &mut impl BlockAlloc, file: &QuotaFile) -> Result<QuotaBlocks> {
    let bs = a.geo().block_size as usize;
    let ratio = a.geo().cluster_ratio();
    let mut map: BTreeMap<u64, u64> = BTreeMap::new();
    let mut extents = Vec::new();
    let mut clusters = 0;
    for lblk in file.alloc_order(bs) {
        let implied = map
            .iter()
            .find(|(&k, _)| k / ratio == lblk / ratio)
            .map(|(&k, &pb)| pb - k % ratio + lblk % ratio);
        let pblk = match implied {
            Some(b) => b,
            None => {
                let goal = lblk
                    .checked_sub(1)
                    .and_then(|prev| map.get(&prev))
                    .map_or(0, |pb| pb + 1);
                clusters += 1;
                a.alloc_block(goal)?
            }
        };
        map.insert(lblk, pblk);
        super::extents::map_block(&mut extents, lblk, pblk);
    }
    Ok(QuotaBlocks {
        map: map.into_iter().collect(),
        extents,
        clusters,
    })
}

/// The quota file's inode with no blocks mapped yet (an empty extent root
/// with extents): for a mapping stored by the block-pointer editor.
pub(crate) fn unmapped_inode(
    file: &QuotaFile,
    inode_size: usize,
    extents: bool,
    now: i64,
) -> Result<InodeBuf> {
    let mut qi = InodeBuf::new_file(inode_size, 0o100600, 1, now);
    qi.set_size(file.size());
    if extents {
        qi.set_flags(EXTENTS_FL | IMMUTABLE_FL);
        qi.set_i_block(&objects::extent_root(&[], None)?);
    } else {
        qi.set_flags(IMMUTABLE_FL);
    }
    Ok(qi)
}

/// The quota file's inode as `quota_inode_init_new` and the writes leave
/// it: an immutable regular file (checksum not yet set).
pub(crate) fn encode_inode(
    file: &QuotaFile,
    q: &QuotaBlocks,
    inode_size: usize,
    block_size: u64,
    cluster_ratio: u64,
    extents: bool,
    now: i64,
) -> Result<InodeBuf> {
    let mut qi = InodeBuf::new_file(inode_size, 0o100600, 1, now);
    qi.set_size(file.size());
    qi.set_sectors(q.clusters * cluster_ratio * (block_size / 512));
    if extents {
        if q.extents.len() > 4 {
            return Err(Error::InvalidArgument(
                "quota file too fragmented for an in-inode extent list".into(),
            ));
        }
        qi.set_flags(EXTENTS_FL | IMMUTABLE_FL);
        qi.set_i_block(&objects::extent_root(&q.extents, None)?);
    } else {
        let mut words = [0u32; 15];
        for &(lb, pb) in &q.map {
            if lb >= 12 {
                return Err(Error::InvalidArgument(
                    "quota file too large for direct block pointers".into(),
                ));
            }
            words[num::index(lb)] = super::blockmap::ptr(pb);
        }
        qi.set_flags(IMMUTABLE_FL);
        qi.set_block_words(&words);
    }
    Ok(qi)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quota_types_parse_as_mke2fs() {
        assert_eq!(parse_types("usrquota:grpquota:prjquota"), Ok(7));
        assert_eq!(parse_types("prj"), Ok(PRJ));
        assert_eq!(parse_types("usr,grp,^usr"), Ok(GRP));
        assert_eq!(parse_types("foo"), Err("foo".into()));
    }
}
