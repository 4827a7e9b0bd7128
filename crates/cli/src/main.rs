//! corral
fn main() {}
