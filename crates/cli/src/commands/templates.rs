//! `corral templates [NAME]`: the templates new sandboxes are made from
//! (built in, or the operator's files beside the configuration), or one of
//! them with the context file and cloud-init user-data a sandbox on a
//! profile would get — exactly what corral would hand the backend.

use corral_service::sandboxes::{ByteSize, default_profile};
use corral_service::templates::render::{Rendered, render};
use corral_service::templates::{Catalog, Template, TemplateError, TemplateSource, dir_for};
use serde::Serialize;

use crate::args::TemplatesArgs;
use crate::error::{CliError, CmdResult, Outcome};
use crate::load;
use crate::output::{Output, Style, Table, print_json};

/// `corral templates NAME --json`.
#[derive(Debug, Serialize)]
struct TemplateJson<'a> {
    schema: &'static str,
    template: &'a Template,
    profile: Option<&'a str>,
    rendered: &'a Rendered,
}

fn template_error(e: TemplateError) -> CliError {
    match e {
        TemplateError::Read { .. } => CliError::failure(e),
        other => CliError::usage(other),
    }
}

/// What a template asks for, in a few words.
/// A lifetime default as `corral new` takes it, or `none`.
fn shown_secs(secs: Option<u64>) -> String {
    secs.map_or_else(
        || "none".to_owned(),
        |s| corral_service::lifetimes::show_secs(s).to_string(),
    )
}

fn resources(t: &Template) -> String {
    if let Some(size) = t.size {
        return format!("{size:?}").to_ascii_lowercase();
    }
    let r = t.resources;
    let parts: Vec<String> = [
        r.cpus.map(|c| format!("{c} cpu")),
        r.memory_mib.map(|m| ByteSize { mib: m }.to_string()),
        r.disk_gib.map(|d| format!("{d}GiB disk")),
    ]
    .into_iter()
    .flatten()
    .collect();
    if parts.is_empty() {
        "backend default".to_owned()
    } else {
        parts.join(" ")
    }
}

fn source(t: &Template) -> String {
    match &t.source {
        TemplateSource::Builtin => "built-in".to_owned(),
        TemplateSource::File(p) => p.display().to_string(),
    }
}

/// List, or show one.
pub fn run(args: &TemplatesArgs, out: Output) -> CmdResult {
    let loaded = load::load(&args.source)?;
    let dir = dir_for(&loaded.origin);
    let catalog = Catalog::load(&dir).map_err(template_error)?;
    let Some(name) = &args.name else {
        if args.json {
            print_json(&corral_service::shapes::TemplateList::new(
                &dir,
                catalog.iter().cloned().collect(),
            ))?;
            return Ok(Outcome::Ok);
        }
        let mut t = Table::new([
            "name", "image", "user", "size", "packages", "source", "about",
        ]);
        for tpl in catalog.iter() {
            t.row([
                tpl.name.clone(),
                tpl.image.clone(),
                tpl.user.clone(),
                resources(tpl),
                if tpl.packages.is_empty() {
                    "-".to_owned()
                } else {
                    tpl.packages.len().to_string()
                },
                source(tpl),
                tpl.description.clone(),
            ]);
        }
        out.table(&t, true);
        out.info(&format!(
            "operator templates: {} (NAME.toml each; `corral templates NAME` shows one)",
            dir.display()
        ));
        return Ok(Outcome::Ok);
    };
    let template = catalog.get(name).map_err(template_error)?;
    let profile_name = match &args.profile {
        Some(p) => Some(p.clone()),
        None => default_profile(&loaded.config).ok(),
    };
    let profile = match &profile_name {
        Some(p) => Some(loaded.config.profiles.get(p).ok_or_else(|| {
            CliError::usage(anyhow::anyhow!(
                "profile `{p}` is not configured; configured profiles: {}",
                loaded.config.profiles.names().join(", ")
            ))
        })?),
        None => None,
    };
    let rendered = render(template, profile).map_err(CliError::failure)?;
    if args.json {
        print_json(&TemplateJson {
            schema: "corral.template.v1",
            template,
            profile: profile_name.as_deref(),
            rendered: &rendered,
        })?;
        return Ok(Outcome::Ok);
    }
    let rows = [
        ("name", template.name.clone()),
        ("about", template.description.clone()),
        ("image", template.image.clone()),
        ("user", template.user.clone()),
        ("size", resources(template)),
        ("packages", template.packages.join(" ")),
        ("install", template.install.join("; ")),
        ("ttl", shown_secs(template.ttl_secs)),
        ("idle_stop", shown_secs(template.idle_stop_secs)),
        ("context", template.context.path.clone()),
        ("source", source(template)),
    ];
    for (k, v) in rows {
        out.data(&format!("{k:<9} {v}"));
    }
    out.data(&format!(
        "\n{} (on profile {}):\n{}",
        out.paint(Style::Bold, "context file"),
        profile_name.as_deref().unwrap_or("none: no network"),
        rendered.context
    ));
    out.data(&format!(
        "{}:\n{}",
        out.paint(Style::Bold, "cloud-init user-data"),
        rendered.user_data
    ));
    Ok(Outcome::Ok)
}
