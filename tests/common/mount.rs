//! Mounts for the tests: an image served by `ext4r mount`, and one
//! loop-mounted by the kernel; each unmounted on drop, also when the test
//! fails.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::run;

/// An image mounted by `ext4r mount`; unmounted (waiting for the driver)
/// on drop.
pub struct Fuse {
    pub dir: PathBuf,
    mounted: bool,
}

impl Fuse {
    pub fn mount(img: &Path, dir: &Path) -> Fuse {
        Fuse::mount_with(img, dir, &[])
    }
    /// With options (`-o ro`, ...) before the image.
    pub fn mount_with(img: &Path, dir: &Path, options: &[&str]) -> Fuse {
        fs::create_dir_all(dir).expect("create the mount point");
        let o = run(Command::new(env!("CARGO_BIN_EXE_ext4r"))
            .arg("mount")
            .args(options)
            .arg(img)
            .arg(dir));
        assert!(
            o.status.success(),
            "ext4r mount {}: {}",
            img.display(),
            String::from_utf8_lossy(&o.stderr)
        );
        Fuse {
            dir: dir.to_path_buf(),
            mounted: true,
        }
    }
    pub fn umount(&mut self) {
        if self.mounted {
            let o = run(Command::new(env!("CARGO_BIN_EXE_ext4r"))
                .arg("umount")
                .arg(&self.dir));
            assert!(
                o.status.success(),
                "ext4r umount: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            self.mounted = false;
        }
    }
}

impl Drop for Fuse {
    fn drop(&mut self) {
        if self.mounted {
            let _ = Command::new(env!("CARGO_BIN_EXE_ext4r"))
                .arg("umount")
                .arg(&self.dir)
                .output();
        }
    }
}

/// An image loop-mounted by the kernel, noatime (a FUSE mount never
/// updates access times on reads either), nodev and nosuid (as every FUSE
/// mount is: opening a device node, a whiteout among them, is EACCES on
/// both); unmounted on drop.
pub struct Kernel {
    pub dir: PathBuf,
    mounted: bool,
}

impl Kernel {
    pub fn mount(img: &Path, dir: &Path) -> Kernel {
        fs::create_dir_all(dir).expect("create the mount point");
        let o = run(Command::new("mount")
            .args(["-t", "ext4", "-o", "loop,noatime,nodev,nosuid"])
            .arg(img)
            .arg(dir));
        assert!(
            o.status.success(),
            "mount {}: {}",
            img.display(),
            String::from_utf8_lossy(&o.stderr)
        );
        Kernel {
            dir: dir.to_path_buf(),
            mounted: true,
        }
    }
    pub fn umount(&mut self) {
        if self.mounted {
            if let Err(e) = super::umount_retrying(&self.dir) {
                panic!("{e}");
            }
            self.mounted = false;
        }
    }
}

impl Drop for Kernel {
    fn drop(&mut self) {
        if self.mounted {
            let _ = Command::new("umount").arg(&self.dir).output();
        }
    }
}
