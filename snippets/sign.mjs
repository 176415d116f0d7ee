// Build a Shortlink dynamic link (spec 4.7) with WebCrypto. Runs in Node 20+ and browsers; no dependencies.
//
//   node snippets/sign.mjs GROUP_KEY GROUP_ID DOMAIN DESTINATION [BACK_PARAM [EXPIRES_AT]]

const toBase64url = (bytes) => {
  let binary = '';
  for (const b of bytes) binary += String.fromCharCode(b);
  return btoa(binary).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
};

const fromBase64url = (text) => {
  const padded = text.replace(/-/g, '+').replace(/_/g, '/') + '==='.slice((text.length + 3) % 4);
  return Uint8Array.from(atob(padded), (c) => c.charCodeAt(0));
};

/**
 * @param {string} groupKey  the group's base64url key (32 bytes)
 * @param {string} groupId   the group's UUID
 * @param {string} domain    an enabled domain, e.g. "go.example.com"
 * @param {{destination_url: string, back_param?: string, expires_at?: number}} payload
 * @returns {Promise<string>} https://<domain>/e/<group_id>?signature=<token>
 */
export async function buildDynamicLink(groupKey, groupId, domain, payload) {
  const keyBytes = fromBase64url(groupKey);
  if (keyBytes.length !== 32) throw new Error('group key must decode to 32 bytes');
  const key = await crypto.subtle.importKey('raw', keyBytes, 'AES-GCM', false, ['encrypt']);

  const iv = crypto.getRandomValues(new Uint8Array(12)); // unique per token
  const plaintext = new TextEncoder().encode(JSON.stringify(payload)); // compact JSON, UTF-8
  // WebCrypto returns ciphertext || 16-byte tag; the AAD is empty.
  const sealed = new Uint8Array(await crypto.subtle.encrypt({ name: 'AES-GCM', iv }, key, plaintext));

  const raw = new Uint8Array(1 + iv.length + sealed.length);
  raw[0] = 0x01; // version
  raw.set(iv, 1);
  raw.set(sealed, 1 + iv.length);
  return `https://${domain}/e/${groupId}?signature=${encodeURIComponent(toBase64url(raw))}`;
}

// Command-line wrapper (Node only; skipped when imported or run in a browser).
if (globalThis.process?.argv?.[1]) {
  const { pathToFileURL } = await import('node:url');
  if (import.meta.url === pathToFileURL(process.argv[1]).href) {
    const [groupKey, groupId, domain, destination, backParam, expiresAt] = process.argv.slice(2);
    if (!destination) {
      console.error('usage: node sign.mjs GROUP_KEY GROUP_ID DOMAIN DESTINATION [BACK_PARAM [EXPIRES_AT]]');
      process.exit(2);
    }
    const payload = { destination_url: destination };
    if (backParam) payload.back_param = backParam;
    if (expiresAt) payload.expires_at = Number.parseInt(expiresAt, 10);
    console.log(await buildDynamicLink(groupKey, groupId, domain, payload));
  }
}
