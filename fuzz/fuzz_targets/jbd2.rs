//! jbd2 blocks: the journal superblock, descriptor tags, revoke records and
//! commit headers, each parsed, walked to the end, re-encoded and re-parsed.
//! The first input byte chooses the journal's incompat features (the block
//! layout); the rest is one journal block.
#![no_main]

use ext4r_format::jbd2::{
    block_tail_checksum, verify_commit_block_checksum, CommitHeader, DescriptorBlock,
    DescriptorWriter, JournalIncompat, JournalLayout, JournalSuperblock, RevokeBlock, RevokeWriter,
    TagFlags, COMMIT_HEADER_SIZE, HEADER_SIZE, JOURNAL_SUPERBLOCK_SIZE, REVOKE_HEADER_SIZE,
};
use libfuzzer_sys::fuzz_target;

fn superblock(block: &[u8]) {
    if let Ok(sb) = JournalSuperblock::parse(block) {
        assert_eq!(&sb.to_bytes()[..], &block[..JOURNAL_SUPERBLOCK_SIZE]);
    }
    // Zero-padded, so that short inputs reach the fields too.
    let mut buf = [0u8; JOURNAL_SUPERBLOCK_SIZE];
    let n = block.len().min(JOURNAL_SUPERBLOCK_SIZE);
    buf[..n].copy_from_slice(&block[..n]);
    let Ok(sb) = JournalSuperblock::parse(&buf) else {
        return;
    };
    assert_eq!(sb.to_bytes(), buf);
    assert!(JournalSuperblock::parse(&sb.to_bytes()).expect("re-parse") == sb);
    let _ = (
        sb.validate(),
        sb.verify_checksum(),
        sb.users().count(),
        sb.log_end(),
    );
    let _ = (
        sb.num_fc_blocks(),
        sb.unknown_incompat(),
        sb.unknown_ro_compat(),
    );
    let _ = (sb.version(), sb.csum_seed(), format!("{sb:?}"));
    let l = sb.layout();
    let _ = (l.tag_bytes(), l.tail_bytes(), l.revoke_record_bytes());
    let mut fixed = sb.clone();
    fixed.update_checksum();
    assert!(fixed.verify_checksum().is_ok());
}

fn descriptor(block: &[u8], layout: JournalLayout) {
    let Ok(d) = DescriptorBlock::parse(block, layout) else {
        return;
    };
    let seq = d.header().sequence();
    let mut it = d.tags();
    let tags: Vec<_> = it.by_ref().collect();
    assert!(tags.len() <= block.len() / 8);
    let end = it.end_offset();
    let _ = d.verify_checksum(seq);

    // Encoding the tags again reproduces the walked part of the block.
    let mut out = vec![0u8; block.len()];
    let mut off = HEADER_SIZE;
    for t in &tags {
        off += t
            .encode(layout, &mut out[off..])
            .expect("tag fits where it came from");
        let _ = (t.blocknr(layout), t.flags());
        let _ = t.verify_data(layout, seq, seq, &block[..block.len().min(64)]);
    }
    assert_eq!(off, end);
    assert_eq!(&out[HEADER_SIZE..end], &block[HEADER_SIZE..end]);

    // The writer builds a block that walks to the same tags.
    let mut built = vec![0u8; block.len()];
    let mut w = DescriptorWriter::new(&mut built, layout, seq).expect("writer");
    for t in &tags {
        let mut t = *t;
        t.t_flags &= !u32::from(TagFlags::LAST_TAG.bits());
        assert!(w.push(&t).expect("push"), "tag that fitted no longer fits");
    }
    let n = w.finish(seq).expect("finish");
    assert_eq!(n, tags.len());
    let d2 = DescriptorBlock::parse(&built, layout).expect("re-parse");
    assert!(d2.verify_checksum(seq).is_ok());
    let again: Vec<_> = d2.tags().collect();
    assert_eq!(again.len(), tags.len());
    for (a, b) in again.iter().zip(&tags) {
        assert_eq!(a.blocknr(layout), b.blocknr(layout));
        assert_eq!(a.t_checksum, b.t_checksum);
        assert_eq!(
            a.flags() - TagFlags::LAST_TAG,
            b.flags() - TagFlags::LAST_TAG
        );
    }
}

fn revoke(block: &[u8], layout: JournalLayout) {
    let Ok(r) = RevokeBlock::parse(block, layout) else {
        return;
    };
    let seq = r.header().r_header.sequence();
    let _ = r.verify_checksum(seq);
    let recs: Vec<_> = r.records().collect();
    assert!(recs.len() <= block.len() / 4);
    let mut built = vec![0u8; block.len()];
    let mut w = RevokeWriter::new(&mut built, layout, seq).expect("writer");
    for &b in &recs {
        assert!(w.push(b).expect("record from this layout"));
    }
    assert_eq!(w.finish(seq).expect("finish"), recs.len());
    let end = REVOKE_HEADER_SIZE + recs.len() * layout.revoke_record_bytes();
    assert_eq!(
        &built[REVOKE_HEADER_SIZE..end],
        &block[REVOKE_HEADER_SIZE..end]
    );
    let r2 = RevokeBlock::parse(&built, layout).expect("re-parse");
    assert!(r2.verify_checksum(seq).is_ok());
    assert!(r2.records().eq(recs.iter().copied()));
}

fn commit(block: &[u8]) {
    let Ok(h) = CommitHeader::parse(block) else {
        return;
    };
    assert_eq!(&h.to_bytes()[..], &block[..COMMIT_HEADER_SIZE]);
    let _ = (h.commit_time(), verify_commit_block_checksum(1, block));
    let mut copy = block.to_vec();
    ext4r_format::jbd2::set_commit_block_checksum(1, &mut copy).expect("checksum");
    assert!(verify_commit_block_checksum(1, &copy).is_ok());
    assert!(CommitHeader::parse(&copy).is_ok());
}

fuzz_target!(|data: &[u8]| {
    let Some((&sel, block)) = data.split_first() else {
        return;
    };
    let layout = JournalLayout::new(JournalIncompat::from_bits_retain(u32::from(sel)));
    let _ = block_tail_checksum(0, block);
    superblock(block);
    descriptor(block, layout);
    revoke(block, layout);
    commit(block);
});
