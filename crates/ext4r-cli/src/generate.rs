//! `ext4r --generate man|completions DIR`, `ext4r --generate links`: the
//! man pages (clap_mangen) and shell completions (clap_complete) from the
//! tools' clap definitions, and the names to link to the binary. `cargo
//! xtask install` runs these.

use std::ffi::OsString;
use std::path::Path;
use std::process::ExitCode;

use clap_complete::Shell;

use crate::{usage, TOOLS};

/// Man page section: 8 for the administration tools (as mke2fs(8)), 1
/// for the image readers.
fn section(linked: bool) -> &'static str {
    if linked {
        "8"
    } else {
        "1"
    }
}

/// The `ext4r` command with every tool as a subcommand.
fn multicall() -> clap::Command {
    let mut cmd = clap::Command::new("ext4r")
        .version(env!("CARGO_PKG_VERSION"))
        .about("ext2/ext3/ext4 tools: one binary, named by the tool it runs")
        .long_about(usage());
    for t in TOOLS {
        cmd = cmd.subcommand((t.command)().name(t.sub).about(t.what));
    }
    cmd
}

/// Each page: (file name, rendered command).
fn pages() -> Vec<(String, clap::Command)> {
    let mut v = vec![("ext4r.1".to_string(), multicall())];
    for t in TOOLS {
        let (name, cmd) = match t.link {
            Some(link) => (link.to_string(), (t.command)().name(link)),
            None => {
                let name = format!("ext4r-{}", t.sub);
                (
                    name.clone(),
                    (t.command)()
                        .name(name)
                        .bin_name(format!("ext4r {}", t.sub)),
                )
            }
        };
        let sec = section(t.link.is_some());
        v.push((format!("{name}.{sec}"), synopsis(cmd.display_name(name))));
    }
    v
}

/// The SYNOPSIS from the usage line `--help` prints ("mkfs.ext4r
/// [OPTIONS] [DEVICE] [SIZE]"): clap_mangen 0.3 lists a short-only option
/// there without its value ("[-b ]"), which reads as a flag; the OPTIONS
/// section that follows names every value.
fn synopsis(mut cmd: clap::Command) -> clap::Command {
    if cmd.get_overridden_usage().is_some() {
        return cmd;
    }
    let usage = cmd.render_usage().to_string();
    let usage = usage.trim_start_matches("Usage:").trim().to_string();
    cmd.override_usage(usage)
}

fn write_man(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    for (file, cmd) in pages() {
        let sec = file.rsplit('.').next().unwrap_or("1").to_string();
        let mut buf = Vec::new();
        clap_mangen::Man::new(cmd)
            .section(sec)
            .source(format!("ext4r {}", env!("CARGO_PKG_VERSION")))
            .manual("ext4r")
            .render(&mut buf)?;
        std::fs::write(dir.join(&file), buf)?;
    }
    Ok(())
}

/// Completions for bash, zsh and fish under `dir/bash`, `dir/zsh`,
/// `dir/fish`: one file per command name (bash-completion loads a
/// command's file by its name).
fn write_completions(dir: &Path) -> std::io::Result<()> {
    for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
        let sub = dir.join(shell.to_string());
        std::fs::create_dir_all(&sub)?;
        let mut names: Vec<(String, clap::Command)> = vec![("ext4r".into(), multicall())];
        for t in TOOLS {
            if let Some(link) = t.link {
                names.push((link.into(), (t.command)().name(link)));
            }
        }
        for (name, mut cmd) in names {
            let file = match shell {
                Shell::Zsh => format!("_{name}"),
                Shell::Fish => format!("{name}.fish"),
                _ => name.clone(),
            };
            let mut buf = Vec::new();
            clap_complete::generate(shell, &mut cmd, &name, &mut buf);
            std::fs::write(sub.join(file), buf)?;
        }
    }
    Ok(())
}

pub(crate) fn main(args: &[OsString]) -> ExitCode {
    let what = args.first().map(|a| a.to_string_lossy().into_owned());
    let dir = args.get(1).map(Path::new);
    let result = match (what.as_deref(), dir) {
        (Some("links"), None) => {
            for t in TOOLS {
                if let Some(l) = t.link {
                    println!("{l}");
                }
            }
            Ok(())
        }
        (Some("man"), Some(d)) => write_man(d),
        (Some("completions"), Some(d)) => write_completions(d),
        _ => {
            eprintln!("usage: ext4r --generate man DIR | completions DIR | links");
            return ExitCode::from(16);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ext4r: {}", crate::errors::message(&e));
            ExitCode::from(8)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_has_a_page_and_valid_command_line() {
        let pages = pages();
        for t in TOOLS {
            (t.command)().debug_assert();
            let want = match t.link {
                Some(l) => format!("{l}.8"),
                None => format!("ext4r-{}.1", t.sub),
            };
            assert!(pages.iter().any(|(f, _)| *f == want), "{want}");
        }
        multicall().debug_assert();
    }

    /// Bash completes -t with the filesystem types and -T with the usage
    /// types, as mkfs.ext4r and as `ext4r mkfs` (not with file names).
    #[test]
    fn mkfs_types_complete() {
        for (name, mut cmd, section) in [
            (
                "mkfs.ext4r",
                crate::mkfs::command().name("mkfs.ext4r"),
                "mkfs.ext4r)",
            ),
            ("ext4r", multicall(), "ext4r__subcmd__mkfs)"),
        ] {
            let mut buf = Vec::new();
            clap_complete::generate(Shell::Bash, &mut cmd, name, &mut buf);
            let all = String::from_utf8_lossy(&buf);
            // The options of mkfs: from its case on.
            let text = all
                .split_once(&format!("\n        {section}"))
                .map_or("", |(_, t)| t);
            for (flag, words) in [
                ("-t)", "\"ext2 ext3 ext4\""),
                (
                    "-T)",
                    "\"small floppy big huge news largefile largefile4 hurd\"",
                ),
            ] {
                let at = text
                    .find(flag)
                    .unwrap_or_else(|| panic!("{name}: no {flag}"));
                let case = text[at..].split(";;").next().unwrap_or("");
                assert!(
                    case.contains(&format!("compgen -W {words}")),
                    "{name} {flag}: {case}"
                );
            }
        }
    }
}
