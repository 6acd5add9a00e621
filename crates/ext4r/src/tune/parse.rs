//! Parsing and formatting as e2fsprogs does it: C's `strtoul`, `%g`,
//! mount option lists.

use super::list;

pub(super) fn until_nul(b: &[u8]) -> &[u8] {
    &b[..b.iter().position(|&c| c == 0).unwrap_or(b.len())]
}

/// `strtoul(s, &end, 0)` that must consume everything: decimal, `0x` hex
/// or `0` octal, optional leading blanks and sign (a minus wraps, as in C).
pub fn parse_c_ulong(s: &str) -> Option<u64> {
    let t = s.trim_start();
    let (neg, t) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let (radix, digits) = if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        (16, h)
    } else if t.len() > 1 && t.starts_with('0') {
        (8, &t[1..])
    } else {
        (10, t)
    };
    if digits.is_empty() {
        return None;
    }
    let v = u64::from_str_radix(digits, radix).ok()?;
    Some(if neg { v.wrapping_neg() } else { v })
}

/// `e2p_edit_mntopts` with every option allowed.
pub(super) fn edit_mntopts(list: &str, mask: &mut u32) -> std::result::Result<(), ()> {
    for word in list.split(|c: char| c == ',' || c.is_ascii_whitespace()) {
        if word.is_empty() {
            continue;
        }
        let (neg, name) = match word.as_bytes()[0] {
            b'^' | b'-' => (true, &word[1..]),
            b'+' => (false, &word[1..]),
            _ => (false, word),
        };
        let m = if let Some((m, _)) = list::MNTOPTS
            .iter()
            .find(|(_, n)| n.eq_ignore_ascii_case(name))
        {
            *m
        } else {
            // e2p reads the number from the 9th character of "MNTOPT_<n>".
            let p = name
                .get(..7)
                .filter(|p| p.eq_ignore_ascii_case("MNTOPT_"))
                .ok_or(())?;
            let num: u32 = name
                .get(p.len() + 1..)
                .filter(|r| !r.is_empty())
                .ok_or(())?
                .parse()
                .map_err(|_| ())?;
            if num > 31 {
                return Err(());
            }
            1 << num
        };
        if m & list::JMODE != 0 {
            *mask &= !list::JMODE;
        }
        if neg {
            *mask &= !m;
        } else {
            *mask |= m;
        }
    }
    Ok(())
}

/// C's `%g`: six significant digits, trailing zeros dropped.
pub(super) fn fmt_g(v: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    #[allow(clippy::cast_possible_truncation)] // a decimal exponent of an f64 is within ±324
    let exp = v.abs().log10().floor() as i32;
    if !(-4..6).contains(&exp) {
        let s = format!("{:.5e}", v);
        let (m, e) = s.split_once('e').unwrap_or((&s, "0"));
        let m = trim_zeros(m);
        let e: i32 = e.parse().unwrap_or(0);
        return format!("{m}e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs());
    }
    let decimals = (5 - exp).max(0) as usize;
    trim_zeros(&format!("{v:.decimals$}"))
}

fn trim_zeros(s: &str) -> String {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s.to_string()
    }
}
