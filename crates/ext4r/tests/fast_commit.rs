//! Crafted fast-commit areas (issue 28): each case writes a fast-commit
//! area by hand into the journal of a small filesystem made here, marks
//! the journal as needing recovery, recovers through the engine, and
//! checks what was replayed against what the kernel's replay does with
//! the same records (`fs/ext4/fast_commit.c`): valid commits applied, a
//! torn or stale area ignored from its first bad record, a record that
//! would build on something that is not there passed over, and nothing
//! else touched. Never a panic; where e2fsck is installed the recovered
//! image must be e2fsck-clean unless the case leaves an inode without a
//! name (what a replay stopped half-way leaves, for fsck to finish).
#![allow(clippy::unwrap_used)]

mod common;

use common::{missing_tools, run_status, TempDir};
use ext4r::device::{BlockDevice, MemDevice};
use ext4r::fs::Filesystem;
use ext4r::journal::{Journal, JournalLocation, Recovery};
use ext4r::mkfs::{format, MkfsOptions};
use ext4r::write::{NewNode, WriteFs, WriteOptions, ROOT_INO};
use ext4r_format::extent::Extent;
use ext4r_format::jbd2::fast_commit::{
    add_range_value, del_range_value, dentry_value, inode_value, tag, FcWriter,
};
use ext4r_format::jbd2::{JournalIncompat, JournalSuperblock, JOURNAL_SUPERBLOCK_SIZE};
use ext4r_format::superblock::{Superblock, SUPERBLOCK_OFFSET, SUPERBLOCK_SIZE};
use ext4r_format::{BlockNr, InodeNr};
use std::io::Read;
use std::sync::Arc;

const BS: u64 = 4096;
const TID: u32 = 40;
const NOW: i64 = 1_700_000_000;

/// A filesystem with `/d` (a directory) holding `/d/a` (5000 bytes), and
/// what a case needs to write records about it.
struct Fx {
    dev: Arc<MemDevice>,
    d: u32,
    a: u32,
    /// `/d/a`'s record, a template for new inodes.
    template: Vec<u8>,
    /// An unused inode.
    free_ino: u32,
    /// A run of 8 unused blocks.
    free_blocks: u64,
    loc: JournalLocation,
    inodes_count: u32,
}

fn fixture() -> Fx {
    let dev = Arc::new(MemDevice::new(64 << 20));
    let opts = MkfsOptions {
        size_bytes: 64 << 20,
        now: NOW,
        block_size: Some(BS as u32),
        features: vec!["fast_commit".into()],
        ..Default::default()
    };
    format(&*dev, &opts, true).unwrap();
    let mut w = WriteFs::open(dev.clone(), WriteOptions::default()).unwrap();
    let d = w.mkdir(ROOT_INO, b"d", &NewNode::dir(0o755)).unwrap();
    let a = w.create(d, b"a", &NewNode::file(0o644)).unwrap();
    w.write(a, 0, &[0x61; 5000]).unwrap();
    w.close().unwrap();
    let fs = Filesystem::open(dev.snapshot()).unwrap();
    let template = fs.inode(InodeNr(a)).unwrap().record;
    let loc = fs.journal_location().unwrap().unwrap();
    let blocks = fs.geometry().blocks_count;
    Fx {
        dev,
        d,
        a,
        template,
        free_ino: a + 7,
        free_blocks: blocks - 64,
        loc,
        inodes_count: fs.superblock().s_inodes_count.get(),
    }
}

impl Fx {
    fn journal_sb(&self) -> JournalSuperblock {
        let mut b = [0u8; JOURNAL_SUPERBLOCK_SIZE];
        let at = self.loc.device_block(0).unwrap().0 * BS;
        self.dev.read_at(&mut b, at).unwrap();
        JournalSuperblock::parse(&b).unwrap()
    }

    /// Index of fast-commit block 0 in the journal.
    fn fc_first(&self) -> u64 {
        let sb = self.journal_sb();
        u64::from(sb.s_maxlen.get()) - u64::from(sb.num_fc_blocks_if_enabled()) + 1
    }

