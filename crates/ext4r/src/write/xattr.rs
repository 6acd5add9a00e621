//! Extended attributes: set, removed and listed, in the inode's extra
//! space and in an attribute block, as the kernel keeps them (in-inode
//! first; the rest in one block, sorted, with entry and block hashes). A
//! block shared by several inodes (reference count above 1) is copied
//! before it changes. Values kept in EA inodes (ea_inode) are read but
//! not written here: an inode that has one is refused for changes.

use super::WriteFs;
use crate::error::{Error, Result};
use ext4r_format::xattr::{
    parse_xattr_block, parse_xattr_ibody, split_xattr_name, write_xattr_block, write_xattr_ibody,
    xattr_prefix, NewXattr, XattrValue, XATTR_HEADER_SIZE, XATTR_IBODY_HEADER_SIZE,
};
use ext4r_txn::csum::BlockKind;

/// One attribute: prefix index, stored name, value.
type Attr = (u8, Vec<u8>, Vec<u8>);

fn corrupt(ino: u32, e: ext4r_format::FormatError) -> Error {
    Error::corrupt(format!("inode {ino}, xattrs"), e)
}

fn entry_room(name: usize, value: usize) -> usize {
    ext4r_format::xattr::xattr_entry_len(name) + ext4r_format::xattr::xattr_value_len(value)
}

impl WriteFs {
    /// Every attribute of inode `ino`: in-inode ones, then the block's.
    fn read_xattrs(&self, ino: u32) -> Result<(Vec<Attr>, Vec<Attr>, u64, u32)> {
        let rec = self.txn.read_inode(ino)?;
        let mut ibody = Vec::new();
        if let Some(es) = parse_xattr_ibody(&rec).map_err(|e| corrupt(ino, e))? {
            for e in es.iter() {
                let e = e.map_err(|e| corrupt(ino, e))?;
                match e.value {
                    XattrValue::Inline(v) => {
                        ibody.push((e.entry.e_name_index, e.name.to_vec(), v.to_vec()))
                    }
                    XattrValue::EaInode { .. } => {
                        return Err(Error::Unsupported(format!(
                            "inode {ino}: changing xattrs kept in EA inodes"
                        )))
                    }
                }
            }
        }
        let i = self.inode(ino)?;
        let acl = i.file_acl(self.txn.groups().wide()).0;
        let mut block = Vec::new();
        let mut refs = 0;
        if acl != 0 {
            let b = self.txn.read_block(acl)?;
            let (h, es) = parse_xattr_block(&b).map_err(|e| corrupt(ino, e))?;
            refs = h.h_refcount.get();
            for e in es.iter() {
                let e = e.map_err(|e| corrupt(ino, e))?;
                match e.value {
                    XattrValue::Inline(v) => {
                        block.push((e.entry.e_name_index, e.name.to_vec(), v.to_vec()))
                    }
                    XattrValue::EaInode { .. } => {
                        return Err(Error::Unsupported(format!(
                            "inode {ino}: changing xattrs kept in EA inodes"
                        )))
                    }
                }
            }
        }
        Ok((ibody, block, acl, refs))
    }

