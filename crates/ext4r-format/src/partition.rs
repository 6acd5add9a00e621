//! Partition tables: where a filesystem starts on a whole disk (or a disk
//! image). The classic MBR in sector 0 (four primary entries; extended
//! partitions are not followed) and the GUID partition table that a
//! protective MBR points to (header in LBA 1, CRC32-checked header and
//! entry array), as the UEFI specification lays them out.
//!
//! Parsing only: [`mbr`] reads sector 0, [`gpt_header`] LBA 1, and
//! [`gpt_entries`] the entry array the header names. The engine's
//! `OffsetDevice::partition` puts them together over a device.

#[allow(unused_imports)]
use crate::prelude::*;

use crate::error::{need, FormatError, Result};
use crate::num;
use zerocopy::little_endian::{U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// The sector size of MBR addresses (LBA), and of GPT on the 512-byte
/// sector disks and images this reads.
pub const SECTOR: u64 = 512;
/// The MBR's boot signature at bytes 510–511.
pub const MBR_SIGNATURE: u16 = 0xAA55;
/// The MBR partition type of a protective entry: the disk holds a GPT.
pub const MBR_TYPE_GPT_PROTECTIVE: u8 = 0xEE;
/// The GPT header's signature, "EFI PART".
pub const GPT_SIGNATURE: [u8; 8] = *b"EFI PART";
/// Entries larger than this are refused (the specification's entries are
/// 128 bytes; larger powers of two are allowed, as by Linux).
const GPT_MAX_ENTRY_SIZE: u32 = 4096;
/// Entry arrays larger than this are refused (128 entries of 128 bytes is
/// the usual 16 KiB; Linux reads any size, we bound the allocation).
pub const GPT_MAX_ARRAY_BYTES: u64 = 1 << 20;

/// One MBR partition entry as on disk (16 bytes at 446 + 16 × i).
#[derive(Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
#[allow(missing_docs)] // The classic names; CHS addresses are ignored.
pub struct MbrEntry {
    pub status: u8,
    pub chs_first: [u8; 3],
    pub kind: u8,
    pub chs_last: [u8; 3],
    pub lba_first: U32,
    pub sectors: U32,
}

/// The GPT header as on disk (92 bytes at the start of LBA 1).
#[derive(Clone, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
#[allow(missing_docs)] // The UEFI specification's names.
pub struct GptHeader {
    pub signature: [u8; 8],
    pub revision: U32,
    pub header_size: U32,
    pub header_crc32: U32,
    pub reserved: U32,
    pub my_lba: U64,
    pub alternate_lba: U64,
    pub first_usable_lba: U64,
    pub last_usable_lba: U64,
    pub disk_guid: [u8; 16],
    pub entries_lba: U64,
    pub entry_count: U32,
    pub entry_size: U32,
    pub entries_crc32: U32,
}

const GPT_HEADER_MIN: usize = core::mem::size_of::<GptHeader>();
const _: () = assert!(GPT_HEADER_MIN == 92);

/// The fixed part of a GPT entry (the name follows, UTF-16LE, to the
/// entry's size).
#[derive(Clone, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
#[allow(missing_docs)]
pub struct GptEntryHead {
    pub type_guid: [u8; 16],
    pub unique_guid: [u8; 16],
    pub first_lba: U64,
    pub last_lba: U64,
    pub attributes: U64,
}

/// What kind of table a partition came from, with its type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PartitionType {
    /// An MBR entry's type byte (0x83 Linux, 0x07 NTFS, ...).
    Mbr(u8),
    /// A GPT entry's type GUID, as stored (mixed-endian bytes).
    Gpt([u8; 16]),
}

/// One partition: its number as Linux numbers it (1-based: `sda1`,
/// `loop0p1`), and its place in bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Partition {
    /// 1-based number (an MBR's slot, a GPT's entry index + 1).
    pub number: u32,
    /// First byte.
    pub start: u64,
    /// Length in bytes.
    pub len: u64,
    /// Its type.
    pub kind: PartitionType,
    /// The GPT entry's name (empty for MBR).
    pub name: String,
}

/// What sector 0 holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mbr {
    /// No boot signature: no partition table.
    None,
    /// A protective MBR: the partitions are in the GPT.
    Protective,
    /// Classic primary partitions (empty slots left out).
    Primary(Vec<Partition>),
}

