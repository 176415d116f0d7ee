use super::ValidationError;
use rand::Rng;

/// Minimum and maximum length of a short code (spec 4.1).
pub(crate) const MIN_LEN: usize = 3;
/// See [`MIN_LEN`].
pub(crate) const MAX_LEN: usize = 50;
/// Length of generated codes: 36^7 ≈ 7.8e10 codes, so collisions stay rare per domain.
const GENERATED_LEN: usize = 7;
const GENERATED_ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";

/// A short code: 3 to 50 of `[A-Za-z0-9_-]`, held lowercase as it is stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShortCode(String);

impl ShortCode {
    /// Validates a client-chosen alias and lowercases it.
    pub fn parse(raw: &str) -> Result<Self, ValidationError> {
        let len = raw.chars().count();
        if !(MIN_LEN..=MAX_LEN).contains(&len) {
            return Err(ValidationError::new(format!(
                "short_code must be {MIN_LEN} to {MAX_LEN} characters long"
            )));
        }
        if !raw
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            return Err(ValidationError::new(
                "short_code may contain only letters, digits, _ and -",
            ));
        }
        Ok(Self(raw.to_ascii_lowercase()))
    }

    /// A fresh random code; uniqueness is the database's job (unique index, retry).
    pub fn generate() -> Self {
        let mut rng = rand::rng();
        let code = (0..GENERATED_LEN)
            .map(|_| GENERATED_ALPHABET[rng.random_range(0..GENERATED_ALPHABET.len())] as char)
            .collect();
        Self(code)
    }

    /// The stored (lowercase) form.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_bounds_and_lowercases() {
        assert_eq!(ShortCode::parse("AbC").unwrap().as_str(), "abc");
        assert!(ShortCode::parse(&"a".repeat(50)).is_ok());
        assert!(ShortCode::parse("a_b-C9").is_ok());
    }

    #[test]
    fn rejects_length_and_characters() {
        for bad in [
            "",
            "ab",
            &"a".repeat(51),
            "abc!",
            "a b c",
            "ábc",
            "abc/",
            "abc.d",
        ] {
            assert!(ShortCode::parse(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn generated_codes_are_valid_and_vary() {
        let a = ShortCode::generate();
        let b = ShortCode::generate();
        assert_eq!(ShortCode::parse(a.as_str()).unwrap(), a);
        assert_ne!(a, b);
    }
}
