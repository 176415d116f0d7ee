// Dynamic links (spec sections 2 and 4.7), built in the browser so the destination never reaches the dashboard
// server in clear. Runs unchanged in Node (globalThis.crypto), where tests/browser/dynamic-link.test.mjs
// checks it against the shortlink CLI.

const TOKEN_VERSION = 0x01;
const KEY_LEN = 32;
const IV_LEN = 12;
// Counted like the server: Unicode code points of the final URL, after back_param is appended.
const MAX_URL_LEN = 2048;
const ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/**
 * The payload object for buildToken, keys in the order the server serializes them.
 * Throws an Error with a message fit to show the user when the input is not acceptable.
 */
export function buildPayload({ destination, backParam, expiresAt } = {}) {
  let url = String(destination ?? "").trim();
  if (url === "") {
    throw new Error("Destination URL is required");
  }
  // Same upgrade as the server (scheme in any letter case), done here so the token holds what the edge uses.
  if (/^http:\/\//i.test(url)) {
    url = "https://" + url.slice("http://".length);
  } else if (!/^https:\/\//i.test(url)) {
    throw new Error("Destination URL must start with https://");
  }
  if (/^[/?#\\]|^$/.test(url.slice("https://".length))) {
    throw new Error("Destination URL has no host name");
  }

  const back = String(backParam ?? "").trim().replace(/^[?&]/, "");

  // The edge checks the URL it redirects to, so check that one: a link that passes here must not die there.
  const final = appendBackParam(url, back);
  // Browsers drop tabs and newlines from URLs, so the server refuses control characters outright.
  if (/[\u0000-\u001f\u007f-\u009f]/.test(final)) {
    throw new Error("Destination URL and back parameters must not contain tabs, line breaks or other control characters");
  }
  const length = [...final].length;
  if (length > MAX_URL_LEN) {
    throw new Error(back
      ? `Destination URL with back parameters is ${length} characters long; the limit is ${MAX_URL_LEN}`
      : `Destination URL is ${length} characters long; the limit is ${MAX_URL_LEN}`);
  }

  const payload = { destination_url: url };
  if (back !== "") {
    payload.back_param = back;
  }
  if (expiresAt !== undefined && expiresAt !== null && expiresAt !== "") {
    if (!Number.isSafeInteger(expiresAt)) {
      throw new Error("Expiry must be a whole number of UNIX seconds");
    }
    payload.expires_at = expiresAt;
  }
  return payload;
}

/**
 * Encrypts a payload into a token: base64url(0x01 || iv || AES-256-GCM ciphertext || tag), no padding.
 * `iv` is for tests; leave it out so every token gets a fresh random one (GCM breaks if an IV repeats).
 */
export async function buildToken(groupKeyB64url, payload, iv) {
  const subtle = globalThis.crypto?.subtle;
  if (!subtle) {
    // Browsers expose WebCrypto only in secure contexts (https or localhost).
    throw new Error("This page must be opened over https to build links (WebCrypto is unavailable)");
  }
  const keyBytes = base64urlDecode(String(groupKeyB64url ?? ""));
  if (keyBytes === null) {
    throw new Error("Group key is not base64url");
  }
  if (keyBytes.length !== KEY_LEN) {
    throw new Error(`Group key decodes to ${keyBytes.length} bytes; expected ${KEY_LEN} bytes`);
  }
  iv ??= globalThis.crypto.getRandomValues(new Uint8Array(IV_LEN));
  if (!(iv instanceof Uint8Array) || iv.length !== IV_LEN) {
    throw new Error(`IV must be a Uint8Array of ${IV_LEN} bytes`);
  }

  const key = await subtle.importKey("raw", keyBytes, { name: "AES-GCM" }, false, ["encrypt"]);
  const plaintext = new TextEncoder().encode(JSON.stringify(payload));
  // No additionalData: the spec's AAD is empty. WebCrypto appends the 16-byte tag, as the format wants.
  const sealed = new Uint8Array(
    await subtle.encrypt({ name: "AES-GCM", iv, tagLength: 128 }, key, plaintext),
  );

  const raw = new Uint8Array(1 + IV_LEN + sealed.length);
  raw[0] = TOKEN_VERSION;
  raw.set(iv, 1);
  raw.set(sealed, 1 + IV_LEN);
  return base64urlEncode(raw);
}

/** `https://<domain>/e/<group_id>?signature=<token>` (spec 4.7 step 7). */
export function dynamicLinkUrl(domain, groupId, token) {
  return `https://${domain}/e/${groupId}?signature=${encodeURIComponent(token)}`;
}

/**
 * A `<input type="datetime-local">` value (no time zone) read in the browser's local time zone, as UNIX
 * seconds; undefined for an empty value.
 */
export function localDateTimeToUnix(value) {
  if (value === undefined || value === null || value === "") {
    return undefined;
  }
  const m = /^(\d{4,})-(\d\d)-(\d\d)T(\d\d):(\d\d)(?::(\d\d)(?:\.\d+)?)?$/.exec(value);
  if (!m) {
    throw new Error("Expiry date and time is not valid");
  }
  const [year, month, day, hour, minute, second = "0"] = m.slice(1);
  // The multi-argument Date constructor uses local time; Date.parse's handling of this form varied by browser.
  const date = new Date(+year, +month - 1, +day, +hour, +minute, +second);
  if (Number.isNaN(date.getTime())) {
    throw new Error("Expiry date and time is not valid");
  }
  return Math.floor(date.getTime() / 1000);
}

// The server's append rule: separator `?` or `&` unless the URL already ends with one; before any #fragment.
function appendBackParam(url, backParam) {
  const back = backParam.replace(/^[?&]+/, "");
  if (back === "") {
    return url;
  }
  const hash = url.indexOf("#");
  const base = hash === -1 ? url : url.slice(0, hash);
  const fragment = hash === -1 ? "" : url.slice(hash);
  const separator = /[?&]$/.test(base) ? "" : base.includes("?") ? "&" : "?";
  return base + separator + back + fragment;
}

function base64urlEncode(bytes) {
  let out = "";
  for (let i = 0; i < bytes.length; i += 3) {
    const left = bytes.length - i;
    const group = (bytes[i] << 16) | ((left > 1 ? bytes[i + 1] : 0) << 8) | (left > 2 ? bytes[i + 2] : 0);
    // 1 byte -> 2 characters, 2 -> 3, 3 -> 4: no `=` padding.
    const chars = Math.min(left, 3) + 1;
    for (let j = 0; j < chars; j++) {
      out += ALPHABET[(group >> (18 - 6 * j)) & 63];
    }
  }
  return out;
}

// Returns null on bad input. Lenient like the CLI where harmless (keys are pasted by hand): surrounding whitespace
// and trailing `=` are ignored. Strict where the CLI is: no `+` `/`, and unused trailing bits must be zero.
function base64urlDecode(text) {
  const clean = text.trim().replace(/=+$/, "");
  if (clean.length % 4 === 1) {
    return null;
  }
  const out = new Uint8Array(Math.floor((clean.length * 3) / 4));
  let buffer = 0;
  let bits = 0;
  let n = 0;
  for (const ch of clean) {
    const value = ALPHABET.indexOf(ch);
    if (value === -1) {
      return null;
    }
    buffer = (buffer << 6) | value;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[n++] = buffer >> bits;
      buffer &= (1 << bits) - 1;
    }
  }
  return buffer === 0 ? out : null;
}
