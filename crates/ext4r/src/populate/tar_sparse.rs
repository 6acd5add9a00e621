//! GNU tar's sparse members in pax archives (`tar --format=pax --sparse`,
//! GNU tar's manual, "Storing Sparse Files"): the member's real name and
//! size are pax records, its stored data is the data runs one after the
//! other, and the map saying where each run goes is
//!
//! - 0.0: repeated `GNU.sparse.offset` / `GNU.sparse.numbytes` records;
//! - 0.1: one `GNU.sparse.map` record, `offset,size,offset,size,...`;
//! - 1.0: text at the start of the stored data — the number of runs, then
//!   an offset and a size per run, one decimal number a line, padded with
//!   NULs to a 512-byte boundary.
//!
//! Read as plain members these are files named `GNUSparseFile.PID/NAME`
//! holding the packed runs; unpacking them keeps the holes and the real
//! names.

use super::PopulateError;
use std::io::Read;

/// What the pax records of one member say about its sparseness.
#[derive(Debug, Default)]
pub(crate) struct PaxSparse {
    major: Option<u64>,
    minor: Option<u64>,
    /// The member's real name (the header's is a made-up one).
    pub name: Option<Vec<u8>>,
    /// `GNU.sparse.realsize` (1.0) or `GNU.sparse.size` (0.x).
    pub real_size: Option<u64>,
    /// The map of 0.1.
    map: Option<Vec<(u64, u64)>>,
    /// The map of 0.0, built from offset and numbytes records in order.
    pairs: Vec<(u64, Option<u64>)>,
}

fn bad(what: &str) -> PopulateError {
    PopulateError::Archive(format!("bad GNU sparse {what} in a pax header"))
}

fn num(v: &[u8], what: &str) -> Result<u64, PopulateError> {
    std::str::from_utf8(v)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .ok_or_else(|| bad(what))
}

