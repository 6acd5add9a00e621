//! inline_data through the write API, against a model: small files and new
//! directories kept in the inode, moved out into blocks as they grow
//! (writes past what the inode holds, truncates up, preallocation, a
//! directory filling up), shrunk back inside; entries removed and renamed
//! in place, a moved directory's stored parent. Every file's contents and
//! every directory's names read back through our read path as the model
//! has them, and `e2fsck -fn` is clean after each round. (The kernel-twin
//! test leaves truncates out on inline_data: see write_kernel.rs.)
#![allow(clippy::unwrap_used)]

mod common;

use common::{missing_tools, run, TempDir};
use ext4r::device::{FileDevice, OpenMode};
use ext4r::write::{NewNode, WriteFs, WriteOptions, ROOT_INO};
use ext4r_format::inode::InodeFlags;
use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// What the filesystem should hold: files by name in `/f`, directories
/// `/d0`, `/d1`, ... with their entry names (empty files).
#[derive(Default)]
struct Model {
    files: BTreeMap<String, Vec<u8>>,
    dirs: BTreeMap<String, Vec<String>>,
}

fn open(img: &Path) -> WriteFs {
    let mut o = WriteOptions::default();
    o.now = Some((1_700_000_000, 0));
    WriteFs::open_path(img, o).unwrap()
}

fn check(img: &Path, m: &Model, round: usize) -> (usize, usize) {
    let (code, out, _) =
        common::run_status("e2fsck", &["-fn", img.to_str().unwrap()], &[]).unwrap();
    assert_eq!(code, 0, "round {round}: e2fsck -fn:\n{out}");
    let fs =
        ext4r::fs::Filesystem::open(FileDevice::open(img, OpenMode::default()).unwrap()).unwrap();
    let mut inline = (0, 0);
    for (name, want) in &m.files {
        let info = fs.resolve(&format!("/f/{name}")).unwrap();
        if info.inode.flags().contains(InodeFlags::INLINE_DATA) {
            inline.0 += 1;
        }
        let mut got = Vec::new();
        fs.open_file(&info).unwrap().read_to_end(&mut got).unwrap();
        assert!(
            got == *want,
            "round {round}: /f/{name}: {} bytes read, {} expected",
            got.len(),
            want.len()
        );
    }
    for (d, names) in &m.dirs {
        let info = fs.resolve(&format!("/{d}")).unwrap();
        if info.inode.flags().contains(InodeFlags::INLINE_DATA) {
            inline.1 += 1;
        }
        let mut got: Vec<String> = fs
            .read_dir(&info)
            .unwrap()
            .iter()
            .filter(|e| !e.is_dot())
            .map(|e| e.name_lossy())
            .collect();
        got.sort();
        let mut want = names.clone();
        want.sort();
        assert_eq!(got, want, "round {round}: /{d}");
    }
    inline
}

