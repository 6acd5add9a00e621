//! PROBLEMS.md stays true: its codes are exactly e2fsck's list
//! (`e2fsck-problems.txt`), every problem code the source raises is
//! marked handled there, every code marked handled is raised somewhere,
//! ext4r's own codes are listed, and the counts it states add up.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const STATUSES: [&str; 4] = ["handled", "different", "not yet", "n/a"];

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// e2fsck's codes, in the list's order.
fn listed() -> Vec<String> {
    read(&crate_dir().join("e2fsck-problems.txt"))
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

/// The table's rows: code -> (status, note); and the own codes listed.
fn table() -> (Vec<(String, String, String)>, BTreeSet<String>, String) {
    let text = read(&crate_dir().join("PROBLEMS.md"));
    let mut rows = Vec::new();
    let mut own = BTreeSet::new();
    for l in text.lines() {
        let cells: Vec<&str> = l.split('|').map(str::trim).collect();
        if cells.len() < 3 {
            continue;
        }
        if cells[1].starts_with("PR_") {
            rows.push((
                cells[1].to_string(),
                cells[2].to_string(),
                cells.get(3).unwrap_or(&"").to_string(),
            ));
        } else if cells[1].starts_with("EXT4R_") {
            own.insert(cells[1].to_string());
        }
    }
    (rows, own, text)
}

/// Problem codes the crate's sources name (`ProblemCode::PR_…`) (their test
/// modules, at the end of a file, left out), with the files.
fn raised() -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut stack = vec![crate_dir().join("src")];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            // codes.rs looks up e2fsck's flags by code (a bitmap
            // difference's question takes the _END code's): it raises
            // nothing.
            if p.extension().is_none_or(|x| x != "rs") || p.ends_with("codes.rs") {
                continue;
            }
            let text = read(&p);
            let text = text.split("#[cfg(test)]").next().unwrap_or("");
            for piece in text.split("ProblemCode::").skip(1) {
                let code: String = piece
                    .chars()
                    .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                    .collect();
                if code.starts_with("PR_") || code.starts_with("EXT4R_") {
                    out.entry(code).or_default().insert(p.display().to_string());
                }
            }
        }
    }
    out
}

#[test]
fn the_table_lists_exactly_e2fscks_codes() {
    let list = listed();
    let (rows, _, _) = table();
    let codes: Vec<&String> = rows.iter().map(|r| &r.0).collect();
    let unique: BTreeSet<&String> = codes.iter().copied().collect();
    assert_eq!(
        unique.len(),
        codes.len(),
        "a code appears twice in PROBLEMS.md"
    );
    let want: BTreeSet<&String> = list.iter().collect();
    let missing: Vec<_> = want.difference(&unique).collect();
    let extra: Vec<_> = unique.difference(&want).collect();
    assert!(
        missing.is_empty(),
        "codes missing from PROBLEMS.md: {missing:?}"
    );
    assert!(
        extra.is_empty(),
        "PROBLEMS.md codes not in e2fsck's list: {extra:?}"
    );
    for (c, s, _) in &rows {
        assert!(STATUSES.contains(&s.as_str()), "{c}: unknown status {s:?}");
    }
}

#[test]
fn what_the_source_raises_is_handled_and_the_reverse() {
    let list: BTreeSet<String> = listed().into_iter().collect();
    let (rows, own, _) = table();
    let status: BTreeMap<&str, &str> = rows.iter().map(|r| (r.0.as_str(), r.1.as_str())).collect();
    let raised = raised();
    for (code, files) in &raised {
        if code.starts_with("EXT4R_") {
            assert!(
                own.contains(code),
                "{code} ({files:?}) is not listed among ext4r's own"
            );
            continue;
        }
        assert!(
            list.contains(code),
            "{code} ({files:?}) is not one of e2fsck's codes"
        );
        assert_eq!(
            status.get(code.as_str()).copied(),
            Some("handled"),
            "{code} is raised in {files:?} but PROBLEMS.md does not say handled"
        );
    }
    for (code, s, _) in &rows {
        if s == "handled" {
            assert!(
                raised.contains_key(code),
                "{code} is marked handled but nothing raises it"
            );
        }
    }
    for code in &own {
        assert!(
            raised.contains_key(code),
            "{code} is listed but nothing raises it"
        );
    }
}

#[test]
fn ext4rs_own_list_is_the_tables() {
    let (_, own, _) = table();
    let listed: BTreeSet<String> = read(&crate_dir().join("ext4r-problems.txt"))
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect();
    assert_eq!(
        listed, own,
        "ext4r-problems.txt and PROBLEMS.md's own codes"
    );
}

#[test]
fn the_stated_counts_add_up() {
    let (rows, _, text) = table();
    let count = |s: &str| rows.iter().filter(|r| r.1 == s).count();
    let applicable = rows.len() - count("n/a");
    let handled = count("handled");
    let line = format!("Applicable codes: {applicable}; handled: {handled} (");
    assert!(text.contains(&line), "PROBLEMS.md should state: {line}...");
    println!(
        "e2fsck codes: {}, applicable {applicable}, handled {handled} ({:.1}%)",
        rows.len(),
        100.0 * handled as f64 / applicable as f64
    );
}
