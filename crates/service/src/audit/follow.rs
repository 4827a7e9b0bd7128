//! Reading the trail as it grows (`corral log --follow`, the events
//! stream): new complete lines since the last poll, across rotations.

use std::fs::File;
use std::io::{Read as _, Seek as _, SeekFrom};
use std::os::unix::fs::MetadataExt as _;
use std::path::PathBuf;

use super::{AuditLine, parse_line};

/// A reader at a position in the trail's current file.
#[derive(Debug)]
pub struct Follower {
    path: PathBuf,
    keep: u32,
    file: Option<(File, u64)>,
    partial: Vec<u8>,
}

impl Follower {
    /// A follower that will return only what is appended from now on.
    pub fn at_end(path: PathBuf, keep: u32) -> Self {
        let file = File::open(&path).ok().and_then(|mut f| {
            let ino = f.metadata().ok()?.ino();
            f.seek(SeekFrom::End(0)).ok()?;
            Some((f, ino))
        });
        Self {
            path,
            keep,
            file,
            partial: Vec::new(),
        }
    }

    /// Every complete line appended since the last poll, parsed (lines
    /// that do not parse are dropped). When the file was rotated, the rest
    /// of the old file is read first, then the new one from its start.
    pub fn poll(&mut self) -> Vec<AuditLine> {
        let mut bytes = Vec::new();
        if let Some((f, _)) = self.file.as_mut() {
            let _ = f.read_to_end(&mut bytes);
        }
        let current = std::fs::metadata(&self.path).ok().map(|m| m.ino());
        let held = self.file.as_ref().map(|(_, ino)| *ino);
        if current.is_some() && current != held {
            // Rotated (maybe more than once) since the last poll: the files
            // newer than the one held, oldest first, then the current one.
            let rotated = |n: u32| PathBuf::from(format!("{}.{n}", self.path.display()));
            let held_at = (1..=self.keep).find(|n| {
                held.is_some()
                    && std::fs::metadata(rotated(*n)).is_ok_and(|m| Some(m.ino()) == held)
            });
            let newer = match held_at {
                Some(n) => 1..n,
                None if held.is_some() => 1..self.keep + 1,
                None => 1..1,
            };
            for n in newer.rev() {
                if let Ok(mut f) = File::open(rotated(n)) {
                    let _ = f.read_to_end(&mut bytes);
                }
            }
            if let Ok(mut f) = File::open(&self.path) {
                let _ = f.read_to_end(&mut bytes);
                self.file = current.map(|ino| (f, ino));
            }
        }
        self.partial.extend_from_slice(&bytes);
        let Some(end) = self.partial.iter().rposition(|b| *b == b'\n') else {
            return Vec::new();
        };
        let complete: Vec<u8> = self.partial.drain(..=end).collect();
        String::from_utf8_lossy(&complete)
            .lines()
            .filter_map(parse_line)
            .collect()
    }
}
