// The dashboard's dynamic-link builder (dashboard/assets/dynamic-link.js) against the spec and against the
// shortlink CLI, which uses the same Rust code as the edge. Run: node --test tests/browser/dynamic-link.test.mjs
// The CLI must be built first (cargo build -p shortlink) or named by SHORTLINK_CLI; without it the CLI tests fail.

import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

import {
  buildPayload,
  buildToken,
  dynamicLinkUrl,
  localDateTimeToUnix,
} from "../../dashboard/assets/dynamic-link.js";

const repo = fileURLToPath(new URL("../../", import.meta.url));
const cli = process.env.SHORTLINK_CLI || `${repo}target/debug/shortlink`;

// A key whose base64url starts with `-`, to check that the CLI takes it as a value and not as an option.
const KEY_BYTES = Uint8Array.from({ length: 32 }, (_, i) => (i === 0 ? 0xf8 : i * 7));
const KEY = Buffer.from(KEY_BYTES).toString("base64url");
const IV = Uint8Array.from({ length: 12 }, (_, i) => i + 1);
const GROUP_ID = "0b7e2c1a-3f4d-4e5f-8a9b-0c1d2e3f4a5b";

function runCli(...args) {
  assert.ok(
    existsSync(cli),
    `shortlink CLI not found at ${cli}: build it with \`cargo build -p shortlink\` or set SHORTLINK_CLI`,
  );
  const env = { ...process.env };
  delete env.SHORTLINK_GROUP_KEY; // the key must come from the arguments under test
  // stderr is piped so the CLI's notes stay out of the test report; a failure's error carries it.
  return execFileSync(cli, args, { encoding: "utf8", env, stdio: ["ignore", "pipe", "pipe"] }).trim();
}

function verify(urlOrToken, now) {
  return JSON.parse(runCli("verify", "--group-key", KEY, "--now", String(now), urlOrToken));
}

async function decrypt(keyBytes, token) {
  const raw = Buffer.from(token, "base64url");
  assert.equal(raw[0], 0x01, "version byte");
  const key = await crypto.subtle.importKey("raw", keyBytes, "AES-GCM", false, ["decrypt"]);
  const plain = await crypto.subtle.decrypt({ name: "AES-GCM", iv: raw.subarray(1, 13) }, key, raw.subarray(13));
  return new TextDecoder().decode(plain);
}

test("KEY starts with '-'", () => {
  assert.equal(KEY[0], "-");
  assert.equal(KEY.length, 43);
});

test("buildPayload: keys in order, optional fields only when given", () => {
  const full = buildPayload({ destination: " https://d.example/x ", backParam: "a=1", expiresAt: 1_900_000_000 });
  assert.deepEqual(Object.keys(full), ["destination_url", "back_param", "expires_at"]);
  assert.equal(JSON.stringify(full), '{"destination_url":"https://d.example/x","back_param":"a=1","expires_at":1900000000}');
  assert.deepEqual(buildPayload({ destination: "https://d.example/" }), { destination_url: "https://d.example/" });
  assert.deepEqual(
    buildPayload({ destination: "https://d.example/", backParam: "", expiresAt: undefined }),
    { destination_url: "https://d.example/" },
  );
  assert.deepEqual(Object.keys(buildPayload({ destination: "https://d.example/", expiresAt: 0 })), [
    "destination_url",
    "expires_at",
  ]);
});

test("buildPayload: http upgraded, other schemes refused", () => {
  assert.equal(buildPayload({ destination: "http://d.example/x?q=1" }).destination_url, "https://d.example/x?q=1");
  assert.equal(buildPayload({ destination: "HTTP://d.example/" }).destination_url, "https://d.example/");
  assert.equal(buildPayload({ destination: "HTTPS://d.example/" }).destination_url, "HTTPS://d.example/");
  for (const bad of ["ftp://d.example/", "javascript:alert(1)", "d.example/x", "//d.example/", "https:/d.example"]) {
    assert.throws(() => buildPayload({ destination: bad }), { message: "Destination URL must start with https://" }, bad);
  }
  assert.throws(() => buildPayload({ destination: "  " }), { message: "Destination URL is required" });
  assert.throws(() => buildPayload({}), { message: "Destination URL is required" });
  assert.throws(() => buildPayload({ destination: "https://" }), /no host/);
  assert.throws(() => buildPayload({ destination: "http:///path" }), /no host/);
  assert.throws(() => buildPayload({ destination: "https://d.example/a\tb" }), /control characters/);
});

test("buildPayload: back_param loses one leading ? or &", () => {
  const back = (backParam) => buildPayload({ destination: "https://d.example/", backParam }).back_param;
  assert.equal(back("?a=1&b=2"), "a=1&b=2");
  assert.equal(back("&a=1"), "a=1");
  assert.equal(back(" a=1 "), "a=1");
  assert.equal(back("?"), undefined);
  assert.equal(back(""), undefined);
  assert.equal(back(undefined), undefined);
});

