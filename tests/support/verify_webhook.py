#!/usr/bin/env python3
"""Checks one Standard Webhooks delivery with the `standardwebhooks` package from PyPI, an implementation
independent of ours (pinned in requirements-webhooks.txt).

    python3 verify_webhook.py SECRET WEBHOOK_ID WEBHOOK_TIMESTAMP WEBHOOK_SIGNATURE [--now UNIX_SECONDS] < body

The body is read from standard input, as bytes. Exits 0 when `Webhook(SECRET).verify(...)` accepts the delivery,
1 when it refuses it (the reason on standard error), 2 on bad usage. The package refuses timestamps more than five
minutes from its clock; `--now` sets that clock, for tests whose deliveries carry a test clock's time.
"""

import argparse
import sys
from datetime import datetime, timezone

from standardwebhooks import webhooks


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("secret")
    parser.add_argument("webhook_id")
    parser.add_argument("webhook_timestamp")
    parser.add_argument("webhook_signature")
    parser.add_argument("--now", type=int, help="the verifier's clock, in Unix seconds")
    args = parser.parse_args()
    body = sys.stdin.buffer.read()

    if args.now is not None:
        fixed = datetime.fromtimestamp(args.now, tz=timezone.utc)

        class FixedClock(datetime):
            @classmethod
            def now(cls, tz=None):
                return fixed if tz is None else fixed.astimezone(tz)

        # The package reads the time through its module's `datetime` name; nothing else is replaced.
        webhooks.datetime = FixedClock

    headers = {
        "webhook-id": args.webhook_id,
        "webhook-timestamp": args.webhook_timestamp,
        "webhook-signature": args.webhook_signature,
    }
    try:
        webhooks.Webhook(args.secret).verify(body, headers, json_parse=False)
    # ValueError: a malformed signature (bad base64, no comma) or a body that is not UTF-8.
    except (webhooks.WebhookVerificationError, ValueError) as e:
        print(f"refused: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
