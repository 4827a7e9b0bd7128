//! drill