impl PaxSparse {
    /// Takes one pax record; `false` when it is not a sparse one.
    pub(crate) fn record(&mut self, key: &str, v: &[u8]) -> Result<bool, PopulateError> {
        match key {
            "GNU.sparse.major" => self.major = Some(num(v, "version")?),
            "GNU.sparse.minor" => self.minor = Some(num(v, "version")?),
            "GNU.sparse.name" => self.name = Some(v.to_vec()),
            "GNU.sparse.realsize" | "GNU.sparse.size" => self.real_size = Some(num(v, "size")?),
            "GNU.sparse.numblocks" => {}
            "GNU.sparse.map" => {
                let s = std::str::from_utf8(v).map_err(|_| bad("map"))?;
                let nums = s
                    .split(',')
                    .filter(|x| !x.is_empty())
                    .map(|x| num(x.as_bytes(), "map"))
                    .collect::<Result<Vec<u64>, _>>()?;
                if nums.len() % 2 != 0 {
                    return Err(bad("map"));
                }
                self.map = Some(nums.chunks(2).map(|c| (c[0], c[1])).collect());
            }
            "GNU.sparse.offset" => self.pairs.push((num(v, "offset")?, None)),
            "GNU.sparse.numbytes" => match self.pairs.last_mut() {
                Some((_, n @ None)) => *n = Some(num(v, "size")?),
                _ => return Err(bad("map")),
            },
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Whether the member is stored sparse (a real size was given).
    pub(crate) fn is_sparse(&self) -> bool {
        self.real_size.is_some()
    }

    /// The runs (offset, length) of the member, in order, checked against
    /// the real size; for 1.0 read from the front of `r`, the member's
    /// stored data, which is left at the first run's bytes.
    pub(crate) fn runs(&self, r: &mut dyn Read) -> Result<Vec<(u64, u64)>, PopulateError> {
        let size = self.real_size.ok_or_else(|| bad("size"))?;
        let runs = match (self.major, self.minor) {
            (Some(1), _) => read_map(r)?,
            _ => match &self.map {
                Some(m) => m.clone(),
                None => self
                    .pairs
                    .iter()
                    .map(|&(o, n)| n.map(|n| (o, n)).ok_or_else(|| bad("map")))
                    .collect::<Result<_, _>>()?,
            },
        };
        // Runs in order, inside the file: what GNU tar writes, and what
        // keeps the writes bounded by the real size.
        let mut end = 0u64;
        for &(o, n) in &runs {
            let e = o.checked_add(n).ok_or_else(|| bad("map"))?;
            if o < end || e > size {
                return Err(bad("map"));
            }
            end = e;
        }
        Ok(runs)
    }
}

/// The 1.0 map at the front of the stored data.
fn read_map(r: &mut dyn Read) -> Result<Vec<(u64, u64)>, PopulateError> {
    let mut block = [0u8; 512];
    let mut at = block.len();
    let mut line = Vec::new();
    let mut next = |r: &mut dyn Read| -> Result<u64, PopulateError> {
        line.clear();
        loop {
            if at == block.len() {
                r.read_exact(&mut block).map_err(|e| {
                    PopulateError::Archive(format!(
                        "reading a sparse member's map: {}",
                        crate::error::chain(&e)
                    ))
                })?;
                at = 0;
            }
            let b = block[at];
            at += 1;
            if b == b'\n' {
                return num(&line, "map");
            }
            // A decimal u64 has at most 20 digits.
            if line.len() > 20 {
                return Err(bad("map"));
            }
            line.push(b);
        }
    };
    let count = next(r)?;
    let mut runs = Vec::new();
    for _ in 0..count {
        let o = next(r)?;
        let n = next(r)?;
        runs.push((o, n));
    }
    // The rest of the block is padding: the data starts at the next one.
    Ok(runs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_of_each_version() {
        let mut s = PaxSparse::default();
        for (k, v) in [
            ("GNU.sparse.major", "1"),
            ("GNU.sparse.minor", "0"),
            ("GNU.sparse.name", "a/b"),
            ("GNU.sparse.realsize", "10000"),
        ] {
            assert!(s.record(k, v.as_bytes()).unwrap_or(false));
        }
        assert!(!s.record("mtime", b"1").unwrap_or(true));
        let mut data = b"2\n0\n10\n5000\n3\n".to_vec();
        data.resize(512, 0);
        data.extend_from_slice(b"0123456789abc");
        let mut r = &data[..];
        assert_eq!(s.runs(&mut r).ok(), Some(vec![(0, 10), (5000, 3)]));
        assert_eq!(r, b"0123456789abc");

        let mut s = PaxSparse::default();
        assert!(s.record("GNU.sparse.size", b"100").is_ok());
        assert!(s.record("GNU.sparse.map", b"0,1,50,2").is_ok());
        assert_eq!(s.runs(&mut &[][..]).ok(), Some(vec![(0, 1), (50, 2)]));

        let mut s = PaxSparse::default();
        for (k, v) in [
            ("GNU.sparse.size", "100"),
            ("GNU.sparse.offset", "4"),
            ("GNU.sparse.numbytes", "5"),
            ("GNU.sparse.offset", "90"),
            ("GNU.sparse.numbytes", "10"),
        ] {
            assert!(s.record(k, v.as_bytes()).is_ok());
        }
        assert_eq!(s.runs(&mut &[][..]).ok(), Some(vec![(4, 5), (90, 10)]));
    }

    #[test]
    fn bad_maps_are_refused() {
        let mut s = PaxSparse::default();
        assert!(s.record("GNU.sparse.size", b"100").is_ok());
        // Past the end, out of order, overflowing.
        for m in ["0,101", "50,1,0,1", "18446744073709551615,2"] {
            assert!(s.record("GNU.sparse.map", m.as_bytes()).is_ok());
            assert!(s.runs(&mut &[][..]).is_err(), "{m}");
        }
        // An offset without a size, a number that is none.
        assert!(s.record("GNU.sparse.map", b"0,1,5").is_err());
        assert!(s.record("GNU.sparse.map", b"0,x").is_err());
        assert!(s.record("GNU.sparse.numbytes", b"1").is_err());
        // 1.0: a huge count on a short member, an endless line.
        let mut s = PaxSparse::default();
        assert!(s.record("GNU.sparse.major", b"1").is_ok());
        assert!(s.record("GNU.sparse.realsize", b"100").is_ok());
        let mut data = b"99999999999\n0\n1\n".to_vec();
        data.resize(512, 0);
        assert!(s.runs(&mut &data[..]).is_err());
        let data = vec![b'7'; 1024];
        assert!(s.runs(&mut &data[..]).is_err());
    }
}
