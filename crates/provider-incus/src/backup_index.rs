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
//! The archive is read as a stream from its own bytes (gzip or plain tar;
//! corral's exports are gzip), to the end, since a later duplicate entry
//! would win on extraction. Incus follows what the archive holds on
//! extraction: a record that is a symlink made it read (and quote back in
//! its error) a file of the host's, and a record that is a link passed this
//! check as an empty one. So every record must be a regular file, every
//! directory on the way to one a directory, no entry's path may climb out
//! (`..`), and a record's YAML must be one that corral and Go's parser read
//! alike (`crate::yaml_strict`: no anchors, aliases, merge keys or tags).

use std::io::Read;
use std::path::{Component, Path};

use corral_sandbox_core::sandbox::ProviderError;
use tar::EntryType;
use yaml_serde::Value;

use crate::{allowed, yaml_strict};

/// The largest instance record read (real ones are a few KiB).
const MAX_RECORD: u64 = 4 << 20;

/// The record every Incus backup holds.
const INDEX: &str = "backup/index.yaml";

fn refuse(source: &Path, reason: impl Into<String>) -> ProviderError {
    ProviderError::InvalidSpec {
        field: "backup",
        reason: format!("{} cannot be imported: {}", source.display(), reason.into()),
    }
}

/// How an archive's first bytes say it is packed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Packing {
    Gzip,
    Tar,
    /// A compression Incus reads and corral does not.
    Other(&'static str),
    Unknown,
}

fn packing(head: &[u8]) -> Packing {
    const OTHERS: [(&[u8], &str); 4] = [
        (&[0xfd, b'7', b'z', b'X', b'Z', 0], "xz"),
        (&[0x28, 0xb5, 0x2f, 0xfd], "zstd"),
        (b"BZh", "bzip2"),
        (&[0x5d, 0, 0], "lzma"),
    ];
    if head.starts_with(&[0x1f, 0x8b]) {
        return Packing::Gzip;
    }
    if let Some((_, name)) = OTHERS.iter().find(|(magic, _)| head.starts_with(magic)) {
        return Packing::Other(name);
    }
    // POSIX and GNU tar headers both carry `ustar` at offset 257.
    if head.get(257..262) == Some(b"ustar") {
        return Packing::Tar;
    }
    Packing::Unknown
}

/// Every instance record in the archive at `source` passes the allowlists,
/// and there is at least `backup/index.yaml`.
pub fn check(source: &Path) -> Result<(), ProviderError> {
    let io = |e: std::io::Error| refuse(source, format!("it cannot be read as a backup: {e}"));
    let mut file = std::fs::File::open(source).map_err(io)?;
    let mut head = Vec::with_capacity(512);
    file.by_ref().take(512).read_to_end(&mut head).map_err(io)?;
    let file = std::fs::File::open(source).map_err(io)?;
    match packing(&head) {
        Packing::Gzip => check_archive(source, flate2::read::MultiGzDecoder::new(file)),
        Packing::Tar => check_archive(source, file),
        Packing::Other(name) => Err(refuse(
            source,
            format!(
                "it is compressed with {name}, which corral does not read; corral checks gzip (what its exports are) or plain tar archives: recompress it with gzip"
            ),
        )),
        Packing::Unknown => Err(refuse(
            source,
            "it is not a tar archive (gzip-compressed or plain), so not an Incus backup",
        )),
    }
}

/// What the entry at `parts` must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    /// An instance record corral reads and Incus trusts.
    Record,
    /// A directory on the way to a record (`backup`, `backup/container`,
    /// `backup/snapshots/<name>`), or an instance's root file system (a
    /// link there would make a host directory the guest's root).
    Layout,
    /// Anything else (the instance's own files, links included).
    Content,
}

fn role(parts: &[String]) -> Role {
    let p: Vec<&str> = parts.iter().map(String::as_str).collect();
    match p.as_slice() {
        ["backup", "index.yaml"]
        | ["backup", _, "backup.yaml"]
        | ["backup", "snapshots", _, "backup.yaml"] => Role::Record,
        ["backup"]
        | ["backup", _]
        | ["backup", "snapshots", _]
        | ["backup", _, "rootfs"]
        | ["backup", "snapshots", _, "rootfs"] => Role::Layout,
        _ => Role::Content,
    }
}