#[test]
fn inline_files_and_directories_grow_shrink_and_move_out() {
    if let Some(m) = missing_tools(&["mke2fs", "e2fsck"]) {
        eprintln!("skipped: {m}");
        return;
    }
    for (name, mkfs) in [
        ("4k", "-t ext4 -O inline_data"),
        (
            "1k-nocsum",
            "-t ext4 -b 1024 -O inline_data,^metadata_csum -I 512",
        ),
    ] {
        let dir = TempDir::new(&format!("write-inline-{name}"));
        let img = dir.join("img");
        let mut args = vec!["-q", "-F"];
        args.extend(mkfs.split_whitespace());
        args.extend([img.to_str().unwrap(), "32M"]);
        run("mke2fs", &args, &[("E2FSPROGS_FAKE_TIME", "1700000000")]).unwrap();
        let mut m = Model::default();
        let mut rng = Rng(0x5eed_1234 ^ name.len() as u64);
        let mut seen_inline = (0, 0);
        {
            let mut fs = open(&img);
            fs.mkdir(ROOT_INO, b"f", &NewNode::dir(0o755)).unwrap();
            fs.close().unwrap();
        }
        for round in 0..12 {
            let mut fs = open(&img);
            let froot = fs.lookup_path("/f").unwrap();
            for _ in 0..60 {
                match rng.below(10) {
                    0 | 1 => {
                        let n = format!("x{}", rng.below(40));
                        if let std::collections::btree_map::Entry::Vacant(v) = m.files.entry(n) {
                            fs.create(froot, v.key().as_bytes(), &NewNode::file(0o644))
                                .unwrap();
                            v.insert(Vec::new());
                        }
                    }
                    2..=4 if !m.files.is_empty() => {
                        let k = rng.below(m.files.len() as u64) as usize;
                        let n = m.files.keys().nth(k).unwrap().clone();
                        // Mostly small: inside the inode or just past it.
                        let off = match rng.below(4) {
                            0 => 0,
                            1 => rng.below(200),
                            2 => rng.below(5000),
                            _ => rng.below(40_000),
                        };
                        let cap = if rng.below(3) == 0 { 6000 } else { 120 };
                        let len = rng.below(cap) + 1;
                        let fill = rng.next() as u8;
                        let data: Vec<u8> =
                            (0..len).map(|k| fill.wrapping_add(k as u8) | 1).collect();
                        let ino = fs.lookup_path(format!("/f/{n}")).unwrap();
                        fs.write(ino, off, &data).unwrap();
                        let f = m.files.get_mut(&n).unwrap();
                        let end = (off + len) as usize;
                        if f.len() < end {
                            f.resize(end, 0);
                        }
                        f[off as usize..end].copy_from_slice(&data);
                    }
                    5 if !m.files.is_empty() => {
                        let k = rng.below(m.files.len() as u64) as usize;
                        let n = m.files.keys().nth(k).unwrap().clone();
                        let size = match rng.below(3) {
                            0 => rng.below(60),
                            1 => rng.below(300),
                            _ => rng.below(20_000),
                        };
                        let ino = fs.lookup_path(format!("/f/{n}")).unwrap();
                        fs.truncate(ino, size).unwrap();
                        m.files.get_mut(&n).unwrap().resize(size as usize, 0);
                    }
                    6 if !m.files.is_empty() => {
                        let k = rng.below(m.files.len() as u64) as usize;
                        let n = m.files.keys().nth(k).unwrap().clone();
                        let (off, len) = (rng.below(9000), rng.below(9000) + 1);
                        let ino = fs.lookup_path(format!("/f/{n}")).unwrap();
                        fs.fallocate(ino, off, len, false).unwrap();
                        let f = m.files.get_mut(&n).unwrap();
                        if (f.len() as u64) < off + len {
                            f.resize((off + len) as usize, 0);
                        }
                    }
                    7 => {
                        // A directory gets entries (inline ones fill up and
                        // move out) or a new one is made.
                        if m.dirs.is_empty() || rng.below(4) == 0 {
                            let d = format!("d{}", m.dirs.len());
                            fs.mkdir(ROOT_INO, d.as_bytes(), &NewNode::dir(0o755))
                                .unwrap();
                            m.dirs.insert(d, Vec::new());
                        } else {
                            let k = rng.below(m.dirs.len() as u64) as usize;
                            let d = m.dirs.keys().nth(k).unwrap().clone();
                            let e = format!(
                                "e{}-{}",
                                rng.below(1000),
                                "n".repeat(rng.below(12) as usize)
                            );
                            let names = m.dirs.get_mut(&d).unwrap();
                            if !names.contains(&e) {
                                let di = fs.lookup_path(format!("/{d}")).unwrap();
                                fs.create(di, e.as_bytes(), &NewNode::file(0o600)).unwrap();
                                names.push(e);
                            }
                        }
                    }
                    8 if !m.dirs.is_empty() => {
                        // An entry removed, or renamed within its directory.
                        let k = rng.below(m.dirs.len() as u64) as usize;
                        let d = m.dirs.keys().nth(k).unwrap().clone();
                        let names = m.dirs.get_mut(&d).unwrap();
                        if names.is_empty() {
                            continue;
                        }
                        let j = rng.below(names.len() as u64) as usize;
                        let e = names[j].clone();
                        let di = fs.lookup_path(format!("/{d}")).unwrap();
                        if rng.below(2) == 0 {
                            fs.unlink(di, e.as_bytes()).unwrap();
                            names.remove(j);
                        } else {
                            let to = format!("{e}r");
                            if !names.contains(&to) {
                                fs.rename(di, e.as_bytes(), di, to.as_bytes()).unwrap();
                                names[j] = to;
                            }
                        }
                    }
                    _ if m.files.len() > 3 => {
                        let k = rng.below(m.files.len() as u64) as usize;
                        let n = m.files.keys().nth(k).unwrap().clone();
                        fs.unlink(froot, n.as_bytes()).unwrap();
                        m.files.remove(&n);
                    }
                    _ => {}
                }
            }
            // A directory moved under another (e2fsck checks its stored
            // parent, inline or not) and back.
            if m.dirs.len() >= 2 {
                let a = m.dirs.keys().next().unwrap().clone();
                let b = m.dirs.keys().nth(1).unwrap().clone();
                let bi = fs.lookup_path(format!("/{b}")).unwrap();
                fs.rename(ROOT_INO, a.as_bytes(), bi, b"moved").unwrap();
                fs.close().unwrap();
                let (code, out, _) =
                    common::run_status("e2fsck", &["-fn", img.to_str().unwrap()], &[]).unwrap();
                assert_eq!(
                    code, 0,
                    "{name} round {round}: e2fsck -fn after a move:\n{out}"
                );
                fs = open(&img);
                fs.rename(bi, b"moved", ROOT_INO, a.as_bytes()).unwrap();
            }
            fs.close().unwrap();
            let n = check(&img, &m, round);
            seen_inline.0 = seen_inline.0.max(n.0);
            seen_inline.1 = seen_inline.1.max(n.1);
        }
        // Not vacuous: inline files and directories were there to change.
        assert!(
            seen_inline.0 > 0 && seen_inline.1 > 0,
            "{name}: {seen_inline:?} inline"
        );
        println!(
            "{name}: {} files, {} directories as the model after 12 rounds; at most {} files and {} directories inline at once",
            m.files.len(),
            m.dirs.len(),
            seen_inline.0,
            seen_inline.1
        );
    }
}
