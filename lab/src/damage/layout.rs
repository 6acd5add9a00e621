//! Where everything is in a base image: geometry and descriptors, and for
//! every inode in use its record's offset, path, extent tree nodes or
//! indirect blocks, data runs and xattr block. Read once per base image
//! with the engine (directory walk, data runs) and the format crate (tree
//! nodes), on disk as it is (a snapshot's journal is not replayed).

use std::collections::{BTreeMap, HashSet};
use std::path::Path;

use anyhow::{Context, Result};
use ext4r::device::{FileDevice, OpenMode};
use ext4r::fs::{Filesystem, OpenOptions, Run};
use ext4r_format::blockmap::IndirectBlock;
use ext4r_format::extent::ExtentNode;
use ext4r_format::features::{Incompat, RoCompat};
use ext4r_format::geometry::Geometry;
use ext4r_format::group_desc::GroupDesc;
use ext4r_format::inode::{Inode, InodeFlags};
use ext4r_format::superblock::Superblock;
use ext4r_format::InodeNr;

/// One inode in use.
#[derive(Clone, Debug)]
pub struct Ino {
    pub ino: u32,
    /// Its first path, or `<inode N>` for the special inodes.
    pub path: String,
    /// How many paths name it (hard links).
    pub paths: usize,
    pub inode: Inode,
    /// Byte offset of the record in the image.
    pub offset: u64,
    /// Extent tree nodes stored in blocks: (block, depth).
    pub ext_blocks: Vec<(u64, u16)>,
    /// Indirect blocks: (block, level), level 1 pointing at data.
    pub ind_blocks: Vec<(u64, u8)>,
    pub runs: Vec<Run>,
    pub xattr_block: u64,
    /// Bytes of the record past `128 + i_extra_isize` hold xattrs.
    pub ibody_xattrs: bool,
}

impl Ino {
    pub fn flags(&self) -> InodeFlags {
        self.inode.flags()
    }
    pub fn has_extents(&self) -> bool {
        self.flags().contains(InodeFlags::EXTENTS)
    }
    pub fn inline(&self) -> bool {
        self.flags().contains(InodeFlags::INLINE_DATA)
    }
    pub fn htree(&self) -> bool {
        self.inode.is_dir() && self.flags().contains(InodeFlags::INDEX)
    }
    /// Whether its i_block holds block numbers (not a fast symlink's
    /// target or inline data).
    pub fn block_mapped(&self) -> bool {
        !self.has_extents() && !self.inline() && !self.runs.is_empty()
    }
    /// The physical block of logical block `lblk`.
    pub fn physical(&self, lblk: u64) -> Option<u64> {
        self.runs
            .iter()
            .find(|r| r.logical <= lblk && lblk < r.end())
            .map(|r| r.physical + (lblk - r.logical))
    }
    /// Every (logical, physical) block, holes left out.
    pub fn blocks(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.runs
            .iter()
            .flat_map(|r| (0..r.len).map(move |k| (r.logical + k, r.physical + k)))
    }
}

pub struct Layout {
    pub sb: Superblock,
    pub geo: Geometry,
    pub bs: u64,
    pub wide: bool,
    pub csum: bool,
    pub gdt_csum: bool,
    pub fs_seed: u32,
    pub descs: Vec<GroupDesc>,
    pub inodes: Vec<Ino>,
    pub by_ino: BTreeMap<u32, usize>,
    /// Journal block i -> filesystem block.
    pub journal: Vec<u64>,
}

