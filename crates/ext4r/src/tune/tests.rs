use super::*;

#[test]
fn c_numbers_parse_like_strtoul() {
    assert_eq!(parse_c_ulong("10"), Some(10));
    assert_eq!(parse_c_ulong("0x10"), Some(16));
    assert_eq!(parse_c_ulong("010"), Some(8));
    assert_eq!(parse_c_ulong("0"), Some(0));
    assert_eq!(parse_c_ulong("1x"), None);
    assert_eq!(parse_c_ulong(""), None);
}

#[test]
fn percent_g_formats_like_c() {
    assert_eq!(fmt_g(5.0), "5");
    assert_eq!(fmt_g(0.5), "0.5");
    assert_eq!(fmt_g(2.25), "2.25");
    assert_eq!(fmt_g(0.00001), "1e-05");
    assert_eq!(fmt_g(12.3456789), "12.3457");
}

#[test]
fn mount_option_edits() {
    let mut m = 0x0c;
    edit_mntopts("^acl,journal_data", &mut m).unwrap();
    assert_eq!(m, 0x24);
    edit_mntopts("journal_data_writeback", &mut m).unwrap();
    assert_eq!(m, 0x64);
    assert!(edit_mntopts("frob", &mut m).is_err());
}

#[test]
fn time_uuids_are_version_1() {
    let u = time_uuid(1_700_000_000, [7; 16]);
    assert_eq!(u[6] >> 4, 1);
    assert_eq!(u[8] & 0xc0, 0x80);
}