    /// Writes `blocks` as the fast-commit area and leaves the journal and
    /// the filesystem needing recovery with an empty log whose next
    /// transaction is `TID`.
    fn arm(&self, blocks: &[Vec<u8>]) {
        let mut sb = self.journal_sb();
        sb.s_feature_incompat
            .set(sb.s_feature_incompat.get() | JournalIncompat::FAST_COMMIT.bits());
        let first = u64::from(sb.s_first.get());
        sb.s_start.set(first as u32);
        sb.s_sequence.set(TID);
        let at = self.loc.device_block(0).unwrap().0 * BS;
        self.dev.write_at(&sb.to_bytes(), at).unwrap();
        let zero = vec![0u8; BS as usize];
        let log = self.loc.device_block(first).unwrap().0 * BS;
        self.dev.write_at(&zero, log).unwrap();
        let fc0 = self.fc_first();
        for (k, b) in blocks.iter().enumerate() {
            let Some(blk) = self.loc.device_block(fc0 + k as u64) else {
                break;
            };
            self.dev.write_at(b, blk.0 * BS).unwrap();
        }
        let mut raw = [0u8; SUPERBLOCK_SIZE];
        self.dev.read_at(&mut raw, SUPERBLOCK_OFFSET).unwrap();
        let mut fsb = Superblock::parse(&raw).unwrap();
        fsb.s_feature_incompat
            .set(fsb.s_feature_incompat.get() | ext4r_format::features::Incompat::RECOVER.bits());
        ext4r_txn::csum::Checksums::stamp_superblock(&mut fsb);
        self.dev
            .write_at(&fsb.to_bytes(), SUPERBLOCK_OFFSET)
            .unwrap();
    }

    fn recover(&self) -> Recovery {
        let dev: Arc<dyn BlockDevice> = self.dev.clone();
        let j = Journal::open(dev.clone(), self.loc.clone(), BS as u32).unwrap();
        ext4r::write::recover_journal(&dev, &j, Some((NOW, 0))).unwrap()
    }

    /// A new file's record: the template with `size` bytes, one link, and
    /// an empty extent root (the add-range records map it).
    fn new_inode(&self, size: u64) -> Vec<u8> {
        let mut i = ext4r_format::inode::Inode::parse(&self.template).unwrap();
        i.set_size(size);
        i.i_links_count.set(1);
        i.i_generation.set(77);
        let mut rec = self.template.clone();
        i.write(&mut rec).unwrap();
        rec[..256.min(rec.len())].to_vec()
    }

    fn fs(&self) -> Filesystem {
        Filesystem::open(self.dev.snapshot()).unwrap()
    }

    fn read(&self, path: &str) -> Option<Vec<u8>> {
        let fs = self.fs();
        let info = fs.resolve(path).ok()?;
        let mut out = Vec::new();
        fs.open_file(&info).ok()?.read_to_end(&mut out).ok()?;
        Some(out)
    }

    fn names(&self, dir: &str) -> Vec<String> {
        let fs = self.fs();
        let info = fs.resolve(dir).unwrap();
        let mut v: Vec<String> = fs
            .read_dir(&info)
            .unwrap()
            .into_iter()
            .filter(|e| !e.is_dot())
            .map(|e| e.name_lossy())
            .collect();
        v.sort();
        v
    }

    fn links(&self, ino: u32) -> u16 {
        self.fs().inode(InodeNr(ino)).unwrap().inode.links_count()
    }

    /// `e2fsck -fn` on the image: exit code (None without e2fsck).
    fn e2fsck(&self) -> Option<i32> {
        if missing_tools(&["e2fsck"]).is_some() {
            return None;
        }
        let dir = TempDir::new("fc-crafted");
        let img = dir.join("img");
        self.dev.save(&img).unwrap();
        let (rc, _, _) = run_status("e2fsck", &["-fn", &img.display().to_string()], &[]).unwrap();
        Some(rc)
    }

    /// The records of a new file `name` in `/d`: its inode, its data (in
    /// the free run, written there), its entry.
    fn create_file(&self, w: &mut FcWriter, name: &[u8], data: &[u8]) {
        let blocks = (data.len() as u64).div_ceil(BS);
        let mut buf = data.to_vec();
        buf.resize((blocks * BS) as usize, 0);
        self.dev.write_at(&buf, self.free_blocks * BS).unwrap();
        w.record(
            tag::INODE,
            &inode_value(self.free_ino, &self.new_inode(data.len() as u64)[..160]),
        );
        let e = Extent::new(0, BlockNr(self.free_blocks), blocks as u16, false).unwrap();
        w.record(tag::ADD_RANGE, &add_range_value(self.free_ino, &e));
        w.record(tag::CREAT, &dentry_value(self.d, self.free_ino, name));
        w.record(
            tag::INODE,
            &inode_value(self.free_ino, &self.new_inode(data.len() as u64)[..160]),
        );
    }
}

