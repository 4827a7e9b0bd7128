//! corrald
fn main() {}
