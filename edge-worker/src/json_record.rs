//! KV's records (and the origin's answers, which carry the same records) parsed from their JSON text as objects.
//!
//! serde's derived `Deserialize` for a struct accepts a JSON object and also an array of the fields in order, and
//! serde_json's `deserialize_struct` reaches both, so each record type's parse would carry a second parser for a
//! form no record is ever written in, which a new isolate compiles on its first request ([`kv_model::ObjectOnly`]
//! says more). [`parse`] asks serde_json for a map instead: an array where a record's object should be is refused,
//! as any other malformed record is (read as absent). kv-model reads the settings nested in a record the same way.

use kv_model::ObjectOnly;
use serde::de::DeserializeOwned;

/// `T` (a struct) from `text`, which must be one JSON object with nothing after it but whitespace.
pub fn parse<T: DeserializeOwned>(text: &str) -> serde_json::Result<T> {
    let mut de = serde_json::Deserializer::from_str(text);
    let value = T::deserialize(ObjectOnly(&mut de))?;
    de.end()?;
    Ok(value)
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
    fn nested_settings_in_the_array_form_are_refused() {
        // kv-model reads a record's settings as objects only, as this reads the record.
        for text in [
            r#"{"v":1,"long_url":"https://a.example/","group_id":"g","is_active":true,"group_settings":[{},null,{}]}"#,
            r#"{"v":1,"long_url":"https://a.example/","group_id":"g","is_active":true,"group_settings":{"access":[[],[],true,null]}}"#,
        ] {
            assert!(parse::<LinkRecord>(text).is_err(), "{text}");
        }
        assert!(parse::<GroupRecord>(r#"{"v":1,"key":"k","settings":[{},null,{}]}"#).is_err());
        // null and absent still read as none.
        let plain: LinkRecord = parse(
            r#"{"v":1,"long_url":"https://a.example/","group_id":"g","is_active":true,"group_settings":{"access":null,"monetization":null,"analytics":null}}"#,
        )
        .unwrap();
        assert_eq!(plain.group_settings, Some(Default::default()));
        let none: LinkRecord = parse(
            r#"{"v":1,"long_url":"https://a.example/","group_id":"g","is_active":true,"group_settings":null}"#,
        )
        .unwrap();
        assert_eq!(none.group_settings, None);
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