fn kind_name(kind: EntryType) -> &'static str {
    match kind {
        EntryType::Symlink => "a symlink",
        EntryType::Link => "a hard link",
        EntryType::Char => "a character device",
        EntryType::Block => "a block device",
        EntryType::Fifo => "a fifo",
        EntryType::Directory => "a directory",
        EntryType::Regular | EntryType::Continuous => "a regular file",
        EntryType::GNUSparse => "a sparse file",
        _ => "an entry of an unusual type",
    }
}

/// [`check`] on an archive already decompressed.
fn check_archive(source: &Path, reader: impl Read) -> Result<(), ProviderError> {
    let io = |e: std::io::Error| refuse(source, format!("it cannot be read as a backup: {e}"));
    let mut archive = tar::Archive::new(reader);
    let mut index = false;
    for entry in archive.entries().map_err(io)? {
        let mut entry = entry.map_err(io)?;
        let raw = entry.path().map_err(io)?.into_owned();
        let shown = raw.display().to_string();
        let mut parts = Vec::new();
        for c in raw.components() {
            match c {
                Component::Normal(p) => parts.push(p.to_string_lossy().into_owned()),
                // Extraction drops a leading `/` and `.`: so does the check.
                Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
                Component::ParentDir => {
                    return Err(refuse(
                        source,
                        format!("entry {shown} climbs out of the archive with `..`"),
                    ));
                }
            }
        }
        let kind = entry.header().entry_type();
        let name = parts.join("/");
        match role(&parts) {
            Role::Content => continue,
            Role::Layout => {
                if kind.is_dir() || kind.is_file() {
                    continue;
                }
                return Err(refuse(
                    source,
                    format!(
                        "entry {shown} is {} where a backup has a directory (a link there would redirect the records below it)",
                        kind_name(kind)
                    ),
                ));
            }
            Role::Record => {}
        }
        if !kind.is_file() {
            return Err(refuse(
                source,
                format!(
                    "entry {shown} is {} where a backup has its record {name}, which must be a regular file",
                    kind_name(kind)
                ),
            ));
        }
        let size = entry.header().size().map_err(io)?;
        if size > MAX_RECORD {
            return Err(refuse(
                source,
                format!("record {name} is {size} bytes; a backup record is at most {MAX_RECORD}"),
            ));
        }
        let mut bytes = Vec::new();
        entry
            .by_ref()
            .take(MAX_RECORD)
            .read_to_end(&mut bytes)
            .map_err(io)?;
        let text = String::from_utf8(bytes)
            .map_err(|_| refuse(source, format!("record {name} is not UTF-8 text")))?;
        let yaml: Value = yaml_serde::from_str(&text)
            .map_err(|e| refuse(source, format!("record {name} is not YAML: {e}")))?;
        if yaml.is_null() {
            return Err(refuse(source, format!("record {name} is empty")));
        }
        match yaml_strict::first_indirection(&text) {
            Ok(None) => {}
            Ok(Some(found)) => {
                return Err(refuse(
                    source,
                    format!(
                        "record {name}, {found}: corral refuses anchors, aliases, merge keys and tags in a backup record (Incus writes none, and they could make corral and Incus read different settings)"
                    ),
                ));
            }
            Err(e) => return Err(refuse(source, format!("record {name}: {e}"))),
        }
        let problems = record_problems(&yaml);
        if !problems.is_empty() {
            return Err(refuse(
                source,
                format!("record {name}: {}", problems.join("; ")),
            ));
        }
        index |= name == INDEX;
    }
    if !index {
        return Err(refuse(
            source,
            format!("it holds no {INDEX} (not an Incus backup)"),
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

    fn tar_with(entries: &[(&str, EntryType, &[u8], Option<&str>)]) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        for (path, kind, data, link) in entries {
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(*kind);
            h.set_mode(0o644);
            h.set_size(data.len() as u64);
            if let Some(l) = link {
                h.set_link_name(l).unwrap();
            }
            // `append_data` would refuse a `..` path; the header is written raw.
            let name = path.as_bytes();
            h.as_old_mut().name[..name.len()].copy_from_slice(name);
            h.set_cksum();
            b.append(&h, *data).unwrap();
        }
        b.into_inner().unwrap()
    }

    fn verdict(entries: &[(&str, EntryType, &[u8], Option<&str>)]) -> Result<(), String> {
        let bytes = tar_with(entries);
        check_archive(Path::new("b.tar"), &bytes[..]).map_err(|e| e.to_string())
    }

    const GOOD: &[u8] = b"name: a\nconfig:\n  container:\n    config: {image.os: busybox}\n";

    #[test]
    fn a_plain_backup_passes_and_its_control_holds() {
        let dir = EntryType::Directory;
        let file = EntryType::Regular;
        verdict(&[
            ("backup/", dir, b"", None),
            ("backup/index.yaml", file, GOOD, None),
            ("backup/container/", dir, b"", None),
            ("backup/container/backup.yaml", file, GOOD, None),
            ("backup/container/rootfs/", dir, b"", None),
            // A guest's own links are its business.
            (
                "backup/container/rootfs/bin/sh",
                EntryType::Symlink,
                b"",
                Some("busybox"),
            ),
            (
                "backup/container/rootfs/etc/backup.yaml",
                EntryType::Symlink,
                b"",
                Some("/x"),
            ),
        ])
        .unwrap();
        let e = verdict(&[("backup/container/backup.yaml", file, GOOD, None)]).unwrap_err();
        assert!(e.contains("holds no backup/index.yaml"), "{e}");
    }

    #[test]
    fn a_record_that_is_not_a_regular_file_is_refused_naming_it() {
        for (kind, said) in [
            (EntryType::Symlink, "a symlink"),
            (EntryType::Link, "a hard link"),
            (EntryType::Fifo, "a fifo"),
            (EntryType::Char, "a character device"),
            (EntryType::Directory, "a directory"),
        ] {
            let e = verdict(&[
                ("backup/index.yaml", EntryType::Regular, GOOD, None),
                (
                    "backup/container/backup.yaml",
                    kind,
                    b"",
                    Some("/root/secret"),
                ),
            ])
            .unwrap_err();
            assert!(
                e.contains(&format!("entry backup/container/backup.yaml is {said}")),
                "{e}"
            );
            // The index itself, too, and under `./`.
            let e =
                verdict(&[("./backup/index.yaml", kind, b"", Some("/root/secret"))]).unwrap_err();
            assert!(e.contains(said), "{e}");
        }
    }

    #[test]
    fn a_link_on_the_way_to_a_record_or_as_a_root_file_system_is_refused() {
        for path in [
            "backup",
            "backup/container",
            "backup/container/rootfs",
            "backup/snapshots/s0",
        ] {
            let e = verdict(&[
                ("backup/index.yaml", EntryType::Regular, GOOD, None),
                (path, EntryType::Symlink, b"", Some("/root")),
            ])
            .unwrap_err();
            assert!(e.contains(&format!("entry {path} is a symlink")), "{e}");
        }
    }

    #[test]
    fn a_path_that_climbs_out_is_refused() {
        let e = verdict(&[
            ("backup/index.yaml", EntryType::Regular, GOOD, None),
            ("backup/../../etc/x", EntryType::Regular, b"x", None),
        ])
        .unwrap_err();
        assert!(e.contains("climbs out"), "{e}");
    }

    #[test]
    fn merge_keys_anchors_and_empty_records_are_refused() {
        // Go's parser merges the instance in; yaml_serde keeps a `<<` entry.
        let merged = b"name: a\nconfig:\n  <<: {container: {config: {raw.lxc: x}}}\n";
        // Control: the allowlist alone, on the parsed value, sees nothing.
        let v: Value = yaml_serde::from_str(std::str::from_utf8(merged).unwrap()).unwrap();
        assert_eq!(record_problems(&v), Vec::<String>::new());
        let e = verdict(&[("backup/index.yaml", EntryType::Regular, merged, None)]).unwrap_err();
        assert!(
            e.contains("record backup/index.yaml, line 3: a merge key"),
            "{e}"
        );
        let anchored = b"name: a\nx: &c {raw.lxc: x}\nconfig:\n  container:\n    config: *c\n";
        let e = verdict(&[("backup/index.yaml", EntryType::Regular, anchored, None)]).unwrap_err();
        assert!(e.contains("an anchor"), "{e}");
        let e = verdict(&[("backup/index.yaml", EntryType::Regular, b"", None)]).unwrap_err();
        assert!(e.contains("record backup/index.yaml is empty"), "{e}");
    }

    #[test]
    fn the_packing_is_read_from_the_first_bytes() {
        assert_eq!(packing(&[0x1f, 0x8b, 8]), Packing::Gzip);
        assert_eq!(
            packing(&[0xfd, b'7', b'z', b'X', b'Z', 0, 1]),
            Packing::Other("xz")
        );
        assert_eq!(packing(&[0x28, 0xb5, 0x2f, 0xfd]), Packing::Other("zstd"));
        assert_eq!(
            packing(&tar_with(&[("a", EntryType::Regular, b"", None)])),
            Packing::Tar
        );
        assert_eq!(packing(b"hello"), Packing::Unknown);
    }

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
