//! `-O`: feature toggles, following tune2fs's `update_feature_set`.
//!
//! The edit list is checked against tune2fs's lists of features it may set
//! and clear, with its messages. Toggles that are only superblock bits (or
//! superblock fields) are made; checksum changes are planned here and
//! carried out by `csum`; the other toggles for which tune2fs rewrites
//! metadata are refused, saying so.

use super::csum::{Disable, REWRITE_ALL, REWRITE_DIR};
use super::{Refused, Run, Step};
use crate::device::BlockDevice;
use crate::error::{Error, Result};
use ext4r_format::features::{Compat, Features, Incompat, RoCompat, Word};
use ext4r_format::geometry::Geometry;
use ext4r_format::superblock::Superblock;
use std::sync::Arc;

/// Features tune2fs may set (`ok_features`).
const OK_SET: Features = Features {
    compat: Compat::HAS_JOURNAL
        .union(Compat::DIR_INDEX)
        .union(Compat::FAST_COMMIT)
        .union(Compat::STABLE_INODES)
        .union(Compat::ORPHAN_FILE),
    incompat: Incompat::FILETYPE
        .union(Incompat::EXTENTS)
        .union(Incompat::FLEX_BG)
        .union(Incompat::EA_INODE)
        .union(Incompat::MMP)
        .union(Incompat::BIT64)
        .union(Incompat::ENCRYPT)
        .union(Incompat::CSUM_SEED)
        .union(Incompat::LARGEDIR)
        .union(Incompat::CASEFOLD),
    ro_compat: RoCompat::LARGE_FILE
        .union(RoCompat::HUGE_FILE)
        .union(RoCompat::DIR_NLINK)
        .union(RoCompat::EXTRA_ISIZE)
        .union(RoCompat::GDT_CSUM)
        .union(RoCompat::SPARSE_SUPER)
        .union(RoCompat::QUOTA)
        .union(RoCompat::METADATA_CSUM)
        .union(RoCompat::READONLY)
        .union(RoCompat::PROJECT)
        .union(RoCompat::VERITY),
};

/// Features tune2fs may clear (`clear_ok_features`).
const OK_CLEAR: Features = Features {
    compat: Compat::HAS_JOURNAL
        .union(Compat::RESIZE_INODE)
        .union(Compat::DIR_INDEX)
        .union(Compat::FAST_COMMIT)
        .union(Compat::ORPHAN_FILE),
    incompat: Incompat::FILETYPE
        .union(Incompat::FLEX_BG)
        .union(Incompat::MMP)
        .union(Incompat::BIT64)
        .union(Incompat::CSUM_SEED)
        .union(Incompat::CASEFOLD),
    ro_compat: RoCompat::LARGE_FILE
        .union(RoCompat::HUGE_FILE)
        .union(RoCompat::DIR_NLINK)
        .union(RoCompat::EXTRA_ISIZE)
        .union(RoCompat::GDT_CSUM)
        .union(RoCompat::QUOTA)
        .union(RoCompat::PROJECT)
        .union(RoCompat::METADATA_CSUM)
        .union(RoCompat::READONLY),
};

/// The message for a change tune2fs makes by rewriting metadata.
fn not_yet(what: &str) -> String {
    format!(
        "tune.ext4r: {what} is not supported yet: tune2fs does it by rewriting \
         metadata, which tune.ext4r does not do. Nothing was changed.\n"
    )
}

