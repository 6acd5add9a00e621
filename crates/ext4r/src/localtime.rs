//! Times as e2fsprogs prints and reads them: in the local time zone (the
//! C library's `ctime` and `mktime`), which chrono's `Local` follows: `TZ`
//! when set (a zone name, a file, or a POSIX rule), else `/etc/localtime`.

use chrono::{DateTime, Local, LocalResult, NaiveDate, TimeZone};

/// C's `ctime` without the newline, in the local zone:
/// `"Tue Nov 14 22:13:20 2023"`.
pub fn ctime(t: i64) -> String {
    ctime_in(&Local, t)
}

/// [`ctime`] in the zone `tz`.
fn ctime_in<Tz: TimeZone>(tz: &Tz, t: i64) -> String
where
    Tz::Offset: std::fmt::Display,
{
    match tz.timestamp_opt(t, 0) {
        LocalResult::Single(d) | LocalResult::Ambiguous(d, _) => {
            d.format("%a %b %e %H:%M:%S %Y").to_string()
        }
        // Outside chrono's range (not reachable with on-disk times, which
        // are at most 34 bits): the number itself, as glibc's ctime
        // prints nothing usable either.
        LocalResult::None => t.to_string(),
    }
}

/// `YYYY-MM-DD HH:MM` in the local zone (as `ls -l --time-style=+%F %R`).
pub fn short(t: i64) -> String {
    short_in(&Local, t)
}

fn short_in<Tz: TimeZone>(tz: &Tz, t: i64) -> String
where
    Tz::Offset: std::fmt::Display,
{
    match tz.timestamp_opt(t, 0) {
        LocalResult::Single(d) | LocalResult::Ambiguous(d, _) => {
            d.format("%Y-%m-%d %H:%M").to_string()
        }
        LocalResult::None => t.to_string(),
    }
}

/// Seconds since the epoch of a local date and time, as C's `mktime` with
/// `tm_isdst = -1` reads it (tune2fs `-T`). A time that falls in the gap
/// of a change to summer time is taken an hour on, as glibc does; of an
/// ambiguous one (the hour repeated in autumn), the earlier. Fields past
/// their range carry over as `mktime` normalises them (February 30 is
/// March 2 or 1); `None` for a month outside 1..=12 or a year out of range.
pub fn from_local(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> Option<i64> {
    from_zone(&Local, y, mo, d, h, mi, s)
}

fn from_zone<Tz: TimeZone>(
    tz: &Tz,
    y: i32,
    mo: u32,
    d: u32,
    h: u32,
    mi: u32,
    s: u32,
) -> Option<i64> {
    let naive = NaiveDate::from_ymd_opt(y, mo, 1)?.and_hms_opt(0, 0, 0)?
        + chrono::Duration::days(i64::from(d) - 1)
        + chrono::Duration::hours(h.into())
        + chrono::Duration::minutes(mi.into())
        + chrono::Duration::seconds(s.into());
    let pick = |r: LocalResult<DateTime<Tz>>| match r {
        LocalResult::Single(t) | LocalResult::Ambiguous(t, _) => Some(t.timestamp()),
        LocalResult::None => None,
    };
    pick(tz.from_local_datetime(&naive))
        .or_else(|| pick(tz.from_local_datetime(&(naive + chrono::Duration::hours(1)))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{FixedOffset, Utc};

    #[test]
    fn ctime_reads_as_c_prints_it() {
        assert_eq!(ctime_in(&Utc, 0), "Thu Jan  1 00:00:00 1970");
        assert_eq!(ctime_in(&Utc, 1_700_000_000), "Tue Nov 14 22:13:20 2023");
        assert_eq!(ctime_in(&Utc, 951_782_400), "Tue Feb 29 00:00:00 2000");
        let east = FixedOffset::east_opt(2 * 3600).unwrap();
        assert_eq!(ctime_in(&east, 0), "Thu Jan  1 02:00:00 1970");
    }

    #[test]
    fn local_dates_convert_back() {
        assert_eq!(
            from_zone(&Utc, 2023, 11, 14, 22, 13, 20),
            Some(1_700_000_000)
        );
        let west = FixedOffset::west_opt(5 * 3600).unwrap();
        assert_eq!(
            from_zone(&west, 2023, 11, 14, 17, 13, 20),
            Some(1_700_000_000)
        );
        // mktime's carry: February 30 is March 2.
        assert_eq!(
            from_zone(&Utc, 2023, 2, 30, 0, 0, 0),
            from_zone(&Utc, 2023, 3, 2, 0, 0, 0)
        );
        assert_eq!(from_zone(&Utc, 2023, 13, 1, 0, 0, 0), None);
        assert_eq!(short_in(&Utc, 1_700_000_000), "2023-11-14 22:13");
        assert_eq!(short_in(&Utc, -86_400), "1969-12-31 00:00");
    }
}
