//! `mkdir -m MODE`: an octal mode, or chmod's symbolic clauses applied to
//! `a=rwx` as coreutils' mkdir applies them (a clause that names no one
//! leaves the umask's bits alone). One difference: coreutils lets the
//! umask take bits again when the result has the sticky bit (`-m +t` is
//! 1755 under umask 022); here it is 1777, what the clause says.

use anyhow::{bail, Result};

/// The mode `-m spec` gives a new directory, for a process with `umask`.
pub(crate) fn parse_mode(spec: &str, umask: u16) -> Result<u16> {
    let bad = || anyhow::anyhow!("invalid mode '{spec}'");
    if !spec.is_empty() && spec.bytes().all(|b| (b'0'..=b'7').contains(&b)) {
        let v = u32::from_str_radix(spec, 8).map_err(|_| bad())?;
        return u16::try_from(v)
            .ok()
            .filter(|&v| v <= 0o7777)
            .ok_or_else(bad);
    }
    let mut m: u16 = 0o777;
    for clause in spec.split(',') {
        let b = clause.as_bytes();
        let mut i = 0;
        let mut who = 0u16;
        while i < b.len() && b"ugoa".contains(&b[i]) {
            who |= match b[i] {
                b'u' => 0o4700,
                b'g' => 0o2070,
                b'o' => 0o1007,
                _ => 0o7777,
            };
            i += 1;
        }
        // No one named: everyone, less what the umask takes.
        let named = who != 0;
        let (who, masked) = if named { (who, 0) } else { (0o7777, umask) };
        if i == b.len() {
            bail!(bad());
        }
        while i < b.len() {
            let op = b[i];
            if !b"+-=".contains(&op) {
                bail!(bad());
            }
            i += 1;
            let mut bits = 0u16;
            while i < b.len() && !b"+-=".contains(&b[i]) {
                bits |= match b[i] {
                    b'r' => 0o444,
                    b'w' => 0o222,
                    // A directory: X is x.
                    b'x' | b'X' => 0o111,
                    b's' => 0o6000,
                    b't' => 0o1000,
                    // Copies of another class's bits, spread to all three.
                    b'u' => spread((m >> 6) & 7),
                    b'g' => spread((m >> 3) & 7),
                    b'o' => spread(m & 7),
                    _ => bail!(bad()),
                };
                i += 1;
            }
            let bits = bits & who & !masked;
            match op {
                b'+' => m |= bits,
                b'-' => m &= !bits,
                // '=' for no one named sets the whole mode (gnulib's
                // mode_adjust keeps nothing then).
                _ if !named => m = bits,
                _ => m = (m & !who) | bits,
            }
        }
    }
    Ok(m)
}

fn spread(x: u16) -> u16 {
    x << 6 | x << 3 | x
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_as_mkdir_takes_them() {
        assert_eq!(parse_mode("700", 0o022).ok(), Some(0o700));
        assert_eq!(parse_mode("2755", 0o022).ok(), Some(0o2755));
        assert!(parse_mode("17777", 0).is_err());
        assert_eq!(parse_mode("u=rwx,go=", 0o022).ok(), Some(0o700));
        assert_eq!(parse_mode("go-w", 0).ok(), Some(0o755));
        assert_eq!(parse_mode("a-w", 0).ok(), Some(0o555));
        // No one named: the umask's bits are left alone.
        assert_eq!(parse_mode("-w", 0o022).ok(), Some(0o555 | 0o022));
        assert_eq!(parse_mode("=r", 0o022).ok(), Some(0o444));
        assert_eq!(parse_mode("=rwx", 0o022).ok(), Some(0o755));
        assert_eq!(parse_mode("+s", 0o022).ok(), Some(0o6777));
        assert_eq!(parse_mode("-x", 0o022).ok(), Some(0o666));
        assert_eq!(parse_mode("g=u", 0).ok(), Some(0o777));
        assert!(parse_mode("u*x", 0).is_err());
        assert!(parse_mode("", 0).is_err());
    }
}
