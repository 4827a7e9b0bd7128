//! `corral config check` and `corral config import`.

use anyhow::Context as _;
use corral_sandbox_core::config::{Config, ConfigError};
use serde::Serialize;

use crate::args::{ConfigCheckArgs, ConfigCommand, ConfigFormat, ConfigImportArgs};
use crate::error::{CliError, CmdResult, Outcome};
use crate::load;
use crate::output::{Output, Style, print_json};

/// Run a `config` subcommand.
pub fn run(cmd: ConfigCommand, out: Output) -> CmdResult {
    match cmd {
        ConfigCommand::Check(args) => check(&args, out),
        ConfigCommand::Import(args) => import(&args, out),
    }
}

/// `corral config check --json` (schema in docs/json-schema.md).
#[derive(Debug, Serialize)]
struct CheckReport {
    schema: &'static str,
    file: String,
    format: &'static str,
    valid: bool,
    profiles: Vec<String>,
    errors: Vec<ErrorView>,
}

/// One configuration problem, field by field.
#[derive(Debug, Serialize)]
struct ErrorView {
    file: String,
    line: Option<usize>,
    column: Option<usize>,
    context: Option<String>,
    field: Option<String>,
    problem: String,
    message: String,
}

impl From<&ConfigError> for ErrorView {
    fn from(e: &ConfigError) -> Self {
        Self {
            file: e.file.clone(),
            line: e.line,
            column: e.column,
            context: e.context.clone(),
            field: e.field.clone(),
            problem: e.problem.clone(),
            message: e.to_string(),
        }
    }
}

fn format_name(format: ConfigFormat) -> &'static str {
    match format {
        ConfigFormat::Toml => "toml",
        ConfigFormat::NetworksConf => "networks-conf",
    }
}

fn check(args: &ConfigCheckArgs, out: Output) -> CmdResult {
    let format = args
        .format
        .unwrap_or_else(|| load::guess_format(&args.file));
    let text = load::read(&args.file)?;
    let name = args.file.display().to_string();
    let parsed = match format {
        ConfigFormat::Toml => Config::from_toml_str(&text, &name),
        ConfigFormat::NetworksConf => Config::from_networks_conf(&text, &name),
    };
    if args.json {
        let report = CheckReport {
            schema: "corral.config-check.v1",
            file: name,
            format: format_name(format),
            valid: parsed.is_ok(),
            profiles: parsed
                .as_ref()
                .map(|c| c.profiles.names())
                .unwrap_or_default(),
            errors: parsed
                .as_ref()
                .err()
                .map(|errs| errs.iter().map(ErrorView::from).collect())
                .unwrap_or_default(),
        };
        print_json(&report)?;
        // The JSON already carries every problem; the exit code still says
        // "fix your input" so scripts need not parse to know.
        return match parsed {
            Ok(_) => Ok(Outcome::Ok),
            Err(_) => Err(CliError::usage(anyhow::anyhow!(
                "{} is invalid (details in the JSON on stdout)",
                args.file.display()
            ))),
        };
    }
    let config = parsed.map_err(CliError::usage)?;
    let names = config.profiles.names();
    out.info(&format!(
        "{} {}: valid, {} profile{} ({})",
        out.paint(Style::Good, "ok"),
        args.file.display(),
        names.len(),
        if names.len() == 1 { "" } else { "s" },
        names.join(", ")
    ));
    Ok(Outcome::Ok)
}

fn import(args: &ConfigImportArgs, out: Output) -> CmdResult {
    let loaded = load::load_file(&args.file, ConfigFormat::NetworksConf)?;
    let toml = format!(
        "# corral.toml imported from {} by `corral config import`.\n{}",
        args.file.display(),
        loaded.config.to_toml_string()
    );
    // Prove the conversion before handing it over: what we write must load
    // as the same configuration.
    let again = Config::from_toml_str(&toml, "imported corral.toml").map_err(|e| {
        CliError::failure(anyhow::Error::new(e).context(
            "the imported corral.toml does not parse back; this is a corral bug, please report it",
        ))
    })?;
    if again != loaded.config {
        return Err(CliError::failure(anyhow::anyhow!(
            "the imported corral.toml parses to a different configuration; this is a corral bug, please report it"
        )));
    }
    match &args.output {
        None => out.data(&toml),
        Some(path) => {
            std::fs::write(path, &toml)
                .with_context(|| format!("cannot write {}", path.display()))?;
            out.info(&format!(
                "wrote {} ({} profiles) from {}",
                path.display(),
                loaded.config.profiles.len(),
                args.file.display()
            ));
        }
    }
    Ok(Outcome::Ok)
}
