//! Directory paths in messages, as e2fsck prints them ("Entry 'f20' in
//! /d1/d2 (13)"): walked up through each directory's `..` entry and
//! looked up by name in its parent, on disk, as libext2fs's
//! `ext2fs_get_pathname` does, and printed as e2fsck's `print_pathname`
//! prints them (the reserved inodes by name, unprintable bytes in `^`
//! and `M-` notation). Only built when a problem is reported.

use ext4r::fs::Filesystem;
use ext4r_format::InodeNr;

/// Levels walked below the first before giving up with "..." (e2fsck's
/// `maxdepth` of 32, which stops when it goes below 0).
const MAX_DEPTH: i32 = 32;
const ROOT: u32 = 2;

/// e2fsck's names for the reserved inodes, as `print_pathname` gives
/// them when no directory is named.
const SPECIAL: [&str; 11] = [
    "<The NULL inode>",
    "<The bad blocks inode>",
    "/",
    "<The user quota inode>",
    "<The group quota inode>",
    "<The boot loader inode>",
    "<The undelete directory inode>",
    "<The group descriptor inode>",
    "<The journal inode>",
    "<Reserved inode 9>",
    "<Reserved inode 10>",
];

/// Stands for e2fsck's `%Q` of inode `ino` in a finding pass 1 makes and
/// e2fsck reports in pass 2 (its `process_bad_inode`, called for the
/// first entry that names the inode, with that entry's directory): the
/// path is only known once pass 2 has met the inode, and is filled in
/// then by [`fill_q`].
pub(crate) fn q(ino: u32) -> String {
    format!("{Q}{ino}{Q}")
}

const Q: char = '\u{1}';

/// The inodes whose `%Q` a message waits for.
pub(crate) fn q_wanted(message: &str) -> impl Iterator<Item = u32> + '_ {
    message
        .split(Q)
        .skip(1)
        .step_by(2)
        .filter_map(|n| n.parse().ok())
}

/// `message` with each [`q`] replaced by the path of its inode as named
/// in the directory `dir_of` gives (0 when pass 2 never met it, which
/// e2fsck prints as "...").
pub(crate) fn fill_q(fs: &Filesystem, message: &str, dir_of: impl Fn(u32) -> u32) -> String {
    let mut out = String::with_capacity(message.len());
    for (i, part) in message.split(Q).enumerate() {
        match part.parse::<u32>() {
            Ok(ino) if i % 2 == 1 => out.push_str(&path_in(fs, dir_of(ino), ino)),
            _ => out.push_str(part),
        }
    }
    out
}

/// The path of directory `dir` (e2fsck's `%p` and `%q`): "/" for the
/// root, "<The NULL inode>" for 0, "???" when a directory on the way
/// cannot be read, "<N>" for an inode that is not a directory.
pub(crate) fn dir_path(fs: &Filesystem, dir: u32) -> String {
    path_in(fs, dir, 0)
}

/// The path of `ino` as named in directory `dir` (e2fsck's `%Q` and
/// `%P`): the parent's path, then the name `dir` gives it ("???" when
/// none does); with no directory, a reserved inode's name.
pub(crate) fn path_in(fs: &Filesystem, dir: u32, ino: u32) -> String {
    if dir == 0 {
        if let Some(name) = SPECIAL.get(ino as usize) {
            return (*name).to_string();
        }
    }
    // ext2fs_get_pathname: a directory in itself is the directory.
    let ino = if dir == ino { 0 } else { ino };
    walk(fs, dir, ino, MAX_DEPTH).map_or_else(|| "???".into(), |p| safe(&p))
}

