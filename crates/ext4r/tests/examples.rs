//! The embedder's example (`examples/embed.rs`) run as a test: its trees
//! must be e2fsck-clean, and the kernel must see in the partition exactly
//! the files the program wrote.

mod common;

#[path = "../examples/embed.rs"]
mod embed;

use common::{missing_tools, run, run_status, TempDir};

#[test]
fn embed_example_is_clean_and_mounts_equal() {
    let dir = TempDir::new("embed-example");
    let (mem, disk) = embed::run(&dir.join("out")).expect("the example runs");
    if let Some(why) = missing_tools(&["e2fsck"]) {
        println!("e2fsck checks skipped: {why}");
        return;
    }
    let partition = format!("{}?offset={}", disk.display(), embed::PART_START);
    for img in [mem.display().to_string(), partition] {
        let (code, out, err) = run_status("e2fsck", &["-fn", &img], &[]).unwrap();
        assert_eq!(code, 0, "e2fsck -fn {img}:\n{out}{err}");
    }
    if !rustix::process::geteuid().is_root() || missing_tools(&["mount", "umount"]).is_some() {
        println!("kernel comparison skipped: needs root, mount and loop devices");
        return;
    }
    let mnt = dir.join("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    let opts = format!("loop,ro,offset={}", embed::PART_START);
    run(
        "mount",
        &[
            "-t",
            "ext4",
            "-o",
            &opts,
            disk.to_str().unwrap(),
            mnt.to_str().unwrap(),
        ],
        &[],
    )
    .expect("the kernel mounts the partition");
    let compared: Result<(), String> = embed::paths().into_iter().try_for_each(|path| {
        let on_mount = std::fs::read(mnt.join(&path[1..])).map_err(|e| format!("{path}: {e}"))?;
        if on_mount == embed::expected(path) {
            Ok(())
        } else {
            Err(format!("{path}: the kernel reads other bytes"))
        }
    });
    let mut unmounted = false;
    for _ in 0..20 {
        if run("umount", &[mnt.to_str().unwrap()], &[]).is_ok() {
            unmounted = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    if !unmounted {
        run("umount", &["-l", mnt.to_str().unwrap()], &[]).unwrap();
    }
    compared.unwrap();
}
