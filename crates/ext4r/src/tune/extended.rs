//! `-E`: tune2fs's extended options, parsed and applied in its order.

use super::parse::parse_c_ulong;
use super::{Refused, Run, Step};
use ext4r_format::features::Incompat;
use ext4r_format::num;
use ext4r_format::superblock::{FLAGS_TEST_FS, STATE_ERROR};
use std::fmt::Write as _;

impl Run<'_, '_> {
    /// `-E`: parsed and applied in tune2fs's order; stride, stripe width and
    /// mount_opts are stored later (after `-l`), as tune2fs does.
    pub(super) fn extended(&mut self, opts: &str, late: &mut Late) -> Step {
        let mut bad = 0;
        let mut encoding: Option<u16> = None;
        let mut encoding_flags: Option<String> = None;
        for token in opts.split(',') {
            if token.is_empty() {
                // tune2fs stops at an empty token.
                break;
            }
            let (key, arg) = match token.split_once('=') {
                Some((k, a)) => (k, Some(a)),
                None => (token, None),
            };
            match key {
                // Done after the other -E options, in place of what
                // follows them (tune2fs's "goto closefs").
                "clear-mmp" | "clear_mmp" => late.clear_mmp = true,
                "mmp_update_interval" => {
                    let Some(a) = arg else {
                        bad += 1;
                        continue;
                    };
                    let Some(mut v) = parse_c_ulong(a) else {
                        let _ = writeln!(self.err, "Invalid mmp_update_interval: {a}");
                        bad += 1;
                        continue;
                    };
                    if v == 0 {
                        v = 5;
                    } else if v > 300 {
                        let _ = writeln!(self.err, "mmp_update_interval too big: {v}");
                        bad += 1;
                        continue;
                    }
                    let _ = writeln!(
                        self.out,
                        "Setting multiple mount protection update interval to {v} second{}",
                        if v == 1 { "" } else { "s" }
                    );
                    self.sb.s_mmp_update_interval.set(num::sat_u16(v)); // <= 300, checked above
                    self.dirty = true;
                }
                "force_fsck" => {
                    self.sb.s_state.set(self.sb.s_state.get() | STATE_ERROR);
                    self.out
                        .push_str("Setting filesystem error flag to force fsck.\n");
                    self.dirty = true;
                }
                "test_fs" => {
                    self.sb.s_flags.set(self.sb.s_flags.get() | FLAGS_TEST_FS);
                    self.out.push_str("Setting test filesystem flag\n");
                    self.dirty = true;
                }
                "^test_fs" => {
                    self.sb.s_flags.set(self.sb.s_flags.get() & !FLAGS_TEST_FS);
                    self.out.push_str("Clearing test filesystem flag\n");
                    self.dirty = true;
                }
                "stride" => {
                    let Some(a) = arg else {
                        bad += 1;
                        continue;
                    };
                    match parse_c_ulong(a) {
                        // s_raid_stride is 16 bits: a wider value is refused,
                        // not cut.
                        Some(v) if u16::try_from(v).is_ok() => late.stride = Some(v),
                        Some(_) => {
                            let _ = writeln!(self.err, "Invalid RAID stride: {a}");
                            bad += 1;
                        }
                        None => {
                            let _ = writeln!(self.err, "Invalid RAID stride: {a}");
                            bad += 1;
                        }
                    }
                }
                "stripe-width" | "stripe_width" => {
                    let Some(a) = arg else {
                        bad += 1;
                        continue;
                    };
                    match parse_c_ulong(a) {
                        Some(v) if u32::try_from(v).is_ok() => late.stripe_width = Some(v),
                        Some(_) => {
                            let _ = writeln!(self.err, "Invalid RAID stripe-width: {a}");
                            bad += 1;
                        }
                        None => {
                            let _ = writeln!(self.err, "Invalid RAID stripe-width: {a}");
                            bad += 1;
                        }
                    }
                }
                "hash_alg" | "hash-alg" => {
                    let Some(a) = arg else {
                        bad += 1;
                        continue;
                    };
                    match string_to_hash(a) {
                        Some(h) => {
                            self.sb.s_def_hash_version = h;
                            let _ =
                                writeln!(self.out, "Setting default hash algorithm to {a} ({h})");
                            self.dirty = true;
                        }
                        None => {
                            let _ = writeln!(self.err, "Invalid hash algorithm: {a}");
                            bad += 1;
                        }
                    }
                }
                "mount_opts" => {
                    let Some(a) = arg else {
                        bad += 1;
                        continue;
                    };
                    if a.len() >= 64 {
                        self.err.push_str("Extended mount options too long\n");
                        continue;
                    }
                    late.mount_opts = Some(a.to_string());
                }
                "encoding" => {
                    let Some(a) = arg else {
                        bad += 1;
                        continue;
                    };
                    if self.sb.has_incompat(Incompat::CASEFOLD) && !self.enabling_casefold {
                        self.err.push_str("Cannot alter existing encoding\n");
                        bad += 1;
                        continue;
                    }
                    if a != "utf8" && a != "utf8-12.1" {
                        let _ = writeln!(self.err, "Invalid encoding: {a}");
                        bad += 1;
                        continue;
                    }
                    encoding = Some(1);
                    self.sb.s_encoding.set(1);
                    self.sb.s_encoding_flags.set(0);
                    let _ = writeln!(self.out, "Setting encoding to '{a}'");
                }
                "encoding_flags" => {
                    let Some(a) = arg else {
                        bad += 1;
                        continue;
                    };
                    encoding_flags = Some(a.to_string());
                }
                "orphan_file_size" => {
                    self.err
                        .push_str("tune.ext4r: orphan_file_size is not supported yet.\n");
                    return Err(Refused);
                }
                _ => bad += 1,
            }
        }
        if encoding.is_some() && bad == 0 {
            self.sb.s_encoding_flags.set(0);
            if let Some(fl) = &encoding_flags {
                let mut flags = 0u16;
                if edit_encoding_flags(fl, &mut flags).is_err() {
                    let _ = writeln!(self.err, "error: Invalid encoding flag: {fl}");
                    bad += 1;
                } else {
                    self.sb.s_encoding_flags.set(flags);
                    let _ = writeln!(self.out, "Setting encoding_flags to '{fl}'");
                }
            }
            self.sb
                .s_feature_incompat
                .set(self.sb.s_feature_incompat.get() | Incompat::CASEFOLD.bits());
            self.dirty = true;
        } else if encoding_flags.is_some() && bad == 0 {
            self.err.push_str(
                "error: An encoding must be explicitly specified when passing encoding-flags\n",
            );
            bad += 1;
        }
        if bad > 0 {
            self.err.push_str(EXTENDED_USAGE);
            return Err(Refused);
        }
        Ok(())
    }
}

