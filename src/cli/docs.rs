//! What the command line says about itself, for installers: shell completion scripts
//! (clap_complete) and man pages (clap_mangen), both generated from the one definition in
//! `mod.rs`, so they never disagree with `--help`. `make install` writes them.

use std::path::{Path, PathBuf};

use clap::CommandFactory;

use super::Cli;

/// The completion script for `shell`. (Generated into memory: clap_complete panics when its
/// writer fails, and stdout may be a closed pipe.)
pub fn completions(shell: clap_complete::Shell) -> Vec<u8> {
    let mut command = Cli::command();
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut command, "ofnode", &mut script);
    script
}

/// Writes `ofnode.1` and one page per subcommand (`ofnode-pod-add.1`, …) into `dir`, creating
/// it when missing; returns the pages written.
pub fn manpages(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut command = Cli::command().disable_help_subcommand(true);
    // Building sets each subcommand's display name (`ofnode-pod-add`), which names its page.
    command.build();
    let mut written = Vec::new();
    write_pages(command, dir, &mut written)?;
    Ok(written)
}

fn write_pages(
    command: clap::Command,
    dir: &Path,
    written: &mut Vec<PathBuf>,
) -> std::io::Result<()> {
    for sub in command.get_subcommands().filter(|s| !s.is_hide_set()) {
        write_pages(sub.clone(), dir, written)?;
    }
    let page = clap_mangen::Man::new(command).source(concat!("ofnode ", env!("CARGO_PKG_VERSION")));
    written.push(page.generate_to(dir)?);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completions_name_every_subcommand_for_each_shell() {
        for shell in [
            clap_complete::Shell::Bash,
            clap_complete::Shell::Zsh,
            clap_complete::Shell::Fish,
        ] {
            let text = String::from_utf8(completions(shell)).unwrap();
            for word in ["trace", "hostsubnet", "dump-flows", "api", "check-config"] {
                assert!(text.contains(word), "{shell}: no {word}");
            }
        }
    }

    #[test]
    fn a_man_page_per_command_each_with_its_options() {
        let dir = tempfile::tempdir().unwrap();
        let pages = manpages(&dir.path().join("man1")).unwrap();
        let names: Vec<String> = pages
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        for name in [
            "ofnode.1",
            "ofnode-run.1",
            "ofnode-pod-add.1",
            "ofnode-trace.1",
        ] {
            assert!(names.iter().any(|n| n == name), "{name} in {names:?}");
        }
        assert!(!names.iter().any(|n| n.contains("help")), "{names:?}");
        let trace = std::fs::read_to_string(dir.path().join("man1/ofnode-trace.1")).unwrap();
        assert!(trace.contains(".TH ofnode-trace 1"), "roff: {trace:.200}");
        assert!(
            trace.contains(concat!("ofnode ", env!("CARGO_PKG_VERSION"))),
            "{trace:.200}"
        );
        assert!(trace.contains("dport"), "{trace}");
    }
}
