//! `shortlink`: client and operator CLI.
fn main() {}