impl Run<'_, '_> {
    pub(super) fn update_features(
        &mut self,
        dev: &Arc<dyn BlockDevice>,
        list: &str,
        force: u32,
    ) -> Result<Step> {
        let old = self.sb.features();
        let mut new = old;
        if let Err(msg) = edit(list, &mut new) {
            self.err.push_str(&msg);
            return Ok(Err(Refused));
        }
        let on = |w: Word, m: u32| !old.has(w, m) && new.has(w, m);
        let off = |w: Word, m: u32| old.has(w, m) && !new.has(w, m);
        let changed = |w: Word, m: u32| old.has(w, m) != new.has(w, m);
        let c = |f: Compat| (Word::Compat, f.bits());
        let i = |f: Incompat| (Word::Incompat, f.bits());
        let r = |f: RoCompat| (Word::RoCompat, f.bits());
        let is_on = |(w, m): (Word, u32)| on(w, m);
        let is_off = |(w, m): (Word, u32)| off(w, m);
        let is_changed = |(w, m): (Word, u32)| changed(w, m);
        // Flags set by the later steps that make what they stand for.
        let mut later = Features::default();

        if is_off(c(Compat::HAS_JOURNAL)) {
            if new.incompat.contains(Incompat::RECOVER) && force < 2 {
                return Ok(self.refuse(
                    "The needs_recovery flag is set.  Please run e2fsck before clearing\n\
                     the has_journal flag.\n",
                ));
            }
            if self.remove_journal(dev, force)?.is_err() {
                return Ok(Err(Refused));
            }
        }
        if is_off(c(Compat::ORPHAN_FILE)) || is_on(c(Compat::ORPHAN_FILE)) {
            if is_on(c(Compat::ORPHAN_FILE)) && !new.compat.contains(Compat::HAS_JOURNAL) {
                return Ok(self.refuse(
                    "orphan_file feature can be set only for filesystems with journal.\n",
                ));
            }
            return Ok(self.refuse(&not_yet("changing orphan_file")));
        }
        if is_on(r(RoCompat::SPARSE_SUPER)) && new.incompat.contains(Incompat::META_BG) {
            return Ok(self.refuse(
                "Setting filesystem feature 'sparse_super' not supported\nfor filesystems with \
                 the meta_bg feature enabled.\n",
            ));
        }
        if is_changed(i(Incompat::MMP)) {
            return Ok(self.refuse(&not_yet("changing mmp")));
        }
        if is_on(c(Compat::HAS_JOURNAL)) {
            // Made by add_journal, after the other options, which sets
            // the flag; without -J the journal has the default size.
            if self.journal.size == 0 {
                self.journal.size = -1;
            }
            later.compat.insert(Compat::HAS_JOURNAL);
        }
        if is_on(c(Compat::DIR_INDEX)) {
            if self.sb.s_def_hash_version == 0 {
                self.sb.s_def_hash_version = 1;
            }
            if self.sb.s_hash_seed.iter().all(|w| w.get() == 0) {
                let mut u = (self.env.random)();
                u[6] = (u[6] & 0x0f) | 0x40;
                u[8] = (u[8] & 0x3f) | 0x80;
                self.sb.set_hash_seed_bytes(&u);
            }
        }
        if is_off(c(Compat::DIR_INDEX)) && new.ro_compat.contains(RoCompat::METADATA_CSUM) {
            if self.check_fsck_needed().is_err() {
                return Ok(Err(Refused));
            }
            // Every directory's blocks and checksums change.
            self.csum.rewrite |= REWRITE_DIR;
        }
        if is_off(i(Incompat::FLEX_BG)) && !descs_inside_groups(dev.as_ref(), &self.sb)? {
            return Ok(self.refuse(
                "Clearing the flex_bg flag would cause the the filesystem to be\ninconsistent.\n",
            ));
        }
        if (is_changed(r(RoCompat::METADATA_CSUM)) || is_changed(r(RoCompat::GDT_CSUM)))
            && new.incompat.contains(Incompat::MMP)
        {
            return Ok(self.refuse(&not_yet(
                "changing checksums with mmp on (the MMP block is rewritten too)",
            )));
        }
        // What tune2fs does to the superblock's gdt_csum bit on its own.
        let mut gdt_final: Option<bool> = None;
        let mut clear_seed = false;
        let mut old_gdt = old.ro_compat.contains(RoCompat::GDT_CSUM);
        if is_on(r(RoCompat::METADATA_CSUM)) {
            if self.check_fsck_needed().is_err() {
                return Ok(Err(Refused));
            }
            if !new.incompat.contains(Incompat::EXTENTS) {
                self.out.push_str(
                    "Extents are not enabled.  The file extent tree can be checksummed, \
                     whereas block maps cannot.  Not enabling extents reduces the coverage \
                     of metadata checksumming.  Re-run with -O extent to rectify.\n",
                );
            }
            if !new.incompat.contains(Incompat::BIT64) {
                self.out.push_str(
                    "64-bit filesystem support is not enabled.  The larger fields afforded \
                     by this feature enable full-strength checksumming.  Run resize2fs -b to \
                     rectify.\n",
                );
            }
            self.csum.rewrite = REWRITE_ALL;
            // metadata_csum supersedes uninit_bg.
            gdt_final = Some(false);
            if !old_gdt {
                self.csum.enable_uninit = true;
            }
            old_gdt = false;
        }
        if is_off(r(RoCompat::METADATA_CSUM)) {
            if self.check_fsck_needed().is_err() {
                return Ok(Err(Refused));
            }
            self.csum.rewrite = REWRITE_ALL;
            // uninit_bg takes over unless the list turns it off.
            let mut test = old;
            test.ro_compat.insert(RoCompat::GDT_CSUM);
            let _ = edit(list, &mut test);
            if test.ro_compat.contains(RoCompat::GDT_CSUM)
                || new.ro_compat.contains(RoCompat::GDT_CSUM)
            {
                gdt_final = Some(true);
                old_gdt = true;
            } else {
                self.csum.disable_uninit = Some(Disable::MetadataCsum);
            }
            self.sb.s_checksum_seed.set(0);
            clear_seed = true;
        }
        let gdt_now = gdt_final.unwrap_or(new.ro_compat.contains(RoCompat::GDT_CSUM));
        if !old_gdt && gdt_now {
            if new.ro_compat.contains(RoCompat::METADATA_CSUM) {
                gdt_final = Some(false);
            } else {
                self.csum.enable_uninit = true;
            }
        }
        if old_gdt && !gdt_now {
            self.csum.disable_uninit = Some(Disable::GdtCsum);
        }
        if is_changed(i(Incompat::BIT64)) {
            return Ok(self.refuse(
                "tune.ext4r: the 64bit feature is changed by resize2fs (-b or -s), \
                 not by tune2fs. Nothing was changed.\n",
            ));
        }
        // Quota files are made or removed later, by handle_quota, which
        // sets or clears these flags.
        if is_on(r(RoCompat::QUOTA)) {
            if !self.q_flag {
                self.q_flag = true;
                self.quota_enable = [Some(true), Some(true), Some(false)];
            }
            later.ro_compat.insert(RoCompat::QUOTA);
        }
        if is_on(r(RoCompat::PROJECT)) {
            if self.sb.inode_size() == 128 {
                return Ok(self.refuse("Cannot enable project feature; inode size too small.\n"));
            }
            self.q_flag = true;
            self.quota_enable[2] = Some(true);
        }
        if is_off(r(RoCompat::PROJECT)) {
            self.q_flag = true;
            self.quota_enable[2] = Some(false);
        }
        if is_off(r(RoCompat::QUOTA)) {
            if self.q_flag {
                self.err
                    .push_str("\nWarning: '^quota' option overrides '-Q'arguments.\n");
            }
            self.q_flag = true;
            self.quota_enable = [Some(false); 3];
        }
        if is_on(i(Incompat::ENCRYPT)) {
            // EXT4_ENCRYPTION_MODE_AES_256_XTS, _AES_256_CTS.
            self.sb.s_encrypt_algos[0] = 1;
            self.sb.s_encrypt_algos[1] = 4;
        }
        if is_on(i(Incompat::CASEFOLD)) {
            self.sb.s_encoding.set(1);
            self.sb.s_encoding_flags.set(0);
            self.enabling_casefold = true;
        }
        if is_off(i(Incompat::CASEFOLD)) {
            return Ok(self.refuse(&not_yet(
                "clearing casefold (every inode is checked for the casefold flag)",
            )));
        }
        if is_on(i(Incompat::CSUM_SEED)) {
            if !new.ro_compat.contains(RoCompat::METADATA_CSUM) {
                return Ok(self.refuse(
                    "Setting feature 'metadata_csum_seed' is only supported\non filesystems with \
                     the metadata_csum feature enabled.\n",
                ));
            }
            if !std::path::Path::new("/sys/fs/ext4/features/metadata_csum_seed").exists() {
                self.err.push_str(
                    "WARNING: Could not confirm kernel support for metadata_csum_seed.\n  \
                     This requires Linux >= v4.4.\n",
                );
            }
            // The seed in use until now, so that nothing needs rewriting.
            let seed = self.sb.csum_seed();
            self.sb.s_checksum_seed.set(seed);
        }
        // The features written: the list's, with tune2fs's own adjustments.
        let mut fin = new;
        if let Some(on) = gdt_final {
            fin.ro_compat.set(RoCompat::GDT_CSUM, on);
        }
        if clear_seed {
            fin.incompat.remove(Incompat::CSUM_SEED);
        }
        if old.incompat.contains(Incompat::CSUM_SEED)
            && !fin.incompat.contains(Incompat::CSUM_SEED)
            && self.sb.s_checksum_seed.get() != super::uuid_seed(&self.sb)
        {
            if self.check_fsck_needed().is_err() {
                return Ok(Err(Refused));
            }
            self.csum.rewrite = REWRITE_ALL;
        }
        let mut stored = fin;
        stored.compat.remove(later.compat);
        stored.ro_compat.remove(later.ro_compat);
        self.sb.set_features(stored);
        if self.sb.s_rev_level.get() == 0 && stored != Features::default() {
            // ext2fs_update_dynamic_rev.
            self.sb.s_rev_level.set(1);
            self.sb.s_first_ino.set(11);
            self.sb.s_inode_size.set(128);
        }
        if is_changed(r(RoCompat::SPARSE_SUPER))
            || is_off(r(RoCompat::HUGE_FILE))
            || is_changed(i(Incompat::FILETYPE))
            || is_changed(c(Compat::RESIZE_INODE))
            || is_off(r(RoCompat::LARGE_FILE))
        {
            self.request_fsck();
        }
        if fin != old {
            self.dirty = true;
        }
        Ok(Ok(()))
    }
}

