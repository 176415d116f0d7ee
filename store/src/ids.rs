//! Identifiers of stored rows: random UUIDs as text, the same on both engines.

/// A new random identifier.
pub(crate) fn new_id() -> String {
    uuid::Uuid::new_v4().to_string()
}
