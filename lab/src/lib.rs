//! The verification lab: how we know the product crates are right
//! (DESIGN.md §6 and §9). Each campaign is a module with its `Args` and
//! `run`, which `cargo xtask <name>` calls:
//!
//! - [`damage`]: random metadata damage, our repair against e2fsck's, file by file.
//! - [`crash`]: power cuts at every write of tune, fsck and the write layer.
//! - [`corpus`]: a checker's verdicts and output on the e2fsprogs test images.
//! - [`zoo`]: clean images across the mke2fs feature matrix, and fast-commit cuts.
//! - [`fragment`]: fragmented images written by the kernel, for the defragmenter.
//! - [`mountwalk`]: `ext4r mount` on a possibly damaged image, walked under a watchdog.
//! - [`same`]: an fsck build against an earlier one, byte for byte (used by corpus and damage).
//! - [`bench`](mod@bench): an ext4r tool against its e2fsprogs counterpart, alternating runs.
//!
//! The lab runs e2fsprogs, mounts loop devices and damages images on purpose:
//! it is not product code, `cargo xtask layers` does not read it, and it is
//! never published. It does not depend on `xtask`; the binary as shipped,
//! which the benchmarks measure, it asks of `cargo xtask dist`
//! ([`util::shipped_ext4r`]).

// The campaigns' docs explain themselves through their private modules
// (`damage` through `mutate`, `crash` through its workloads), as they did
// when the lab was a binary, whose docs cargo builds with private items.
#![allow(rustdoc::private_intra_doc_links)]

pub mod bench;
pub mod corpus;
pub mod crash;
pub mod damage;
pub mod fragment;
mod measure;
pub mod mountwalk;
pub mod same;
pub mod util;
pub mod zoo;
