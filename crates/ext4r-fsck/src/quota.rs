//! Quota usage (e2fsck's quota context): pass 1 charges every inode it
//! keeps to its user, group and project, and at the end each quota file
//! the superblock names is read and compared with what was counted, as
//! e2fsck's `quota_compare_and_update` does. A file that differs, or does
//! not read, is `PR_6_UPDATE_QUOTAS`: written anew with the usage counted
//! and the limits the old file held.

use crate::codes::ProblemCode;
use crate::problem::Subject;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Seek, SeekFrom};

use ext4r::quota::{Dquot, Scan, Unreadable, Usage, QBLK};
use ext4r_format::inode::{Inode, InodeFlags};
use ext4r_format::InodeNr;

use crate::ctx::Ctx;
use crate::fix::Fix;

/// e2fsck's `quota_data_add` and `quota_data_inodes` for inode `ino` as
/// pass 1 keeps it: `space` bytes and `inodes` inodes (itself and the EA
/// inodes whose values it holds). The root and ordinary inodes count; the
/// project quota file, the orphan file and EA inodes do not.
///
/// Without quotas (most filesystems) done inline, without the call.
#[inline]
pub(crate) fn charge(c: &mut Ctx, ino: u32, inode: &Inode, rec: &[u8], space: u64, inodes: u64) {
    if !c.counts_quota() {
        return;
    }
    charge_counted(c, ino, inode, rec, space, inodes);
}

/// [`charge`] with a quota type counted.
#[inline(never)]
fn charge_counted(c: &mut Ctx, ino: u32, inode: &Inode, rec: &[u8], space: u64, inodes: u64) {
    let sb = c.sb();
    if !(ino == ext4r_format::inode::ino::ROOT || ino >= sb.first_ino())
        || ino == sb.s_prj_quota_inum.get()
        || ino == sb.s_orphan_file_inum.get()
        || inode.flags().contains(InodeFlags::EA_INODE)
    {
        return;
    }
    let ids = ext4r::quota::owners(rec);
    // Project ids only with inodes larger than the old 128 bytes
    // (e2fsck's project_quota_valid).
    let types = if rec.len() > 128 { 3 } else { 2 };
    for (t, id) in ids.iter().enumerate().take(types) {
        if let Some(m) = c.quota_usage(t) {
            let u = m.entry(*id).or_default();
            u.space = u.space.wrapping_add(space);
            u.inodes = u.inodes.wrapping_add(inodes);
        }
    }
}

/// The comparison at the end of the check, for each quota type in turn
/// (`emit` shows what each one found before the next is compared, as
/// e2fsck interleaves its warnings and questions).
///
/// A repair round with other fixes to make leaves it to the round after
/// them, which counts what they leave: e2fsck compares after all its
/// repairs. Bitmaps that cannot be trusted leave it undone, as e2fsck's
/// `invalid_bitmaps` does.
pub(crate) fn check(c: &mut Ctx, emit: &mut dyn FnMut(&Ctx)) {
    if !c.counts_quota() {
        return;
    }
    if c.groups().any_metadata_misplaced() {
        return;
    }
    if c.repairing() && !c.problems().fixes().is_empty() {
        return;
    }
    for qtype in 0..3u8 {
        compare(c, qtype);
        emit(c);
    }
}

fn compare(c: &mut Ctx, qtype: u8) {
    let q = usize::from(qtype);
    let Some(counted) = c.take_quota_usage(q) else {
        return;
    };
    let ino = crate::quota_usage::inum(c.sb(), q);
    let mut dict: BTreeMap<u32, Dquot> = counted
        .into_iter()
        .map(|(id, u)| (id, Dquot::new(id, u)))
        .collect();
    let mut warnings = Vec::new();
    let inconsistent = match read(c, ino, q) {
        Err(_) => true,
        Ok(scan) => {
            let mut seen = BTreeSet::new();
            let mut differs = false;
            for d in &scan.dquots {
                let m = dict
                    .entry(d.id)
                    .or_insert_with(|| Dquot::new(d.id, Usage::default()));
                seen.insert(d.id);
                if m.usage != d.usage {
                    differs = true;
                    warnings.push(format!(
                        "[QUOTA WARNING] Usage inconsistent for ID {}:actual ({}, {}) != \
                         expected ({}, {})",
                        d.id,
                        m.usage.space as i64,
                        m.usage.inodes as i64,
                        d.usage.space as i64,
                        d.usage.inodes as i64
                    ));
                }
                m.take_limits(d);
            }
            if scan.complete {
                for id in dict.keys().filter(|id| !seen.contains(id)) {
                    differs = true;
                    // e2fsck prints the id with %d.
                    warnings.push(format!(
                        "[QUOTA WARNING] Missing quota entry ID {}",
                        *id as i32
                    ));
                }
            }
            differs || !scan.complete
        }
    };
    for w in warnings {
        c.note(w);
    }
    if inconsistent {
        let now = c.now().max(0) as u64;
        let dquots: Vec<Dquot> = dict
            .into_values()
            .map(|mut d| {
                d.set_grace_times(now);
                d
            })
            .collect();
        c.report(Subject::Quota(qtype)).error_fix(
            6,
            ProblemCode::PR_6_UPDATE_QUOTAS,
            format!("Update quota info for quota type {qtype}"),
            Fix::UpdateQuota(qtype, dquots),
        );
    }
}

/// Reads quota file `ino` as e2fsprogs opens and scans it: through the
/// file's mapping, up to its size, zeros where nothing reads.
fn read(c: &Ctx, ino: u32, qtype: usize) -> Result<Scan, Unreadable> {
    let Ok(info) = c.fs().inode(InodeNr(ino)) else {
        return Err(Unreadable::Short);
    };
    let size = info.inode.size();
    let Ok(mut r) = c.fs().open_file(&info) else {
        // A mapping that does not read reads as nothing.
        return Err(Unreadable::Short);
    };
    ext4r::quota::scan(size, qtype, &mut |n, buf| {
        buf.fill(0);
        if r.seek(SeekFrom::Start(u64::from(n) * QBLK as u64)).is_err() {
            return;
        }
        let mut got = 0;
        while got < QBLK {
            match r.read(&mut buf[got..]) {
                Ok(0) => break,
                Ok(k) => got += k,
                Err(_) => {
                    buf.fill(0);
                    break;
                }
            }
        }
    })
}
