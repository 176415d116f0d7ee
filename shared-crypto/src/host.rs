//! Host normalization shared by the destination rules and the blocklist, so both compare hosts the same way.

use alloc::string::String;

/// Lowercases an ASCII host and removes trailing dots (`Blocked.Example.NET.` → `blocked.example.net`).
pub fn normalize_host(host: &str) -> String {
    crate::ascii::lowercase(crate::ascii::trim_end_byte(host, b'.'))
}

#[cfg(test)]
mod tests {
    #[test]
    fn lowercases_and_drops_trailing_dots() {
        assert_eq!(
            super::normalize_host("Blocked.Example.NET."),
            "blocked.example.net"
        );
        assert_eq!(super::normalize_host("a.."), "a");
    }
}
