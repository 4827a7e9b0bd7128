//! Where a streamed command's standard input comes from and its output
//! goes, as two small traits the caller implements (a terminal, a pipe, a
//! buffer, an HTTP body). Nothing here performs I/O itself.

use std::fmt;
use std::io;

use async_trait::async_trait;

/// A source of bytes: the command's standard input.
#[async_trait]
pub trait ByteSource: Send {
    /// The next chunk; `None` at end of input.
    async fn read(&mut self) -> io::Result<Option<Vec<u8>>>;
}

/// A sink of bytes: the command's standard output or error.
#[async_trait]
pub trait ByteSink: Send {
    /// Deliver one chunk, in order.
    async fn write(&mut self, bytes: &[u8]) -> io::Result<()>;
}

/// The three streams of a command run with [`super::Sandbox::exec_streamed`].
pub struct ExecStreams {
    /// Standard input; `None` gives the command an empty one.
    pub stdin: Option<Box<dyn ByteSource>>,
    /// Standard output.
    pub stdout: Box<dyn ByteSink>,
    /// Standard error.
    pub stderr: Box<dyn ByteSink>,
}

impl fmt::Debug for ExecStreams {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExecStreams")
            .field("stdin", &self.stdin.is_some())
            .finish_non_exhaustive()
    }
}

/// A source that yields one buffer, then end of input.
#[derive(Debug, Default)]
pub struct BufferSource(Option<Vec<u8>>);

impl BufferSource {
    /// A source holding `bytes`.
    pub fn new(bytes: Vec<u8>) -> Self {
        Self(Some(bytes))
    }
}

#[async_trait]
impl ByteSource for BufferSource {
    async fn read(&mut self) -> io::Result<Option<Vec<u8>>> {
        Ok(self.0.take().filter(|b| !b.is_empty()))
    }
}

/// Read `source` to its end.
pub async fn read_all(source: &mut dyn ByteSource) -> io::Result<Vec<u8>> {
    let mut all = Vec::new();
    while let Some(chunk) = source.read().await? {
        all.extend_from_slice(&chunk);
    }
    Ok(all)
}
