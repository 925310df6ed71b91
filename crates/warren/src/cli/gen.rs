//! `warren completions SHELL` and `warren man DIR`: generated from the clap
//! definitions (clap_complete, clap_mangen), so they never drift from the parser.

use std::io::Write as _;

use clap::CommandFactory;

use super::*;

pub(super) const COMPLETIONS_HELP: &str = "\
Install (as root; open a new shell afterwards):
  bash: warren completions bash > /usr/share/bash-completion/completions/warren
  zsh:  warren completions zsh > /usr/local/share/zsh/site-functions/_warren
  fish: warren completions fish > /usr/share/fish/vendor_completions.d/warren.fish";

/// Print the completion script for `shell` (bash, zsh or fish).
pub(super) fn completions(shell: &str) -> Result<()> {
    use clap_complete::Shell;
    let sh = match shell {
        "bash" => Shell::Bash,
        "zsh" => Shell::Zsh,
        "fish" => Shell::Fish,
        other => {
            return Err(Error::Invalid(format!(
                "{other:?}: completions exist for bash, zsh and fish"
            )))
        }
    };
    let mut out = Vec::new();
    clap_complete::generate(sh, &mut Cli::command(), "warren", &mut out);
    std::io::stdout()
        .write_all(&out)
        .ctx(|| "writing the completion script to stdout".into())
}

/// Write `warren.1` and one page per verb (`warren-list.1`, `warren-config-set.1`, …)
/// into `dir` (created if missing). Returns the files written.
pub(super) fn man_pages(dir: &Path) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).ctx(|| format!("creating {}", dir.display()))?;
    let mut written = Vec::new();
    let mut cmd = Cli::command();
    cmd.build();
    render(dir, &cmd, "warren", &mut written)?;
    Ok(written)
}

fn render(dir: &Path, cmd: &clap::Command, name: &str, out: &mut Vec<PathBuf>) -> Result<()> {
    let page = cmd.clone().name(name.to_string());
    let mut buf = Vec::new();
    clap_mangen::Man::new(page)
        .render(&mut buf)
        .ctx(|| format!("rendering the man page of '{name}'"))?;
    let path = dir.join(format!("{name}.1"));
    crate::fsutil::atomic_write(&path, &buf, false)
        .ctx(|| format!("writing {}", path.display()))?;
    out.push(path);
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        if sub.get_name() == "help" {
            continue;
        }
        render(dir, sub, &format!("{name}-{}", sub.get_name()), out)?;
    }
    Ok(())
}
