//! What mke2fs says on the way to a filesystem it does make: warnings it
//! prints and goes on, and the few points where it stops unless forced
//! (`-F`) — a question ("Proceed anyway? (y,N)") or an abort.
//!
//! The library does not print or ask: [`super::plan_with`] hands each
//! notice, in mke2fs's order, to the caller, whose answer decides whether
//! the plan goes on. A tool prints them where mke2fs prints them; an
//! embedder may log them or refuse.

use std::fmt;

/// Something mke2fs tells about the options while making a filesystem
/// (mke2fs 1.47's wording is the [`fmt::Display`] text).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Notice {
    /// `-b` above 4 KiB (the value as given): most kernels cannot mount it.
    BlockSizeUnusual(u32),
    /// A label longer than 16 bytes: cut to these.
    LabelTruncated(String),
    /// `-t` names a type the stock mke2fs.conf does not define. mke2fs
    /// aborts unless forced; forced, it makes the filesystem from the
    /// defaults alone.
    UndefinedFsType(String),
    /// A usage type (`-T`) mke2fs.conf does not define: left out.
    UnknownUsageType(String),
    /// A block size above this system's page size: the kernel here cannot
    /// mount it. mke2fs asks unless forced.
    BlockSizeAbovePage {
        /// The block size.
        block_size: u32,
        /// This system's page size.
        page_size: u32,
    },
    /// A RAID stripe width that is not a multiple of the stride.
    StripeNotMultiple {
        /// `-E stride=`.
        stride: u32,
        /// `-E stripe_width=`.
        stripe_width: u32,
    },
    /// A bigalloc cluster of more than 16 blocks (mke2fs says nothing with
    /// `-q`).
    LargeCluster,
    /// 128-byte inodes: no timestamps past 2038 (on standard output).
    SmallInodes,
    /// The filesystem is too small for a journal: made without one.
    NoJournal,
}

impl Notice {
    /// Whether mke2fs stops here unless forced: it asks
    /// ([`Notice::BlockSizeAbovePage`]) or aborts
    /// ([`Notice::UndefinedFsType`]).
    pub fn needs_consent(&self) -> bool {
        matches!(
            self,
            Notice::BlockSizeAbovePage { .. } | Notice::UndefinedFsType(_)
        )
    }

    /// What mke2fs says once it goes on after asking (forced, or told
    /// yes).
    pub fn forced_message(&self) -> Option<String> {
        match self {
            Notice::BlockSizeAbovePage {
                block_size,
                page_size,
            } => Some(format!(
                "Warning: {block_size}-byte blocks too big for system (max {page_size}), forced \
                 to continue"
            )),
            _ => None,
        }
    }
}

impl fmt::Display for Notice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Notice::BlockSizeUnusual(b) => {
                write!(f, "Warning: blocksize {b} not usable on most systems.")
            }
            Notice::LabelTruncated(l) => {
                write!(f, "Warning: label too long; will be truncated to '{l}'")
            }
            Notice::UndefinedFsType(t) => {
                write!(
                    f,
                    "Your mke2fs.conf file does not define the {t} filesystem type."
                )?;
                if matches!(t.as_str(), "ext3" | "ext4" | "ext4dev") {
                    write!(
                        f,
                        "\nYou probably need to install an updated mke2fs.conf file."
                    )?;
                }
                Ok(())
            }
            Notice::UnknownUsageType(t) => {
                write!(f, "Warning: the fs_type {t} is not defined in mke2fs.conf")
            }
            Notice::BlockSizeAbovePage {
                block_size,
                page_size,
            } => write!(
                f,
                "{block_size}-byte blocks too big for system (max {page_size})"
            ),
            Notice::StripeNotMultiple {
                stride,
                stripe_width,
            } => write!(
                f,
                "Warning: RAID stripe-width {stripe_width} not an even multiple of stride \
                 {stride}."
            ),
            Notice::LargeCluster => f.write_str(
                "Warning: bigalloc file systems with a cluster size greater than\n16 times the \
                 block size is considered experimental",
            ),
            Notice::SmallInodes => {
                f.write_str("128-byte inodes cannot handle dates beyond 2038 and are deprecated")
            }
            Notice::NoJournal => f.write_str("Filesystem too small for a journal"),
        }
    }
}

/// The notices of one plan: each handed to the caller's hook as it is
/// met, and kept for the summary.
pub(crate) struct Notices<'a> {
    hook: &'a mut dyn FnMut(&Notice) -> bool,
    pub(crate) said: Vec<Notice>,
}

impl<'a> Notices<'a> {
    pub(crate) fn new(hook: &'a mut dyn FnMut(&Notice) -> bool) -> Self {
        Notices {
            hook,
            said: Vec::new(),
        }
    }

    /// Tells `n`; where mke2fs stops unless forced, a `false` from the
    /// hook ends the plan.
    ///
    /// # Errors
    /// [`crate::Error::Cancelled`] when the hook declines a notice that
    /// needs consent.
    pub(crate) fn say(&mut self, n: Notice) -> crate::Result<()> {
        let go = (self.hook)(&n);
        let stop = n.needs_consent() && !go;
        let what = n.to_string();
        self.said.push(n);
        if stop {
            return Err(crate::Error::Cancelled(what));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_mke2fs_words() {
        let n = Notice::BlockSizeAbovePage {
            block_size: 65536,
            page_size: 4096,
        };
        assert_eq!(
            n.to_string(),
            "65536-byte blocks too big for system (max 4096)"
        );
        assert!(n.needs_consent());
        assert_eq!(
            n.forced_message().as_deref(),
            Some("Warning: 65536-byte blocks too big for system (max 4096), forced to continue")
        );
        assert!(!Notice::LargeCluster.needs_consent());
        let mut asked = 0;
        let mut no = |_: &Notice| {
            asked += 1;
            false
        };
        let mut ns = Notices::new(&mut no);
        assert!(ns.say(Notice::NoJournal).is_ok());
        assert!(matches!(
            ns.say(Notice::UndefinedFsType("foo".into())),
            Err(crate::Error::Cancelled(_))
        ));
        assert_eq!(ns.said.len(), 2);
        drop(ns);
        assert_eq!(asked, 2);
    }
}
