//! The MMP block: parse, round-trip, state and names, checksum.
//!
//! The raw input is parsed as is; then it is zero-padded to 1024 bytes and
//! given the magic, so that the fuzzer reaches the fields.
#![no_main]

use ext4r_format::mmp::{MmpStruct, MMP_MAGIC, MMP_SIZE};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = MmpStruct::parse(data) {
        assert_eq!(&m.to_bytes()[..], &data[..MMP_SIZE]);
    }
    let mut buf = [0u8; MMP_SIZE];
    let n = data.len().min(MMP_SIZE);
    buf[..n].copy_from_slice(&data[..n]);
    buf[..4].copy_from_slice(&MMP_MAGIC.to_le_bytes());
    let m = MmpStruct::parse(&buf).expect("magic is set");
    assert_eq!(m.to_bytes(), buf);
    assert!(MmpStruct::parse(&m.to_bytes()).expect("re-parse") == m);
    let _ = (m.state(), m.nodename(), m.bdevname(), format!("{m:?}"));
    let seed = m.mmp_seq.get();
    let _ = m.verify_checksum(seed);
    let mut fixed = m.clone();
    fixed.update_checksum(seed);
    assert!(fixed.verify_checksum(seed).is_ok());
    let rebuilt = MmpStruct::new(
        m.mmp_seq.get(),
        m.mmp_time.get(),
        m.nodename(),
        m.bdevname(),
        m.mmp_check_interval.get(),
    );
    assert_eq!(rebuilt.nodename(), m.nodename());
    assert_eq!(rebuilt.state(), m.state());
});