    /// The attributes of inode `ino` as (full name, value), in-inode first.
    ///
    /// # Errors
    /// [`Error::Corrupt`] for damaged attributes, read errors.
    pub fn xattrs(&self, ino: u32) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let (a, b, _, _) = self.read_xattrs(ino)?;
        Ok(a.into_iter()
            .chain(b)
            .map(|(i, n, v)| {
                let mut full = xattr_prefix(i).unwrap_or("").as_bytes().to_vec();
                full.extend_from_slice(&n);
                (full, v)
            })
            .collect())
    }

    /// Sets attribute `name` (with its namespace prefix: `user.`,
    /// `trusted.`, `security.`, `system.`) of inode `ino` to `value`.
    ///
    /// # Errors
    /// [`Error::InvalidName`] for an unknown prefix or a name over 255
    /// bytes, [`Error::NoSpace`] when the value fits in neither the inode
    /// nor a block.
    pub fn set_xattr(&mut self, ino: u32, name: &[u8], value: &[u8]) -> Result<()> {
        self.change_xattr(ino, name, Some(value))
    }

    /// Removes attribute `name` of inode `ino`.
    ///
    /// # Errors
    /// [`Error::NotFound`] when it is not there.
    pub fn remove_xattr(&mut self, ino: u32, name: &[u8]) -> Result<()> {
        self.change_xattr(ino, name, None)
    }

    fn change_xattr(&mut self, ino: u32, name: &[u8], value: Option<&[u8]>) -> Result<()> {
        let shown = String::from_utf8_lossy(name).into_owned();
        let (index, suffix) =
            split_xattr_name(name).ok_or_else(|| Error::InvalidName(shown.clone()))?;
        if suffix.len() > 255 || (suffix.is_empty() && index != 2 && index != 3) {
            return Err(Error::InvalidName(shown));
        }
        let bs = self.shape.bs;
        if let Some(v) = value {
            if entry_room(suffix.len(), v.len()) + XATTR_HEADER_SIZE + 4 > bs {
                return Err(Error::NoSpace);
            }
        }
        self.op(|w| {
            let (mut ib, mut blk, acl, refs) = w.read_xattrs(ino)?;
            let key = |a: &Attr| a.0 == index && a.1 == suffix;
            let found = ib.iter().any(key) || blk.iter().any(key);
            if value.is_none() && !found {
                return Err(Error::NotFound(shown.clone()));
            }
            ib.retain(|a| !key(a));
            blk.retain(|a| !key(a));
            if let Some(v) = value {
                ib.push((index, suffix.to_vec(), v.to_vec()));
            }
            w.place_xattrs(ino, ib, blk, acl, refs)?;
            let mut i = w.inode(ino)?;
            i.set_ctime(w.now());
            w.put_inode(ino, &i)
        })
    }

    /// Stores the attributes: as many as fit in the inode (those already
    /// there first), the rest in a block of this inode's own.
    fn place_xattrs(
        &mut self,
        ino: u32,
        ib: Vec<Attr>,
        blk: Vec<Attr>,
        acl: u64,
        refs: u32,
    ) -> Result<()> {
        let sh = self.shape;
        let rec_now = self.txn.read_inode(ino)?;
        let extra = if sh.isz > 128 {
            usize::from(u16::from_le_bytes([rec_now[0x80], rec_now[0x81]]))
        } else {
            0
        };
        let ibody_room = if sh.isz > 128 {
            sh.isz
                .saturating_sub(128 + extra + XATTR_IBODY_HEADER_SIZE + 4)
        } else {
            0
        };
        let mut in_inode: Vec<Attr> = Vec::new();
        let mut used = 0;
        let mut rest: Vec<Attr> = Vec::new();
        for a in ib.into_iter().chain(blk) {
            let need = entry_room(a.1.len(), a.2.len());
            if used + need <= ibody_room {
                used += need;
                in_inode.push(a);
            } else {
                rest.push(a);
            }
        }
        // The block part must fit in one block.
        let block_need: usize = rest.iter().map(|a| entry_room(a.1.len(), a.2.len())).sum();
        if block_need + XATTR_HEADER_SIZE + 4 > sh.bs {
            return Err(Error::NoSpace);
        }
        if sh.isz > 128 {
            let news: Vec<NewXattr<'_>> = in_inode
                .iter()
                .map(|(i, n, v)| NewXattr {
                    name_index: *i,
                    name: n,
                    value: v,
                })
                .collect();
            let rec = self.txn.inode_mut(ino)?;
            write_xattr_ibody(rec, &news).map_err(|e| corrupt(ino, e))?;
        }
        let r = sh.ratio;
        let sectors = r * (sh.bs as u64 / 512);
        let mut i = self.inode(ino)?;
        let mut blocks = i.blocks_count(sh.huge_file, sh.bs as u32);
        // The old block: ours to rewrite when not shared, else one
        // reference less.
        let mut target = None;
        if acl != 0 {
            if refs <= 1 {
                if rest.is_empty() {
                    self.txn.free_blocks(acl & !(r - 1), r)?;
                    blocks = blocks.saturating_sub(sectors);
                } else {
                    target = Some(acl);
                }
            } else {
                let b = self.txn.block_mut(acl, BlockKind::Xattr)?;
                b[4..8].copy_from_slice(&(refs - 1).to_le_bytes());
                blocks = blocks.saturating_sub(sectors);
            }
        }
        if !rest.is_empty() && target.is_none() {
            let goal = self.goal_for(ino);
            let (b, _) = self.alloc_data(goal, 1)?;
            blocks += sectors;
            target = Some(b);
        }
        if let Some(b) = target {
            let news: Vec<NewXattr<'_>> = rest
                .iter()
                .map(|(i, n, v)| NewXattr {
                    name_index: *i,
                    name: n,
                    value: v,
                })
                .collect();
            let mut buf = vec![0u8; sh.bs];
            write_xattr_block(&mut buf, &news).map_err(|e| corrupt(ino, e))?;
            self.txn.write_block(b, BlockKind::Xattr, buf)?;
        }
        i = self.inode(ino)?;
        i.set_file_acl(ext4r_format::BlockNr(target.unwrap_or(0)));
        i.set_blocks_count(blocks, sh.huge_file, sh.bs as u32)
            .map_err(|e| corrupt(ino, e))?;
        self.put_inode(ino, &i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ext4r_format::xattr::XATTR_ENTRY_SIZE;

    #[test]
    fn entry_room_counts_padding() {
        assert_eq!(entry_room(4, 5), XATTR_ENTRY_SIZE + 4 + 8);
    }
}
