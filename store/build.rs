//! Rebuilds the store when a migration is added or changed: `sqlx::migrate!` embeds the migrations at compile time,
//! and a proc macro's reads are not tracked by cargo.
fn main() {
    println!("cargo:rerun-if-changed=../migrations");
}
