//! A link's title and tags (issue 24): trimmed, bounded, and for tags a small alphabet compared case-insensitively.

use super::ValidationError;

/// Most characters in a title, after trimming.
pub const MAX_TITLE_CHARS: usize = 200;
/// Most characters in a tag, after trimming.
pub const MAX_TAG_CHARS: usize = 50;
/// Most tags on one link.
pub const MAX_TAGS: usize = 10;

/// A link's title: trimmed, 1 to [`MAX_TITLE_CHARS`] characters, no control characters. An empty title is no
/// title ([`Title::parse`] answers `None`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Title(String);

impl Title {
    /// The title of `raw`: `None` when it is empty once trimmed.
    pub fn parse(raw: &str) -> Result<Option<Self>, ValidationError> {
        let t = raw.trim();
        if t.is_empty() {
            return Ok(None);
        }
        if t.chars().count() > MAX_TITLE_CHARS {
            return Err(ValidationError::new(format!(
                "title must be at most {MAX_TITLE_CHARS} characters"
            )));
        }
        if t.chars().any(char::is_control) {
            return Err(ValidationError::new(
                "title must not contain control characters",
            ));
        }
        Ok(Some(Self(t.to_owned())))
    }

    /// The trimmed title.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A tag name: trimmed, 1 to [`MAX_TAG_CHARS`] of letters, digits, space, `_`, `-`, `.` and `:`. Two tags are the
/// same tag when their [`Tag::key`]s (lowercase) are equal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tag {
    name: String,
    key: String,
}

impl Tag {
    /// Validates and trims one tag name.
    pub fn parse(raw: &str) -> Result<Self, ValidationError> {
        let name = raw.trim();
        let n = name.chars().count();
        if n == 0 || n > MAX_TAG_CHARS {
            return Err(ValidationError::new(format!(
                "a tag must be 1 to {MAX_TAG_CHARS} characters once trimmed"
            )));
        }
        if let Some(c) = name
            .chars()
            .find(|c| !(c.is_alphanumeric() || matches!(c, ' ' | '_' | '-' | '.' | ':')))
        {
            return Err(ValidationError::new(format!(
                "tag {name:?}: {c:?} is not allowed (letters, digits, space, _ - . : only)"
            )));
        }
        Ok(Self {
            key: name.to_lowercase(),
            name: name.to_owned(),
        })
    }

    /// A link's tags as a request gives them: each parsed, duplicates (case-insensitive) merged keeping the first
    /// spelling, at most [`MAX_TAGS`] once merged. Errors name the field and the index.
    pub fn parse_list(field: &str, raw: &[String]) -> Result<Vec<Self>, ValidationError> {
        let mut tags: Vec<Self> = Vec::with_capacity(raw.len().min(MAX_TAGS));
        for (i, r) in raw.iter().enumerate() {
            let tag =
                Self::parse(r).map_err(|e| ValidationError::new(format!("{field}[{i}]: {e}")))?;
            if !tags.iter().any(|t| t.key == tag.key) {
                tags.push(tag);
            }
        }
        if tags.len() > MAX_TAGS {
            return Err(ValidationError::new(format!(
                "{field}: a link has at most {MAX_TAGS} tags"
            )));
        }
        Ok(tags)
    }

    /// The name as given, trimmed.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The comparison key: the name in lowercase.
    pub fn key(&self) -> &str {
        &self.key
    }
}

/// Sorts tag names case-insensitively (then by exact spelling, so the order is total): the order of a link's
/// `tags` and of the tag list.
pub fn sort_tag_names(names: &mut [String]) {
    names.sort_by_cached_key(|n| (n.to_lowercase(), n.clone()));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn titles() {
        assert_eq!(Title::parse("").unwrap(), None);
        assert_eq!(Title::parse("   ").unwrap(), None);
        assert_eq!(
            Title::parse("  Spring sale ").unwrap().unwrap().as_str(),
            "Spring sale"
        );
        let max = "é".repeat(200);
        assert_eq!(
            Title::parse(&format!(" {max} ")).unwrap().unwrap().as_str(),
            max
        );
        assert!(Title::parse(&"a".repeat(201)).is_err());
        assert!(Title::parse("a\u{0}b").is_err());
        assert!(Title::parse("line\nbreak").is_err());
    }

    #[test]
    fn tags() {
        let t = Tag::parse("  Q3 launch: web-v1.2_x ").unwrap();
        assert_eq!(
            (t.name(), t.key()),
            ("Q3 launch: web-v1.2_x", "q3 launch: web-v1.2_x")
        );
        assert_eq!(Tag::parse("Café").unwrap().key(), "café");
        assert_eq!(Tag::parse(&"a".repeat(50)).unwrap().name().len(), 50);
        for bad in ["", "   ", "a/b", "a|b", "a,b", "#x", "a\tb", "ta\nb"] {
            assert!(Tag::parse(bad).is_err(), "{bad:?}");
        }
        assert!(Tag::parse(&"a".repeat(51)).is_err());
    }

    #[test]
    fn lists_merge_and_are_bounded() {
        let raw: Vec<String> = ["News", "news", " NEWS ", "Promo"]
            .map(String::from)
            .to_vec();
        let tags = Tag::parse_list("tags", &raw).unwrap();
        let names: Vec<&str> = tags.iter().map(Tag::name).collect();
        assert_eq!(names, ["News", "Promo"]);
        let ten: Vec<String> = (0..10).map(|i| format!("t{i}")).collect();
        assert_eq!(Tag::parse_list("tags", &ten).unwrap().len(), 10);
        let mut eleven = ten.clone();
        eleven.push("T0".to_owned());
        assert_eq!(
            Tag::parse_list("tags", &eleven).unwrap().len(),
            10,
            "a duplicate is merged first"
        );
        eleven.push("t10".to_owned());
        assert!(Tag::parse_list("tags", &eleven).is_err());
        let e = Tag::parse_list("tags", &["ok".to_owned(), "b/d".to_owned()]).unwrap_err();
        assert!(e.0.starts_with("tags[1]"), "{e}");
    }

    #[test]
    fn sorting_ignores_case() {
        let mut names: Vec<String> = ["beta", "Alpha", "alpha2", "Gamma"]
            .map(String::from)
            .to_vec();
        sort_tag_names(&mut names);
        assert_eq!(names, ["Alpha", "alpha2", "beta", "Gamma"]);
    }
}
