//! Reading a tar archive as a stream of members: ustar and GNU headers
//! (long names, base-256 numbers, old-style sparse maps), pax extended
//! headers, local and global. Written here rather than taken from the
//! `tar` crate, whose pax parser splits records at newlines: a binary
//! xattr value holding a 0x0A byte (an ACL, a capability) made the whole
//! member unreadable, and the tail of such a value could pass for a record
//! of its own (tar-rs issues 428 and 452). Records are read by their length
//! prefix, as POSIX defines them and GNU tar reads them.
//!
//! Everything read from the archive is bounded before it is kept: names
//! and pax headers by a size limit, sparse maps by an entry count.

use super::tar_sparse::PaxSparse;
use super::PopulateError;
use ext4r_format::inode::Timestamp;
use ext4r_format::num;
use std::io::{self, Read};

/// Block size of the format.
const BLOCK: usize = 512;
/// Longest GNU long name or link name kept (Linux's PATH_MAX is 4096).
const NAME_MAX: u64 = 64 << 10;
/// Largest pax header kept (xattr values are at most 64 KiB each).
const PAX_MAX: u64 = 16 << 20;
/// Most runs in an old-style GNU sparse map.
const SPARSE_MAX: usize = 1 << 20;

/// Member types (`typeflag`).
pub(crate) mod ty {
    pub(crate) const REGULAR: u8 = b'0';
    pub(crate) const REGULAR_OLD: u8 = 0;
    pub(crate) const LINK: u8 = b'1';
    pub(crate) const SYMLINK: u8 = b'2';
    pub(crate) const CHAR: u8 = b'3';
    pub(crate) const BLOCK: u8 = b'4';
    pub(crate) const DIR: u8 = b'5';
    pub(crate) const FIFO: u8 = b'6';
    pub(crate) const CONTIGUOUS: u8 = b'7';
    pub(crate) const GNU_SPARSE: u8 = b'S';
}

fn bad(what: &str) -> PopulateError {
    PopulateError::Archive(format!("reading the tar archive: {what}"))
}

fn io_err(e: io::Error) -> PopulateError {
    PopulateError::Archive(format!(
        "reading the tar archive: {}",
        crate::error::chain(&e)
    ))
}

/// How a member's data is laid out.
#[derive(Debug)]
pub(crate) enum Sparse {
    /// Not sparse: the data is the file.
    No,
    /// Old-style GNU sparse: the runs, and the file's size.
    Runs(Vec<(u64, u64)>, u64),
    /// A pax sparse member (the map may be at the front of the data).
    Pax(PaxSparse),
}

/// One member's header, pax records applied.
#[derive(Debug)]
pub(crate) struct Member {
    /// The type flag.
    pub ty: u8,
    /// Its name as archived.
    pub name: Vec<u8>,
    /// A link's target (hard or symbolic).
    pub link: Vec<u8>,
    /// Permission bits with setuid, setgid and sticky.
    pub mode: u32,
    pub uid: u64,
    pub gid: u64,
    pub mtime: Timestamp,
    /// Only where the archive has one (pax, or a GNU header's field).
    pub atime: Option<Timestamp>,
    /// Device numbers of a device node.
    pub dev: (u32, u32),
    /// Bytes of data stored after the header.
    pub size: u64,
    pub sparse: Sparse,
    /// `SCHILY.xattr.NAME` records: (NAME, value).
    pub xattrs: Vec<(Vec<u8>, Vec<u8>)>,
}

/// A tar archive read member by member.
pub(crate) struct TarReader<R> {
    r: R,
    /// Data bytes of the current member not read yet.
    left: u64,
    /// Padding after them to the next block.
    pad: u64,
    /// Records of global pax headers, in force for every later member.
    global: Vec<(String, Vec<u8>)>,
}

impl<R: Read> TarReader<R> {
    pub(crate) fn new(r: R) -> Self {
        TarReader {
            r,
            left: 0,
            pad: 0,
            global: Vec::new(),
        }
    }

