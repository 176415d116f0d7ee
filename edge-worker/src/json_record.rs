//! KV's records (and the origin's answers, which carry the same records) parsed from their JSON text as objects.
//!
//! serde's derived `Deserialize` for a struct accepts a JSON object (`visit_map`) and also an array of the fields in
//! order (`visit_seq`), and serde_json's `deserialize_struct` reaches both, so each record type's parse carries a
//! second parser for a form no record is ever written in. In the worker that second parser is wasm a new isolate
//! compiles on its first request (the link record's `visit_seq` sat inside the largest function a first visit
//! compiled; BENCHMARKS.md, issue 28). [`parse`] asks serde_json for a map instead, which leaves the array form
//! out: an array where a record's object should be is refused, as any other malformed record is (read as absent).
//! Records nested in a record (a group's settings, a rule, a preview card) are parsed by serde_json as before.

use serde::de::{DeserializeOwned, Deserializer, Visitor};

/// `T` (a struct) from `text`, which must be one JSON object with nothing after it but whitespace.
pub fn parse<T: DeserializeOwned>(text: &str) -> serde_json::Result<T> {
    let mut de = serde_json::Deserializer::from_str(text);
    let value = T::deserialize(ObjectOnly(&mut de))?;
    de.end()?;
    Ok(value)
}

/// A deserializer that reads a struct as a map; anything else goes to the inner one's `deserialize_any`, which is
/// only reached if `T` is not a struct.
struct ObjectOnly<D>(D);

impl<'de, D: Deserializer<'de>> Deserializer<'de> for ObjectOnly<D> {
    type Error = D::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        self.0.deserialize_any(visitor)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_map(visitor)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf option unit
        unit_struct newtype_struct seq tuple tuple_struct map enum identifier ignored_any
    }
}

#[cfg(test)]
mod tests {
    use kv_model::{BlocklistRecord, DomainRecord, GroupRecord, LinkRecord};
    use serde::de::DeserializeOwned;

    use super::parse;

    /// Every record the way serde_json reads it: the same value from the same object text, whatever it holds.
    fn same_as_serde_json<T: DeserializeOwned + PartialEq + std::fmt::Debug>(text: &str) {
        let ours: T = parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        let theirs: T = serde_json::from_str(text).unwrap();
        assert_eq!(ours, theirs, "{text}");
    }

    #[test]
    fn objects_read_as_serde_json_reads_them() {
        same_as_serde_json::<LinkRecord>(
            r#"{"v":1,"long_url":"https://a.example/x","group_id":"g","is_active":true}"#,
        );
        same_as_serde_json::<LinkRecord>(
            r#" {"group_id":"g","v":1,"is_active":false,"long_url":"https://a.example/","expires_at":5,
                "forward_query":false,"rules":[{"if":{"country":["DE"]},"to":"https://de.example/"}],
                "password_hash":"pbkdf2-sha256$1$c2FsdA$ZGlnZXN0","expired_url":"https://e.example/",
                "redirect_status":308,"preview":{"title":"T","image":"https://i.example/c.png"},
                "group_settings":{"access":{"block_countries":["RU"],"block_bots":true},
                "monetization":{"interstitial_seconds":3},"analytics":{"enabled":true}},"unknown":[1,{"x":2}]} "#,
        );
        same_as_serde_json::<GroupRecord>(
            r#"{"v":1,"key":"QkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkI","settings":{}}"#,
        );
        same_as_serde_json::<DomainRecord>(
            r#"{"v":1,"enabled":true,"fallback_url":"https://f.example/"}"#,
        );
        same_as_serde_json::<BlocklistRecord>(
            r#"{"v":1,"domains":["evil.example","bad.example"]}"#,
        );
    }

    #[test]
    fn the_array_form_is_refused() {
        // serde's derive reads it (the fields after `is_active` all have defaults); no record is written so.
        let text = r#"[1,"https://a.example/","g",true]"#;
        assert!(serde_json::from_str::<LinkRecord>(text).is_ok());
        assert!(parse::<LinkRecord>(text).is_err());
    }

    #[test]
    fn what_is_not_one_record_object_is_refused() {
        for text in [
            "",
            "null",
            r#""link""#,
            r#"{"v":1,"long_url":"https://a.example/","group_id":"g","is_active":true} x"#,
            r#"{"v":1,"long_url":"https://a.example/","group_id":"g","is_active":true"#,
            r#"{"v":2,"long_url":"https://a.example/","group_id":"g","is_active":true}"#,
            r#"{"v":1,"long_url":"https://a.example/","group_id":"g"}"#,
            r#"{"v":1,"long_url":"https://a.example/","group_id":"g","is_active":true,"is_active":false}"#,
        ] {
            assert!(parse::<LinkRecord>(text).is_err(), "{text:?}");
        }
    }
}