trait FcBlocks {
    fn num_fc_blocks_if_enabled(&self) -> u32;
}

impl FcBlocks for JournalSuperblock {
    /// The area mkfs made (s_num_fc_blks), whether or not the journal
    /// has the feature on yet.
    fn num_fc_blocks_if_enabled(&self) -> u32 {
        match self.s_num_fc_blks.get() {
            0 => 256,
            n => n,
        }
    }
}

#[test]
fn a_valid_commit_is_replayed() {
    let fx = fixture();
    let mut w = FcWriter::new(BS as usize, TID);
    fx.create_file(&mut w, b"new", &[0x6e; 6000]);
    w.tail(TID);
    fx.arm(&w.finish());
    let r = fx.recover();
    assert!(r.problem.is_none(), "{:?}", r.problem);
    assert_eq!(r.fast_commit_applied, 6);
    assert_eq!(fx.read("/d/new").unwrap(), vec![0x6e; 6000]);
    assert_eq!(fx.read("/d/a").unwrap(), vec![0x61; 5000]);
    assert_eq!(fx.e2fsck().unwrap_or(0), 0);
    // The area is spent: a second recovery finds nothing.
    let fs = fx.fs();
    assert!(!fs
        .superblock()
        .has_incompat(ext4r_format::features::Incompat::RECOVER));
}

#[test]
fn a_bad_tail_crc_on_the_only_commit_refuses_the_area() {
    let fx = fixture();
    let mut w = FcWriter::new(BS as usize, TID);
    fx.create_file(&mut w, b"new", &[0x6e; 100]);
    w.tail(TID);
    let mut blocks = w.finish();
    // A byte of the entry's name: the CRC no longer matches.
    let at = blocks[0].windows(3).position(|x| x == b"new").unwrap();
    blocks[0][at] = b'N';
    fx.arm(&blocks);
    let r = fx.recover();
    assert!(r.problem.is_some(), "the kernel fails such a recovery");
    assert_eq!(r.fast_commit_applied, 0);
    assert_eq!(fx.names("/d"), ["a"]);
    assert_eq!(fx.read("/d/a").unwrap(), vec![0x61; 5000]);
}

#[test]
fn a_torn_second_commit_keeps_the_first() {
    let fx = fixture();
    let mut w = FcWriter::new(BS as usize, TID);
    fx.create_file(&mut w, b"new", &[0x6e; 100]);
    w.tail(TID);
    w.record(tag::UNLINK, &dentry_value(fx.d, fx.a, b"a"));
    w.tail(TID);
    let mut blocks = w.finish();
    // The second commit's record, in block 1.
    blocks[1][8] ^= 0xff;
    fx.arm(&blocks);
    let r = fx.recover();
    assert!(r.problem.is_none(), "{:?}", r.problem);
    assert_eq!(fx.names("/d"), ["a", "new"]);
    assert_eq!(fx.e2fsck().unwrap_or(0), 0);
}

#[test]
fn a_stale_area_is_ignored() {
    let fx = fixture();
    let mut w = FcWriter::new(BS as usize, TID - 1);
    fx.create_file(&mut w, b"new", &[0x6e; 100]);
    w.tail(TID - 1);
    fx.arm(&w.finish());
    let r = fx.recover();
    assert!(r.problem.is_none(), "{:?}", r.problem);
    assert!(r.fast_commit.is_none());
    assert_eq!(fx.names("/d"), ["a"]);
    assert_eq!(fx.e2fsck().unwrap_or(0), 0);
}

#[test]
fn unknown_head_features_refuse_the_area() {
    let fx = fixture();
    let mut w = FcWriter::new(BS as usize, TID);
    fx.create_file(&mut w, b"new", &[0x6e; 100]);
    w.tail(TID);
    let mut blocks = w.finish();
    blocks[0][4] = 0x80;
    fx.arm(&blocks);
    let r = fx.recover();
    assert!(r.problem.is_some());
    assert_eq!(fx.names("/d"), ["a"]);
}