    /// The current member's data (what is left of it).
    pub(crate) fn data(&mut self) -> Data<'_, R> {
        Data { t: self }
    }

    /// Reads one block; `false` at the end of the input before it.
    fn block(&mut self, b: &mut [u8; BLOCK]) -> Result<bool, PopulateError> {
        let mut n = 0;
        while n < BLOCK {
            match self.r.read(&mut b[n..]) {
                Ok(0) if n == 0 => return Ok(false),
                Ok(0) => return Err(bad("the archive ends inside a header")),
                Ok(k) => n += k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(io_err(e)),
            }
        }
        Ok(true)
    }

    /// Skips what is left of the current member.
    fn skip_rest(&mut self) -> Result<(), PopulateError> {
        let n = self.left + self.pad;
        let got = io::copy(&mut (&mut self.r).take(n), &mut io::sink()).map_err(io_err)?;
        if got < n {
            return Err(bad("the archive ends inside a member"));
        }
        self.left = 0;
        self.pad = 0;
        Ok(())
    }

    /// `size` bytes of data and their padding, where at most `limit` are
    /// accepted (names, pax headers).
    fn small(&mut self, size: u64, limit: u64, what: &str) -> Result<Vec<u8>, PopulateError> {
        if size > limit {
            return Err(bad(&format!("a {what} of {size} bytes")));
        }
        let mut v = vec![0u8; num::index(size)];
        self.r.read_exact(&mut v).map_err(io_err)?;
        self.left = 0;
        self.pad = padding(size);
        self.skip_rest()?;
        Ok(v)
    }

    /// The next member, its data not read yet; `None` at the end.
    pub(crate) fn next(&mut self) -> Result<Option<Member>, PopulateError> {
        self.skip_rest()?;
        let mut long_name = None;
        let mut long_link = None;
        let mut local: Vec<(String, Vec<u8>)> = Vec::new();
        loop {
            let mut h = [0u8; BLOCK];
            // The end: two zero blocks, one, or none (GNU tar accepts all).
            if !self.block(&mut h)? || h.iter().all(|&b| b == 0) {
                return Ok(None);
            }
            check_sum(&h)?;
            let t = h[156];
            let size = number(&h[124..136]).ok_or_else(|| bad("a bad size field"))?;
            match t {
                b'x' | b'g' => {
                    let body = self.small(size, PAX_MAX, "pax header")?;
                    let recs = records(&body)?;
                    if t == b'g' {
                        self.global.extend(recs);
                    } else {
                        local.extend(recs);
                    }
                    continue;
                }
                b'L' | b'K' => {
                    let mut v = self.small(size, NAME_MAX, "long name")?;
                    if let Some(z) = v.iter().position(|&b| b == 0) {
                        v.truncate(z);
                    }
                    if t == b'L' {
                        long_name = Some(v);
                    } else {
                        long_link = Some(v);
                    }
                    continue;
                }
                _ => {}
            }
            let mut m = header_member(&h, t, size)?;
            if let Some(n) = long_name {
                m.name = n;
            }
            if let Some(l) = long_link {
                m.link = l;
            }
            if t == ty::GNU_SPARSE {
                m.sparse = self.gnu_sparse(&h)?;
            }
            let mut ps = PaxSparse::default();
            for (k, v) in self.global.iter().chain(local.iter()) {
                apply(&mut m, &mut ps, k, v)?;
            }
            if ps.is_sparse() {
                m.sparse = Sparse::Pax(ps);
            }
            self.left = m.size;
            self.pad = padding(m.size);
            return Ok(Some(m));
        }
    }

    /// The map of an old-style GNU sparse member: four entries in its
    /// header, 21 in each extension block that follows.
    fn gnu_sparse(&mut self, h: &[u8; BLOCK]) -> Result<Sparse, PopulateError> {
        let mut runs = Vec::new();
        let take = |entries: &[u8], runs: &mut Vec<(u64, u64)>| -> Result<(), PopulateError> {
            for e in entries.chunks_exact(24) {
                if e[0] == 0 {
                    break;
                }
                let o = number(&e[..12]).ok_or_else(|| bad("a bad sparse map"))?;
                let n = number(&e[12..]).ok_or_else(|| bad("a bad sparse map"))?;
                if runs.len() >= SPARSE_MAX {
                    return Err(bad("a sparse map of too many runs"));
                }
                runs.push((o, n));
            }
            Ok(())
        };
        take(&h[386..482], &mut runs)?;
        let real = number(&h[483..495]).ok_or_else(|| bad("a bad sparse size"))?;
        let mut more = h[482] != 0;
        while more {
            let mut x = [0u8; BLOCK];
            if !self.block(&mut x)? {
                return Err(bad("the archive ends inside a sparse map"));
            }
            take(&x[..504], &mut runs)?;
            more = x[504] != 0;
        }
        // In order and inside the file, as GNU tar writes them.
        let mut end = 0u64;
        for &(o, n) in &runs {
            let e = o.checked_add(n).ok_or_else(|| bad("a bad sparse map"))?;
            if o < end || e > real {
                return Err(bad("a bad sparse map"));
            }
            end = e;
        }
        Ok(Sparse::Runs(runs, real))
    }
}

