//! Errors of setting corrald up before it serves: its socket, its token,
//! its listener. Each says what failed and on which path.

/// corrald could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// A file-system or socket operation failed.
    #[error("{what}")]
    Io {
        /// What was being done, on which path.
        what: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The set-up is refused as it stands (the message says how to fix it).
    #[error("{0}")]
    Refused(String),
}

/// Names what an I/O result was doing when it failed.
pub(crate) trait IoContext<T> {
    /// `Err` becomes [`SetupError::Io`] with `what()`.
    fn ctx(self, what: impl FnOnce() -> String) -> Result<T, SetupError>;
}

impl<T> IoContext<T> for Result<T, std::io::Error> {
    fn ctx(self, what: impl FnOnce() -> String) -> Result<T, SetupError> {
        self.map_err(|source| SetupError::Io {
            what: what(),
            source,
        })
    }
}