#[test]
fn a_record_past_its_block_ends_the_valid_part() {
    let fx = fixture();
    let mut w = FcWriter::new(BS as usize, TID);
    fx.create_file(&mut w, b"new", &[0x6e; 100]);
    w.tail(TID);
    w.record(tag::UNLINK, &dentry_value(fx.d, fx.a, b"a"));
    w.tail(TID);
    let mut blocks = w.finish();
    // The unlink record's length now runs past the block's end.
    blocks[1][2..4].copy_from_slice(&5000u16.to_le_bytes());
    fx.arm(&blocks);
    let r = fx.recover();
    assert!(r.problem.is_none());
    assert_eq!(fx.names("/d"), ["a", "new"]);
}

#[test]
fn an_area_running_past_the_journal_is_read_to_its_end_only() {
    let fx = fixture();
    // Commits in every block of the area and beyond: the scan ends where
    // the journal does (the kernel's read past s_maxlen fails).
    let sb = fx.journal_sb();
    let area = sb.num_fc_blocks_if_enabled() as usize;
    let mut w = FcWriter::new(BS as usize, TID);
    for k in 0..area + 3 {
        w.record(tag::PAD, &[0u8; 16]);
        if k == 0 {
            fx.create_file(&mut w, b"new", &[0x6e; 100]);
        }
        w.tail(TID);
    }
    fx.arm(&w.finish());
    let r = fx.recover();
    assert!(r.problem.is_none(), "{:?}", r.problem);
    assert_eq!(fx.names("/d"), ["a", "new"]);
}

#[test]
fn a_commit_torn_in_the_areas_last_block_keeps_those_before_it() {
    let fx = fixture();
    // What the kernel leaves when fsyncs fill the area before the full
    // commit that resets it: whole commits up to the last block but one,
    // then a commit without its tail whose records fill the last block.
    // The kernel's own recovery reads past the journal after that block
    // and refuses the mount (jbd2's fc_do_one_pass reads up to j_fc_last
    // = s_maxlen); the rule of ext4_fc_replay_scan is that the records up
    // to the last good tail are replayed, and so they are here.
    let sb = fx.journal_sb();
    let area = sb.num_fc_blocks_if_enabled() as usize - 1;
    let mut w = FcWriter::new(BS as usize, TID);
    fx.create_file(&mut w, b"new", &[0x6e; 100]);
    w.tail(TID);
    for _ in 1..area - 1 {
        w.record(tag::PAD, &[0u8; 16]);
        w.tail(TID);
    }
    w.record(tag::UNLINK, &dentry_value(fx.d, fx.a, b"a"));
    let mut blocks = w.finish();
    assert_eq!(blocks.len(), area);
    // The untailed commit's block, padded to its end as the kernel pads.
    let last = blocks.last_mut().unwrap();
    let used = 4 + 8 + 1;
    let pad = (BS as usize - used - 4) as u16;
    last[used..used + 2].copy_from_slice(&tag::PAD.to_le_bytes());
    last[used + 2..used + 4].copy_from_slice(&pad.to_le_bytes());
    fx.arm(&blocks);
    let r = fx.recover();
    assert!(r.problem.is_none(), "{:?}", r.problem);
    // The created file stands; the untailed unlink is not replayed.
    assert_eq!(fx.names("/d"), ["a", "new"]);
    assert_eq!(fx.read("/d/new").unwrap(), vec![0x6e; 100]);
    assert_eq!(fx.e2fsck().unwrap_or(0), 0);
}

#[test]
fn an_inode_out_of_range_stops_the_replay_there() {
    let fx = fixture();
    let mut w = FcWriter::new(BS as usize, TID);
    w.record(tag::UNLINK, &dentry_value(fx.d, fx.a, b"a"));
    w.record(
        tag::INODE,
        &inode_value(fx.inodes_count + 5, &fx.new_inode(10)[..160]),
    );
    fx.create_file(&mut w, b"new", &[0x6e; 100]);
    w.tail(TID);
    fx.arm(&w.finish());
    let r = fx.recover();
    assert!(r.problem.is_some(), "the kernel fails here");
    // The unlink before it stands, the create after it does not.
    assert_eq!(fx.names("/d"), Vec::<String>::new());
    assert_eq!(fx.e2fsck().unwrap_or(0), 0);
}