/// The data of the current member.
pub(crate) struct Data<'a, R> {
    t: &'a mut TarReader<R>,
}

impl<R: Read> Read for Data<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let want = num::index((buf.len() as u64).min(self.t.left));
        if want == 0 {
            return Ok(0);
        }
        let n = self.t.r.read(&mut buf[..want])?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the archive ends inside a member",
            ));
        }
        self.t.left -= n as u64;
        Ok(n)
    }
}

fn padding(size: u64) -> u64 {
    (BLOCK as u64 - size % BLOCK as u64) % BLOCK as u64
}

/// The header's checksum: the sum of its bytes with the field itself as
/// spaces, unsigned (POSIX) or signed (some old archivers).
fn check_sum(h: &[u8; BLOCK]) -> Result<(), PopulateError> {
    let want = number(&h[148..156]).ok_or_else(|| bad("a bad header checksum field"))?;
    let (mut u, mut s) = (0u64, 0i64);
    for (i, &b) in h.iter().enumerate() {
        let b = if (148..156).contains(&i) { b' ' } else { b };
        u += u64::from(b);
        s += i64::from(b as i8);
    }
    if want == u || i64::try_from(want).is_ok_and(|w| w == s) {
        Ok(())
    } else {
        Err(bad("a header with a wrong checksum (not a tar archive?)"))
    }
}

/// A numeric field: octal (spaces and NULs around it), or GNU's base-256
/// (high bit set) for values octal cannot hold. Negative base-256 values
/// (times before 1970) are refused here and read by [`time`].
fn number(f: &[u8]) -> Option<u64> {
    if f.first().is_some_and(|&b| b & 0x80 != 0) {
        if f[0] == 0xff {
            return None;
        }
        let mut v: u64 = u64::from(f[0] & 0x7f);
        for &b in &f[1..] {
            v = v.checked_mul(256)?.checked_add(u64::from(b))?;
        }
        return Some(v);
    }
    let s = f
        .iter()
        .skip_while(|&&b| b == b' ' || b == 0)
        .take_while(|&&b| b != b' ' && b != 0);
    // An empty field is zero.
    let mut v: u64 = 0;
    for &b in s {
        if !(b'0'..=b'7').contains(&b) {
            return None;
        }
        v = v.checked_mul(8)?.checked_add(u64::from(b - b'0'))?;
    }
    Some(v)
}

/// A time field (seconds), negative ones in base-256 included.
fn time(f: &[u8]) -> Option<i64> {
    if f.first() == Some(&0xff) && f.len() <= 12 {
        // Two's complement over the whole field.
        let v = f.iter().fold(0i128, |v, &b| v * 256 + i128::from(b));
        return i64::try_from(v - (1i128 << (8 * f.len()))).ok();
    }
    number(f).and_then(|v| i64::try_from(v).ok())
}

/// A NUL-terminated text field.
fn text(f: &[u8]) -> Vec<u8> {
    let end = f.iter().position(|&b| b == 0).unwrap_or(f.len());
    f[..end].to_vec()
}

/// The member a plain header describes.
fn header_member(h: &[u8; BLOCK], t: u8, size: u64) -> Result<Member, PopulateError> {
    let field = |r: std::ops::Range<usize>, what: &str| {
        number(&h[r]).ok_or_else(|| bad(&format!("a bad {what} field")))
    };
    let posix = &h[257..263] == b"ustar\0";
    let gnu = &h[257..265] == b"ustar  \0";
    let mut name = text(&h[..100]);
    let prefix = text(&h[345..500]);
    if posix && !prefix.is_empty() {
        let mut p = prefix;
        p.push(b'/');
        p.extend_from_slice(&name);
        name = p;
    }
    let secs = |s: i64| Timestamp { secs: s, nsecs: 0 };
    let mtime = time(&h[136..148]).ok_or_else(|| bad("a bad mtime field"))?;
    let atime = if gnu {
        time(&h[345..357]).filter(|&t| t != 0).map(secs)
    } else {
        None
    };
    let dev = if posix || gnu {
        let d = |r| {
            field(r, "device number")
                .and_then(|v| u32::try_from(v).map_err(|_| bad("a bad device number")))
        };
        (d(329..337)?, d(337..345)?)
    } else {
        (0, 0)
    };
    Ok(Member {
        ty: t,
        name,
        link: text(&h[157..257]),
        mode: (field(100..108, "mode")? & 0o7777) as u32,
        uid: field(108..116, "uid")?,
        gid: field(116..124, "gid")?,
        mtime: secs(mtime),
        atime,
        dev,
        size: if carries_data(t) { size } else { 0 },
        sparse: Sparse::No,
        xattrs: Vec::new(),
    })
}

