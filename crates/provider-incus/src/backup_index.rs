//! What a backup file asks Incus to create, read before a byte is uploaded.
//!
//! Incus refuses a backup's `volatile.*` keys in a project restricted like
//! corral's, so import lifts `restricted.containers.lowlevel` during the
//! upload. Whatever the backup carries is then created unchecked: a
//! `raw.lxc` in it left an instance the restriction could no longer be put
//! back over. So the archive's instance records — `backup/index.yaml` and
//! every `backup/<type>/backup.yaml`, the instance and each snapshot — are
//! read first and held to the same allowlists as the topology check
//! (`crate::allowed`); anything else is refused and nothing is uploaded.
//! The archive is read as a stream (gzip or plain tar; corral's exports are
//! gzip), to the end, since a later duplicate entry would win on extraction.

use std::io::Read;
use std::path::Path;

use corral_sandbox_core::sandbox::ProviderError;
use yaml_serde::Value;

use crate::allowed;

/// The largest instance record read (real ones are a few KiB).
const MAX_RECORD: u64 = 4 << 20;

fn refuse(source: &Path, reason: impl Into<String>) -> ProviderError {
    ProviderError::InvalidSpec {
        field: "backup",
        reason: format!("{} cannot be imported: {}", source.display(), reason.into()),
    }
}

/// Every instance record in the archive at `source` passes the allowlists,
/// and there is at least one.
pub fn check(source: &Path) -> Result<(), ProviderError> {
    let io = |e: std::io::Error| refuse(source, format!("it cannot be read as a backup: {e}"));
    let mut file = std::fs::File::open(source).map_err(io)?;
    let mut magic = [0u8; 2];
    file.read_exact(&mut magic).map_err(io)?;
    let file = std::fs::File::open(source).map_err(io)?;
    let reader: Box<dyn Read> = if magic == [0x1f, 0x8b] {
        Box::new(flate2::read::MultiGzDecoder::new(file))
    } else {
        Box::new(file)
    };
    let mut archive = tar::Archive::new(reader);
    let mut records = 0;
    for entry in archive.entries().map_err(io)? {
        let mut entry = entry.map_err(io)?;
        let name = entry.path().map_err(io)?.to_string_lossy().into_owned();
        let name = name.trim_start_matches("./");
        let is_record = name == "backup/index.yaml"
            || (name.starts_with("backup/") && name.ends_with("/backup.yaml"));
        if !is_record {
            continue;
        }
        let mut text = String::new();
        entry
            .by_ref()
            .take(MAX_RECORD)
            .read_to_string(&mut text)
            .map_err(io)?;
        let yaml: Value = yaml_serde::from_str(&text)
            .map_err(|e| refuse(source, format!("{name} is not YAML: {e}")))?;
        let problems = record_problems(&yaml);
        if !problems.is_empty() {
            return Err(refuse(source, format!("{name}: {}", problems.join("; "))));
        }
        records += 1;
    }
    if records == 0 {
        return Err(refuse(
            source,
            "it holds no backup/index.yaml (not an Incus backup, or compressed other than gzip)",
        ));
    }
    Ok(())
}

/// Every allowlist problem of the instances and snapshots in one record.
pub fn record_problems(record: &Value) -> Vec<String> {
    let mut out = Vec::new();
    // index.yaml nests the records under `config`; backup.yaml has them at
    // the top level.
    let roots = [record, record.get("config").unwrap_or(&Value::Null)];
    for root in roots {
        for key in ["container", "instance"] {
            if let Some(inst) = root.get(key) {
                instance_problems(inst, &mut out);
            }
        }
        if let Some(Value::Sequence(snaps)) = root.get("snapshots") {
            for snap in snaps {
                instance_problems(snap, &mut out);
            }
        }
    }
    out
}

fn instance_problems(inst: &Value, out: &mut Vec<String>) {
    for field in ["config", "expanded_config"] {
        if let Some(Value::Mapping(map)) = inst.get(field) {
            for (k, v) in map {
                let (k, v) = (scalar(k), scalar(v));
                out.extend(allowed::config_problem(&k, &v));
            }
        }
    }
    for field in ["devices", "expanded_devices"] {
        if let Some(Value::Mapping(map)) = inst.get(field) {
            for (name, device) in map {
                let device: crate::api::Device = match device {
                    Value::Mapping(d) => d.iter().map(|(k, v)| (scalar(k), scalar(v))).collect(),
                    _ => Default::default(),
                };
                out.extend(allowed::device_problem(&scalar(name), &device));
            }
        }
    }
    if let Some(Value::Sequence(profiles)) = inst.get("profiles")
        && !profiles.is_empty()
    {
        out.push("profiles are attached (corral attaches none)".to_owned());
    }
}

fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::Null => String::new(),
        other => yaml_serde::to_string(other).unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const INDEX: &str = r#"
name: a
type: container
config:
  container:
    config:
      image.os: busybox
      volatile.uuid: x
    devices:
      root: {path: /, pool: default, type: disk}
    profiles: []
  snapshots:
  - config: {volatile.uuid: y}
    devices: {}
"#;

    #[test]
    fn a_corral_record_passes_and_a_raw_one_does_not() {
        let ok: Value = yaml_serde::from_str(INDEX).unwrap();
        assert_eq!(record_problems(&ok), Vec::<String>::new());
        let bad: Value =
            yaml_serde::from_str(&INDEX.replace("image.os: busybox", "raw.lxc: x")).unwrap();
        assert_eq!(record_problems(&bad).len(), 1);
        let bad: Value = yaml_serde::from_str(&INDEX.replace(
            "config: {volatile.uuid: y}",
            "config: {security.privileged: true}",
        ))
        .unwrap();
        assert_eq!(record_problems(&bad).len(), 1, "snapshots are checked too");
    }
}
