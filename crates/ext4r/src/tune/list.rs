//! The superblock as `tune2fs -l` and `dumpe2fs -h` print it (e2fsprogs'
//! `list_super2`, lib/e2p/ls.c): the same lines, labels, column widths and
//! conditions, so that the two outputs can be compared byte for byte.
//!
//! Times are printed as C's `ctime` does in UTC; e2fsprogs uses the local
//! time zone, so the outputs agree on machines (and in tests) running in UTC.

use ext4r_format::features::{Incompat, RoCompat};
use ext4r_format::superblock::{Superblock, STATE_ERROR, STATE_VALID};
use std::fmt::Write;
use zerocopy::IntoBytes;

/// Looks up a user or group name by number (`getpwuid` / `getgrgid`).
pub type NameLookup<'a> = &'a dyn Fn(u32) -> Option<String>;

/// Renders the superblock as `tune2fs -l` prints it (after its version
/// line). `user` and `group` resolve the reserved-blocks owner's names.
pub fn list_super(sb: &Superblock, user: NameLookup<'_>, group: NameLookup<'_>) -> String {
    let mut o = String::new();
    // Writing to a String cannot fail.
    let _ = write_super(&mut o, sb, user, group);
    o
}

fn write_super(
    o: &mut String,
    sb: &Superblock,
    user: NameLookup<'_>,
    group: NameLookup<'_>,
) -> std::fmt::Result {
    let bs = 1024u64 << sb.s_log_block_size.get().min(16);
    let ipg = u64::from(sb.s_inodes_per_group.get());
    let isz = u64::from(sb.inode_size());
    let inode_blocks = (ipg * isz).div_ceil(bs);
    let label = c_str(&sb.s_volume_name);
    if label.is_empty() {
        writeln!(o, "Filesystem volume name:   <none>")?;
    } else {
        writeln!(o, "Filesystem volume name:   {label}")?;
    }
    let lm = c_str(&sb.s_last_mounted);
    if lm.is_empty() {
        writeln!(o, "Last mounted on:          <not available>")?;
    } else {
        writeln!(o, "Last mounted on:          {lm}")?;
    }
    writeln!(o, "Filesystem UUID:          {}", uuid_str(&sb.s_uuid))?;
    writeln!(o, "Filesystem magic number:  0x{:04X}", sb.s_magic.get())?;
    let rev = sb.s_rev_level.get();
    let rev_name = match rev {
        0 => "original",
        1 => "dynamic",
        _ => "unknown",
    };
    writeln!(o, "Filesystem revision #:    {} ({rev_name})", rev as i32)?;
    let names = sb.features().names();
    if names.is_empty() {
        writeln!(o, "Filesystem features:      (none)")?;
    } else {
        writeln!(o, "Filesystem features:      {}", names.join(" "))?;
    }
    let flags = sb.s_flags.get();
    if flags != 0 {
        let mut s = String::new();
        for (bit, name) in [
            (1u32, "signed_directory_hash "),
            (2, "unsigned_directory_hash "),
            (4, "test_filesystem "),
        ] {
            if flags & bit != 0 {
                s.push_str(name);
            }
        }
        if s.is_empty() {
            s.push_str("(none)");
        }
        writeln!(o, "Filesystem flags:         {s}")?;
    }
    writeln!(
        o,
        "Default mount options:   {}",
        mount_opts_string(sb.s_default_mount_opts.get())
    )?;
    let mo = c_str(&sb.s_mount_opts);
    if !mo.is_empty() {
        writeln!(o, "Mount options:            {mo}")?;
    }
    let state = sb.s_state.get();
    writeln!(
        o,
        "Filesystem state:        {}{}",
        if state & STATE_VALID != 0 {
            " clean"
        } else {
            " not clean"
        },
        if state & STATE_ERROR != 0 {
            " with errors"
        } else {
            ""
        }
    )?;
    let errors = match sb.s_errors.get() {
        1 => "Continue",
        2 => "Remount read-only",
        3 => "Panic",
        _ => "Unknown (continue)",
    };
    writeln!(o, "Errors behavior:          {errors}")?;
    let os = match sb.s_creator_os.get() {
        0 => "Linux",
        1 => "Hurd",
        2 => "Masix",
        3 => "FreeBSD",
        4 => "Lites",
        _ => "(unknown os)",
    };
    writeln!(o, "Filesystem OS type:       {os}")?;
    writeln!(o, "Inode count:              {}", sb.s_inodes_count.get())?;
    writeln!(o, "Block count:              {}", sb.blocks_count())?;
    writeln!(o, "Reserved block count:     {}", sb.r_blocks_count())?;
    if sb.s_overhead_clusters.get() != 0 {
        writeln!(
            o,
            "Overhead clusters:        {}",
            sb.s_overhead_clusters.get()
        )?;
    }
    writeln!(o, "Free blocks:              {}", sb.free_blocks_count())?;
    writeln!(
        o,
        "Free inodes:              {}",
        sb.s_free_inodes_count.get()
    )?;
    writeln!(
        o,
        "First block:              {}",
        sb.s_first_data_block.get()
    )?;
    writeln!(o, "Block size:               {bs}")?;
    let cs = 1024u64 << sb.s_log_cluster_size.get().min(31);
    let bigalloc = sb.has_ro_compat(RoCompat::BIGALLOC);
    if bigalloc {
        writeln!(o, "Cluster size:             {cs}")?;
    } else {
        writeln!(o, "Fragment size:            {cs}")?;
    }
    if sb.has_incompat(Incompat::BIT64) {
        writeln!(o, "Group descriptor size:    {}", sb.s_desc_size.get())?;
    }
    if sb.s_reserved_gdt_blocks.get() != 0 {
        writeln!(
            o,
            "Reserved GDT blocks:      {}",
            sb.s_reserved_gdt_blocks.get()
        )?;
    }
    writeln!(
        o,
        "Blocks per group:         {}",
        sb.s_blocks_per_group.get()
    )?;
    if bigalloc {
        writeln!(
            o,
            "Clusters per group:       {}",
            sb.s_clusters_per_group.get()
        )?;
    } else {
        writeln!(
            o,
            "Fragments per group:      {}",
            sb.s_clusters_per_group.get()
        )?;
    }
    writeln!(o, "Inodes per group:         {ipg}")?;
    writeln!(o, "Inode blocks per group:   {inode_blocks}")?;
    if sb.s_raid_stride.get() != 0 {
        writeln!(o, "RAID stride:              {}", sb.s_raid_stride.get())?;
    }
    if sb.s_raid_stripe_width.get() != 0 {
        writeln!(
            o,
            "RAID stripe width:        {}",
            sb.s_raid_stripe_width.get()
        )?;
    }
    if sb.s_first_meta_bg.get() != 0 {
        writeln!(o, "First meta block group:   {}", sb.s_first_meta_bg.get())?;
    }
    if sb.s_log_groups_per_flex != 0 {
        writeln!(
            o,
            "Flex block group size:    {}",
            1u32.wrapping_shl(u32::from(sb.s_log_groups_per_flex))
        )?;
    }
    // list_super2 reads the 32-bit time fields only, as here.
    if sb.s_mkfs_time.get() != 0 {
        write!(
            o,
            "Filesystem created:       {}",
            ctime(sb.s_mkfs_time.get().into())
        )?;
    }
    if sb.s_mtime.get() != 0 {
        write!(
            o,
            "Last mount time:          {}",
            ctime(sb.s_mtime.get().into())
        )?;
    } else {
        writeln!(o, "Last mount time:          n/a")?;
    }
    write!(
        o,
        "Last write time:          {}",
        ctime(sb.s_wtime.get().into())
    )?;
    writeln!(o, "Mount count:              {}", sb.s_mnt_count.get())?;
    writeln!(o, "Maximum mount count:      {}", sb.s_max_mnt_count.get())?;
    let lastcheck = sb.s_lastcheck.get();
    write!(o, "Last checked:             {}", ctime(lastcheck.into()))?;
    let interval = sb.s_checkinterval.get();
    writeln!(
        o,
        "Check interval:           {interval} ({})",
        interval_string(interval)
    )?;
    if interval != 0 {
        // time_t arithmetic: the sum of two u32 does not wrap.
        let next = i64::from(lastcheck) + i64::from(interval);
        write!(o, "Next check after:         {}", ctime(next))?;
    }
    let kb = sb.s_kbytes_written.get();
    if kb != 0 {
        let p = |x: u32| 1u64 << x;
        let s = if kb < p(13) {
            format!("{kb} kB")
        } else if kb < p(23) {
            format!("{} MB", (kb + p(9)) >> 10)
        } else if kb < p(33) {
            format!("{} GB", (kb + p(19)) >> 20)
        } else if kb < p(43) {
            format!("{} TB", (kb + p(29)) >> 30)
        } else {
            format!("{} PB", (kb + p(39)) >> 40)
        };
        writeln!(o, "Lifetime writes:          {s}")?;
    }
    let uid = sb.s_def_resuid.get();
    match user(uid.into()) {
        Some(n) => writeln!(o, "Reserved blocks uid:      {uid} (user {n})")?,
        None => writeln!(o, "Reserved blocks uid:      {uid} (user unknown)")?,
    }
    let gid = sb.s_def_resgid.get();
    match group(gid.into()) {
        Some(n) => writeln!(o, "Reserved blocks gid:      {gid} (group {n})")?,
        None => writeln!(o, "Reserved blocks gid:      {gid} (group unknown)")?,
    }
    if rev >= 1 {
        writeln!(
            o,
            "First inode:              {}",
            sb.s_first_ino.get() as i32
        )?;
        writeln!(o, "Inode size:\t          {}", sb.s_inode_size.get())?;
        if sb.s_min_extra_isize.get() != 0 {
            writeln!(
                o,
                "Required extra isize:     {}",
                sb.s_min_extra_isize.get()
            )?;
        }
        if sb.s_want_extra_isize.get() != 0 {
            writeln!(
                o,
                "Desired extra isize:      {}",
                sb.s_want_extra_isize.get()
            )?;
        }
    }
    if sb.s_journal_uuid.iter().any(|&b| b != 0) {
        writeln!(
            o,
            "Journal UUID:             {}",
            uuid_str(&sb.s_journal_uuid)
        )?;
    }
    if sb.s_journal_inum.get() != 0 {
        writeln!(o, "Journal inode:            {}", sb.s_journal_inum.get())?;
    }
    if sb.s_journal_dev.get() != 0 {
        writeln!(
            o,
            "Journal device:\t          0x{:04x}",
            sb.s_journal_dev.get()
        )?;
    }
    if sb.s_last_orphan.get() != 0 {
        writeln!(o, "First orphan inode:       {}", sb.s_last_orphan.get())?;
    }
    let hv = sb.s_def_hash_version;
    if sb.has_compat(ext4r_format::features::Compat::DIR_INDEX) || hv != 0 {
        writeln!(o, "Default directory hash:   {}", hash_name(hv))?;
    }
    // The four little-endian words as the 16 bytes of a UUID, as
    // dumpe2fs prints them.
    let mut seed_bytes = [0u8; 16];
    seed_bytes.copy_from_slice(sb.s_hash_seed.as_bytes());
    if seed_bytes.iter().any(|&b| b != 0) {
        writeln!(o, "Directory Hash Seed:      {}", uuid_str(&seed_bytes))?;
    }
    match sb.s_jnl_backup_type {
        0 => {}
        1 => writeln!(o, "Journal backup:           inode blocks")?,
        t => writeln!(o, "Journal backup:           type {t}")?,
    }
    let bgs = [sb.s_backup_bgs[0].get(), sb.s_backup_bgs[1].get()];
    if bgs[0] != 0 || bgs[1] != 0 {
        let mut s = String::new();
        for g in bgs.iter().filter(|g| **g != 0) {
            let _ = write!(s, "{g} ");
        }
        writeln!(o, "Backup block groups:      {s}")?;
    }
    if sb.s_snapshot_inum.get() != 0 {
        writeln!(o, "Snapshot inode:           {}", sb.s_snapshot_inum.get())?;
        writeln!(o, "Snapshot ID:              {}", sb.s_snapshot_id.get())?;
        writeln!(
            o,
            "Snapshot reserved blocks: {}",
            sb.s_snapshot_r_blocks_count.get()
        )?;
    }
    if sb.s_snapshot_list.get() != 0 {
        writeln!(o, "Snapshot list head:       {}", sb.s_snapshot_list.get())?;
    }
    if sb.s_error_count.get() != 0 {
        writeln!(o, "FS Error count:           {}", sb.s_error_count.get())?;
    }
    for first in [true, false] {
        let (time, func, line, ino, block, code) = if first {
            (
                sb.s_first_error_time.get(),
                &sb.s_first_error_func,
                sb.s_first_error_line.get(),
                sb.s_first_error_ino.get(),
                sb.s_first_error_block.get(),
                sb.s_first_error_errcode,
            )
        } else {
            (
                sb.s_last_error_time.get(),
                &sb.s_last_error_func,
                sb.s_last_error_line.get(),
                sb.s_last_error_ino.get(),
                sb.s_last_error_block.get(),
                sb.s_last_error_errcode,
            )
        };
        if time == 0 {
            continue;
        }
        let w = if first { "First" } else { "Last" };
        let pad = |label: &str| format!("{w} {label}:{}", " ".repeat(25 - w.len() - label.len()));
        write!(o, "{}{}", pad("error time"), ctime(time.into()))?;
        writeln!(o, "{}{}", pad("error function"), c_str(func))?;
        writeln!(o, "{}{line}", pad("error line #"))?;
        if ino != 0 {
            writeln!(o, "{}{ino}", pad("error inode #"))?;
        }
        if block != 0 {
            writeln!(o, "{}{block}", pad("error block #"))?;
        }
        if code != 0 {
            writeln!(o, "{}{}", pad("error err"), errcode_name(code))?;
        }
    }
    if sb.has_incompat(Incompat::MMP) {
        writeln!(o, "MMP block number:         {}", sb.s_mmp_block.get())?;
        writeln!(
            o,
            "MMP update interval:      {}",
            sb.s_mmp_update_interval.get()
        )?;
    }
    for (label, ino) in [
        ("User quota inode:", sb.s_usr_quota_inum.get()),
        ("Group quota inode:", sb.s_grp_quota_inum.get()),
        ("Project quota inode:", sb.s_prj_quota_inum.get()),
    ] {
        if ino != 0 {
            writeln!(o, "{label:<26}{ino}")?;
        }
    }
    if sb.has_ro_compat(RoCompat::METADATA_CSUM) {
        let t = if sb.s_checksum_type == 1 {
            "crc32c"
        } else {
            "unknown"
        };
        writeln!(o, "Checksum type:            {t}")?;
        writeln!(o, "Checksum:                 0x{:08x}", sb.s_checksum.get())?;
    }
    if sb.s_encrypt_pw_salt.iter().any(|&b| b != 0) {
        writeln!(
            o,
            "Encryption PW Salt:       {}",
            uuid_str(&sb.s_encrypt_pw_salt)
        )?;
    }
    if sb.has_incompat(Incompat::CSUM_SEED) {
        writeln!(
            o,
            "Checksum seed:            0x{:08x}",
            sb.s_checksum_seed.get()
        )?;
    }
    if sb.has_incompat(Incompat::CASEFOLD) {
        let enc = sb.s_encoding.get();
        if enc == 1 {
            writeln!(o, "Character encoding:       utf8-12.1")?;
        } else {
            writeln!(o, "Character encoding:       UNKNOWN_ENCODING_{enc}")?;
        }
    }
    if sb.has_compat(ext4r_format::features::Compat::ORPHAN_FILE) {
        writeln!(
            o,
            "Orphan file inode:        {}",
            sb.s_orphan_file_inum.get()
        )?;
    }
    Ok(())
}

