//! WebCrypto (wasm32 only), for link passwords ([`super::password_io`]) and visitor hashes
//! ([`super::unique_io`]): through `js_sys::Reflect` rather than web-sys's `SubtleCrypto` bindings, a few calls and
//! no new feature set to compile for every isolate. Every failure answers `None`.

use wasm_bindgen::{JsCast, JsValue};
use worker::wasm_bindgen_futures::JsFuture;

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
