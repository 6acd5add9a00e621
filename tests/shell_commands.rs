//! `ext4r cp`, `mkdir`, `rm`, `mv`, `ln` against coreutils on the kernel:
//! one script of commands runs as `ext4r CMD ... IMAGE:/PATH` on an image
//! and as `CMD ... MNT/PATH` on a loop-mounted twin of it. Each command
//! must exit as coreutils does and say what it says (the `ext4r ` prefix
//! and the image or mount prefix aside), and at the end the two trees
//! must be equal (type, mode, owner, link count, size, content, link
//! target; times where a command keeps them) and ours e2fsck-clean.
//! Then what only we can be asked: refusals (a mounted image, no image, a
//! bad argument, two images), a full filesystem, and an image left byte
//! for byte as it was when nothing was done.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod common;

use common::tree::manifest;
use common::*;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn ext4r() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ext4r"))
}

/// An image and its kernel-mounted twin, plus a host tree to copy from.
struct Twin {
    // Fields drop in this order: the mount goes before its directory is
    // removed (the other way round the removal failed on the mount point
    // and left the directory in /dev/shm after every run).
    mnt: LoopMount,
    t: TempDir,
    img: PathBuf,
    host: PathBuf,
}

/// What one run printed: exit code, stdout, stderr.
#[derive(Debug, PartialEq, Eq)]
struct Said {
    code: Option<i32>,
    out: String,
    err: String,
}

fn said(o: &Output, strip: &[(&str, &str)]) -> Said {
    let norm = |b: &[u8]| {
        let mut s = String::from_utf8_lossy(b).into_owned();
        for (from, to) in strip {
            s = s.replace(from, to);
        }
        s
    };
    // -v lists in directory order, which is the filesystem's own.
    let mut out: Vec<String> = norm(&o.stdout).lines().map(str::to_string).collect();
    out.sort();
    Said {
        code: o.status.code(),
        out: out.join("\n"),
        err: norm(&o.stderr),
    }
}

fn write_host_tree(h: &Path) {
    fs::create_dir_all(h.join("tree/sub/deeper")).unwrap();
    fs::write(h.join("f1"), b"first file\n").unwrap();
    let big: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    fs::write(h.join("tree/big"), &big).unwrap();
    // A hole in the middle.
    let sp = fs::File::create(h.join("tree/sparse")).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&sp, b"tail", 5 << 20).unwrap();
    fs::write(h.join("tree/sub/a"), b"a").unwrap();
    // Copied by cp -a only (the twin's tmpfs source takes user xattrs).
    let _ = rustix::fs::lsetxattr(
        h.join("tree/sub/a"),
        "user.kept-by-a",
        b"value\nwith a newline",
        rustix::fs::XattrFlags::empty(),
    );
    fs::hard_link(h.join("tree/sub/a"), h.join("tree/sub/a-link")).unwrap();
    fs::write(h.join("tree/sub/deeper/b"), b"bb").unwrap();
    std::os::unix::fs::symlink("sub/a", h.join("tree/rel-link")).unwrap();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        h.join("tree/fifo"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .unwrap();
    // Modes and times a copy without -p does not keep.
    let old = h.join("old");
    fs::write(&old, b"old file").unwrap();
    fs::set_permissions(&old, fs::Permissions::from_mode(0o4751)).unwrap();
    let t = rustix::fs::Timestamps {
        last_access: rustix::fs::Timespec {
            tv_sec: 1_000_000_000,
            tv_nsec: 5,
        },
        last_modification: rustix::fs::Timespec {
            tv_sec: 1_100_000_000,
            tv_nsec: 123_456_789,
        },
    };
    rustix::fs::utimensat(rustix::fs::CWD, &old, &t, rustix::fs::AtFlags::empty()).unwrap();
    rustix::fs::chown(
        h.join("tree/sub/deeper/b"),
        Some(rustix::fs::Uid::from_raw(4321)),
        Some(rustix::fs::Gid::from_raw(99)),
    )
    .unwrap();
}

