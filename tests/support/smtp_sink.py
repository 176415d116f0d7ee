"""A real SMTP server on loopback for the origin's mail tests (origin-api/tests/it/mail.rs), built on aiosmtpd
(pinned in requirements-mail.txt, installed by `cargo xtask test`).

    python3 tests/support/smtp_sink.py OUTDIR [--user USER --password PASSWORD]

Listens on 127.0.0.1 on a port the system picks and prints that port on the first line of stdout once it
accepts connections. Every message it receives is written to OUTDIR as NNNN.json (written to a temporary name
first, then renamed, so a reader never sees half a file): the envelope, the authenticated login (when --user
is given, AUTH PLAIN/LOGIN is required and checked, without TLS: loopback only), the headers that matter, the
plain-text body decoded, and the raw message. Runs until killed.
"""

import argparse
import asyncio
import email
import email.policy
import json
import os
import sys

from aiosmtpd.smtp import SMTP, AuthResult, LoginPassword


class Sink:
    def __init__(self, outdir):
        self.outdir = outdir
        self.count = 0

    async def handle_DATA(self, server, session, envelope):
        raw = envelope.original_content or envelope.content
        if isinstance(raw, str):
            raw = raw.encode("utf-8")
        message = email.message_from_bytes(raw, policy=email.policy.default)
        part = message.get_body(preferencelist=("plain",))
        record = {
            "mail_from": envelope.mail_from,
            "rcpt_tos": envelope.rcpt_tos,
            "login": session.auth_data.decode("utf-8") if isinstance(session.auth_data, bytes) else None,
            "from": str(message["From"]),
            "to": str(message["To"]),
            "subject": str(message["Subject"]),
            "content_type": message.get_content_type(),
            "body": part.get_content() if part is not None else "",
            "raw": raw.decode("utf-8", "replace"),
        }
        self.count += 1
        name = os.path.join(self.outdir, f"{self.count:04}.json")
        with open(name + ".tmp", "w", encoding="utf-8") as f:
            json.dump(record, f)
        os.replace(name + ".tmp", name)
        return "250 Message accepted for delivery"


def authenticator(user, password):
    def check(server, session, envelope, mechanism, auth_data):
        ok = (
            isinstance(auth_data, LoginPassword)
            and auth_data.login == user.encode()
            and auth_data.password == password.encode()
        )
        if not ok:
            # handled=False: aiosmtpd answers "535 5.7.8 Authentication credentials invalid" itself.
            return AuthResult(success=False, handled=False)
        return AuthResult(success=True, auth_data=auth_data.login)

    return check


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("outdir")
    parser.add_argument("--user")
    parser.add_argument("--password")
    args = parser.parse_args()
    os.makedirs(args.outdir, exist_ok=True)
    handler = Sink(args.outdir)

    def factory():
        if args.user is not None:
            return SMTP(
                handler,
                hostname="smtp-sink.test",
                auth_required=True,
                auth_require_tls=False,
                authenticator=authenticator(args.user, args.password or ""),
            )
        return SMTP(handler, hostname="smtp-sink.test")

    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    server = loop.run_until_complete(loop.create_server(factory, "127.0.0.1", 0))
    print(server.sockets[0].getsockname()[1], flush=True)
    try:
        loop.run_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
