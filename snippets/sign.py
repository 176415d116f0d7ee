"""Build a Shortlink dynamic link (spec 4.7) with the `cryptography` package.

    python3 snippets/sign.py GROUP_KEY GROUP_ID DOMAIN DESTINATION [BACK_PARAM [EXPIRES_AT]]
"""

import base64
import json
import os
import sys
from urllib.parse import quote

from cryptography.hazmat.primitives.ciphers.aead import AESGCM


def build_dynamic_link(group_key: str, group_id: str, domain: str, payload: dict) -> str:
    """payload: {"destination_url": str, "back_param"?: str, "expires_at"?: int (UNIX seconds)}"""
    key = base64.urlsafe_b64decode(group_key + "=" * (-len(group_key) % 4))
    if len(key) != 32:
        raise ValueError("group key must decode to 32 bytes")

    iv = os.urandom(12)  # unique per token
    plaintext = json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode("utf-8")  # compact JSON
    sealed = AESGCM(key).encrypt(iv, plaintext, None)  # ciphertext || 16-byte tag, empty AAD

    raw = b"\x01" + iv + sealed  # version 0x01
    token = base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")
    return f"https://{domain}/e/{group_id}?signature={quote(token, safe='')}"


if __name__ == "__main__":
    if len(sys.argv) < 5:
        sys.exit("usage: sign.py GROUP_KEY GROUP_ID DOMAIN DESTINATION [BACK_PARAM [EXPIRES_AT]]")
    group_key, group_id, domain, destination = sys.argv[1:5]
    payload = {"destination_url": destination}
    if len(sys.argv) > 5 and sys.argv[5]:
        payload["back_param"] = sys.argv[5]
    if len(sys.argv) > 6 and sys.argv[6]:
        payload["expires_at"] = int(sys.argv[6])
    print(build_dynamic_link(group_key, group_id, domain, payload))
