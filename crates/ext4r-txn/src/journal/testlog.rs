//! A small jbd2 log writer for tests: builds journals with any layout
//! (64bit, checksum v1/v2/v3, escapes, revokes, wrap-around) on a
//! `MemDevice`, with the journal's blocks scattered (reversed) so that the
//! block map matters.

use super::{Journal, JournalLocation};
use crate::device::{BlockDevice, MemDevice};
use ext4r_format::checksum::crc32_be;
use ext4r_format::features::Incompat;
use ext4r_format::jbd2::{
    block_type, checksum_type, data_block_checksum, set_commit_block_checksum, CommitHeader,
    DescriptorTag, DescriptorWriter, JournalCompat, JournalHeader, JournalIncompat,
    JournalSuperblock, RevokeWriter, TagFlags, JBD2_MAGIC,
};
use ext4r_format::superblock::{Superblock, EXT4_MAGIC, STATE_VALID};
use ext4r_format::BlockNr;

pub(crate) struct TestLog {
    pub dev: MemDevice,
    pub bs: u32,
    pub map: Vec<BlockNr>,
    pub sb: JournalSuperblock,
    pub next: u64,
    pub seq: u32,
    pub time: u64,
}

impl TestLog {
    /// A filesystem of `fs_blocks` blocks whose last `jlen` blocks hold the
    /// journal (in reverse order), with a minimal ext4 superblock that has
    /// `needs_recovery` set.
    pub(super) fn new(bs: u32, fs_blocks: u64, jlen: u32, compat: u32, incompat: u32) -> Self {
        let dev = MemDevice::new(fs_blocks * u64::from(bs));
        let base = fs_blocks - u64::from(jlen);
        let map = (0..u64::from(jlen))
            .map(|i| BlockNr(base + u64::from(jlen) - 1 - i))
            .collect();
        let mut sb = JournalSuperblock::new_internal(bs, jlen, 0, [0x5a; 16]).unwrap();
        sb.s_feature_compat.set(compat);
        sb.s_feature_incompat
            .set(incompat | JournalIncompat::REVOKE.bits());
        if sb.layout().has_csum_v2or3() {
            sb.s_checksum_type = checksum_type::CRC32C;
        }
        if incompat & JournalIncompat::FAST_COMMIT.bits() != 0 {
            sb.s_maxlen.set(jlen);
            sb.s_num_fc_blks.set(64);
        }
        let mut fs = Superblock::zeroed();
        fs.s_magic.set(EXT4_MAGIC);
        fs.s_log_block_size.set(bs.trailing_zeros() - 10);
        fs.s_state.set(STATE_VALID);
        fs.s_feature_incompat.set(Incompat::RECOVER.bits());
        fs.set_blocks_count(fs_blocks);
        dev.write_at(&fs.to_bytes(), 1024).unwrap();
        let mut t = TestLog {
            dev,
            bs,
            map,
            sb,
            next: 1,
            seq: 1,
            time: 1000,
        };
        t.start_at(1, 1);
        t
    }

    /// Starts the log at journal block `at` with transaction `seq`.
    pub(super) fn start_at(&mut self, at: u64, seq: u32) {
        self.next = at;
        self.seq = seq;
        self.sb.s_start.set(at as u32);
        self.sb.s_sequence.set(seq);
        self.write_sb();
    }

    pub(super) fn write_sb(&mut self) {
        self.sb.update_checksum();
        let mut block = vec![0u8; self.bs as usize];
        block[..1024].copy_from_slice(&self.sb.to_bytes());
        self.dev
            .write_at(&block, self.map[0].0 * u64::from(self.bs))
            .unwrap();
    }

    pub(super) fn seed(&self) -> u32 {
        self.sb.csum_seed()
    }

    fn last(&self) -> u64 {
        u64::from(self.sb.log_end().unwrap())
    }