impl Twin {
    fn new(tag: &str, size: &str) -> Twin {
        let t = TempDir::new(tag);
        let img = t.path("ours.img");
        let twin = t.path("twin.img");
        let o = run(ext4r().args(["mkfs", "-q"]).arg(&img).arg(size));
        assert!(
            o.status.success(),
            "mkfs: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        copy_sparse(&img, &twin).unwrap();
        let mnt = LoopMount::new(&twin, &t.path("mnt")).unwrap();
        let host = t.path("host");
        write_host_tree(&host);
        Twin { t, img, mnt, host }
    }

    /// `args` with `@/PATH` as ours (`IMG:/PATH`) or theirs (`MNT/PATH`),
    /// and `%` as the host tree.
    fn args(&self, args: &[&str], ours: bool) -> Vec<String> {
        let img = format!("{}:", self.img.display());
        let mnt = self.mnt.dir.display().to_string();
        let host = self.host.display().to_string();
        args.iter()
            .map(|a| {
                let a = a.replace('%', &host);
                match a.strip_prefix('@') {
                    Some(p) if ours => format!("{img}{p}"),
                    Some(p) => format!("{mnt}{p}"),
                    None => a,
                }
            })
            .collect()
    }

    /// Runs `tool args` both ways; both must exit and speak alike.
    fn both(&self, tool: &str, args: &[&str]) -> Said {
        let o = run(ext4r().arg(tool).args(self.args(args, true)));
        let tool_prefix = format!("ext4r {tool}:");
        let img = format!("{}:", self.img.display());
        let ours = said(&o, &[(&tool_prefix, &format!("{tool}:")), (&img, "")]);
        let o = run(Command::new(tool)
            .env("LC_ALL", "C")
            .args(self.args(args, false)));
        let mnt = self.mnt.dir.display().to_string();
        let theirs = said(&o, &[(&mnt, "")]);
        assert_eq!(
            ours, theirs,
            "{tool} {args:?}: ours, then coreutils on the kernel"
        );
        ours
    }

    /// As `both`, and it must fail with `msg` (after `tool: `).
    fn fails(&self, tool: &str, args: &[&str], msg: &str) {
        let s = self.both(tool, args);
        assert_eq!(s.code, Some(1), "{tool} {args:?}");
        let host = self.host.display().to_string();
        assert_eq!(
            s.err.trim_end(),
            format!("{tool}: {}", msg.replace('%', &host))
        );
    }

    fn ok(&self, tool: &str, args: &[&str]) {
        let s = self.both(tool, args);
        assert_eq!(s.code, Some(0), "{tool} {args:?}: {}", s.err);
    }

    /// Ours mounted beside the twin: the two trees, with times only where
    /// `kept` says a command kept them.
    fn compare(&mut self, kept: &[&str]) {
        let (rc, out) = e2fsck_fn(&self.img);
        assert_eq!(rc, 0, "e2fsck -fn: {out}");
        let strip = |m: std::collections::BTreeMap<String, String>| {
            m.into_iter()
                .map(|(k, v)| {
                    let keep = kept
                        .iter()
                        .any(|p| k == *p || k.starts_with(&format!("{p}/")));
                    let v = if keep {
                        v
                    } else {
                        v.split(' ')
                            .filter(|w| !w.starts_with("mtime="))
                            .collect::<Vec<_>>()
                            .join(" ")
                    };
                    (k, v)
                })
                .collect::<std::collections::BTreeMap<_, _>>()
        };
        let theirs = strip(manifest(&self.mnt.dir));
        let mut m = LoopMount::new(&self.img, &self.t.path("ours-mnt")).unwrap();
        let ours = strip(manifest(&m.dir));
        m.umount().unwrap();
        let diffs: Vec<String> = theirs
            .iter()
            .filter(|(k, v)| ours.get(*k) != Some(v))
            .map(|(k, v)| format!("{k}: kernel {v}\n    ours {:?}", ours.get(k)))
            .chain(
                ours.keys()
                    .filter(|k| !theirs.contains_key(*k))
                    .map(|k| format!("{k}: only in ours")),
            )
            .take(10)
            .collect();
        assert!(
            diffs.is_empty(),
            "{} differences:\n{}",
            diffs.len(),
            diffs.join("\n")
        );
    }
}

fn ready() -> bool {
    if !is_root() || !have("e2fsck") {
        eprintln!("skipped: needs root (loop mounts) and e2fsck");
        return false;
    }
    true
}

#[test]
fn the_commands_do_what_coreutils_do_on_the_kernel() {
    if !ready() {
        return;
    }
    let mut w = Twin::new("shell-twin", "64M");
    // mkdir
    w.ok("mkdir", &["@/a"]);
    w.fails(
        "mkdir",
        &["@/a"],
        "cannot create directory '/a': File exists",
    );
    w.fails(
        "mkdir",
        &["@/x/y"],
        "cannot create directory '/x/y': No such file or directory",
    );
    w.ok("mkdir", &["-p", "@/a/b/c", "@/e/f"]);
    w.ok("mkdir", &["-p", "@/a/b"]);
    w.ok("mkdir", &["-m", "700", "@/m"]);
    w.ok("mkdir", &["-m", "u=rwx,g=rx,o=", "@/m2"]);
    w.ok("mkdir", &["-v", "@/v"]);
    w.fails("mkdir", &["@/"], "cannot create directory '/': File exists");
    let long = format!("@/{}", "n".repeat(256));
    w.fails(
        "mkdir",
        &[&long],
        &format!(
            "cannot create directory '{}': File name too long",
            &long[1..]
        ),
    );
    // cp into the image
    w.ok("cp", &["%/f1", "@/a/"]);
    w.ok("cp", &["%/f1", "@/a/f2"]);
    w.ok("cp", &["%/f1", "@/a/f2"]);
    w.fails(
        "cp",
        &["%/tree", "@/a/"],
        "-r not specified; omitting directory '%/tree'",
    );
    w.ok("cp", &["-r", "%/tree", "@/a/"]);
    w.ok("cp", &["-r", "%/tree", "@/a/"]);
    w.ok("cp", &["-r", "%/tree", "@/copy"]);
    // cp(1)'s rules for "DIR/." (what DIR holds) and "DIR/" (DIR itself),
    // into an existing directory and to a new name.
    w.ok("mkdir", &["@/dot"]);
    w.ok("cp", &["-r", "%/tree/.", "@/dot"]);
    w.ok("cp", &["-r", "%/tree/./", "@/dot-new"]);
    w.ok("cp", &["-r", "%/tree/", "@/dot"]);
    w.ok("cp", &["%/old", "@/plain-old"]);
    w.ok("cp", &["-p", "%/old", "@/p"]);
    w.ok("cp", &["-a", "%/tree", "@/arch"]);
    w.ok("cp", &["-v", "%/f1", "@/v/"]);
    w.fails(
        "cp",
        &["%/f1", "%/old", "@/a/f2"],
        "target '/a/f2': Not a directory",
    );
    w.fails(
        "cp",
        &["%/f1", "@/nodir/x"],
        "cannot create regular file '/nodir/x': No such file or directory",
    );
    w.fails(
        "cp",
        &["%/missing", "@/a"],
        "cannot stat '%/missing': No such file or directory",
    );
    w.fails(
        "cp",
        &["-r", "%/tree", "@/a/f2"],
        "cannot overwrite non-directory '/a/f2' with directory '%/tree'",
    );
    w.ok("mkdir", &["-p", "@/q/f1"]);
    w.fails(
        "cp",
        &["%/f1", "@/q/"],
        "cannot overwrite directory '/q/f1' with non-directory",
    );
    // ln
    w.ok("ln", &["@/a/f1", "@/a/hl"]);
    w.fails(
        "ln",
        &["@/a/f1", "@/a/hl"],
        "failed to create hard link '/a/hl': File exists",
    );
    w.ok("ln", &["-s", "f1", "@/a/sl"]);
    w.ok("ln", &["-s", "/somewhere/else", "@/a"]);
    w.fails(
        "ln",
        &["@/a", "@/dirlink"],
        "/a: hard link not allowed for directory",
    );
    w.ok("ln", &["-f", "@/a/f2", "@/a/hl"]);
    w.ok("ln", &["-f", "@/a/f2", "@/a/hl"]);
    w.fails(
        "ln",
        &["-f", "@/a/f2", "@/a/f2"],
        "'/a/f2' and '/a/f2' are the same file",
    );
    w.fails(
        "ln",
        &["@/a/nope", "@/a/x"],
        "failed to access '/a/nope': No such file or directory",
    );
    w.fails(
        "ln",
        &["-s", "x", "@/a/f1"],
        "failed to create symbolic link '/a/f1': File exists",
    );
    // mv
    w.ok("mv", &["@/a/f2", "@/a/f3"]);
    w.ok("mv", &["@/a/b", "@/m"]);
    w.ok("mv", &["@/a/f3", "@/a/sl", "@/m"]);
    w.fails(
        "mv",
        &["@/a", "@/a/tree"],
        "cannot move '/a' to a subdirectory of itself, '/a/tree/a'",
    );
    w.fails(
        "mv",
        &["@/nope", "@/z"],
        "cannot stat '/nope': No such file or directory",
    );
    w.ok("mkdir", &["-p", "@/e2/e", "@/e3/e/full"]);
    w.ok("mv", &["@/e", "@/e2"]);
    w.fails(
        "mv",
        &["@/e2/e", "@/e3"],
        "cannot move '/e2/e' to '/e3/e': Directory not empty",
    );
    w.ok("mkdir", &["@/m/b/f1"]);
    w.fails(
        "mv",
        &["@/a/f1", "@/m/b"],
        "cannot overwrite directory '/m/b/f1' with non-directory",
    );
    w.fails(
        "mv",
        &["@/m/b", "@/a/f1"],
        "cannot overwrite non-directory '/a/f1' with directory '/m/b'",
    );
    w.ok("mv", &["-Tv", "@/e2/e", "@/e-renamed"]);
    w.ok("ln", &["-sv", "../f1", "@/e-renamed/sv"]);
    w.ok("ln", &["-v", "@/a/f1", "@/e-renamed/hv"]);
    // rm
    w.ok("rm", &["@/a/hl"]);
    w.fails(
        "rm",
        &["@/a/tree"],
        "cannot remove '/a/tree': Is a directory",
    );
    w.fails(
        "rm",
        &["@/nope"],
        "cannot remove '/nope': No such file or directory",
    );
    w.ok("rm", &["-f", "@/nope"]);
    w.fails(
        "rm",
        &["-d", "@/m"],
        "cannot remove '/m': Directory not empty",
    );
    w.ok("rm", &["-r", "@/a/tree"]);
    w.ok("rm", &["-d", "@/e-renamed/f"]);
    w.ok("rm", &["-rv", "@/copy/sub"]);
    w.compare(&["p", "arch"]);

    // cp out of the image, against cp out of the kernel's mount.
    let out_ours = w.t.path("out-ours");
    let out_theirs = w.t.path("out-theirs");
    for d in [&out_ours, &out_theirs] {
        fs::create_dir_all(d).unwrap();
    }
    // "m/." puts what /m holds into the directory, "m" puts /m there.
    for (flags, what) in [
        (&["-r"][..], "m"),
        (&["-r"][..], "m/."),
        (&["-a"][..], "arch"),
        (&[][..], "p"),
    ] {
        let o = run(ext4r()
            .arg("cp")
            .args(flags)
            .arg(format!("{}:/{what}", w.img.display()))
            .arg(&out_ours));
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let o = run(Command::new("cp")
            .env("LC_ALL", "C")
            .args(flags)
            .arg(w.mnt.dir.join(what))
            .arg(&out_theirs));
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let strip_times = |m: std::collections::BTreeMap<String, String>| {
        m.into_iter()
            .map(|(k, v)| {
                if k.starts_with("arch") {
                    return (k, v);
                }
                let v = v
                    .split(' ')
                    .filter(|w| !w.starts_with("mtime="))
                    .collect::<Vec<_>>()
                    .join(" ");
                (k, v)
            })
            .collect::<std::collections::BTreeMap<_, _>>()
    };
    assert_eq!(
        strip_times(manifest(&out_ours)),
        strip_times(manifest(&out_theirs))
    );
}

/// The twin's tree after each sequence of `rm -r` and `mv` is equal too:
/// removing and moving big trees, not only single names.
#[test]
fn trees_removed_and_moved_as_the_kernel_does() {
    if !ready() {
        return;
    }
    let mut w = Twin::new("shell-trees", "128M");
    w.ok("cp", &["-r", "%/tree", "@/t1"]);
    w.ok("cp", &["-r", "%/tree", "@/t2"]);
    w.ok("mkdir", &["-p", "@/deep/a/b/c/d/e/f/g/h"]);
    w.ok("mv", &["@/t1", "@/deep/a/b/c/d"]);
    w.ok("mv", &["@/deep/a/b", "@/t2/sub"]);
    w.ok("rm", &["-r", "@/deep"]);
    w.ok("rm", &["-rf", "@/t2/sub/b/c/d/t1", "@/nothing"]);
    w.compare(&[]);
}

#[test]
fn refusals_and_the_image_left_as_it_was() {
    if !ready() {
        return;
    }
    let t = TempDir::new("shell-refuse");
    let img = t.path("r.img");
    let o = run(ext4r().args(["mkfs", "-q"]).arg(&img).arg("32M"));
    assert!(o.status.success());
    let at = |p: &str| format!("{}:{p}", img.display());
    let before = fs::read(&img).unwrap();
    let unchanged = |what: &str| {
        assert!(
            fs::read(&img).unwrap() == before,
            "{what}: the image changed"
        );
    };
    let err = |o: &Output| String::from_utf8_lossy(&o.stderr).into_owned();
    // Failures that change nothing leave every byte as it was.
    for args in [
        vec!["mkdir".to_string(), at("/x/y")],
        vec!["rm".into(), at("/nope")],
        vec!["rm".into(), "-f".into(), at("/nope")],
        vec!["mv".into(), at("/nope"), at("/z")],
        vec!["ln".into(), at("/nope"), at("/z")],
        vec!["cp".into(), "/nonexistent/src".into(), at("/")],
        vec!["mkdir".into(), "-p".into(), at("/lost+found")],
    ] {
        let o = run(ext4r().args(&args));
        unchanged(&format!("{args:?}: {}", err(&o)));
    }
    // No image, not IMAGE:PATH, two images, no arguments.
    let o = run(ext4r().args(["mkdir", "/nonexistent/img.img:/a"]));
    assert_eq!(o.status.code(), Some(1));
    assert!(
        err(&o).starts_with("ext4r mkdir: ") && err(&o).contains("No such file or directory"),
        "{}",
        err(&o)
    );
    let o = run(ext4r().args(["rm", "plain-name"]));
    assert_eq!(o.status.code(), Some(1));
    assert!(err(&o).contains("not IMAGE:PATH"), "{}", err(&o));
    let other = t.path("other.img");
    copy_sparse(&img, &other).unwrap();
    let o = run(ext4r()
        .arg("mv")
        .arg(at("/lost+found"))
        .arg(format!("{}:/x", other.display())));
    assert_eq!(o.status.code(), Some(1));
    assert!(err(&o).contains("are different images"), "{}", err(&o));
    // Copies between images (or inside one) are not cp's work here.
    let o = run(ext4r()
        .arg("cp")
        .arg(at("/lost+found"))
        .arg(format!("{}:/x", other.display())));
    assert_eq!(o.status.code(), Some(1));
    assert!(
        err(&o).contains("copies between images are not supported"),
        "{}",
        err(&o)
    );
    let o = run(ext4r().arg("cp").arg(at("/lost+found")).arg(at("/x")));
    assert_eq!(o.status.code(), Some(1));
    assert!(
        err(&o).contains("copies inside an image are not supported"),
        "{}",
        err(&o)
    );
    // Usage errors: 2 for every shell-style command, as their --help says.
    let o = run(ext4r().args(["cp", "/etc/hostname", "/tmp/x"]));
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
    for args in [
        &["cp"][..],
        &["mkdir"],
        &["rm"],
        &["mv"],
        &["ln"],
        &["ls"],
        &["cat", "x.img"],
        &["extract"],
        &["ls", "--no-such-option", "x.img"],
    ] {
        let o = run(ext4r().args(args));
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", err(&o));
        let o = run(ext4r().arg(args[0]).arg("--help"));
        assert_eq!(o.status.code(), Some(0));
        assert!(
            String::from_utf8_lossy(&o.stdout).contains(
                "Exit status: 0 if everything was done, 1 if anything failed, 2 for a usage \
                 error."
            ),
            "{} --help",
            args[0]
        );
    }
    unchanged("refusals");
    // A mounted image is refused, naming the mount.
    {
        let m = LoopMount::new(&img, &t.path("mnt")).unwrap();
        let o = run(ext4r().args(["mkdir", &at("/a")]));
        assert_eq!(o.status.code(), Some(1));
        let e = err(&o);
        assert!(
            e.contains("is mounted on") && e.contains(&m.dir.display().to_string()),
            "{e}"
        );
        assert!(!m.dir.join("a").exists());
    }
    // A full filesystem: cp says so as cp does; the image stays
    // e2fsck-clean.
    let big = t.path("big");
    fs::write(&big, vec![0x11u8; 40 << 20]).unwrap();
    let o = run(ext4r().arg("cp").arg(&big).arg(at("/big")));
    assert_eq!(o.status.code(), Some(1));
    assert!(
        err(&o).contains("'/big': No space left on device"),
        "{}",
        err(&o)
    );
    let (rc, out) = e2fsck_fn(&img);
    assert_eq!(rc, 0, "e2fsck -fn after ENOSPC: {out}");

    // No inode left: ENOSPC too, as the kernel says it; the ones made stay.
    let few = t.path("few.img");
    let o = run(ext4r().args(["mkfs", "-q", "-N", "16"]).arg(&few).arg("8M"));
    assert!(o.status.success(), "{}", err(&o));
    let mut said = String::new();
    for i in 0..20 {
        let o = run(ext4r().arg("mkdir").arg(format!("{}:/d{i}", few.display())));
        if !o.status.success() {
            assert_eq!(o.status.code(), Some(1));
            said = err(&o);
            break;
        }
    }
    assert!(
        said.starts_with("ext4r mkdir: cannot create directory '/d")
            && said.trim_end().ends_with(": No space left on device"),
        "{said}"
    );
    let (rc, out) = e2fsck_fn(&few);
    assert_eq!(rc, 0, "e2fsck -fn after running out of inodes: {out}");

    // A filesystem marked read-only: refused before anything is touched.
    if have("tune2fs") {
        let ro = t.path("ro.img");
        copy_sparse(&img, &ro).unwrap();
        let o = run(Command::new("tune2fs").args(["-O", "read-only"]).arg(&ro));
        assert!(o.status.success(), "{}", err(&o));
        let before = fs::read(&ro).unwrap();
        let o = run(ext4r().arg("mkdir").arg(format!("{}:/x", ro.display())));
        assert_eq!(o.status.code(), Some(1));
        let e = err(&o);
        assert!(
            e.starts_with(&format!(
                "ext4r mkdir: cannot change '{}': Read-only file system",
                ro.display()
            )),
            "{e}"
        );
        assert!(
            fs::read(&ro).unwrap() == before,
            "the read-only image changed"
        );
    }
}

/// `ext4r cp - IMAGE:/FILE` writes standard input to the file, made as a
/// shell's `> FILE` makes one (0666 less the umask), over a file that is
/// there too; into a directory it has no name and is refused.
#[test]
fn cp_reads_standard_input() {
    if !have("e2fsck") || !have("debugfs") {
        eprintln!("skipped: needs e2fsck and debugfs");
        return;
    }
    let t = TempDir::new("shell-stdin");
    let img = t.path("s.img");
    let o = run(ext4r().args(["mkfs", "-q"]).arg(&img).arg("32M"));
    assert!(o.status.success());
    let at = |p: &str| format!("{}:{p}", img.display());
    let cp_stdin = |data: &[u8], dest: &str| {
        use std::io::Write;
        let mut child = ext4r()
            .args(["cp", "-"])
            .arg(at(dest))
            .stdin(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        // A refusal exits without reading: the pipe may close under us.
        let _ = stdin.write_all(data);
        drop(stdin);
        child.wait_with_output().unwrap()
    };
    let big: Vec<u8> = (0..1_000_000u32).map(|i| (i % 253) as u8).collect();
    for (data, dest) in [
        (&b"from a pipe\n"[..], "/small"),
        (&big[..], "/big"),
        (b"", "/empty"),
    ] {
        let o = cp_stdin(data, dest);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let o = run(ext4r().arg("cat").arg(&img).arg(dest));
        assert!(o.stdout == data, "{dest}: read back differs");
    }
    // Over a file that is there, shorter than it was.
    let o = cp_stdin(b"shorter", "/big");
    assert!(o.status.success());
    assert_eq!(
        run(ext4r().arg("cat").arg(&img).arg("/big")).stdout,
        b"shorter"
    );
    // The mode a new file gets from a shell's redirection.
    let umask = {
        let m = rustix::process::umask(rustix::fs::Mode::empty());
        rustix::process::umask(m);
        m.bits()
    };
    let o = run(Command::new("debugfs")
        .args(["-R", "stat /small"])
        .arg(&img));
    let stat = String::from_utf8_lossy(&o.stdout);
    let want = format!("Mode:  {:04o}", 0o666 & !umask);
    assert!(stat.contains(&want), "want {want}: {stat}");
    // A directory gives standard input no name.
    let o = cp_stdin(b"x", "/lost+found");
    assert_eq!(o.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("cannot copy standard input into directory"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let (rc, out) = e2fsck_fn(&img);
    assert_eq!(rc, 0, "e2fsck -fn: {out}");
}