/// Reads the MBR of `sector0` (its first 512 bytes).
///
/// # Errors
/// [`FormatError::Truncated`] when shorter than 512 bytes;
/// [`FormatError::Invalid`] for an entry whose end overflows.
pub fn mbr(sector0: &[u8]) -> Result<Mbr> {
    need("MBR", sector0, num::index(SECTOR))?;
    if u16::from_le_bytes([sector0[510], sector0[511]]) != MBR_SIGNATURE {
        return Ok(Mbr::None);
    }
    let mut out = Vec::new();
    for slot in 0..4u32 {
        let at = 446 + 16 * slot as usize;
        let Ok(e) = MbrEntry::read_from_bytes(&sector0[at..at + 16]) else {
            unreachable!("16 bytes hold an MBR entry");
        };
        if e.kind == MBR_TYPE_GPT_PROTECTIVE {
            return Ok(Mbr::Protective);
        }
        if e.kind == 0 || e.sectors.get() == 0 {
            continue;
        }
        out.push(Partition {
            number: slot + 1,
            start: u64::from(e.lba_first.get()) * SECTOR,
            len: u64::from(e.sectors.get()) * SECTOR,
            kind: PartitionType::Mbr(e.kind),
            name: String::new(),
        });
    }
    Ok(Mbr::Primary(out))
}

/// CRC32 (IEEE 802.3, as zlib's `crc32`) over `data`: the GPT's checksum.
pub fn crc32_ieee(data: &[u8]) -> u32 {
    crc::Crc::<u32>::new(&crc::CRC_32_ISO_HDLC).checksum(data)
}

/// Parses and checks the GPT header in `lba1` (one sector).
///
/// # Errors
/// [`FormatError::BadMagic`] without "EFI PART";
/// [`FormatError::BadChecksum`] when the header's CRC32 is wrong;
/// [`FormatError::Invalid`] for a header size, entry size or entry array
/// the specification (or our bound on the array) does not allow.
pub fn gpt_header(lba1: &[u8]) -> Result<GptHeader> {
    need("GPT header", lba1, GPT_HEADER_MIN)?;
    let Ok((h, _)) = GptHeader::read_from_prefix(lba1) else {
        unreachable!("length checked above");
    };
    if h.signature != GPT_SIGNATURE {
        return Err(FormatError::BadMagic {
            what: "GPT header",
            found: u32::from_le_bytes([
                h.signature[0],
                h.signature[1],
                h.signature[2],
                h.signature[3],
            ]),
            expected: u32::from_le_bytes([b'E', b'F', b'I', b' ']),
        });
    }
    let size = h.header_size.get() as usize;
    if size < GPT_HEADER_MIN || size > lba1.len() {
        return Err(FormatError::invalid(
            "GPT header",
            format!(
                "header size {size} outside {GPT_HEADER_MIN}..={}",
                lba1.len()
            ),
        ));
    }
    let mut copy = lba1[..size].to_vec();
    copy[16..20].fill(0);
    let computed = crc32_ieee(&copy);
    if computed != h.header_crc32.get() {
        return Err(FormatError::BadChecksum {
            what: "GPT header",
            stored: h.header_crc32.get(),
            computed,
        });
    }
    let es = h.entry_size.get();
    if es < 128 || !es.is_power_of_two() || es > GPT_MAX_ENTRY_SIZE {
        return Err(FormatError::invalid(
            "GPT header",
            format!("entry size {es} is not a power of two in 128..=4096"),
        ));
    }
    if gpt_array_bytes(&h) > GPT_MAX_ARRAY_BYTES {
        return Err(FormatError::invalid(
            "GPT header",
            format!(
                "{} entries of {es} bytes: more than {GPT_MAX_ARRAY_BYTES} bytes",
                h.entry_count.get()
            ),
        ));
    }
    Ok(h)
}

/// Bytes of the entry array `h` names.
pub fn gpt_array_bytes(h: &GptHeader) -> u64 {
    u64::from(h.entry_count.get()) * u64::from(h.entry_size.get())
}