/// Options of `-E` that tune2fs stores after listing.
#[derive(Default)]
pub(super) struct Late {
    pub(super) stride: Option<u64>,
    pub(super) stripe_width: Option<u64>,
    pub(super) mount_opts: Option<String>,
    /// `clear_mmp`: write a fresh, clean MMP block (needs `-f`).
    pub(super) clear_mmp: bool,
}

const EXTENDED_USAGE: &str = "\nBad options specified.\n\n\
Extended options are separated by commas, and may take an argument which\n\
\tis set off by an equals ('=') sign.\n\n\
Valid extended options are:\n\
\tclear_mmp\n\
\thash_alg=<hash algorithm>\n\
\tmount_opts=<extended default mount options>\n\
\tmmp_update_interval=<mmp update interval in seconds>\n\
\tstride=<RAID per-disk chunk size in blocks>\n\
\tstripe_width=<RAID stride*data disks in blocks>\n\
\tforce_fsck\n\
\ttest_fs\n\
\t^test_fs\n\
\tencoding=<encoding>\n\
\tencoding_flags=<flags>\n";

/// `e2p_string2hash`.
fn string_to_hash(s: &str) -> Option<u8> {
    for (i, n) in (0u8..).zip(["legacy", "half_md4", "tea"]) {
        if s.eq_ignore_ascii_case(n) {
            return Some(i);
        }
    }
    let rest = s.get(..8).filter(|p| p.eq_ignore_ascii_case("HASHALG_"))?;
    let num: i64 = s[rest.len()..].parse().ok()?;
    u8::try_from(num).ok()
}

/// `e2p_str2encoding_flags` for utf8: `strict` / `nostrict`, `-`-separated.
fn edit_encoding_flags(list: &str, flags: &mut u16) -> std::result::Result<(), ()> {
    for f in list.split('-') {
        match f {
            "strict" => *flags |= 1,
            "nostrict" => *flags &= !1,
            _ => return Err(()),
        }
    }
    Ok(())
}
