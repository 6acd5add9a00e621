//! The original tree as the kernel showed it (path -> type, size, content
//! hash, link target), and the comparison that decides which files survived
//! a repair: a file is intact only where type, size, contents and link
//! target are all exactly what they were.

use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use anyhow::{bail, Context, Result};
use ext4r_format::checksum::crc32c;

/// One object of the tree. Directories carry only their type: their size
/// is the filesystem's business (a repair may compact or rehash them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// `d`, `f` or `l`.
    pub kind: char,
    pub size: u64,
    pub hash: u64,
    pub target: Vec<u8>,
}

pub type Manifest = BTreeMap<String, Entry>;

/// Two CRC32C registers from different seeds: 64 bits, hardware speed, and
/// the same value whatever the chunking.
#[derive(Clone, Copy)]
pub struct Hasher(u32, u32);

impl Hasher {
    pub fn new() -> Self {
        Hasher(!0, 0x5bd1_e995)
    }
    pub fn update(&mut self, data: &[u8]) {
        self.0 = crc32c(self.0, data);
        self.1 = crc32c(self.1, data);
    }
    pub fn finish(self) -> u64 {
        (u64::from(self.0) << 32) | u64::from(self.1)
    }
}

pub fn hash_bytes(data: &[u8]) -> u64 {
    let mut h = Hasher::new();
    h.update(data);
    h.finish()
}

/// Hashes everything `r` yields; returns (bytes, hash).
pub fn hash_reader(r: &mut impl Read) -> std::io::Result<(u64, u64)> {
    let mut h = Hasher::new();
    let mut buf = vec![0u8; 256 << 10];
    let mut n = 0u64;
    loop {
        let k = r.read(&mut buf)?;
        if k == 0 {
            return Ok((n, h.finish()));
        }
        h.update(&buf[..k]);
        n += k as u64;
    }
}

/// The tree under `root` (a mount point), `lost+found` left out.
pub fn of_dir(root: &Path) -> Result<Manifest> {
    let mut m = Manifest::new();
    walk(root, "", &mut m)?;
    Ok(m)
}

fn walk(dir: &Path, rel: &str, m: &mut Manifest) -> Result<()> {
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .with_context(|| format!("read_dir {}", dir.display()))?
        .collect::<std::io::Result<Vec<_>>>()?;
    names.sort_by_key(|e| e.file_name());
    for e in names {
        let name = String::from_utf8_lossy(e.file_name().as_bytes()).into_owned();
        if rel.is_empty() && name == "lost+found" {
            continue;
        }
        let path = format!("{rel}/{name}");
        let p = e.path();
        let md = std::fs::symlink_metadata(&p)?;
        let ft = md.file_type();
        let entry = if ft.is_dir() {
            walk(&p, &path, m)?;
            Entry {
                kind: 'd',
                size: 0,
                hash: 0,
                target: Vec::new(),
            }
        } else if ft.is_symlink() {
            let t = std::fs::read_link(&p)?;
            let t = t.as_os_str().as_bytes().to_vec();
            Entry {
                kind: 'l',
                size: t.len() as u64,
                hash: hash_bytes(&t),
                target: t,
            }
        } else if ft.is_file() {
            let mut f = std::fs::File::open(&p)?;
            let (n, hash) = hash_reader(&mut f)?;
            if n != md.len() {
                bail!("{}: read {n} bytes of {}", p.display(), md.len());
            }
            Entry {
                kind: 'f',
                size: n,
                hash,
                target: Vec::new(),
            }
        } else {
            bail!("{}: unexpected file type", p.display());
        };
        m.insert(path, entry);
    }
    Ok(())
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// One line per entry: path, kind, size, hash, target (hex).
pub fn save(m: &Manifest, path: &Path) -> Result<()> {
    let mut s = String::new();
    for (p, e) in m {
        s.push_str(&format!(
            "{p}\t{}\t{}\t{:016x}\t{}\n",
            e.kind,
            e.size,
            e.hash,
            hex(&e.target)
        ));
    }
    std::fs::write(path, s).with_context(|| format!("cannot write {}", path.display()))
}

pub fn load(path: &Path) -> Result<Manifest> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut m = Manifest::new();
    for (n, line) in text.lines().enumerate() {
        let f: Vec<&str> = line.split('\t').collect();
        let parsed = (|| {
            let [p, k, size, hash, target] = f.as_slice() else {
                return None;
            };
            Some((
                p.to_string(),
                Entry {
                    kind: k.chars().next()?,
                    size: size.parse().ok()?,
                    hash: u64::from_str_radix(hash, 16).ok()?,
                    target: unhex(target)?,
                },
            ))
        })();
        let (p, e) = parsed.with_context(|| format!("{}:{}: bad line", path.display(), n + 1))?;
        m.insert(p, e);
    }
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_is_chunking_independent_and_roundtrips() {
        let data: Vec<u8> = (0..10_000u32).map(|i| (i * 7) as u8).collect();
        let mut h = Hasher::new();
        h.update(&data[..333]);
        h.update(&data[333..]);
        assert_eq!(h.finish(), hash_bytes(&data));
        assert_ne!(hash_bytes(&data[1..]), hash_bytes(&data));
        let mut m = Manifest::new();
        m.insert(
            "/a".into(),
            Entry {
                kind: 'l',
                size: 3,
                hash: 9,
                target: b"x\ty".to_vec(),
            },
        );
        let dir = std::env::temp_dir().join(format!("damage-manifest-{}", std::process::id()));
        save(&m, &dir).unwrap();
        assert_eq!(load(&dir).unwrap(), m);
        let _ = std::fs::remove_file(&dir);
    }
}