/// The used entries of the array `bytes` (read from `h.entries_lba`,
/// [`gpt_array_bytes`] long), checked against the header's CRC32.
///
/// # Errors
/// [`FormatError::Truncated`], [`FormatError::BadChecksum`];
/// [`FormatError::Invalid`] for an entry that ends before it starts or
/// whose byte range overflows.
pub fn gpt_entries(h: &GptHeader, bytes: &[u8]) -> Result<Vec<Partition>> {
    let total = num::index(gpt_array_bytes(h));
    need("GPT entries", bytes, total)?;
    let computed = crc32_ieee(&bytes[..total]);
    if computed != h.entries_crc32.get() {
        return Err(FormatError::BadChecksum {
            what: "GPT entries",
            stored: h.entries_crc32.get(),
            computed,
        });
    }
    let es = h.entry_size.get() as usize;
    let mut out = Vec::new();
    for (i, entry) in bytes[..total].chunks_exact(es).enumerate() {
        let Ok((e, rest)) = GptEntryHead::read_from_prefix(entry) else {
            unreachable!("entries are at least 128 bytes");
        };
        if e.type_guid == [0; 16] {
            continue;
        }
        let (first, last) = (e.first_lba.get(), e.last_lba.get());
        let range = last
            .checked_sub(first)
            .and_then(|n| n.checked_add(1))
            .and_then(|n| n.checked_mul(SECTOR))
            .zip(first.checked_mul(SECTOR));
        let Some((len, start)) = range else {
            return Err(FormatError::invalid(
                "GPT entry",
                format!("entry {}: LBA {first}..={last}", i + 1),
            ));
        };
        let name_units: Vec<u16> = rest[..rest.len().min(72)]
            .chunks_exact(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
            .take_while(|&u| u != 0)
            .collect();
        out.push(Partition {
            // i counts entries of a u32 `entry_count`.
            number: num::sat_u32(i + 1),
            start,
            len,
            kind: PartitionType::Gpt(e.type_guid),
            name: char::decode_utf16(name_units)
                .map(|c| c.unwrap_or(char::REPLACEMENT_CHARACTER))
                .collect(),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mbr_with(entries: &[(u8, u32, u32)]) -> Vec<u8> {
        let mut s = vec![0u8; 512];
        for (i, &(kind, first, n)) in entries.iter().enumerate() {
            let at = 446 + 16 * i;
            s[at + 4] = kind;
            s[at + 8..at + 12].copy_from_slice(&first.to_le_bytes());
            s[at + 12..at + 16].copy_from_slice(&n.to_le_bytes());
        }
        s[510] = 0x55;
        s[511] = 0xAA;
        s
    }

    #[test]
    fn mbr_primary_entries() {
        let s = mbr_with(&[(0x83, 2048, 4096), (0, 0, 0), (0x07, 8192, 100)]);
        let Mbr::Primary(p) = mbr(&s).unwrap() else {
            panic!("not primary")
        };
        assert_eq!(p.len(), 2);
        assert_eq!((p[0].number, p[0].start, p[0].len), (1, 1 << 20, 2 << 20));
        assert_eq!(p[1].number, 3);
        assert_eq!(p[1].kind, PartitionType::Mbr(0x07));
    }

    #[test]
    fn mbr_none_and_protective() {
        assert_eq!(mbr(&[0u8; 512]).unwrap(), Mbr::None);
        let s = mbr_with(&[(0xEE, 1, 0xFFFF_FFFF)]);
        assert_eq!(mbr(&s).unwrap(), Mbr::Protective);
        assert!(mbr(&[0u8; 100]).is_err());
    }

    /// A GPT header and array with one entry, checksums right.
    fn gpt(first: u64, last: u64) -> (Vec<u8>, Vec<u8>) {
        let mut arr = vec![0u8; 128 * 128];
        arr[0] = 0xAF; // a non-zero type GUID
        arr[32..40].copy_from_slice(&first.to_le_bytes());
        arr[40..48].copy_from_slice(&last.to_le_bytes());
        for (i, u) in "root".encode_utf16().enumerate() {
            arr[56 + 2 * i..58 + 2 * i].copy_from_slice(&u.to_le_bytes());
        }
        let mut h = vec![0u8; 512];
        h[..8].copy_from_slice(&GPT_SIGNATURE);
        h[8..12].copy_from_slice(&0x0001_0000u32.to_le_bytes());
        h[12..16].copy_from_slice(&92u32.to_le_bytes());
        h[72..80].copy_from_slice(&2u64.to_le_bytes());
        h[80..84].copy_from_slice(&128u32.to_le_bytes());
        h[84..88].copy_from_slice(&128u32.to_le_bytes());
        h[88..92].copy_from_slice(&crc32_ieee(&arr).to_le_bytes());
        let c = crc32_ieee(&h[..92]);
        h[16..20].copy_from_slice(&c.to_le_bytes());
        (h, arr)
    }

    #[test]
    fn gpt_one_entry() {
        let (h, arr) = gpt(2048, 4095);
        let hdr = gpt_header(&h).unwrap();
        let p = gpt_entries(&hdr, &arr).unwrap();
        assert_eq!(p.len(), 1);
        assert_eq!((p[0].number, p[0].start, p[0].len), (1, 1 << 20, 1 << 20));
        assert_eq!(p[0].name, "root");
    }

    #[test]
    fn gpt_damage_refused() {
        let (mut h, mut arr) = gpt(2048, 4095);
        arr[40] ^= 1;
        let hdr = gpt_header(&h).unwrap();
        assert!(matches!(
            gpt_entries(&hdr, &arr),
            Err(FormatError::BadChecksum { .. })
        ));
        h[30] ^= 1;
        assert!(matches!(
            gpt_header(&h),
            Err(FormatError::BadChecksum { .. })
        ));
        let (h, arr) = gpt(4095, 2048);
        let hdr = gpt_header(&h).unwrap();
        assert!(gpt_entries(&hdr, &arr).is_err());
    }

    #[test]
    fn crc32_ieee_check_value() {
        assert_eq!(crc32_ieee(b"123456789"), 0xCBF4_3926);
    }
}
