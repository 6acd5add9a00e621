//! The mke2fs feature and option matrix of the zoo: every combination the
//! kernel here mounts, each named by the features it exercises.

/// One mke2fs configuration.
#[derive(Clone)]
pub struct Config {
    pub name: String,
    pub mkfs: Vec<String>,
    /// `-E` options after root_owner.
    pub extended: String,
    pub mount_opts: String,
    pub features: Vec<&'static str>,
    pub block_size: u64,
    pub size_mib: u64,
    pub extents: bool,
    pub journal: bool,
}

fn cfg(name: &str, fs_type: &str, bs: u64, features: &[&'static str], extra: &[&str]) -> Config {
    let mut mkfs: Vec<String> = vec!["-t".into(), fs_type.into(), "-b".into(), bs.to_string()];
    let mut o = Vec::new();
    let mut extended = Vec::new();
    let mut feats: Vec<&'static str> = vec![match fs_type {
        "ext2" => "ext2",
        "ext3" => "ext3",
        _ => "ext4",
    }];
    feats.push(match bs {
        1024 => "bs=1k",
        2048 => "bs=2k",
        _ => "bs=4k",
    });
    for &f in features {
        feats.push(f);
        match f {
            "^64bit" | "^flex_bg" | "^has_journal" => o.push(f.to_string()),
            // 64bit needs extents.
            "^extent" => o.push("^extent,^64bit".into()),
            "sparse_super2" => {
                o.push(f.into());
                extended.push("num_backup_sb=1".to_string());
            }
            "meta_bg" => {
                o.push("meta_bg,^resize_inode".into());
            }
            "project" => {
                // No quota in this kernel: project ids without the quota
                // feature (the inode field, large inodes).
                mkfs.extend(["-I".into(), "256".into()]);
            }
            "inode128" => mkfs.extend(["-I".into(), "128".into()]),
            "bigalloc16k" => {
                o.push("bigalloc".into());
                mkfs.extend(["-C".into(), (bs * 16).to_string()]);
            }
            "bigalloc4x" => {
                o.push("bigalloc".into());
                mkfs.extend(["-C".into(), (bs * 4).to_string()]);
            }
            "encrypt" | "inline_data" | "ea_inode" | "large_dir" | "huge_file" | "dir_nlink"
            | "metadata_csum_seed" | "orphan_file" | "fast_commit" | "^metadata_csum" => {
                o.push(f.into())
            }
            _ => {}
        }
    }
    if !o.is_empty() {
        mkfs.extend(["-O".into(), o.join(",")]);
    }
    mkfs.extend(extra.iter().map(|s| s.to_string()));
    let extents = fs_type == "ext4" && !features.contains(&"^extent");
    let journal = fs_type != "ext2" && !features.contains(&"^has_journal");
    Config {
        name: name.to_string(),
        mkfs,
        extended: extended.join(","),
        // Without a key, the kernel encrypts new files under a dummy policy
        // only with this mount option.
        mount_opts: if features.contains(&"encrypt") {
            "test_dummy_encryption".into()
        } else {
            String::new()
        },
        features: feats,
        block_size: bs,
        size_mib: if features.iter().any(|f| f.starts_with("bigalloc")) {
            256
        } else {
            64
        },
        extents,
        journal,
    }
}

/// Every configuration, in a fixed order (the sample takes the first 48
/// in cycle order, so it spans the matrix).
pub fn configs() -> Vec<Config> {
    let singles: &[&[&'static str]] = &[
        &[],
        &["inline_data"],
        &["ea_inode"],
        &["large_dir"],
        &["huge_file"],
        &["dir_nlink"],
        &["metadata_csum_seed"],
        &["^64bit"],
        &["meta_bg"],
        &["sparse_super2"],
        &["orphan_file"],
        &["fast_commit"],
        &["project"],
        &["encrypt"],
        &["bigalloc4x"],
        &["bigalloc16k"],
        &["bigalloc16k", "inline_data"],
        &["bigalloc4x", "ea_inode"],
        &["^extent", "^flex_bg"],
        &["^metadata_csum"],
        &["inode128"],
        &["^has_journal"],
        &["inline_data", "ea_inode", "large_dir", "metadata_csum_seed"],
        &["^64bit", "meta_bg", "huge_file"],
        &["orphan_file", "fast_commit", "bigalloc4x"],
    ];
    let mut out = Vec::new();
    for bs in [1024u64, 2048, 4096] {
        out.push(cfg(&format!("ext2-{}k", bs / 1024), "ext2", bs, &[], &[]));
        out.push(cfg(&format!("ext3-{}k", bs / 1024), "ext3", bs, &[], &[]));
        for f in singles {
            let name = format!(
                "ext4-{}k-{}",
                bs / 1024,
                if f.is_empty() {
                    "default".into()
                } else {
                    f.join("+")
                }
            );
            out.push(cfg(&name, "ext4", bs, f, &[]));
        }
        out.push(cfg(
            &format!("ext3-{}k-inode128", bs / 1024),
            "ext3",
            bs,
            &["inode128"],
            &[],
        ));
    }
    // Interleave block sizes so any prefix (the CI sample) covers all three.
    let per = out.len() / 3;
    (0..out.len())
        .map(|i| out[(i % 3) * per + i / 3].clone())
        .collect()
}
