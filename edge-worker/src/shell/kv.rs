//! The Workers KV binding, called directly (wasm32 only): `get` as text with `cacheTtl`, `put` with an optional
//! `expirationTtl`, `delete`. Not through the worker crate's `KvStore`, which looks up five methods of the binding
//! each time it is made and builds every options object with serde-wasm-bindgen (and its put takes any
//! `Serialize` value, which brings float formatting along): code a new isolate compiles on its first request, and
//! bytes in every upload (BENCHMARKS.md, "Cold start").

use js_sys::{Object, Promise, Reflect};
use wasm_bindgen::prelude::wasm_bindgen;
use wasm_bindgen::{JsCast, JsValue};
use worker::Env;

#[wasm_bindgen]
extern "C" {
    /// A KV namespace binding (`KVNamespace`).
    #[derive(Clone)]
    pub(super) type Kv;

    #[wasm_bindgen(method, catch, js_name = get)]
    fn get_with(this: &Kv, key: &str, options: &Object) -> Result<Promise, JsValue>;

    #[wasm_bindgen(method, catch, js_name = put)]
    fn put_with(this: &Kv, key: &str, value: &str, options: &Object) -> Result<Promise, JsValue>;

    #[wasm_bindgen(method, catch, js_name = delete)]
    fn delete_key(this: &Kv, key: &str) -> Result<Promise, JsValue>;
}

/// The KV binding named `name` in `env`, if there is one.
pub(super) fn binding(env: &Env, name: &str) -> Option<Kv> {
    let value = Reflect::get(env.as_ref(), &JsValue::from_str(name)).ok()?;
    (value.is_object()).then(|| value.unchecked_into())
}

/// An options object with one number field.
fn options(name: &str, value: u64) -> Object {
    let options = Object::new();
    // Setting a field of a new plain object does not fail.
    let _ = Reflect::set(
        &options,
        &JsValue::from_str(name),
        &JsValue::from_f64(value as f64),
    );
    options
}

/// The text of a failed call, for the log: an `Error`'s message, a thrown string, else a fixed text.
fn error_text(error: &JsValue) -> String {
    match error.dyn_ref::<js_sys::Error>() {
        Some(e) => String::from(e.message()),
        None => error
            .as_string()
            .unwrap_or_else(|| "KV call failed".to_owned()),
    }
}

async fn settle(promise: Result<Promise, JsValue>) -> Result<JsValue, String> {
    let promise = promise.map_err(|e| error_text(&e))?;
    js_sys::futures::JsFuture::from(promise)
        .await
        .map_err(|e| error_text(&e))
}

impl Kv {
    /// The text at `key` (`None`: KV has no such key), read through the location's cache for `cache_ttl`
    /// seconds; `Err` with the error's text when KV could not be read.
    pub(super) async fn text(&self, key: &str, cache_ttl: u64) -> Result<Option<String>, String> {
        // The options object: `cacheTtl`, and `type: "text"`, the default.
        let value = settle(self.get_with(key, &options("cacheTtl", cache_ttl))).await?;
        Ok(value.as_string())
    }

    /// Writes `value` at `key`, to expire after `expiration_ttl` seconds when given.
    pub(super) async fn put(
        &self,
        key: &str,
        value: &str,
        expiration_ttl: Option<u64>,
    ) -> Result<(), String> {
        let options = match expiration_ttl {
            Some(ttl) => options("expirationTtl", ttl),
            None => Object::new(),
        };
        settle(self.put_with(key, value, &options)).await.map(drop)
    }

    /// Deletes `key`.
    pub(super) async fn delete(&self, key: &str) -> Result<(), String> {
        settle(self.delete_key(key)).await.map(drop)
    }
}