/// `e2p_edit_feature2` with tune2fs's allow lists; the error is its message.
fn edit(list: &str, f: &mut Features) -> std::result::Result<(), String> {
    for word in list.split(|ch: char| ch == ',' || ch.is_ascii_whitespace()) {
        if word.is_empty() {
            continue;
        }
        if word.eq_ignore_ascii_case("none") || word.eq_ignore_ascii_case("clear") {
            *f = Features::default();
            continue;
        }
        let (neg, name) = match word.as_bytes()[0] {
            b'^' | b'-' => (true, &word[1..]),
            b'+' => (false, &word[1..]),
            _ => (false, word),
        };
        let Some((w, m)) = Features::lookup(name) else {
            return Err(format!("Invalid filesystem option set: {list}\n"));
        };
        let allowed = if neg { &OK_CLEAR } else { &OK_SET };
        if !allowed.has(w, m) {
            return Err(format!(
                "{} filesystem feature '{}' not supported.\n",
                if neg { "Clearing" } else { "Setting" },
                Features::name(w, m)
            ));
        }
        f.set(w, m, !neg);
    }
    Ok(())
}

/// `ext2fs_check_desc`'s location test without flex_bg: every group's
/// bitmaps and inode table lie inside the group.
fn descs_inside_groups(dev: &dyn BlockDevice, sb: &Superblock) -> Result<bool> {
    let (_, descs) = super::read_desc_table(dev, sb)?;
    let geo = Geometry::from_superblock(sb).map_err(|e| Error::corrupt("superblock", e))?;
    let wide = sb.desc_size() >= 64;
    let itb = u64::from(geo.inode_blocks_per_group());
    for (g, d) in (0u32..).zip(descs.iter()) {
        let (lo, hi) = (geo.group_first_block(g), geo.group_last_block(g));
        let inside = |b: u64| (lo..=hi).contains(&b);
        let it = d.inode_table(wide);
        if !inside(d.block_bitmap(wide))
            || !inside(d.inode_bitmap(wide))
            || !inside(it)
            || !inside(it + itb.saturating_sub(1))
        {
            return Ok(false);
        }
    }
    Ok(true)
}
