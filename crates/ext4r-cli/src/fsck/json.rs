//! `fsck.ext4r --json`: the report as one JSON object (serde_json).

use ext4r_fsck::{Report, Severity};
use serde::Serialize;

#[derive(Serialize)]
struct Json<'a> {
    device: &'a str,
    label: &'a str,
    exit_code: u8,
    clean_skip: bool,
    errors: u64,
    problems: Vec<JsonProblem<'a>>,
    problems_not_shown: u64,
    counts: Counts,
    passes: Vec<JsonPass>,
    seconds: f64,
}

#[derive(Serialize)]
struct JsonProblem<'a> {
    pass: u8,
    code: &'static str,
    error: bool,
    message: &'a str,
}

#[derive(Serialize)]
struct Counts {
    inodes_used: u64,
    inodes: u64,
    blocks_used: u64,
    blocks: u64,
    regular: u64,
    directories: u64,
    symlinks: u64,
    devices: u64,
    fifos: u64,
    sockets: u64,
}

#[derive(Serialize)]
struct JsonPass {
    name: &'static str,
    seconds: f64,
}

/// The report as JSON text.
pub(crate) fn render(dev: &str, r: &Report, code: u8, secs: f64) -> String {
    let s = &r.summary;
    let j = Json {
        device: dev,
        label: &r.label,
        exit_code: code,
        clean_skip: r.skipped_clean.is_some(),
        errors: r.problems.errors(),
        problems: r
            .problems
            .list()
            .iter()
            .map(|p| JsonProblem {
                pass: p.pass,
                code: p.code.name(),
                error: p.severity == Severity::Error,
                message: &p.message,
            })
            .collect(),
        problems_not_shown: r.problems.dropped(),
        counts: Counts {
            inodes_used: s.inodes_used,
            inodes: s.inodes_count,
            blocks_used: s.blocks_used,
            blocks: s.blocks_count,
            regular: s.regular,
            directories: s.directories,
            symlinks: s.symlinks,
            devices: s.devices,
            fifos: s.fifos,
            sockets: s.sockets,
        },
        passes: r
            .pass_times
            .iter()
            .map(|(name, t)| JsonPass {
                name,
                seconds: t.as_secs_f64(),
            })
            .collect(),
        seconds: secs,
    };
    // Serialising plain structs of strings and numbers cannot fail.
    serde_json::to_string(&j).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ext4r_fsck::{Problems, Summary};

    #[test]
    fn the_report_reads_back_with_its_words_intact() {
        let mut problems = Problems::default();
        problems
            .on(ext4r_fsck::Subject::Entry {
                dir: 2,
                lblk: 0,
                offset: 24,
            })
            .error(
                2,
                ext4r_fsck::ProblemCode::PR_2_BAD_NAME,
                "Entry 'a\"b\\c\n' in / (2) has bad name.".into(),
            );
        problems.on(ext4r_fsck::Subject::Filesystem).harmless(
            5,
            ext4r_fsck::ProblemCode::PR_5_FREE_BLOCK_COUNT,
            "Free blocks count wrong.".into(),
        );
        let r = Report {
            label: "lab\tel".into(),
            problems,
            summary: Summary {
                inodes_used: 11,
                blocks_count: 4096,
                ..Summary::default()
            },
            skipped_clean: None,
            notes: Vec::new(),
            pass_times: vec![("pass 1: inodes, blocks and sizes", Default::default())],
            fatal: None,
            fatal_journal: false,
            check_forced: None,
            cancelled: false,
            errors_flagged: false,
            rehash: Vec::new(),
            restarted: false,
        };
        let v: serde_json::Value = serde_json::from_str(&render("/dev/x", &r, 4, 0.5)).unwrap();
        assert_eq!(v["device"], "/dev/x");
        assert_eq!(v["label"], "lab\tel");
        assert_eq!(v["exit_code"], 4);
        assert_eq!(v["errors"], 1);
        assert_eq!(
            v["problems"][0]["message"],
            "Entry 'a\"b\\c\n' in / (2) has bad name."
        );
        assert_eq!(v["problems"][1]["error"], false);
        assert_eq!(v["counts"]["inodes_used"], 11);
        assert_eq!(v["counts"]["blocks"], 4096);
        assert_eq!(v["passes"][0]["name"], "pass 1: inodes, blocks and sizes");
    }
}
