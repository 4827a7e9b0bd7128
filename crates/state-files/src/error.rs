//! What can go wrong with the state directory.

use std::io;
use std::path::PathBuf;

/// A state file or directory could not be trusted, read or written.
#[derive(Debug, thiserror::Error)]
pub enum StateFileError {
    /// The directory (or a file in it, or one of its parents) could be
    /// changed by someone other than corral, so corral will not use it.
    #[error("refusing {}: {problem}; {fix}", path.display())]
    Untrusted {
        /// The directory or file at fault.
        path: PathBuf,
        /// What is wrong: its owner, mode or type.
        problem: String,
        /// How to make it acceptable.
        fix: String,
    },
    /// A name inside the state directory is not a single plain component.
    #[error(
        "`{}` cannot name a file in the state directory: expected one path component, not `.`, `..`, empty, or holding `/` or NUL",
        name.escape_debug()
    )]
    BadName {
        /// The refused name.
        name: String,
    },
    /// Other users cannot enter a parent of a directory a daemon that
    /// dropped root must reach, and corral will not change it.
    #[error(
        "{} cannot be entered by other users ({problem}), so a daemon that drops root cannot reach {}; run `chmod o+x {}` (others may then enter it, never list or write it) or choose a state directory whose parents others may enter",
        path.display(), below.display(), path.display()
    )]
    Unsearchable {
        /// The parent others cannot enter.
        path: PathBuf,
        /// The directory below it that must be reached.
        below: PathBuf,
        /// Its owner and mode.
        problem: String,
    },
    /// A file operation failed.
    #[error("cannot {op} {}: {source}", path.display())]
    Io {
        /// What was attempted.
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
}

impl StateFileError {
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>) -> impl FnOnce(io::Error) -> Self {
        let path = path.into();
        move |source| Self::Io { op, path, source }
    }
}
