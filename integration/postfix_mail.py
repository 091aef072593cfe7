#!/usr/bin/env python3
"""postfix_mail.py: run_postfix.sh's mail client and mailbox reader.

    postfix_mail.py smtp SOCK SUBJECT [BODY]
                                        one mail to nobody@h121.test through smtpd on the
                                        unix stream socket SOCK (its body the file BODY's
                                        lines, or one line); prints each reply
    postfix_mail.py burst SOCK N        N such mails at once, each in a session of its own
                                        (subjects "burst 1".."burst N"); prints the replies
                                        that were not the usual ones
    postfix_mail.py mbox FILE           one line per message of the mbox FILE: the headers
                                        the runs share, the body's size and SHA-256
    postfix_mail.py body FILE SUBJECT SENT
                                        whether the message SUBJECT in FILE has the body
                                        of the mail SENT (headers, a blank line, body)
"""

import hashlib
import mailbox
import smtplib
import socket
import sys
import threading


class UnixSMTP(smtplib.SMTP):
    """smtplib on a unix stream socket: the host is the socket's path."""

    def _get_socket(self, host, port, timeout):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        sock.connect(host)
        return sock


def smtp(path, subject, body_file=None):
    client = UnixSMTP(timeout=15)
    print("connect:", *client.connect(path))
    code, features = client.ehlo("client.h121.test")
    print("ehlo:", code, features.decode().replace("\n", " "))
    body = "sent through smtpd\n"
    if body_file:
        with open(body_file) as f:
            body = f.read().split("\n\n", 1)[1]
    mail = f"Subject: {subject}\nFrom: alice@h121.test\nTo: nobody@h121.test\n\n{body}"
    print("refused:", client.sendmail("alice@h121.test", ["nobody@h121.test"], mail))
    print("quit:", *client.quit())


def burst(path, n):
    odd = []

    def one(k):
        try:
            client = UnixSMTP(timeout=30)
            client.connect(path)
            client.ehlo("client.h121.test")
            mail = f"Subject: burst {k}\nFrom: alice@h121.test\nTo: nobody@h121.test\n\nburst mail {k}\n"
            refused = client.sendmail("alice@h121.test", ["nobody@h121.test"], mail)
            code = client.quit()[0]
            if refused or code != 221:
                odd.append(f"{k}: refused {refused}, quit {code}")
        except Exception as e:  # what went wrong is the answer
            odd.append(f"{k}: {type(e).__name__}: {e}")

    threads = [threading.Thread(target=one, args=(k,)) for k in range(1, int(n) + 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(f"burst of {n}: {len(odd)} odd answers", *sorted(odd), sep="\n")


# The headers every run gives the same values (not Received, Date, Message-Id: times
# and queue ids).
SHARED = ("Return-Path", "X-Original-To", "Delivered-To", "From", "To", "Subject")


# What a bounce's delivery report says that every run says alike.
REPORTED = ("Final-Recipient", "Action", "Status", "Diagnostic-Code")


def mbox(path):
    for msg in mailbox.mbox(path, create=False):
        heads = " ".join(f"{h}={msg.get(h)}" for h in SHARED)
        if msg.is_multipart():
            # a bounce: its text names queue ids and times; its report's fields do not
            report = [p for p in msg.walk() if p.get_content_type() == "message/delivery-status"]
            fields = [f"{k}={part.get(k)}" for r in report for part in r.get_payload() for k in REPORTED if part.get(k)]
            print(heads, "report:", *fields)
            continue
        body = msg.get_payload(decode=False).encode()
        print(f"{heads} body={len(body)} sha256={hashlib.sha256(body).hexdigest()[:16]}")


def body(path, subject, sent):
    with open(sent, "rb") as f:
        want = f.read().split(b"\n\n", 1)[1]
    got = [m.get_payload().encode() for m in mailbox.mbox(path, create=False) if m["Subject"] == subject]
    print(f"{subject} body equal:", "yes" if got == [want] else f"no ({[len(g) for g in got]} bytes, want {len(want)})")


if __name__ == "__main__":
    {"smtp": smtp, "burst": burst, "mbox": mbox, "body": body}[sys.argv[1]](*sys.argv[2:])