impl Layout {
    pub fn load(img: &Path) -> Result<Layout> {
        let dev = FileDevice::open(img, OpenMode::default())?;
        let mut opts = OpenOptions::default();
        opts.skip_journal_replay = true;
        let fs = Filesystem::open_with(dev, opts)
            .with_context(|| format!("cannot open {}", img.display()))?;
        let sb = fs.superblock().clone();
        let geo = fs.geometry().clone();
        let bs = u64::from(fs.block_size());
        let wide = sb.has_incompat(Incompat::BIT64);
        let csum = sb.has_ro_compat(RoCompat::METADATA_CSUM);
        let gdt_csum = sb.has_ro_compat(RoCompat::GDT_CSUM);
        let mut l = Layout {
            fs_seed: sb.csum_seed(),
            sb,
            geo,
            bs,
            wide,
            csum,
            gdt_csum,
            descs: fs.group_descs().to_vec(),
            inodes: Vec::new(),
            by_ino: BTreeMap::new(),
            journal: Vec::new(),
        };
        if let Ok(Some(ext4r::journal::JournalLocation::Internal(b))) = fs.journal_location() {
            l.journal = b.iter().map(|b| b.0).collect();
        }
        // Paths from a walk of the tree; then the special inodes.
        let mut paths: BTreeMap<u32, (String, usize)> = BTreeMap::new();
        paths.insert(2, ("/".to_string(), 1));
        let mut stack = vec![(String::new(), 2u32)];
        let mut seen = HashSet::new();
        while let Some((path, ino)) = stack.pop() {
            if !seen.insert(ino) {
                continue;
            }
            // A snapshot's metadata may be stale until replayed: walk what
            // can be read.
            let Ok(info) = fs.inode(InodeNr(ino)) else {
                continue;
            };
            if !info.inode.is_dir() {
                continue;
            }
            for e in fs.read_dir(&info).unwrap_or_default() {
                if e.is_dot() {
                    continue;
                }
                let child = format!("{path}/{}", e.name_lossy());
                let slot = paths.entry(e.ino.0).or_insert((child.clone(), 0));
                slot.1 += 1;
                stack.push((child, e.ino.0));
            }
        }
        let s = &l.sb;
        for special in [
            7,
            s.s_journal_inum.get(),
            s.s_usr_quota_inum.get(),
            s.s_grp_quota_inum.get(),
            s.s_prj_quota_inum.get(),
            s.s_orphan_file_inum.get(),
        ] {
            if special != 0 {
                paths
                    .entry(special)
                    .or_insert((format!("<inode {special}>"), 0));
            }
        }
        for (ino, (path, npaths)) in paths {
            let Ok(info) = fs.inode(InodeNr(ino)) else {
                continue;
            };
            if info.inode.i_mode.get() == 0 {
                continue;
            }
            let runs = fs.runs(&info).unwrap_or_default();
            let mut one = Ino {
                ino,
                path,
                paths: npaths,
                offset: l.inode_offset(ino),
                ext_blocks: Vec::new(),
                ind_blocks: Vec::new(),
                runs,
                xattr_block: info.inode.file_acl(wide).0,
                ibody_xattrs: ext4r_format::xattr::parse_xattr_ibody(&info.record)
                    .ok()
                    .flatten()
                    .is_some(),
                inode: info.inode,
            };
            l.tree_blocks(&fs, &mut one)?;
            l.by_ino.insert(ino, l.inodes.len());
            l.inodes.push(one);
        }
        Ok(l)
    }

    pub fn inode_offset(&self, ino: u32) -> u64 {
        let ipg = self.geo.inodes_per_group;
        let g = (ino - 1) / ipg;
        let idx = u64::from((ino - 1) % ipg);
        let table = self.descs.get(g as usize).map(|d| d.inode_table(self.wide));
        table.unwrap_or(0) * self.bs + idx * u64::from(self.geo.inode_size)
    }

    pub fn get(&self, ino: u32) -> Option<&Ino> {
        self.by_ino.get(&ino).and_then(|&i| self.inodes.get(i))
    }

    /// The primary superblock's and descriptors' blocks (reserved GDT
    /// blocks included): what a file must never own.
    pub fn primary_meta(&self) -> (u64, u64) {
        let m = self.geo.group_meta(0);
        let first = m.super_block.unwrap_or(self.geo.first_data_block);
        let count =
            1 + u64::from(self.geo.old_desc_blocks()) + u64::from(self.geo.reserved_gdt_blocks);
        (first, count)
    }

    /// Byte offset of group `g`'s primary descriptor.
    pub fn desc_offset(&self, g: u32) -> u64 {
        let per = self.geo.descs_per_block();
        let block = self.geo.desc_block_loc(g / per);
        block * self.bs + u64::from(g % per) * u64::from(self.geo.desc_size)
    }

    fn tree_blocks(&self, fs: &Filesystem, one: &mut Ino) -> Result<()> {
        let flags = one.inode.flags();
        if flags.contains(InodeFlags::INLINE_DATA) || one.runs.is_empty() {
            return Ok(());
        }
        let mut buf = vec![0u8; self.bs as usize];
        if flags.contains(InodeFlags::EXTENTS) {
            let root = one.inode.i_block;
            let mut todo: Vec<(u64, u16)> = Vec::new();
            if let Ok(node) = ExtentNode::parse(&root) {
                for i in node.indexes().unwrap_or(&[]) {
                    todo.push((i.leaf().0, node.depth().saturating_sub(1)));
                }
            }
            while let Some((b, depth)) = todo.pop() {
                if one.ext_blocks.len() > 10_000 || one.ext_blocks.iter().any(|x| x.0 == b) {
                    continue;
                }
                fs.device().read_at(&mut buf, b * self.bs)?;
                one.ext_blocks.push((b, depth));
                if let Ok(node) = ExtentNode::parse(&buf) {
                    for i in node.indexes().unwrap_or(&[]) {
                        todo.push((i.leaf().0, node.depth().saturating_sub(1)));
                    }
                }
            }
        } else {
            let words = one.inode.block_words();
            let mut todo: Vec<(u64, u8)> = (12..15)
                .filter(|&k| words[k] != 0)
                .map(|k| (u64::from(words[k]), (k - 11) as u8))
                .collect();
            while let Some((b, level)) = todo.pop() {
                if one.ind_blocks.len() > 100_000 || b >= self.geo.blocks_count {
                    continue;
                }
                one.ind_blocks.push((b, level));
                if level > 1 {
                    fs.device().read_at(&mut buf, b * self.bs)?;
                    if let Ok(ind) = IndirectBlock::parse(&buf) {
                        for c in ind.iter().filter(|c| c.0 != 0) {
                            todo.push((c.0, level - 1));
                        }
                    }
                }
            }
        }
        Ok(())
    }
}