/// `ext2fs_get_pathname_int`'s rule, on bytes: `None` for a directory
/// that cannot be read.
fn walk(fs: &Filesystem, dir: u32, ino: u32, depth: i32) -> Option<Vec<u8>> {
    if dir == ino {
        return Some(if dir == ROOT {
            b"/".to_vec()
        } else {
            b".".to_vec()
        });
    }
    if dir == 0 || depth < 0 {
        return Some(b"...".to_vec());
    }
    let info = fs.inode(InodeNr(dir)).ok()?;
    if !info.inode.is_dir() {
        return Some(if ino != 0 {
            format!("<{dir}>/<{ino}>").into_bytes()
        } else {
            format!("<{dir}>").into_bytes()
        });
    }
    let (parent, name) = scan(fs, &info, ino)?;
    let parent_path = walk(fs, parent, dir, depth - 1)?;
    if ino == 0 {
        return Some(parent_path);
    }
    let mut out = if parent_path.len() > 1 {
        parent_path
    } else {
        Vec::new()
    };
    out.push(b'/');
    out.extend_from_slice(name.as_deref().unwrap_or(b"???"));
    Some(out)
}

/// `get_pathname_proc` over `ext2fs_dir_iterate`: the entries in order,
/// `..` noted as met, until the first that names `ino` (never 0: empty
/// records are skipped). `None` when a block cannot be read or holds a
/// record libext2fs calls corrupted — its rules, looser than pass 2's
/// (an 8-byte record passes), and only as far as the search goes: a
/// damaged block after the name found does not matter. The blocks are
/// those mapped, whatever the size says, as `ext2fs_block_iterate3`
/// gives them.
fn scan(fs: &Filesystem, info: &ext4r::fs::InodeInfo, ino: u32) -> Option<(u32, Option<Vec<u8>>)> {
    let mut parent = 0;
    if info
        .inode
        .flags()
        .contains(ext4r_format::inode::InodeFlags::INLINE_DATA)
    {
        for e in fs.read_dir(info).ok()? {
            if e.name == b".." {
                parent = e.ino.0;
            }
            if ino != 0 && e.ino.0 == ino {
                return Some((parent, Some(e.name)));
            }
        }
        return Some((parent, None));
    }
    let bs = fs.block_size();
    let size = bs as usize;
    let mut buf = vec![0u8; size];
    for r in fs.runs(info).ok()?.iter().filter(|r| !r.unwritten) {
        for nr in r.physical..r.physical + r.len {
            fs.device().read_at(&mut buf, nr * u64::from(bs)).ok()?;
            let mut off = 0usize;
            while off < size - 8 {
                let raw = u16::from_le_bytes([buf[off + 4], buf[off + 5]]);
                let rec = ext4r_format::dir::rec_len_from_disk(raw, bs) as usize;
                let name_len = usize::from(buf[off + 6]);
                if off + rec > size || rec < 8 || rec % 4 != 0 || name_len + 8 > rec {
                    return None;
                }
                let at = u32::from_le_bytes([buf[off], buf[off + 1], buf[off + 2], buf[off + 3]]);
                if at != 0 {
                    let name = &buf[off + 8..off + 8 + name_len];
                    if name == b".." {
                        parent = at;
                    }
                    if at == ino {
                        return Some((parent, Some(name.to_vec())));
                    }
                }
                off += rec;
            }
        }
    }
    Some((parent, None))
}

/// e2fsck's `safe_print`: bytes above 128 as `M-` and the byte less 128,
/// control characters and DEL as `^` and the character they control
/// ("^@", "^?"). (128 itself passes through, as in e2fsck.)
pub(crate) fn safe(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for &b in bytes {
        let mut ch = b;
        if ch > 128 {
            out.push_str("M-");
            ch -= 128;
        }
        if ch < 32 || ch == 0x7f {
            out.push('^');
            ch ^= 0x40;
        }
        out.push(char::from(ch));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn safe_print_as_e2fsck() {
        assert_eq!(safe(b"motd"), "motd");
        assert_eq!(safe(&[0x01, 0x7f, 0x81, 0xe9, 0x9f]), "^A^?M-^AM-iM-^_");
    }
}