    /// Writes one log block at the head and advances (wrapping).
    pub(super) fn put(&mut self, data: &[u8]) -> u64 {
        let at = self.next;
        self.dev
            .write_at(data, self.map[at as usize].0 * u64::from(self.bs))
            .unwrap();
        self.next += 1;
        if self.next >= self.last() {
            self.next = u64::from(self.sb.s_first.get());
        }
        at
    }

    /// A block of `fill` bytes.
    pub(super) fn block(&self, fill: u8) -> Vec<u8> {
        vec![fill; self.bs as usize]
    }

    /// Writes a revoke block for the current transaction.
    pub(super) fn revoke(&mut self, blocks: &[u64]) {
        let layout = self.sb.layout();
        let mut b = self.block(0);
        let mut w = RevokeWriter::new(&mut b, layout, self.seq).unwrap();
        for &x in blocks {
            assert!(w.push(BlockNr(x)).unwrap());
        }
        w.finish(self.seed()).unwrap();
        self.put(&b);
    }

    /// Writes a descriptor and its data blocks; returns the v1 CRC32 of
    /// them, continued from `crc`.
    pub(super) fn descriptor(&mut self, writes: &[(u64, Vec<u8>)], crc: u32) -> u32 {
        let layout = self.sb.layout();
        let seed = self.seed();
        let mut d = self.block(0);
        let mut w = DescriptorWriter::new(&mut d, layout, self.seq).unwrap();
        let mut datas = Vec::new();
        for (k, (target, data)) in writes.iter().enumerate() {
            let mut data = data.clone();
            let mut flags = TagFlags::empty();
            if data[..4] == JBD2_MAGIC.to_be_bytes() {
                data[..4].fill(0);
                flags |= TagFlags::ESCAPE;
            }
            let uuid = (k == 0).then_some([0x5a; 16]);
            let mut tag = DescriptorTag::new(layout, BlockNr(*target), flags, uuid);
            tag.set_checksum(layout, data_block_checksum(seed, self.seq, &data));
            assert!(w.push(&tag).unwrap());
            datas.push(data);
        }
        w.finish(seed).unwrap();
        let mut crc = crc32_be(crc, &d);
        self.put(&d);
        for data in datas {
            crc = crc32_be(crc, &data);
            self.put(&data);
        }
        crc
    }

    /// Writes the commit block of the current transaction and moves on.
    pub(super) fn commit(&mut self, crc: u32) -> u64 {
        let mut b = self.block(0);
        b[..60].copy_from_slice(&CommitHeader::new(self.seq, self.time, 0).to_bytes());
        if self.sb.compat().contains(JournalCompat::CHECKSUM) {
            b[12] = checksum_type::CRC32;
            b[13] = 4;
            b[16..20].copy_from_slice(&crc.to_be_bytes());
        }
        if self.sb.layout().has_csum_v2or3() {
            set_commit_block_checksum(self.seed(), &mut b).unwrap();
        }
        self.seq = self.seq.wrapping_add(1);
        self.time += 1;
        self.put(&b)
    }

    /// A whole transaction: revokes (if any), one descriptor, commit.
    pub(super) fn transaction(&mut self, writes: &[(u64, Vec<u8>)], revokes: &[u64]) -> u64 {
        if !revokes.is_empty() {
            self.revoke(revokes);
        }
        let crc = if writes.is_empty() {
            !0
        } else {
            self.descriptor(writes, !0)
        };
        self.commit(crc)
    }

    /// Ends the log: the block at the head gets a header that does not
    /// continue it.
    pub(super) fn end(&mut self) {
        let mut b = self.block(0);
        b[..12].copy_from_slice(&JournalHeader::new(block_type::DESCRIPTOR, 0xdead).to_bytes());
        let at = self.next;
        self.dev
            .write_at(&b, self.map[at as usize].0 * u64::from(self.bs))
            .unwrap();
    }

    pub(super) fn journal(&self) -> Journal<&MemDevice> {
        Journal::open(
            &self.dev,
            JournalLocation::internal(self.map.clone()),
            self.bs,
        )
        .unwrap()
    }
}
