//! SIGINT and SIGTERM stop fsck as they stop e2fsck (its `signal_cancel`):
//! the handler only raises a flag, which the check looks at between pass
//! 1's chunks and between passes ([`ext4r_fsck::Options::cancel`]). The
//! run then ends with "canceled" and exit 32, what earlier rounds fixed
//! written, and the superblock's state, check time and mount count left
//! as they were — not killed half way through a write. (A Ctrl-C typed at
//! a question is read as a key, see `ask.rs`.)

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};

/// The flag the handler raises; made before the handler is installed.
static FLAG: OnceLock<Arc<AtomicBool>> = OnceLock::new();

extern "C" fn raise_flag(_: nix::libc::c_int) {
    // An atomic load and store: async-signal-safe.
    if let Some(f) = FLAG.get() {
        f.store(true, Ordering::Relaxed);
    }
}

/// Installs the handlers for SIGINT and SIGTERM; returns the flag they
/// raise. Interrupted system calls restart (`SA_RESTART`): the flag is
/// what stops the run.
#[allow(unsafe_code)]
pub(crate) fn install() -> Arc<AtomicBool> {
    let flag = FLAG
        .get_or_init(|| Arc::new(AtomicBool::new(false)))
        .clone();
    let action = SigAction::new(
        SigHandler::Handler(raise_flag),
        SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    for sig in [Signal::SIGINT, Signal::SIGTERM] {
        // SAFETY: the handler does nothing but an atomic store to a flag
        // that exists before it is installed.
        let _ = unsafe { sigaction(sig, &action) };
    }
    flag
}

/// e2fsck's words for a cancelled run with exit code `code` (32, with 4
/// when the filesystem still has errors: then its warning too). No
/// summary line follows, as none follows e2fsck's.
pub(crate) fn report(dev: &str, code: u8) -> u8 {
    println!("{dev}: fsck.ext4r canceled.");
    if code & 4 != 0 {
        println!("\n{dev}: ********** WARNING: Filesystem still has errors **********\n");
    }
    code
}
