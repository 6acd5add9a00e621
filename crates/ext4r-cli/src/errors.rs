//! Error messages as e2fsprogs' com_err prints them: one message per
//! error, its causes after it, none repeated.

use std::error::Error;

/// The whole chain of `e` in one line: its message, then each cause
/// (`source()`) that adds words the message does not already hold.
/// Segments repeated back to back ("superblock: superblock: bad magic")
/// are said once, and the OS error number Rust appends to a system error
/// is dropped, so that "No such file or directory" reads as `strerror`
/// says it.
pub(crate) fn message(e: &(dyn Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let more = c.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        cause = c.source();
    }
    let mut out: Vec<&str> = Vec::new();
    for seg in text.split(": ") {
        let seg = strip_os_error(seg);
        if out.last() != Some(&seg) {
            out.push(seg);
        }
    }
    out.join(": ")
}

/// "No such file or directory (os error 2)" → "No such file or directory".
fn strip_os_error(s: &str) -> &str {
    match s.rfind(" (os error ") {
        Some(i) if s.ends_with(')') => &s[..i],
        _ => s,
    }
}

/// The system error of `e` or of its causes, if any.
pub(crate) fn os_error(e: &(dyn Error + 'static)) -> Option<i32> {
    let mut cur: Option<&(dyn Error + 'static)> = Some(e);
    while let Some(c) = cur {
        if let Some(n) = c
            .downcast_ref::<std::io::Error>()
            .and_then(std::io::Error::raw_os_error)
        {
            return Some(n);
        }
        cur = c.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("{0}: {1}")]
    struct Wrap(&'static str, #[source] Inner);

    #[derive(Debug, thiserror::Error)]
    #[error("superblock: bad magic")]
    struct Inner;

    #[test]
    fn causes_are_said_once() {
        assert_eq!(message(&Wrap("superblock", Inner)), "superblock: bad magic");
        let io = std::io::Error::from_raw_os_error(2);
        assert_eq!(message(&io), "No such file or directory");
        #[derive(Debug, thiserror::Error)]
        #[error("{0}")]
        struct Same(#[from] std::io::Error);
        let e = Same(std::io::Error::from_raw_os_error(2));
        assert_eq!(message(&e), "No such file or directory");
        assert_eq!(os_error(&e), Some(2));
    }
}
