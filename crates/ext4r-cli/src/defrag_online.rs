//! `e4defrag-r` without `-c`: online defragmentation of files and trees of
//! a mounted filesystem, and `-r` placement. Every file worked on gets one
//! line saying what FIEMAP shows afterwards; nothing is called a success
//! that did not get fewer extents.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::Instant;

use ext4r_defrag::mounted::MountedFs;
use ext4r_defrag::online::kernel::KernelMover;
use ext4r_defrag::online::relevant::{gaps, place, read_order};
use ext4r_defrag::online::{plan, run as run_plan, Outcome, RunOptions, Summary};
use ext4r_defrag::source::Source;
use ext4r_defrag::stat::ArgKind;
use ext4r_defrag::target::{holds_ext_superblock, resolve, MountedTarget, Target};
use ext4r_defrag::Error;

use crate::defrag::OnlineArgs;

/// Runs every target; false when one could not be worked on or a file
/// failed.
pub(crate) fn run(a: &OnlineArgs) -> bool {
    let mut ok = true;
    for arg in &a.targets {
        let t = match resolve(arg, a.image) {
            Ok(Target::Mounted(t)) => t,
            Ok(Target::Unmounted(p)) => {
                ok &= crate::defrag_offline::run(a, &p);
                continue;
            }
            Err(e) => {
                eprintln!("{}", crate::errors::message(&e));
                ok = false;
                continue;
            }
        };
        let offline_only = if a.free_space {
            Some("-f (free-space defragmentation)")
        } else if a.to_extents {
            Some("--to-extents")
        } else if a.path.is_some() {
            Some("--path (a path inside an image; name the file or directory itself)")
        } else {
            None
        };
        // A file on a mounted ext4 that holds a filesystem is most likely
        // an image the user meant to work on offline: e4defrag would move
        // the file's own blocks, and so do we, but say how to get the other.
        let image_file = t.kind == ArgKind::File && holds_ext_superblock(Path::new(arg));
        if let Some(what) = offline_only {
            let path = std::path::PathBuf::from(arg);
            let e = if t.kind == ArgKind::File {
                Error::OfflineOnlyFile {
                    path,
                    what,
                    mountpoint: t.mountpoint.clone(),
                }
            } else {
                Error::OfflineOnly { path, what }
            };
            eprintln!("e4defrag-r: {}", crate::errors::message(&e));
            ok = false;
            continue;
        }
        if image_file {
            eprintln!(
                "e4defrag-r: note: {} holds an ext2/3/4 filesystem but lies on the ext4 mounted \
                 at {}: its own blocks are defragmented as a file's; add --image to \
                 defragment the filesystem inside it offline",
                Path::new(arg).display(),
                t.mountpoint.display()
            );
        }
        let r = if a.relevant {
            relevant(a, arg, &t)
        } else {
            defrag(a, arg, &t)
        };
        ok &= r;
    }
    ok
}

fn source(a: &OnlineArgs, t: &MountedTarget) -> Option<MountedFs> {
    match MountedFs::new(&t.root, &t.mountpoint, &t.device) {
        Ok((fs, warning)) => {
            if let (Some(w), true) = (warning, a.verbose) {
                eprintln!("Warning: {w}");
            }
            Some(fs.with_order(a.order))
        }
        Err(e) => {
            eprintln!("e4defrag-r: {}", crate::errors::message(&e));
            None
        }
    }
}

fn defrag(a: &OnlineArgs, arg: &OsStr, t: &MountedTarget) -> bool {
    let shown = arg.to_string_lossy();
    match t.kind {
        ArgKind::Device => println!("ext4 defragmentation for device({shown})"),
        ArgKind::Directory => println!("ext4 defragmentation for directory({shown})"),
        ArgKind::File => println!("ext4 defragmentation for {shown}"),
    }
    let Some(src) = source(a, t) else {
        return false;
    };
    let uid = rustix::process::getuid();
    let started = Instant::now();
    let p = match plan(&src, &t.lost_found, uid.is_root(), uid.as_raw()) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("e4defrag-r: {}", crate::errors::message(&e));
            return false;
        }
    };
    if a.verbose {
        for (e, why) in &p.skipped {
            println!(" {}: skipped: {why}", e.display());
        }
        for (e, n) in &p.already_best {
            println!(" {}: {n} extents: already as few as possible", e.display());
        }
    }
    let mut mover = KernelMover::new(src.best_rule(), src.block_size(), uid.is_root());
    let opts = RunOptions {
        deadline: a.deadline,
        retries: 2,
        retry_delay: std::time::Duration::from_millis(200),
    };
    let bar = crate::defrag_bar::Bar::new();
    let s = run_plan(&p, &mut mover, &opts, &mut |i, n, c, o| {
        bar.step(i, n, Some(format!("[{i}/{n}] {}: {o}", c.entry.display())));
    });
    bar.finish();
    summary(&s, &p, started);
    s.failed == 0
}

