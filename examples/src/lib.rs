//! Small programs an embedder of corral's libraries would copy; they live
//! in `src/bin/` and are described in `docs/examples.md`.
#![warn(missing_docs)]