/// Whether members of type `t` have data after the header: links,
/// directories and device nodes have none whatever the size field says
/// (GNU tar's rule for hard links archived with their size).
fn carries_data(t: u8) -> bool {
    !matches!(
        t,
        ty::LINK | ty::SYMLINK | ty::CHAR | ty::BLOCK | ty::DIR | ty::FIFO
    )
}

/// The records of a pax header, each read by its length prefix.
fn records(mut b: &[u8]) -> Result<Vec<(String, Vec<u8>)>, PopulateError> {
    let mut out = Vec::new();
    while !b.is_empty() {
        // Some writers pad the body with NULs.
        if b.iter().all(|&c| c == 0) {
            break;
        }
        let sp = b
            .iter()
            .take(20)
            .position(|&c| c == b' ')
            .ok_or_else(|| bad("a malformed pax record"))?;
        let len: usize = std::str::from_utf8(&b[..sp])
            .ok()
            .and_then(|s| s.parse().ok())
            .filter(|&l| l > sp + 1 && l <= b.len())
            .ok_or_else(|| bad("a malformed pax record length"))?;
        let rec = &b[sp + 1..len];
        let Some((&b'\n', kv)) = rec.split_last() else {
            return Err(bad("a pax record without its newline"));
        };
        let eq = kv
            .iter()
            .position(|&c| c == b'=')
            .ok_or_else(|| bad("a pax record without '='"))?;
        let key = String::from_utf8_lossy(&kv[..eq]).into_owned();
        out.push((key, kv[eq + 1..].to_vec()));
        b = &b[len..];
    }
    Ok(out)
}

/// A pax time (`1700000000.25`, `-1.5`) as a timestamp.
pub(crate) fn pax_time(v: &str) -> Option<Timestamp> {
    let (s, frac) = v.split_once('.').unwrap_or((v, ""));
    let neg = s.starts_with('-');
    let secs: i64 = s.parse().ok()?;
    if !frac.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let digits: String = frac.chars().take(9).collect();
    let mut nsecs: u32 = if digits.is_empty() {
        0
    } else {
        digits.parse().ok()?
    };
    for _ in digits.len()..9 {
        nsecs = nsecs.saturating_mul(10);
    }
    // "-1.5" is 1.5 s before the epoch.
    if neg && nsecs > 0 {
        return Some(Timestamp {
            secs: secs - 1,
            nsecs: 1_000_000_000 - nsecs,
        });
    }
    Some(Timestamp { secs, nsecs })
}

