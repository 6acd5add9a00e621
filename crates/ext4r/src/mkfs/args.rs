//! mke2fs's textual arguments as a library: sizes (`parse_num_blocks2`)
//! and the `-E` list. The CLI and the fuzzer share them, so what a user
//! types is validated by the same code the tests exercise.

use super::params::{parse_uuid, Extended};
use crate::error::{Error, Result};

fn bad(msg: String) -> Error {
    Error::InvalidArgument(msg)
}

/// mke2fs's parse_num_blocks2: a count of `unit`-byte blocks, or bytes with
/// a K/M/G/T/P suffix (`s` = 512-byte sectors).
///
/// # Errors
/// [`Error::InvalidArgument`] for anything else, or a size past `u64`.
pub fn parse_size(s: &str, unit: u64) -> Result<u64> {
    let s = s.trim();
    let (num, suffix) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: u64 = num
        .parse()
        .map_err(|_| bad(format!("invalid size '{s}'")))?;
    let mult: u64 = match suffix {
        "" => unit,
        "s" => 512,
        "K" | "k" => 1 << 10,
        "M" | "m" => 1 << 20,
        "G" | "g" => 1 << 30,
        "T" | "t" => 1 << 40,
        "P" | "p" => 1 << 50,
        _ => return Err(bad(format!("invalid size '{s}'"))),
    };
    n.checked_mul(mult)
        .ok_or_else(|| bad(format!("size '{s}' too large")))
}

impl Extended {
    /// Parses mke2fs's `-E` lists (each comma-separated; as with mke2fs the
    /// caller passes only the last `-E`). `root_owner` without a value is
    /// the calling user.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] with mke2fs's "Bad option(s)" wording for
    /// an unknown option, or a value that does not parse or fit.
    pub fn parse(list: &[String]) -> Result<Extended> {
        let mut ext = Extended::default();
        for item in list
            .iter()
            .flat_map(|l| l.split(','))
            .filter(|s| !s.is_empty())
        {
            let (k, v) = match item.split_once('=') {
                Some((k, v)) => (k, Some(v)),
                None => (item, None),
            };
            let num = |v: Option<&str>| -> Result<u64> {
                v.ok_or_else(|| bad(format!("'{k}' needs a value")))?
                    .parse::<u64>()
                    .map_err(|_| bad(format!("invalid value for '{k}'")))
            };
            let num32 = |v: Option<&str>| -> Result<u32> {
                u32::try_from(num(v)?).map_err(|_| bad(format!("invalid value for '{k}'")))
            };
            let flag = |v: Option<&str>| -> Result<bool> {
                Ok(v.map_or(Ok(1), |s| s.parse::<u64>())
                    .map_err(|_| bad(format!("invalid value for '{k}'")))?
                    != 0)
            };
            let text = |v: Option<&str>| -> Result<String> {
                v.map(str::to_string)
                    .ok_or_else(|| bad(format!("'{k}' needs a value")))
            };
            match k {
                "stride" => ext.stride = Some(num32(v)?),
                "stripe_width" | "stripe-width" => ext.stripe_width = Some(num32(v)?),
                "lazy_itable_init" => ext.lazy_itable_init = Some(flag(v)?),
                "lazy_journal_init" => ext.lazy_journal_init = Some(flag(v)?),
                "assume_storage_prezeroed" => ext.assume_storage_prezeroed = flag(v)?,
                "nodiscard" => ext.discard = Some(false),
                "discard" => ext.discard = Some(true),
                "packed_meta_blocks" => ext.packed_meta_blocks = flag(v)?,
                "test_fs" => ext.test_fs = true,
                "num_backup_sb" => ext.num_backup_sb = Some(num32(v)?),
                "resize" => ext.resize = Some(num(v)?),
                "orphan_file_size" => {
                    ext.orphan_file_size = Some(parse_size(v.unwrap_or(""), 1024)?)
                }
                "quotatype" => ext.quota_types = Some(text(v)?),
                "uid" => ext.populate_uid = Some(num32(v)?),
                "gid" => ext.populate_gid = Some(num32(v)?),
                "no_copy_xattrs" => ext.no_copy_xattrs = true,
                "encoding" => ext.encoding = Some(text(v)?),
                "encoding_flags" => ext.encoding_flags = Some(text(v)?),
                "root_owner" => {
                    ext.root_owner = Some(match v {
                        None => (
                            rustix::process::getuid().as_raw(),
                            rustix::process::getgid().as_raw(),
                        ),
                        Some(s) => {
                            let owner = s.split_once(':').and_then(|(u, g)| {
                                Some((u.parse::<u32>().ok()?, g.parse::<u32>().ok()?))
                            });
                            owner.ok_or_else(|| {
                                bad(format!("Invalid root_owner: '{s}' (uid:gid)"))
                            })?
                        }
                    })
                }
                "hash_seed" => {
                    let s = v.unwrap_or("");
                    ext.hash_seed =
                        Some(parse_uuid(s).ok_or_else(|| bad(format!("Invalid hash seed: {s}")))?)
                }
                _ => {
                    return Err(bad(format!(
                        "Bad option(s) specified: {k}\n\nExtended options are separated by \
                         commas: stride, stripe_width, resize, lazy_itable_init, \
                         lazy_journal_init, assume_storage_prezeroed, root_owner, test_fs, \
                         discard, nodiscard, num_backup_sb, packed_meta_blocks, hash_seed, \
                         orphan_file_size, encoding, encoding_flags, quotatype, no_copy_xattrs, \
                         uid, gid"
                    )))
                }
            }
        }
        Ok(ext)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_extended_options() {
        assert_eq!(parse_size("4", 1024).ok(), Some(4096));
        assert_eq!(parse_size("2M", 1).ok(), Some(2 << 20));
        assert!(parse_size("16385P", 1).is_err());
        assert!(parse_size("1x", 1).is_err());
        let e = Extended::parse(&["stride=8,root_owner=1:2,nodiscard".into()]).expect("valid");
        assert_eq!(
            (e.stride, e.root_owner, e.discard),
            (Some(8), Some((1, 2)), Some(false))
        );
        // A stride past 32 bits was cut to its low bits before.
        assert!(Extended::parse(&["stride=4294967296".into()]).is_err());
        assert!(Extended::parse(&["root_owner=x".into()]).is_err());
        let e = Extended::parse(&["uid=0,gid=5,no_copy_xattrs".into()]).expect("valid");
        assert_eq!(
            (e.populate_uid, e.populate_gid, e.no_copy_xattrs),
            (Some(0), Some(5), true)
        );
        assert!(Extended::parse(&["uid=-1".into()]).is_err());
        assert!(Extended::parse(&["bogus".into()]).is_err());
    }
}
