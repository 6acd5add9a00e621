//! Journal recovery on the e2fsprogs test images with journals (`j_*` in
//! `../shared/corpus/e2fsprogs`): ours must never panic, and where e2fsck
//! (`-y -E journal_only`) replays, our image must equal its image.
//!
//! Known, explained differences are listed and not failures:
//! - a journal superblock e2fsck rejects (bad magic or checksum): e2fsck
//!   resets it with a random sequence number; we return a typed error and
//!   leave the decision to the caller;
//! - fast commits: replayed logically, not as block copies: the two
//!   replays allocate tree blocks and stamp directory times each their
//!   own way, so their images are compared as trees (names, kinds, modes,
//!   sizes, link counts, contents), not byte for byte;
//! - an external journal device alone (no filesystem to replay into): we
//!   only check that it opens and scans.
//!
//! Skipped, with a message, when the corpus or e2fsprogs is missing.

mod common;

use common::*;
use ext4r::device::{FileDevice, OpenMode};
use ext4r::journal::{Journal, JournalLocation};
use std::path::Path;

enum Outcome {
    Identical,
    Explained(String),
    Different(String),
}

#[test]
fn corpus_journals_replay_like_e2fsck() {
    let Some(root) = corpus::corpus_dir() else {
        eprintln!("skipped: e2fsprogs corpus not found");
        return;
    };
    if let Some(why) = missing_tools(&["debugfs", "e2fsck", "gzip"]) {
        eprintln!("skipped: {why}");
        return;
    }
    let mut names: Vec<_> = std::fs::read_dir(&root)
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.file_name()).collect())
        .unwrap_or_default();
    names.retain(|n| n.to_string_lossy().starts_with("j_"));
    names.sort();
    let dir = TempDir::new("jr-corpus");
    let (mut identical, mut explained, mut bad) = (0, 0, Vec::new());
    for name in &names {
        let name = name.to_string_lossy();
        let gz = root.join(&*name).join("image.gz");
        let outcome = run_image(&dir, &name, &gz).unwrap_or_else(Outcome::Different);
        match outcome {
            Outcome::Identical => identical += 1,
            Outcome::Explained(why) => {
                explained += 1;
                eprintln!("{name}: not compared: {why}");
            }
            Outcome::Different(why) => bad.push(format!("{name}: {why}")),
        }
    }
    eprintln!(
        "corpus j_*: {identical}/{} identical to e2fsck's replay, {explained} explained, {} different",
        names.len(),
        bad.len()
    );
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

fn gunzip(gz: &Path, out: &Path) -> Result<(), String> {
    let o = std::process::Command::new("gzip")
        .arg("-dc")
        .arg(gz)
        .output()
        .map_err(|e| e.to_string())?;
    if !o.status.success() {
        return Err(format!("gzip: {}", o.status));
    }
    std::fs::write(out, o.stdout).map_err(|e| e.to_string())
}

fn run_image(dir: &TempDir, name: &str, gz: &Path) -> Result<Outcome, String> {
    let img = dir.join(&format!("{name}.img"));
    gunzip(gz, &img)?;
    let sb = read_sb(&img)?;
    let bs = sb.block_size().ok_or("bad block size")?;
    if sb.has_incompat(ext4r_format::features::Incompat::JOURNAL_DEV) {
        let dev = FileDevice::open(&img, OpenMode::default()).map_err(|e| e.to_string())?;
        let loc = JournalLocation::external(&dev, bs, None).map_err(|e| e.to_string())?;
        let j = Journal::open(&dev, loc, bs).map_err(|e| e.to_string())?;
        let r = j.recover(u64::MAX, usize::from(sb.inode_size()));
        return Ok(Outcome::Explained(format!(
            "external journal device alone; opened, {} blocks to replay",
            r.plan.len()
        )));
    }
    let ino = sb.s_journal_inum.get();
    let a = dir.join(&format!("{name}.e2fsck"));
    let b = dir.join(&format!("{name}.ours"));
    zero_kbytes_written(&img)?;
    copy_sparse(&img, &a).map_err(|e| e.to_string())?;
    copy_sparse(&img, &b).map_err(|e| e.to_string())?;
    let journal = journal_blocks_of(&img, ino)?;
    let (code, out) = match e2fsck_replay(&a) {
        Ok(r) => r,
        Err(e) => (-1, e),
    };

    let shared: std::sync::Arc<dyn ext4r::device::BlockDevice> = std::sync::Arc::new(open_rw(&b)?);
    let j = match Journal::open(shared.clone(), JournalLocation::internal(journal), bs) {
        Ok(j) => j,
        Err(e) => {
            return Ok(Outcome::Explained(format!(
                "we refuse the journal ({e}); e2fsck (exit {code}) resets it: {}",
                first_line(&out)
            )))
        }
    };
    let rec = ext4r::write::recover_journal(&shared, &j, None).map_err(|e| e.to_string())?;
    if code < 0 {
        return Ok(Outcome::Explained(format!(
            "e2fsck's own replay fails: {}",
            out.lines().last().unwrap_or("")
        )));
    }
    drop(j);
    drop(shared);
    stamp_wtime(&b, 1_700_000_000)?;
    let summary = format!(
        "{} blocks, transactions {}..{}, failed commit {:?}, problem {:?}",
        rec.plan.len(),
        rec.start_transaction,
        rec.end_transaction,
        rec.failed_commit,
        rec.problem.as_ref().map(|p| p.to_string())
    );
    eprintln!("{name}: {summary}");
    if rec.fast_commit_applied > 0 {
        let (ta, tb) = (library_tree(&a)?, library_tree(&b)?);
        if ta != tb {
            return Err(format!(
                "after {} fast-commit records, trees differ:\n  e2fsck: {ta:?}\n  ours:   {tb:?}",
                rec.fast_commit_applied
            ));
        }
        let (fsck, _, _) = run_status("e2fsck", &["-fn", &b.display().to_string()], &[])?;
        if fsck != 0 {
            return Err(format!(
                "e2fsck -fn exit {fsck} after our fast-commit replay"
            ));
        }
        return Ok(Outcome::Explained(format!(
            "{} fast-commit records replayed: tree equal to e2fsck's, e2fsck -fn clean",
            rec.fast_commit_applied
        )));
    }
    match compare_images(&a, &b, bs) {
        Ok(()) => Ok(Outcome::Identical),
        Err(diff) => Err(format!(
            "{diff}\n  ours: {summary}\n  e2fsck (exit {code}): {out}"
        )),
    }
}

fn first_line(s: &str) -> &str {
    s.lines().find(|l| !l.trim().is_empty()).unwrap_or("")
}

/// The journal inode's blocks (inode `ino`, 8 unless the superblock says
/// otherwise).
fn journal_blocks_of(img: &Path, ino: u32) -> Result<Vec<ext4r_format::BlockNr>, String> {
    if ino == 8 {
        return journal_blocks(img);
    }
    Err(format!("journal in inode {ino}"))
}
