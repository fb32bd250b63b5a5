//! Side-by-side benchmark runner.
fn main() {}
