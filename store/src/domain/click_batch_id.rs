//! The id a click report carries so that a redelivered report is counted once.

use super::ValidationError;

/// A click report's `batch_id`: a UUID, kept in lowercase hyphenated form, so every spelling of one id is the
/// same batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClickBatchId(String);

impl ClickBatchId {
    /// Any UUID spelling `uuid` accepts (hyphenated, simple, braced, URN); anything else is refused.
    pub fn parse(raw: &str) -> Result<Self, ValidationError> {
        uuid::Uuid::try_parse(raw)
            .map(|u| Self(u.hyphenated().to_string()))
            .map_err(|_| ValidationError::new("batch_id must be a UUID"))
    }

    /// The canonical form.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_id_however_spelled() {
        let a = ClickBatchId::parse("0B7C6A1E-7F39-4C55-9A55-2D1C1F5E8A10").unwrap();
        let b = ClickBatchId::parse("0b7c6a1e7f394c559a552d1c1f5e8a10").unwrap();
        assert_eq!(a, b);
        assert_eq!(a.as_str(), "0b7c6a1e-7f39-4c55-9a55-2d1c1f5e8a10");
        for bad in [
            "",
            "batch-1",
            "0b7c6a1e-7f39-4c55-9a55-2d1c1f5e8a1",
            &"a".repeat(5000),
        ] {
            assert_eq!(
                ClickBatchId::parse(bad).unwrap_err().0,
                "batch_id must be a UUID"
            );
        }
    }
}