/// One pax record over the header's fields.
fn apply(m: &mut Member, ps: &mut PaxSparse, k: &str, v: &[u8]) -> Result<(), PopulateError> {
    if ps.record(k, v)? {
        return Ok(());
    }
    let text = || std::str::from_utf8(v).ok();
    let num = |what: &str| {
        text()
            .and_then(|t| t.parse::<u64>().ok())
            .ok_or_else(|| bad(&format!("a bad pax {what}")))
    };
    match k {
        "path" => m.name = v.to_vec(),
        "linkpath" => m.link = v.to_vec(),
        "size" if carries_data(m.ty) => m.size = num("size")?,
        "size" => {}
        "uid" => m.uid = num("uid")?,
        "gid" => m.gid = num("gid")?,
        "mtime" => {
            m.mtime = text()
                .and_then(pax_time)
                .ok_or_else(|| bad("a bad pax mtime"))?
        }
        "atime" => {
            m.atime = Some(
                text()
                    .and_then(pax_time)
                    .ok_or_else(|| bad("a bad pax atime"))?,
            )
        }
        _ => {
            if let Some(name) = k.strip_prefix("SCHILY.xattr.") {
                m.xattrs.retain(|(n, _)| n != name.as_bytes());
                m.xattrs.push((name.as_bytes().to_vec(), v.to_vec()));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_times() {
        assert_eq!(number(b"0000644\0"), Some(0o644));
        assert_eq!(number(b"  755 \0"), Some(0o755));
        assert_eq!(number(b"\0\0\0\0"), Some(0));
        assert_eq!(number(b"12a\0"), None);
        // Base-256: 2^33 in a 12-byte field.
        let mut f = [0u8; 12];
        f[0] = 0x80;
        f[7] = 2;
        assert_eq!(number(&f), Some(1 << 33));
        let minus_one = [0xffu8; 12];
        assert_eq!(time(&minus_one), Some(-1));
        assert_eq!(number(&minus_one), None);
        assert_eq!(
            pax_time("1700000000.25"),
            Some(Timestamp {
                secs: 1_700_000_000,
                nsecs: 250_000_000
            })
        );
        assert_eq!(
            pax_time("-1.5"),
            Some(Timestamp {
                secs: -2,
                nsecs: 500_000_000
            })
        );
        assert_eq!(pax_time("x"), None);
        assert_eq!(pax_time("1.x"), None);
    }

    #[test]
    fn records_are_read_by_length() {
        // A value holding a newline and what looks like a record.
        let body = b"32 SCHILY.xattr.user.a=x\n9 a=b\n\n12 path=abc\n";
        let r = records(body).expect("valid");
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].0, "SCHILY.xattr.user.a");
        assert_eq!(r[0].1, b"x\n9 a=b\n");
        assert_eq!(r[1], ("path".to_string(), b"abc".to_vec()));
        for bad_body in [
            &b"99 path=abc\n"[..],
            b"11 path=abc",
            b"x path=a\n",
            b"7 pathab\n",
        ] {
            assert!(
                records(bad_body).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad_body)
            );
        }
    }

    /// A header block for `name` of type `t` with `size` bytes.
    fn header(name: &str, t: u8, size: u64) -> [u8; BLOCK] {
        let mut h = [0u8; BLOCK];
        h[..name.len()].copy_from_slice(name.as_bytes());
        h[100..108].copy_from_slice(b"0000644\0");
        h[108..116].copy_from_slice(b"0000000\0");
        h[116..124].copy_from_slice(b"0000000\0");
        h[124..136].copy_from_slice(format!("{size:011o}\0").as_bytes());
        h[136..148].copy_from_slice(b"14000000000\0");
        h[156] = t;
        h[257..263].copy_from_slice(b"ustar\0");
        h[263..265].copy_from_slice(b"00");
        h[148..156].copy_from_slice(b"        ");
        let sum: u64 = h.iter().map(|&b| u64::from(b)).sum();
        h[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
        h
    }

    fn padded(data: &[u8]) -> Vec<u8> {
        let mut v = data.to_vec();
        v.resize(data.len().div_ceil(BLOCK) * BLOCK, 0);
        v
    }

    #[test]
    fn members_pax_headers_and_the_end() {
        let pax = b"32 SCHILY.xattr.user.a=x\n9 a=b\n\n16 path=real/nm\n";
        let mut ar = Vec::new();
        ar.extend_from_slice(&header("PaxHeaders/f", b'x', pax.len() as u64));
        ar.extend(padded(pax));
        ar.extend_from_slice(&header("f", b'0', 5));
        ar.extend(padded(b"hello"));
        ar.extend_from_slice(&header("d/", b'5', 0));
        ar.extend([0u8; 1024]);
        let mut t = TarReader::new(&ar[..]);
        let m = t.next().expect("ok").expect("a member");
        assert_eq!(m.name, b"real/nm");
        assert_eq!(m.xattrs, vec![(b"user.a".to_vec(), b"x\n9 a=b\n".to_vec())]);
        assert_eq!(m.mtime.secs, 0o14000000000);
        let mut s = String::new();
        t.data().read_to_string(&mut s).expect("data");
        assert_eq!(s, "hello");
        let m = t.next().expect("ok").expect("a member");
        assert_eq!((m.ty, m.name.as_slice()), (ty::DIR, &b"d/"[..]));
        assert!(t.next().expect("ok").is_none());
    }

    #[test]
    fn damage_is_an_error() {
        let mut h = header("f", b'0', 5);
        h[0] ^= 1;
        assert!(TarReader::new(&h[..]).next().is_err());
        // Data cut short, a header cut short, a pax header too big.
        let mut ar = header("f", b'0', 5000).to_vec();
        ar.extend_from_slice(&[1u8; 100]);
        let mut t = TarReader::new(&ar[..]);
        assert!(t.next().is_ok());
        assert!(io::copy(&mut t.data(), &mut io::sink()).is_err());
        assert!(TarReader::new(&[7u8; 100][..]).next().is_err());
        let big = header("p", b'x', PAX_MAX + 1);
        assert!(TarReader::new(&big[..]).next().is_err());
    }
}
