//! `corral completions <shell>`: a completion script generated from the clap grammar.

use clap::CommandFactory;

use crate::args::{Cli, CompletionsArgs};

/// Print the completion script for the requested shell on stdout.
pub fn run(args: &CompletionsArgs) {
    let mut command = Cli::command();
    clap_complete::generate(args.shell, &mut command, "corral", &mut std::io::stdout());
}

#[cfg(test)]
mod tests {
    use clap_complete::Shell;

    use super::*;

    #[test]
    fn every_shell_gets_a_script_naming_the_subcommands() {
        for shell in [
            Shell::Bash,
            Shell::Zsh,
            Shell::Fish,
            Shell::Elvish,
            Shell::PowerShell,
        ] {
            let mut buf = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "corral", &mut buf);
            let text = String::from_utf8(buf).unwrap();
            assert!(text.contains("drill"), "{shell}: {text}");
            assert!(text.contains("teardown"), "{shell}");
        }
    }
}
