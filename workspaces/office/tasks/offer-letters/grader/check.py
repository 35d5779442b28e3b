#!/usr/bin/env python3
"""Grader for offer-letters: for each starter of this directory's copy of new-starters.xlsx
who has not withdrawn, hr/offers/offer-first-last.docx holds the template's paragraphs (this
directory's copy) with every placeholder filled as the task says, bold where the template is;
no letter for anyone else, nothing else in hr/offers/, the template unchanged."""
import hashlib, json, os, sys

W = sys.argv[1] if len(sys.argv) > 1 else "/workspace"
HERE = os.path.dirname(os.path.abspath(__file__))
import docx, openpyxl

template = docx.Document(os.path.join(HERE, "offer-letter.docx"))
starters = openpyxl.load_workbook(os.path.join(HERE, "new-starters.xlsx"))["Starters"]
expected = {}
for first, last, role, branch, start, rate, hours, manager, status in starters.iter_rows(
        min_row=2, values_only=True):
    if first is None or status == "withdrawn":
        continue
    values = {"date": "6 April 2026", "first_name": first, "role": role, "branch": branch,
              "start_date": f"{start.day} {start:%B %Y}", "manager": manager,
              "hourly_rate": f"£{rate:.2f}", "hours": f"{hours:g}", "reply_by": "20 April 2026"}
    paragraphs = []
    for p in template.paragraphs:
        text = p.text
        for k, val in values.items():
            text = text.replace("{{" + k + "}}", val)
        paragraphs.append((text, any(r.bold for r in p.runs)))
    expected[f"offer-{first.lower()}-{last.lower()}.docx"] = paragraphs

s = {}
for name, paragraphs in sorted(expected.items()):
    key = name[len("offer-"):-len(".docx")]
    try:
        got = docx.Document(os.path.join(W, "hr/offers", name))
        body = [(p.text, any(r.bold for r in p.runs)) for p in got.paragraphs]
        texts = [t for t, _ in body]
        s[f"{key}_text"] = int(texts == [t for t, _ in paragraphs])
        s[f"{key}_bold"] = int(body == paragraphs)
    except Exception:  # missing or not a Word document
        s[f"{key}_text"] = 0
        s[f"{key}_bold"] = 0
present = sorted(os.listdir(os.path.join(W, "hr/offers"))) if os.path.isdir(
    os.path.join(W, "hr/offers")) else []
s["only_these_letters"] = int(bool(present) and present == sorted(expected))


def sha(p):
    try:
        with open(p, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return None


s["template_unchanged"] = int(sha(os.path.join(W, "templates/offer-letter.docx"))
                              == sha(os.path.join(HERE, "offer-letter.docx")))
print(json.dumps(s))
