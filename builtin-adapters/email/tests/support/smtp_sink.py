"""SMTP receiver for the email adapter's tests (aiosmtpd).

Listens on 127.0.0.1:PORT, requires AUTH with USER and PASSWORD (no TLS: loopback only), and
writes every message it accepts to FOLDER as NNNN.eml: one JSON line with the envelope, then
the message exactly as received. Recipients whose address starts with "refused@" are refused
for good (550), as a server refuses an unknown mailbox. Prints "ready" once it accepts connections, and exits when
its standard input closes, so it never outlives the test that started it.
"""

import argparse
import json
import logging
import os
import sys
import warnings

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword


class Store:
    def __init__(self, folder):
        self.folder = folder
        self.count = 0

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        if address.startswith("refused@"):
            return "550 5.1.1 No such mailbox here"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        self.count += 1
        name = os.path.join(self.folder, f"{self.count:04d}")
        with open(name + ".tmp", "wb") as out:
            head = {"mail_from": envelope.mail_from, "rcpt_tos": envelope.rcpt_tos}
            out.write(json.dumps(head).encode() + b"\n")
            out.write(envelope.original_content)
        # Renamed only when whole, so a reader never sees half a message.
        os.rename(name + ".tmp", name + ".eml")
        return "250 OK"


def authenticator(user, password):
    def check(server, session, envelope, mechanism, auth_data):
        ok = (
            isinstance(auth_data, LoginPassword)
            and auth_data.login.decode() == user
            and auth_data.password.decode() == password
        )
        return AuthResult(success=ok)

    return check


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--folder", required=True)
    parser.add_argument("--user", required=True)
    parser.add_argument("--password", required=True)
    args = parser.parse_args()
    # AUTH without TLS is the point here (loopback only), so aiosmtpd's warnings about it are
    # noise in the test output.
    warnings.filterwarnings("ignore", message="Requiring AUTH while not requiring TLS")
    logging.getLogger("mail.log").setLevel(logging.ERROR)
    controller = Controller(
        Store(args.folder),
        hostname="127.0.0.1",
        port=args.port,
        authenticator=authenticator(args.user, args.password),
        auth_required=True,
        auth_require_tls=False,
    )
    controller.start()
    print("ready", flush=True)
    sys.stdin.read()
    controller.stop()


if __name__ == "__main__":
    main()