#[test]
fn the_journal_inode_is_never_overwritten() {
    let fx = fixture();
    let before = fx.fs().inode(InodeNr(8)).unwrap().record;
    let mut w = FcWriter::new(BS as usize, TID);
    w.record(tag::INODE, &inode_value(8, &fx.new_inode(10)[..160]));
    w.tail(TID);
    fx.arm(&w.finish());
    let r = fx.recover();
    assert!(r.problem.is_some());
    assert_eq!(fx.fs().inode(InodeNr(8)).unwrap().record, before);
    assert_eq!(fx.e2fsck().unwrap_or(0), 0);
}

#[test]
fn a_dentry_into_a_non_directory_is_passed_over() {
    let fx = fixture();
    let data_before = fx.read("/d/a").unwrap();
    let mut w = FcWriter::new(BS as usize, TID);
    w.record(tag::LINK, &dentry_value(fx.a, fx.a, b"x"));
    w.record(tag::CREAT, &dentry_value(fx.a, fx.a, b"y"));
    w.tail(TID);
    fx.arm(&w.finish());
    let r = fx.recover();
    assert!(r.problem.is_none(), "{:?}", r.problem);
    assert_eq!(fx.read("/d/a").unwrap(), data_before);
    assert_eq!(fx.links(fx.a), 1);
    assert_eq!(fx.e2fsck().unwrap_or(0), 0);
}

#[test]
fn a_range_past_the_end_or_over_metadata_is_not_mapped() {
    let fx = fixture();
    let fs = fx.fs();
    let blocks = fs.geometry().blocks_count;
    let table = fs
        .group_desc(ext4r_format::GroupNr(0))
        .unwrap()
        .inode_table(true);
    drop(fs);
    let mut w = FcWriter::new(BS as usize, TID);
    for (lblk, pblk) in [
        (10u32, blocks - 2),
        (20, blocks + 100),
        (30, table),
        (40, 0),
    ] {
        let e = Extent::new(lblk, BlockNr(pblk), 4, false).unwrap();
        w.record(tag::ADD_RANGE, &add_range_value(fx.a, &e));
    }
    w.tail(TID);
    fx.arm(&w.finish());
    let r = fx.recover();
    assert!(r.problem.is_none(), "{:?}", r.problem);
    assert_eq!(fx.read("/d/a").unwrap(), vec![0x61; 5000]);
    let fs = fx.fs();
    let info = fs.inode(InodeNr(fx.a)).unwrap();
    let runs = fs.runs(&info).unwrap();
    assert_eq!(runs.iter().map(|r| r.len).sum::<u64>(), 2, "{runs:?}");
    assert_eq!(fx.e2fsck().unwrap_or(0), 0);
}

#[test]
fn an_unlink_naming_another_inode_changes_nothing() {
    let fx = fixture();
    let mut w = FcWriter::new(BS as usize, TID);
    // `a` names fx.a, not fx.d.
    w.record(tag::UNLINK, &dentry_value(fx.d, fx.d, b"a"));
    w.record(tag::UNLINK, &dentry_value(fx.d, fx.a, b"nothere"));
    w.tail(TID);
    fx.arm(&w.finish());
    let r = fx.recover();
    assert!(r.problem.is_none());
    assert_eq!(fx.names("/d"), ["a"]);
    assert_eq!(fx.links(fx.a), 1);
    assert_eq!(fx.e2fsck().unwrap_or(0), 0);
}