test("buildPayload: 2048 characters, counted on the final URL like the server", () => {
  const base = "https://d.example/";
  const exactly = base + "a".repeat(2048 - base.length);
  assert.equal(buildPayload({ destination: exactly }).destination_url, exactly);
  assert.throws(() => buildPayload({ destination: exactly + "a" }), /2049 characters long; the limit is 2048/);
  // http:// counts as the https:// it becomes.
  assert.throws(() => buildPayload({ destination: "http://d.example/" + "a".repeat(2048 - "http://d.example/".length) }), /2049/);
  // Code points, not UTF-16 units: an emoji is one character.
  const emoji = base + "😀".repeat(2048 - base.length);
  assert.equal(buildPayload({ destination: emoji }).destination_url, emoji);
  // back_param and its `?` separator count too.
  const short = base + "a".repeat(2048 - base.length - 4);
  assert.ok(buildPayload({ destination: short, backParam: "a=1" }));
  assert.throws(() => buildPayload({ destination: short, backParam: "a=12" }), /with back parameters is 2049/);
});

test("buildPayload: expires_at must be whole seconds", () => {
  assert.equal(buildPayload({ destination: "https://d.example/", expiresAt: 1_900_000_000 }).expires_at, 1_900_000_000);
  for (const bad of [1.5, "1900000000", NaN, 2 ** 53, new Date()]) {
    assert.throws(() => buildPayload({ destination: "https://d.example/", expiresAt: bad }), /whole number/);
  }
});

test("buildToken: byte layout and base64url without padding", async () => {
  const payload = buildPayload({ destination: "https://d.example/café", backParam: "q=ü", expiresAt: 1_900_000_000 });
  const json = new TextEncoder().encode(JSON.stringify(payload));
  const token = await buildToken(KEY, payload, IV);
  assert.match(token, /^[A-Za-z0-9_-]+$/);
  const raw = Buffer.from(token, "base64url");
  assert.equal(raw[0], 0x01);
  assert.deepEqual(new Uint8Array(raw.subarray(1, 13)), IV);
  assert.equal(raw.length, 1 + 12 + json.length + 16);
  assert.equal(await decrypt(KEY_BYTES, token), JSON.stringify(payload));
  // Deterministic with a fixed IV; fresh random IVs otherwise.
  assert.equal(await buildToken(KEY, payload, IV), token);
  const a = await buildToken(KEY, payload);
  const b = await buildToken(KEY, payload);
  assert.notEqual(a, b);
  assert.equal(await decrypt(KEY_BYTES, a), JSON.stringify(payload));
});

test("buildToken: our base64url matches Node's for every length mod 3", async () => {
  for (let n = 0; n < 6; n++) {
    const payload = { destination_url: "https://d.example/" + "x".repeat(n) };
    const token = await buildToken(KEY, payload, IV);
    const raw = Buffer.from(token, "base64url");
    assert.equal(token, raw.toString("base64url"));
    assert.equal(token.length, Math.ceil((raw.length * 4) / 3));
    assert.ok(!token.includes("="));
  }
});

test("buildToken: bad keys and IVs are rejected", async () => {
  const payload = { destination_url: "https://d.example/" };
  await assert.rejects(buildToken("AAAA", payload), { message: "Group key decodes to 3 bytes; expected 32 bytes" });
  await assert.rejects(buildToken("", payload), /decodes to 0 bytes/);
  await assert.rejects(buildToken(Buffer.alloc(33).toString("base64url"), payload), /decodes to 33 bytes/);
  await assert.rejects(buildToken(KEY + "AA", payload), /not base64url/); // 45 characters: 6 bits left over
  await assert.rejects(buildToken(KEY.slice(0, -1) + "B", payload), /not base64url/); // non-zero unused bits
  await assert.rejects(buildToken("+".repeat(43), payload), { message: "Group key is not base64url" });
  await assert.rejects(buildToken(KEY.slice(0, -1) + "!", payload), /not base64url/);
  await assert.rejects(buildToken(undefined, payload), /decodes to 0 bytes/);
  await assert.rejects(buildToken(KEY, payload, new Uint8Array(16)), /IV must be/);
  await assert.rejects(buildToken(KEY, payload, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]), /IV must be/);
  // Pasted keys: whitespace and padding are harmless, as in the CLI.
  const token = await buildToken(` ${KEY}=\n`, payload, IV);
  assert.equal(token, await buildToken(KEY, payload, IV));
});

test("dynamicLinkUrl: shape and encoding", () => {
  assert.equal(
    dynamicLinkUrl("go.example.com", GROUP_ID, "AQ-_x"),
    `https://go.example.com/e/${GROUP_ID}?signature=AQ-_x`,
  );
  assert.equal(dynamicLinkUrl("go.example.com", GROUP_ID, "a+b=/"), `https://go.example.com/e/${GROUP_ID}?signature=a%2Bb%3D%2F`);
});

