//! The read face (`fs::Filesystem`) and the write face (`write::WriteFs`)
//! read directories, paths, links and attributes through one object
//! model: they agree on what a tree holds, and the read face finds a name
//! in an indexed directory through its index (a few blocks read, as the
//! kernel's lookup), not by reading the whole directory.

use std::sync::Arc;

use ext4r::device::{BlockDevice, MemDevice};
use ext4r::fs::Filesystem;
use ext4r::mkfs::{format, MkfsOptions};
use ext4r::write::{NewNode, WriteFs, WriteOptions, ROOT_INO};
use ext4r::InodeFlags;

const SIZE: u64 = 64 << 20;
const FILES: u32 = 3000;

fn name(k: u32) -> Vec<u8> {
    format!("a-file-with-a-rather-long-name-{k:05}").into_bytes()
}

/// A filesystem with `/big` (an indexed directory of `FILES` files, one
/// with an xattr), `/link -> big` and `/big/sub`.
fn build() -> Arc<MemDevice> {
    let dev = Arc::new(MemDevice::new(SIZE));
    let opts = MkfsOptions {
        size_bytes: SIZE,
        now: 1_700_000_000,
        ..Default::default()
    };
    format(&*dev, &opts, true).expect("mkfs");
    let mut fs = WriteFs::open(dev.clone(), WriteOptions::default()).expect("open for writing");
    let big = fs
        .mkdir(ROOT_INO, b"big", &NewNode::dir(0o755))
        .expect("mkdir");
    for k in 0..FILES {
        fs.create(big, &name(k), &NewNode::file(0o644))
            .expect("create");
    }
    fs.mkdir(big, b"sub", &NewNode::dir(0o755))
        .expect("mkdir sub");
    let f = fs.lookup(big, &name(7)).expect("lookup").expect("present");
    fs.set_xattr(f, b"user.k", b"seven").expect("set_xattr");
    fs.symlink(ROOT_INO, b"link", b"big", 0, 0)
        .expect("symlink");
    fs.close().expect("close");
    dev
}

#[test]
fn both_faces_read_one_tree_alike() {
    let dev = build();
    let ro = Filesystem::open(dev.clone()).expect("open for reading");
    let rw = WriteFs::open(dev.clone(), WriteOptions::default()).expect("open for writing");

    let big = ro.resolve("/big").expect("resolve /big");
    assert!(
        big.inode.flags().contains(InodeFlags::INDEX),
        "the directory grew an index"
    );
    assert_eq!(rw.lookup_path("/big").expect("lookup_path"), big.ino.0);
    assert_eq!(
        ro.read_dir(&big).expect("read_dir"),
        rw.read_dir(big.ino.0).expect("read_dir")
    );

    // Through a symlink, and `..` as the stored entry.
    let sub = ro
        .resolve("/link/sub/..")
        .expect("resolve through the link");
    assert_eq!(sub.ino, big.ino);
    assert_eq!(
        rw.lookup_path("/link/sub/..").expect("lookup_path"),
        big.ino.0
    );
    let link = ro.resolve("/link").expect("resolve /link");
    assert_eq!(ro.read_link(&link).expect("read_link"), b"big");
    assert_eq!(rw.read_link(link.ino.0).expect("read_link"), b"big");

    let f = ro.lookup(&big, &name(7)).expect("lookup").expect("present");
    let xs = ro.xattrs(&ro.inode(f).expect("inode")).expect("xattrs");
    assert!(xs
        .iter()
        .any(|x| x.name == b"user.k" && x.value == b"seven"));
    assert_eq!(
        rw.xattrs(f.0).expect("xattrs"),
        vec![(b"user.k".to_vec(), b"seven".to_vec())]
    );

    for k in (0..FILES).step_by(97) {
        let a = ro.lookup(&big, &name(k)).expect("lookup");
        let b = rw.lookup(big.ino.0, &name(k)).expect("lookup");
        assert_eq!(a.map(|i| i.0), b, "{}", String::from_utf8_lossy(&name(k)));
        assert!(a.is_some());
    }
    assert_eq!(ro.lookup(&big, b"absent").expect("lookup"), None);
    assert_eq!(rw.lookup(big.ino.0, b"absent").expect("lookup"), None);
    drop(rw);
}

#[test]
fn the_read_face_looks_names_up_through_the_index() {
    let dev = build();
    let ro = Filesystem::open(dev.clone()).expect("open for reading");
    let big = ro.resolve("/big").expect("resolve /big");
    let dir_bytes = big.inode.size();
    let before = dev.stats().bytes_read;
    for k in [0, FILES / 2, FILES - 1] {
        assert!(ro.lookup(&big, &name(k)).expect("lookup").is_some());
    }
    assert_eq!(ro.lookup(&big, b"absent").expect("lookup"), None);
    let read = dev.stats().bytes_read - before;
    // Four lookups by index read a root, a leaf or two and the extent
    // tree each; a linear search would read the directory four times.
    assert!(
        read < dir_bytes / 2,
        "{read} bytes read for four lookups in a directory of {dir_bytes}"
    );
}