pub(crate) fn summary(s: &Summary, p: &ext4r_defrag::online::Plan, started: Instant) {
    let at_best: u64 = p.already_best.iter().map(|(_, n)| n).sum();
    println!();
    println!(
        " Files worked on:\t\t{} ({} already as few extents as possible, {} skipped in the walk)",
        p.candidates.len(),
        p.already_best.len(),
        p.skipped.len()
    );
    println!(
        " Improved:\t\t\t{}\n Not improved:\t\t\t{}\n Skipped:\t\t\t{}\n Failed:\t\t\t{}",
        s.improved, s.not_improved, s.skipped, s.failed
    );
    if s.timed_out {
        println!(" Not reached (time limit):\t{}", s.not_reached);
    }
    println!(
        " Extents of the files reached:\t{} -> {}",
        s.extents_before, s.extents_after
    );
    // Files not reached keep their planned count.
    let planned: u64 = p.candidates.iter().map(|c| c.score.now).sum();
    let untouched = planned.saturating_sub(s.extents_before);
    println!(
        " Total extents:\t\t\t{} -> {}",
        at_best + planned,
        at_best + untouched + s.extents_after
    );
    println!(" Time:\t\t\t\t{:.2} s", started.elapsed().as_secs_f64());
}

fn relevant(a: &OnlineArgs, arg: &OsStr, t: &MountedTarget) -> bool {
    if t.kind != ArgKind::Directory && t.kind != ArgKind::Device {
        eprintln!("e4defrag-r: -r {}: not a directory", arg.to_string_lossy());
        return false;
    }
    println!(
        "ext4 relevant-file placement for directory({})",
        arg.to_string_lossy()
    );
    let Some(src) = source(a, t) else {
        return false;
    };
    let uid = rustix::process::getuid();
    let started = Instant::now();
    let (files, skipped) = match read_order(&src, &t.lost_found) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("e4defrag-r: {}", crate::errors::message(&e));
            return false;
        }
    };
    for (e, why) in &skipped {
        println!(" {}: skipped: {why}", e.display());
    }
    let before = gaps(files.iter().map(|f| &f.extents));
    let dir = Path::new(OsStr::from_bytes(&t.root));
    let bs = src.block_size();
    let verbose = a.verbose;
    let bar = crate::defrag_bar::Bar::new();
    let placed = place(
        &files,
        dir,
        bs,
        uid.is_root(),
        a.deadline,
        &mut |i, n, p, o| {
            let moved = matches!(o, Outcome::Improved { .. } | Outcome::Unchanged { .. });
            let line = (verbose || !moved).then(|| format!("[{i}/{n}] {}: {o}", p.display()));
            bar.step(i, n, line);
        },
    );
    bar.finish();
    let placed = match placed {
        Ok(p) => p,
        Err(e) => {
            eprintln!("e4defrag-r: {}", crate::errors::message(&e));
            return false;
        }
    };
    let after_ext: Vec<_> = files
        .iter()
        .filter_map(|f| src.extents(&f.entry).ok())
        .collect();
    let after = gaps(after_ext.iter());
    println!();
    println!(
        " Files placed:\t\t\t{} of {} ({} blocks), in a donor region of {} extents",
        placed.placed,
        files.len(),
        placed.blocks,
        placed.donor_extents
    );
    if placed.timed_out {
        println!(" Stopped at the time limit.");
    }
    println!(
        " Gaps between files in read order:\t{} -> {} blocks",
        before.between_files, after.between_files
    );
    println!(
        " Seek distance reading in order:\t{} -> {} blocks ({} -> {} jumps)",
        before.total, after.total, before.jumps, after.jumps
    );
    println!(" Time:\t\t\t\t{:.2} s", started.elapsed().as_secs_f64());
    placed
        .skipped
        .iter()
        .all(|(_, why)| !why.starts_with("failed"))
}
