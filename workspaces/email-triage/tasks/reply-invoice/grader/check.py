#!/usr/bin/env python3
"""Grader for reply-invoice: one reply in outbox/ to the invoice's Reply-To address, subject
'Re: ' + the original, naming the invoice, the amount and the payment date; the invoice email
marked read and otherwise unchanged; nothing else in the mailbox touched."""
import json, os, re, sys

W = sys.argv[1] if len(sys.argv) > 1 else "/workspace"
def read(p):
    try:
        with open(os.path.join(W, p), encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return None
s = {"one_email": 0, "to_reply_address": 0, "subject": 0, "mentions_invoice": 0,
     "mentions_amount": 0, "mentions_date": 0, "sent_with_skill": 0, "marked_read": 0,
     "rest_unchanged": 0}
try:
    out = sorted(os.listdir(os.path.join(W, "outbox")))
except OSError:
    out = []
s["one_email"] = 1 if out == ["1.txt"] else 0
mail = read("outbox/1.txt") or ""
head, _, body = mail.partition("\n\n")
h = {}
for line in head.split("\n"):
    k, _, v = line.partition(":"); h[k.strip().lower()] = v.strip()
s["to_reply_address"] = 1 if h.get("to", "").lower() == "accounts@velopartsitalia.it" else 0
s["subject"] = 1 if h.get("subject") == "Re: Invoice VPI-2026-0311" else 0
s["sent_with_skill"] = 1 if re.match(r"^\w{3}, \d\d \w{3} 2026 \d\d:\d\d:\d\d [+-]\d{4}$", h.get("date", "")) else 0
s["mentions_invoice"] = 1 if "VPI-2026-0311" in body else 0
s["mentions_amount"] = 1 if re.search(r"3,?240(\.00)?", body) else 0
s["mentions_date"] = 1 if re.search(r"31 March|2026-03-31|March 31", body) else 0
inv = read("mailbox/inbox/16.eml") or ""
s["marked_read"] = 1 if "\nStatus: read\n" in inv and "Status: unread" not in inv and "EUR 3,240.00" in inv else 0
try:
    names = sorted(os.listdir(os.path.join(W, "mailbox", "inbox")))
    others = [read("mailbox/inbox/%02d.eml" % i) or "" for i in (2, 4, 6, 9, 20)]
    s["rest_unchanged"] = 1 if len(names) == 20 and all("Status: unread" in o for o in others) else 0
except OSError:
    pass
print(json.dumps(s))
