//! Short codes are defined in `kv-model`, beside the KV key they form (so the fuzz targets build without the
//! server stack); the origin adds the randomness for generated codes and the mapping of refusals to its
//! validation errors.

use super::ValidationError;
use rand::Rng;

pub use kv_model::ShortCode;

/// A fresh random code; uniqueness is the database's job (unique index, retry).
pub fn generate() -> ShortCode {
    let mut rng = rand::rng();
    ShortCode::generate(|n| rng.random_range(0..n))
}

impl From<kv_model::ShortCodeError> for ValidationError {
    fn from(e: kv_model::ShortCodeError) -> Self {
        Self::new(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_codes_are_valid_and_vary() {
        let a = generate();
        let b = generate();
        assert_eq!(ShortCode::parse(a.as_str()).unwrap(), a);
        assert_ne!(a, b);
    }

    #[test]
    fn refusals_carry_the_specified_message() {
        let e: ValidationError = ShortCode::parse("ab").unwrap_err().into();
        assert_eq!(e.0, "short_code must be 3 to 50 characters long");
    }
}
