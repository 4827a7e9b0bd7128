//! `corral man` (hidden): man pages in roff, generated from the clap grammar
//! so they can never disagree with `--help`. Packagers run
//! `corral man --out-dir DIR` for one page per command (`corral-host-apply.1`,
//! …, as git does); plain `corral man` prints `corral.1`.

use anyhow::Context as _;
use clap::CommandFactory;

use crate::args::{Cli, ManArgs};
use crate::error::{CmdResult, Outcome};
use crate::output::Output;

/// The top-level page, `corral.1`.
pub fn render_main() -> std::io::Result<String> {
    let mut buf = Vec::new();
    clap_mangen::Man::new(Cli::command()).render(&mut buf)?;
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

/// Print `corral.1`, or write every page into `--out-dir`.
pub fn run(args: &ManArgs, out: Output) -> CmdResult {
    match &args.out_dir {
        None => out.data(&render_main().context("rendering the man page")?),
        Some(dir) => {
            clap_mangen::generate_to(Cli::command(), dir)
                .with_context(|| format!("writing man pages into {}", dir.display()))?;
            out.info(&format!("wrote man pages into {}", dir.display()));
        }
    }
    Ok(Outcome::Ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn main_page_renders_and_lists_commands() {
        let page = render_main().unwrap();
        assert!(
            page.contains(".TH corral 1"),
            "{}",
            &page[..page.len().min(300)]
        );
        for needle in [
            "corral\\-host(1)",
            "corral\\-drill(1)",
            "corral\\-completions(1)",
            // `man` is listed in help since it stopped being hidden.
            "corral\\-man(1)",
            "corral\\-templates(1)",
        ] {
            assert!(page.contains(needle), "main page lacks {needle}:\n{page}");
        }
    }

    #[test]
    fn one_page_per_command() {
        let dir = tempfile::tempdir().unwrap();
        clap_mangen::generate_to(Cli::command(), dir.path()).unwrap();
        for name in [
            "corral.1",
            "corral-host-apply.1",
            "corral-host-verify.1",
            "corral-drill.1",
            "corral-config-import.1",
        ] {
            let page = std::fs::read_to_string(dir.path().join(name))
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(page.contains(".SH NAME"), "{name}");
        }
        let apply = std::fs::read_to_string(dir.path().join("corral-host-apply.1")).unwrap();
        assert!(
            apply.contains("\\-\\-dry\\-run") && apply.contains("\\-\\-netns"),
            "{apply}"
        );
    }
}
