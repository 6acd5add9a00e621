//! The revoke table of recovery: each revoked block with the latest
//! transaction that revoked it.

use super::{tid_geq, tid_gt};
use std::collections::HashMap;

/// Revoked blocks and the newest transaction revoking each. Its size is
/// bounded by the records the log can hold, so by the journal's length.
#[derive(Debug, Default)]
pub(crate) struct RevokeTable {
    map: HashMap<u64, u32>,
}

impl RevokeTable {
    /// Records that transaction `tid` revoked `block`; of several revokes
    /// the newest counts (`jbd2_journal_set_revoke`).
    pub(crate) fn insert(&mut self, block: u64, tid: u32) {
        self.map
            .entry(block)
            .and_modify(|t| {
                if tid_gt(tid, *t) {
                    *t = tid;
                }
            })
            .or_insert(tid);
    }

    /// Whether the copy of `block` logged by transaction `tid` is revoked:
    /// a revoke by that transaction or a later one cancels it
    /// (`jbd2_journal_test_revoke`).
    pub(crate) fn is_revoked(&self, block: u64, tid: u32) -> bool {
        self.map.get(&block).is_some_and(|&t| tid_geq(t, tid))
    }

    /// Number of distinct revoked blocks.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn later_or_equal_revokes_win() {
        let mut t = RevokeTable::default();
        t.insert(10, 5);
        t.insert(10, 3);
        assert!(t.is_revoked(10, 5));
        assert!(t.is_revoked(10, 4));
        assert!(!t.is_revoked(10, 6));
        assert!(!t.is_revoked(11, 1));
        // Sequence numbers wrap: 2 comes after u32::MAX.
        t.insert(20, u32::MAX);
        t.insert(20, 2);
        assert!(t.is_revoked(20, 1));
        assert!(!t.is_revoked(20, 3));
        assert_eq!(t.len(), 2);
    }
}
