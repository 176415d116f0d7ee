//! Records, and the settings nested in them, read as JSON objects only.
//!
//! serde's derived `Deserialize` for a struct accepts a JSON object (`visit_map`) and also an array of its fields in
//! order (`visit_seq`), and a self-describing format's `deserialize_struct` (serde_json's) reaches both, so each
//! struct's parse carries a second parser for a form no record is ever written in. In the edge worker that parser
//! is wasm a new isolate compiles on its first request, whole, with the one it runs (BENCHMARKS.md, issue 28).
//! [`ObjectOnly`] asks the format for a map instead, which leaves the array form out: an array where an object
//! should be is refused, as any other malformed record is (readers treat the record as missing).

use serde::de::{Deserialize, Deserializer, Visitor};

/// A deserializer that reads a struct as a map; anything else goes to the inner one's `deserialize_any`, which is
/// only reached if the type read is not a struct.
pub struct ObjectOnly<D>(pub D);

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

/// `T`, read through [`ObjectOnly`] wherever the format hands it over (inside an `Option`, say).
struct Object<T>(T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Object<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        T::deserialize(ObjectOnly(deserializer)).map(Object)
    }
}

/// A field holding an object or `null` (or left out, with `#[serde(default)]`): `None` for `null`. Out of line, one
/// function per `T`: inlined, every nested object's parser would sit inside its parent's, and the edge would compile
/// them all whenever the parent is read (the link's copy of its group's settings, `{}` for most, is read on every
/// new isolate's first visit).
#[inline(never)]
pub(crate) fn optional_object<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Ok(Option::<Object<T>>::deserialize(deserializer)?.map(|object| object.0))
}

/// A field holding an object or `null`, which reads as the default, so that `"access": null` means the same as
/// leaving `access` out.
pub(crate) fn object_or_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(optional_object(deserializer)?.unwrap_or_default())
}