#[test]
fn link_unlink_rename_and_del_range() {
    let fx = fixture();
    let mut w = FcWriter::new(BS as usize, TID);
    // A second name, then the first goes: a rename as the kernel logs it.
    w.record(tag::LINK, &dentry_value(ROOT_INO, fx.a, b"moved"));
    w.record(tag::UNLINK, &dentry_value(fx.d, fx.a, b"a"));
    // The file cut to its first block, from every block past it (the
    // kernel's truncate logs two ranges that cover 2^32 blocks).
    w.record(tag::DEL_RANGE, &del_range_value(fx.a, 1, 0x7fff_ffff));
    w.record(
        tag::DEL_RANGE,
        &del_range_value(fx.a, 0x8000_0001, 0x7fff_fffe),
    );
    let mut rec = fx.template.clone();
    let mut i = ext4r_format::inode::Inode::parse(&rec).unwrap();
    i.set_size(BS);
    i.write(&mut rec).unwrap();
    w.record(tag::INODE, &inode_value(fx.a, &rec[..160]));
    w.tail(TID);
    fx.arm(&w.finish());
    let r = fx.recover();
    assert!(r.problem.is_none(), "{:?}", r.problem);
    assert_eq!(fx.names("/d"), Vec::<String>::new());
    assert_eq!(fx.read("/moved").unwrap(), vec![0x61; BS as usize]);
    assert_eq!(fx.links(fx.a), 1);
    assert_eq!(fx.e2fsck().unwrap_or(0), 0);
}

#[test]
fn a_directory_created_by_a_fast_commit_gets_dot_and_dotdot() {
    let fx = fixture();
    let mut w = FcWriter::new(BS as usize, TID);
    let mut rec = fx.new_inode(BS);
    let mut i = ext4r_format::inode::Inode::parse(&rec).unwrap();
    i.i_mode.set(0o40755);
    i.i_links_count.set(2);
    i.write(&mut rec).unwrap();
    w.record(tag::INODE, &inode_value(fx.free_ino, &rec[..160]));
    w.record(tag::CREAT, &dentry_value(fx.d, fx.free_ino, b"sub"));
    w.tail(TID);
    fx.arm(&w.finish());
    let r = fx.recover();
    assert!(r.problem.is_none(), "{:?}", r.problem);
    assert_eq!(fx.names("/d"), ["a", "sub"]);
    assert_eq!(fx.names("/d/sub"), Vec::<String>::new());
    assert_eq!(fx.links(fx.d), 3);
    assert_eq!(fx.e2fsck().unwrap_or(0), 0);
}

#[test]
fn random_bytes_in_the_area_never_panic() {
    let fx = fixture();
    let pristine = fx.dev.to_vec().unwrap();
    let mut seed = 0x1234_5678_9abc_def1u64;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for case in 0..60 {
        let fx = Fx {
            dev: Arc::new(MemDevice::from_bytes(&pristine)),
            ..fixture_like(&fx)
        };
        // A valid commit, then bytes flipped at random in its block.
        let mut w = FcWriter::new(BS as usize, TID);
        fx.create_file(&mut w, b"new", &[0x6e; 300]);
        w.record(tag::LINK, &dentry_value(ROOT_INO, fx.a, b"second"));
        w.record(tag::DEL_RANGE, &del_range_value(fx.a, 0, 1));
        w.tail(TID);
        let mut blocks = w.finish();
        for _ in 0..1 + next() % 8 {
            let at = (next() % 700) as usize;
            blocks[0][at] ^= (next() % 255 + 1) as u8;
        }
        if case % 3 == 0 {
            // And a tail CRC recomputed over the damage now and then, so
            // that damaged records get replayed.
            blocks = recrc(&blocks[0]);
        }
        fx.arm(&blocks);
        let _ = fx.recover();
        // Whatever was replayed, the filesystem still opens and reads.
        let fs = fx.fs();
        let _ = fs.read_dir_path("/d");
    }
}

fn fixture_like(fx: &Fx) -> Fx {
    Fx {
        dev: fx.dev.clone(),
        d: fx.d,
        a: fx.a,
        template: fx.template.clone(),
        free_ino: fx.free_ino,
        free_blocks: fx.free_blocks,
        loc: fx.loc.clone(),
        inodes_count: fx.inodes_count,
    }
}

/// The records of `block` written again by the writer (so the CRC covers
/// them as they now are), up to the first one it cannot read.
fn recrc(block: &[u8]) -> Vec<Vec<u8>> {
    use ext4r_format::jbd2::fast_commit::records;
    let mut w = FcWriter::new(BS as usize, TID);
    for r in records(block, 256).map_while(|r| r.ok()).skip(1) {
        if r.tag == tag::TAIL {
            break;
        }
        w.record(r.tag, r.value);
    }
    w.tail(TID);
    w.finish()
}
