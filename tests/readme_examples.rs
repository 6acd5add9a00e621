//! The README's shell examples, run as a reader would paste them.
//!
//! Every ```` ```sh ```` block under the README's "## Use" heading is run by
//! `bash -e -o pipefail` in a fresh directory, with the tools' names
//! (`mkfs.ext4r`, `fsck.ext4r`, `tune.ext4r`, `e4defrag-r`, `resize.ext4r`,
//! `ext4r`) on
//! `PATH` pointing at the binary under test. A block passes when every
//! command in it succeeds and every image it leaves behind is clean for
//! `e2fsck -fn` (where e2fsck is installed). The Rust examples are compiled
//! as doctests (see `ReadmeDoctests` in `crates/ext4r-fsck/src/lib.rs`).

mod common;

use std::path::Path;
use std::process::Command;

use common::{have, run, TempDir};

const NAMES: [&str; 6] = [
    "ext4r",
    "mkfs.ext4r",
    "fsck.ext4r",
    "tune.ext4r",
    "e4defrag-r",
    "resize.ext4r",
];

/// The `sh` blocks of the section headed `## Use`, with the line each
/// starts on.
fn use_examples(readme: &str) -> Vec<(usize, String)> {
    let mut blocks = Vec::new();
    let mut in_use = false;
    let mut current: Option<(usize, String)> = None;
    let mut fence_open = false;
    for (no, line) in readme.lines().enumerate() {
        if line.starts_with("```") {
            if fence_open {
                fence_open = false;
                if let Some(block) = current.take() {
                    blocks.push(block);
                }
            } else {
                fence_open = true;
                if in_use && line.trim_end() == "```sh" {
                    current = Some((no + 1, String::new()));
                }
            }
            continue;
        }
        if fence_open {
            if let Some((_, text)) = current.as_mut() {
                text.push_str(line);
                text.push('\n');
            }
            continue;
        }
        if let Some(title) = line.strip_prefix("## ") {
            in_use = title.trim() == "Use";
        }
    }
    blocks
}

#[test]
fn readme_use_examples_run() {
    let readme_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md");
    let readme = std::fs::read_to_string(&readme_path).expect("read README.md");
    let blocks = use_examples(&readme);
    // One per tool at least: mkfs, fsck, tune, e4defrag, resize, reading,
    // writing.
    assert!(
        blocks.len() >= 7,
        "expected the README's Use section to hold an example per tool, found {}",
        blocks.len()
    );
    if !have("bash") {
        eprintln!("skipped: bash is not installed");
        return;
    }
    let e2fsck = have("e2fsck");
    for (index, (line, script)) in blocks.iter().enumerate() {
        let dir = TempDir::new(&format!("readme-{index}"));
        let bin = dir.path("bin");
        std::fs::create_dir(&bin).unwrap();
        for name in NAMES {
            std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_ext4r"), bin.join(name)).unwrap();
        }
        let work = dir.path("work");
        std::fs::create_dir(&work).unwrap();
        let path = format!(
            "{}:{}",
            bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let out = run(Command::new("bash")
            .args(["-e", "-o", "pipefail", "-c", script])
            .current_dir(&work)
            .env("PATH", path)
            .stdin(std::process::Stdio::null()));
        assert!(
            out.status.success(),
            "README.md line {line}: the example failed ({}):\n{script}\n--- stdout\n{}\n--- stderr\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if !e2fsck {
            continue;
        }
        for entry in std::fs::read_dir(&work).unwrap() {
            let img = entry.unwrap().path();
            if img.extension().is_some_and(|e| e == "img") {
                let (code, text) = common::e2fsck_fn(&img);
                assert_eq!(
                    code,
                    0,
                    "README.md line {line}: {} is not e2fsck-clean after the example:\n{text}",
                    img.display()
                );
            }
        }
    }
}