/// A NUL-padded fixed-size string field, up to its first NUL (`%.*s`).
fn c_str(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

/// A UUID as e2fsprogs prints it, `<none>` when all zero.
pub fn uuid_str(u: &[u8; 16]) -> String {
    if u.iter().all(|&b| b == 0) {
        return "<none>".into();
    }
    uuid::Uuid::from_bytes(*u).hyphenated().to_string()
}

/// The default mount options as `list_super2` prints them: the journal
/// mode first, then the other bits in ascending order; ` (none)` if empty.
pub fn mount_opts_string(mask: u32) -> String {
    let mut s = String::new();
    if mask & JMODE != 0 {
        s.push(' ');
        s.push_str(&mntopt_name(mask & JMODE));
    }
    for bit in 0..32 {
        let m = 1u32 << bit;
        if m & JMODE == 0 && mask & m != 0 {
            s.push(' ');
            s.push_str(&mntopt_name(m));
        }
    }
    if s.is_empty() {
        s.push_str(" (none)");
    }
    s
}

/// `EXT3_DEFM_JMODE`: the two-bit journal mode field.
pub(crate) const JMODE: u32 = 0x0060;

/// e2fsprogs' default mount option names (lib/e2p/mntopts.c).
pub(crate) const MNTOPTS: &[(u32, &str)] = &[
    (0x0001, "debug"),
    (0x0002, "bsdgroups"),
    (0x0004, "user_xattr"),
    (0x0008, "acl"),
    (0x0010, "uid16"),
    (0x0020, "journal_data"),
    (0x0040, "journal_data_ordered"),
    (0x0060, "journal_data_writeback"),
    (0x0100, "nobarrier"),
    (0x0200, "block_validity"),
    (0x0400, "discard"),
    (0x0800, "nodelalloc"),
];

fn mntopt_name(mask: u32) -> String {
    if let Some((_, n)) = MNTOPTS.iter().find(|(m, _)| *m == mask) {
        return (*n).to_string();
    }
    // e2p numbers an unnamed option by its highest bit.
    format!("MNTOPT_{}", 31 - mask.leading_zeros().min(31))
}

/// Directory hash names (lib/e2p/hashstr.c).
pub fn hash_name(v: u8) -> String {
    match v {
        0 => "legacy".into(),
        1 => "half_md4".into(),
        2 => "tea".into(),
        n => format!("HASHALG_{n}"),
    }
}

fn errcode_name(code: u8) -> String {
    const NAMES: [&str; 18] = [
        "",
        "UNKNOWN",
        "EIO",
        "ENOMEM",
        "EFSBADCRC",
        "EFSCORRUPTED",
        "ENOSPC",
        "ENOKEY",
        "EROFS",
        "EFBIG",
        "EEXIST",
        "ERANGE",
        "EOVERFLOW",
        "EBUSY",
        "ENOTDIR",
        "ENOTEMPTY",
        "ESHUTDOWN",
        "EFAULT",
    ];
    NAMES
        .get(usize::from(code))
        .map_or_else(|| format!("UNKNOWN_ERRCODE_{code}"), |s| (*s).to_string())
}

/// `interval_string` of lib/e2p/ls.c: months of 30 days, weeks, days, then
/// h:mm:ss.
fn interval_string(secs: u32) -> String {
    const MONTH: u32 = 86400 * 30;
    const WEEK: u32 = 86400 * 7;
    const DAY: u32 = 86400;
    if secs == 0 {
        return "<none>".into();
    }
    let mut secs = secs;
    let mut parts: Vec<String> = Vec::new();
    for (unit, name) in [(MONTH, "month"), (WEEK, "week"), (DAY, "day")] {
        if secs >= unit {
            let n = secs / unit;
            secs -= n * unit;
            parts.push(format!("{n} {name}{}", if n > 1 { "s" } else { "" }));
        }
    }
    if secs > 0 {
        parts.push(format!(
            "{}:{:02}:{:02}",
            secs / 3600,
            secs % 3600 / 60,
            secs % 60
        ));
    }
    parts.join(", ")
}

/// C's `ctime` in the local zone, with its newline:
/// `"Thu Nov 14 22:13:20 2023\n"`.
pub fn ctime(t: i64) -> String {
    format!("{}\n", crate::localtime::ctime(t))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_read_like_e2p() {
        assert_eq!(interval_string(0), "<none>");
        assert_eq!(interval_string(86400 * 180), "6 months");
        assert_eq!(
            interval_string(86400 * 38 + 61),
            "1 month, 1 week, 1 day, 0:01:01"
        );
    }

    #[test]
    fn mount_options_put_the_journal_mode_first() {
        assert_eq!(mount_opts_string(0), " (none)");
        assert_eq!(mount_opts_string(0x0c), " user_xattr acl");
        assert_eq!(
            mount_opts_string(0x6c),
            " journal_data_writeback user_xattr acl"
        );
        assert_eq!(mount_opts_string(1 << 20), " MNTOPT_20");
    }
}
