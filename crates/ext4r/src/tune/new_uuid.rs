//! `-U`: a new filesystem UUID, as tune2fs sets it (with every checksum
//! rewritten when the checksum seed derives from the UUID).

use super::{csum, read_desc_table, Refused, Run, Step};
use crate::device::BlockDevice;
use crate::error::{Error, Result};
use ext4r_format::checksum::fs_csum_seed;
use ext4r_format::features::{Compat, Incompat, RoCompat};
use ext4r_format::geometry::Geometry;
use ext4r_format::num;
use ext4r_format::superblock::Superblock;
use ext4r_txn::csum::Checksums;
use std::fmt::Write as _;

impl Run<'_, '_> {
    /// `-U`.
    pub(super) fn set_uuid(&mut self, dev: &dyn BlockDevice, req: &str) -> Result<Step> {
        let sb = &self.sb;
        if sb.has_compat(Compat::STABLE_INODES) {
            return Ok(self.refuse(
                "Cannot change the UUID of this filesystem because it has the \
                 stable_inodes feature flag.\n",
            ));
        }
        let csum_seed = sb.has_incompat(Incompat::CSUM_SEED);
        if !csum_seed
            && (sb.has_ro_compat(RoCompat::METADATA_CSUM) || sb.has_incompat(Incompat::EA_INODE))
        {
            if self.check_fsck_needed().is_err() {
                return Ok(Err(Refused));
            }
            // The checksum seed derives from the UUID: every checksum changes.
            self.csum.rewrite = csum::REWRITE_ALL;
        }
        let new = match req.to_ascii_lowercase().as_str() {
            "null" | "clear" => [0u8; 16],
            "random" => {
                let mut u = (self.env.random)();
                u[6] = (u[6] & 0x0f) | 0x40;
                u[8] = (u[8] & 0x3f) | 0x80;
                u
            }
            "time" => time_uuid(self.env.now, (self.env.random)()),
            _ => match crate::mkfs::parse_uuid(req) {
                Some(u) => u,
                None => {
                    let _ = write!(self.err, "{}: Invalid UUID format\n\n", self.env.program);
                    return Ok(Err(Refused));
                }
            },
        };
        // Descriptor checksums that were all valid are recomputed for the
        // new UUID (gdt_csum seeds them with it); invalid ones stay as they
        // are, as tune2fs leaves them for e2fsck.
        let gdt = self.sb.has_ro_compat(RoCompat::GDT_CSUM)
            || self.sb.has_ro_compat(RoCompat::METADATA_CSUM);
        if gdt {
            let (mut table, descs) = read_desc_table(dev, &self.sb)?;
            let geo =
                Geometry::from_superblock(&self.sb).map_err(|e| Error::corrupt("superblock", e))?;
            let dsize = geo.desc_size as usize;
            let old = Checksums::new(&self.sb);
            let all_ok = (0u32..).zip(descs.iter()).all(|(g, d)| old.desc_ok(g, d));
            self.sb.s_uuid = new;
            if all_ok {
                let cs = Checksums::new(&self.sb);
                for (g, mut d) in descs.into_iter().enumerate() {
                    cs.stamp_desc(num::sat_u32(g), &mut d); // g < s_groups_count
                    d.write(&mut table[g * dsize..(g + 1) * dsize], dsize)
                        .map_err(|e| Error::corrupt("group descriptor", e))?;
                }
                self.descs = Some(table);
            }
        } else {
            self.sb.s_uuid = new;
        }
        self.dirty = true;
        Ok(Ok(()))
    }
}

/// A version-1 (time-based) UUID as libuuid's `uuid_generate_time` makes
/// it: 100 ns intervals since 1582-10-15, a random clock sequence and a
/// random node id with the multicast bit set (no MAC address is used).
pub(super) fn time_uuid(now: i64, rand: [u8; 16]) -> [u8; 16] {
    let ticks = (now.max(0) as u64) * 10_000_000
        + 0x01B2_1DD2_1381_4000
        + u64::from(u16::from_le_bytes([rand[0], rand[1]]) % 10_000);
    let mut u = [0u8; 16];
    u[0..4].copy_from_slice(&num::lo32(ticks).to_be_bytes());
    u[4..6].copy_from_slice(&num::hi16_of_48(ticks).to_be_bytes());
    u[6..8].copy_from_slice(&((((ticks >> 48) as u16) & 0x0fff) | 0x1000).to_be_bytes());
    u[8] = (rand[2] & 0x3f) | 0x80;
    u[9] = rand[3];
    u[10..16].copy_from_slice(&rand[4..10]);
    u[10] |= 0x01;
    u
}

/// The checksum seed a filesystem would use from its UUID.
pub(super) fn uuid_seed(sb: &Superblock) -> u32 {
    fs_csum_seed(&sb.s_uuid)
}