test("localDateTimeToUnix reads datetime-local values in local time", () => {
  const saved = process.env.TZ;
  try {
    process.env.TZ = "America/New_York";
    assert.equal(localDateTimeToUnix("2030-01-01T00:00"), Date.UTC(2030, 0, 1, 5, 0) / 1000);
    assert.equal(localDateTimeToUnix("2030-07-01T12:30:15"), Date.UTC(2030, 6, 1, 16, 30, 15) / 1000);
    assert.equal(localDateTimeToUnix("2030-07-01T12:30:15.250"), Date.UTC(2030, 6, 1, 16, 30, 15) / 1000);
    process.env.TZ = "UTC";
    assert.equal(localDateTimeToUnix("2030-01-01T00:00"), Date.UTC(2030, 0, 1) / 1000);
  } finally {
    if (saved === undefined) delete process.env.TZ;
    else process.env.TZ = saved;
  }
  assert.equal(localDateTimeToUnix(""), undefined);
  assert.throws(() => localDateTimeToUnix("2030-01-01"), /not valid/);
  assert.throws(() => localDateTimeToUnix("tomorrow"), /not valid/);
});

test("CLI verify accepts links built here", async () => {
  const payload = buildPayload({
    destination: "http://dest.example.org/café?x=1#top",
    backParam: "?utm_source=mail",
    expiresAt: 1_900_000_000,
  });
  const url = dynamicLinkUrl("go.example.com", GROUP_ID, await buildToken(KEY, payload, IV));
  assert.deepEqual(verify(url, 1_899_999_999), {
    valid: true,
    redirect_to: "https://dest.example.org/café?x=1&utm_source=mail#top",
    reason: null,
  });
  assert.deepEqual(verify(url, 1_900_000_000), { valid: false, redirect_to: null, reason: "expired" });

  // Random IV too, and a bare token rather than a URL.
  const token = await buildToken(KEY, buildPayload({ destination: "https://dest.example.org/" }));
  assert.equal(verify(token, 1_800_000_000).redirect_to, "https://dest.example.org/");

  // Another key must not open it.
  const otherKey = Buffer.alloc(32, 7).toString("base64url");
  const other = JSON.parse(runCli("verify", "--group-key", otherKey, token));
  assert.equal(other.reason, "signature");
});

test("tokens from CLI sign decrypt here to the payload buildPayload makes", async () => {
  const url = runCli(
    "sign", "--group-key", KEY, "--group-id", GROUP_ID, "--domain", "go.example.com",
    "--destination", "http://dest.example.org/ü?a=1", "--back-param", "b=2", "--expires-at", "4102444800",
  );
  const prefix = `https://go.example.com/e/${GROUP_ID}?signature=`;
  assert.ok(url.startsWith(prefix), url);
  const token = decodeURIComponent(url.slice(prefix.length));
  const plaintext = await decrypt(KEY_BYTES, token);
  const ours = buildPayload({ destination: "http://dest.example.org/ü?a=1", backParam: "b=2", expiresAt: 4102444800 });
  // Same bytes, not only the same object: both sides serialize identically.
  assert.equal(plaintext, JSON.stringify(ours));
  assert.deepEqual(JSON.parse(plaintext), {
    destination_url: "https://dest.example.org/ü?a=1",
    back_param: "b=2",
    expires_at: 4102444800,
  });
  // Rebuilding with the CLI's IV gives the CLI's token.
  const iv = new Uint8Array(Buffer.from(token, "base64url").subarray(1, 13));
  assert.equal(await buildToken(KEY, ours, iv), token);
});

test("shared test vectors (built with Python's cryptography) rebuild byte for byte", async () => {
  const vectors = JSON.parse(readFileSync(`${repo}shared-crypto/tests/vectors/dynamic-links.json`, "utf8"));
  const keyBytes = Buffer.from(vectors.group_key, "base64url");
  let rebuilt = 0;
  for (const { name, token, valid } of vectors.cases) {
    if (valid !== true) continue;
    const plaintext = await decrypt(keyBytes, token);
    // Only payloads already in compact JSON can round-trip byte for byte.
    if (JSON.stringify(JSON.parse(plaintext)) !== plaintext) continue;
    const iv = new Uint8Array(Buffer.from(token, "base64url").subarray(1, 13));
    assert.equal(await buildToken(vectors.group_key, JSON.parse(plaintext), iv), token, name);
    rebuilt++;
  }
  assert.ok(rebuilt >= 5, `only ${rebuilt} vectors rebuilt`);
});

test("group keys: accepted and refused exactly where the CLI accepts and refuses them", async () => {
  const payload = { destination_url: "https://d.example/" };
  for (const key of [KEY, ` ${KEY}==\n`, KEY + "A", KEY + "AA", KEY.slice(0, -1) + "B", "+".repeat(43), "", "AAAA"]) {
    const ours = await buildToken(key, payload, IV).then(() => true, () => false);
    let theirs = true;
    try {
      runCli("verify", "--group-key", key, "AAAA");
    } catch (err) {
      assert.equal(err.status, 2, `${JSON.stringify(key)}: ${err.stderr}`); // a usage error, not a crash
      theirs = false;
    }
    assert.equal(ours, theirs, JSON.stringify(key));
  }
});
