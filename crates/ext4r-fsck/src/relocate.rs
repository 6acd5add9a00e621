//! Moving a group's block bitmap, inode bitmap or inode table that the
//! descriptors place outside where it may be (e2fsck's "Relocate?" and
//! `new_table_block`): a free run is taken in the group (with flex_bg in
//! its flex group, then anywhere), zeroed and named in the descriptor.
//! A relocated bitmap is rewritten by the next round's pass 5; a relocated
//! inode table starts empty: what the lost table held is gone, as with
//! e2fsck ("SEVERE DATA LOSS POSSIBLE"), and passes 2–4 clear the names
//! that pointed there.
//!
//! Planned in pass 5, when every claim is known.

use crate::codes::ProblemCode;
use crate::problem::Subject;
use ext4r_format::features::Incompat;

use crate::ctx::Ctx;
use crate::fix::plan::Meta;
use crate::fix::Fix;

/// Plans the moves passes 0 and 1 asked for ([`Ctx::relocate_later`]),
/// over the used blocks `used` (sorted disjoint ranges); returns the ranges
/// taken.
pub(crate) fn plan(c: &mut Ctx, used: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let wanted = c.take_relocations();
    let mut moved = Vec::new();
    if wanted.is_empty() {
        return moved;
    }
    let mut taken = c.usage_map(used.iter().copied());
    let wide = c.wide();
    for (g, what, copy) in wanted {
        let n = match what {
            Meta::InodeTable => u64::from(c.geo().inode_blocks_per_group()),
            _ => 1,
        };
        let Some(at) = ranges(c, g)
            .into_iter()
            .find_map(|(first, finish)| taken.get_free_blocks(first, finish, n))
        else {
            c.report(Subject::GroupPart {
                group: g,
                part: what.name(),
            })
            .error(
                1,
                ProblemCode::PR_1_RELOC_BLOCK_ALLOCATE,
                format!(
                    "Could not allocate {n} block(s) for group {g}'s {}.",
                    what.name()
                ),
            );
            continue;
        };
        taken.mark(at, n);
        c.reserve(at..at + n);
        moved.push((at, at + n));
        let from = c
            .fs()
            .group_desc(ext4r_format::GroupNr(g))
            .ok()
            .map(|d| match what {
                Meta::BlockBitmap => d.block_bitmap(wide),
                Meta::InodeBitmap => d.inode_bitmap(wide),
                Meta::InodeTable => d.inode_table(wide),
            })
            .filter(|&b| {
                copy && b != 0 && b.checked_add(n).is_some_and(|e| e <= c.geo().blocks_count)
            });
        match from {
            Some(from) => c
                .report(Subject::GroupPart {
                    group: g,
                    part: what.name(),
                })
                .error_fix(
                    1,
                    ProblemCode::PR_1_RELOC_FROM_TO,
                    format!(
                        "Relocating group {g}'s {} from {from} to {at}...",
                        what.name()
                    ),
                    Fix::RelocateFrom(g, what, from, at),
                ),
            None => c
                .report(Subject::GroupPart {
                    group: g,
                    part: what.name(),
                })
                .error_fix(
                    1,
                    ProblemCode::PR_1_RELOC_TO,
                    format!("Relocating group {g}'s {} to {at}...", what.name()),
                    Fix::Relocate(g, what, at),
                ),
        }
    }
    moved
}

/// Where to look, in order, as e2fsck's `new_table_block` asks
/// `ext2fs_get_free_blocks2`: from the group's first block (the flex
/// group's with flex_bg) up to its last, then, with flex_bg, from the
/// first data block to the end.
fn ranges(c: &Ctx, g: u32) -> Vec<(u64, u64)> {
    let geo = c.geo();
    if c.sb().has_incompat(Incompat::FLEX_BG) {
        let size = 1u32 << c.sb().s_log_groups_per_flex.min(31);
        let first = g / size * size;
        let last = (g | (size - 1)).min(geo.group_count - 1);
        vec![
            (geo.group_first_block(first), geo.group_last_block(last)),
            (geo.first_data_block, geo.blocks_count),
        ]
    } else {
        vec![(geo.group_first_block(g), geo.group_last_block(g))]
    }
}
