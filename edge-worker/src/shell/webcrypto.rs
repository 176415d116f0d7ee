//! WebCrypto (wasm32 only), for link passwords ([`super::password_io`]) and visitor hashes
//! ([`super::unique_io`]): through `js_sys::Reflect` rather than web-sys's `SubtleCrypto` bindings, a few calls and
//! no new feature set to compile for every isolate. Every failure answers `None`.

use wasm_bindgen::prelude::wasm_bindgen;
use wasm_bindgen::{JsCast, JsValue};
use worker::wasm_bindgen_futures::JsFuture;

#[wasm_bindgen]
extern "C" {
    /// `crypto.getRandomValues(view)`, on a view of the wasm memory: the bytes land in place.
    #[wasm_bindgen(js_namespace = crypto, js_name = getRandomValues, catch)]
    fn get_random_values(bytes: &mut [u8]) -> Result<JsValue, JsValue>;
}

/// 64 bits from the runtime's CSPRNG, for the isolate maps' hasher ([`crate::hashing`]). Were `crypto` ever
/// missing, the clock: the maps still work, keyed less secretly.
pub(crate) fn random_u64() -> u64 {
    let mut bytes = [0u8; 8];
    match get_random_values(&mut bytes) {
        Ok(_) => u64::from_le_bytes(bytes),
        Err(_) => js_sys::Date::now().to_bits(),
    }
}

/// `crypto.subtle`.
fn subtle() -> Option<JsValue> {
    let crypto = js_sys::Reflect::get(&js_sys::global(), &JsValue::from_str("crypto")).ok()?;
    js_sys::Reflect::get(&crypto, &JsValue::from_str("subtle"))
        .ok()
        .filter(JsValue::is_object)
}

/// `crypto.subtle[method](...args)`, awaited.
pub(super) async fn call(method: &str, args: &[JsValue]) -> Option<JsValue> {
    let subtle = subtle()?;
    let f: js_sys::Function = js_sys::Reflect::get(&subtle, &JsValue::from_str(method))
        .ok()?
        .dyn_into()
        .ok()?;
    let array: js_sys::Array = args.iter().collect();
    let promise: js_sys::Promise = f.apply(&subtle, &array).ok()?.dyn_into().ok()?;
    JsFuture::from(promise).await.ok()
}

/// A plain object `{name: value, …}` of string and JS values.
pub(super) fn object(fields: &[(&str, JsValue)]) -> JsValue {
    let o = js_sys::Object::new();
    for (name, value) in fields {
        let _ = js_sys::Reflect::set(&o, &JsValue::from_str(name), value);
    }
    o.into()
}

pub(super) fn bytes(b: &[u8]) -> JsValue {
    js_sys::Uint8Array::from(b).into()
}

pub(super) fn usages(list: &[&str]) -> JsValue {
    list.iter()
        .map(|u| JsValue::from_str(u))
        .collect::<js_sys::Array>()
        .into()
}
