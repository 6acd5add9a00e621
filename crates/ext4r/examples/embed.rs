//! Embedding ext4r: a program that builds a small tree with
//! `std::io::Write` handles named by paths and reads it back with
//! `std::io::Read`, twice — on a filesystem in memory, and on the first
//! partition of a disk image (an MBR partition table, the filesystem at
//! 1 MiB), as an image builder for a VM would.
//!
//! ```sh
//! cargo run -p ext4r --example embed -- /tmp/embed   # leaves disk.img and mem.img there
//! e2fsck -fn '/tmp/embed/disk.img?offset=1048576'    # the partition, as e2fsck opens it
//! ```
//!
//! `crates/ext4r/tests/examples.rs` runs it, then `e2fsck -fn` on both
//! filesystems and a kernel mount of the partition compared with the tree.

use std::error::Error;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ext4r::device::{BlockDevice, FileDevice, MemDevice, OffsetDevice, OpenMode};
use ext4r::mkfs::{format, MkfsOptions};
use ext4r::write::{WriteFs, WriteOptions};

/// The disk image: 64 MiB, one Linux partition from 1 MiB to the end.
pub const DISK_BYTES: u64 = 64 << 20;
/// Where the partition starts.
pub const PART_START: u64 = 1 << 20;
/// The big file's length: many blocks, written through `io::copy`.
pub const BIG_BYTES: u64 = 3 << 20;

/// The small files of the tree: path and contents.
pub const FILES: &[(&str, &[u8])] = &[
    ("/etc/hostname", b"embedded\n"),
    ("/etc/motd", b"built by ext4r's write API\n"),
    ("/srv/www/index.html", b"<h1>hello</h1>\n"),
    ("/var/lib/app/state", b""),
];

/// The big file's byte at `i`.
pub fn big_byte(i: u64) -> u8 {
    (i.wrapping_mul(2_654_435_761) >> 13) as u8
}

/// A reader of the big file's contents.
struct Pattern(u64);

impl Read for Pattern {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        for b in buf.iter_mut() {
            *b = big_byte(self.0);
            self.0 += 1;
        }
        Ok(buf.len())
    }
}

/// Formats `dev` (`size` bytes) as ext4 and writes the tree into it.
fn build(dev: Arc<dyn BlockDevice>, size: u64) -> Result<(), Box<dyn Error>> {
    let opts = MkfsOptions {
        size_bytes: size,
        ..MkfsOptions::default()
    };
    format(dev.as_ref(), &opts, true)?;
    let mut fs = WriteFs::open(dev, WriteOptions::default())?;
    for (path, data) in FILES {
        let parent = &path[..path.rfind('/').unwrap_or(0)];
        if !parent.is_empty() {
            fs.create_dir_all(parent, 0o755)?;
        }
        let mut f = fs.create_file(path, 0o644)?;
        f.write_all(data)?;
    }
    let mut big = fs.create_file("/var/big.bin", 0o600)?;
    let copied = std::io::copy(&mut Pattern(0).take(BIG_BYTES), &mut big)?;
    assert_eq!(copied, BIG_BYTES);
    // Handles seek: rewrite the first line of the motd in place.
    let mut motd = fs.open_file("/etc/motd")?;
    motd.seek(SeekFrom::Start(0))?;
    motd.write_all(b"BUILT")?;
    fs.close()?; // committed and written home
    Ok(())
}

/// What the tree's files must hold after [`build`].
pub fn expected(path: &str) -> Vec<u8> {
    if path == "/var/big.bin" {
        return (0..BIG_BYTES).map(big_byte).collect();
    }
    let (_, data) = FILES
        .iter()
        .find(|(p, _)| *p == path)
        .expect("a file of the tree");
    let mut data = data.to_vec();
    if path == "/etc/motd" {
        data[..5].copy_from_slice(b"BUILT");
    }
    data
}

/// Every file path of the tree.
pub fn paths() -> Vec<&'static str> {
    let mut p: Vec<&str> = FILES.iter().map(|(p, _)| *p).collect();
    p.push("/var/big.bin");
    p
}

/// Reads the tree back from `dev` with the read API and checks it.
fn verify(dev: impl BlockDevice + 'static) -> Result<(), Box<dyn Error>> {
    let fs = ext4r::fs::Filesystem::open(dev)?;
    for path in paths() {
        let mut got = Vec::new();
        fs.open_file(&fs.resolve(path)?)?.read_to_end(&mut got)?;
        if got != expected(path) {
            return Err(format!("{path}: read back {} bytes that differ", got.len()).into());
        }
    }
    Ok(())
}

/// Writes a one-entry MBR (type 0x83, Linux) at the start of `disk`.
fn partition_table(disk: &dyn BlockDevice) -> Result<(), Box<dyn Error>> {
    let mut mbr = [0u8; 512];
    let entry = &mut mbr[446..462];
    entry[4] = 0x83;
    entry[8..12].copy_from_slice(&((PART_START / 512) as u32).to_le_bytes());
    entry[12..16].copy_from_slice(&(((DISK_BYTES - PART_START) / 512) as u32).to_le_bytes());
    mbr[510..].copy_from_slice(&[0x55, 0xAA]);
    disk.write_at(&mbr, 0)?;
    Ok(())
}

/// The whole program: a filesystem in memory (saved to `dir/mem.img`) and
/// one in partition 1 of `dir/disk.img`. Returns the two image paths.
pub fn run(dir: &Path) -> Result<(PathBuf, PathBuf), Box<dyn Error>> {
    std::fs::create_dir_all(dir)?;

    // In memory: nothing touches a file until it is saved.
    let mem = Arc::new(MemDevice::new(32 << 20));
    build(mem.clone(), 32 << 20)?;
    verify(mem.snapshot())?;
    let mem_img = dir.join("mem.img");
    mem.save(&mem_img)?;

    // A disk image with a partition table; the filesystem in partition 1.
    let disk_img = dir.join("disk.img");
    let _ = std::fs::remove_file(&disk_img);
    {
        let disk = FileDevice::open(
            &disk_img,
            OpenMode {
                write: true,
                create_size: Some(DISK_BYTES),
                ..OpenMode::default()
            },
        )?;
        partition_table(&disk)?;
        let part = OffsetDevice::partition(disk, 1)?;
        build(Arc::new(part), DISK_BYTES - PART_START)?;
    }
    let disk = FileDevice::open(&disk_img, OpenMode::default())?;
    verify(OffsetDevice::partition(disk, 1)?)?;
    Ok((mem_img, disk_img))
}

#[allow(dead_code)] // main is the example's; the test calls run().
fn main() -> Result<(), Box<dyn Error>> {
    let dir = std::env::args_os()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("ext4r-embed"));
    let (mem, disk) = run(&dir)?;
    println!(
        "wrote {} (a filesystem made in memory) and {} (the same tree in partition 1, at byte {PART_START}); read back equal",
        mem.display(),
        disk.display()
    );
    Ok(())
}
