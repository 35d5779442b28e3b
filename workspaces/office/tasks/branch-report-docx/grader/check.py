#!/usr/bin/env python3
"""Grader for branch-report-docx: reports/march-2026-branches.docx opens; its first paragraph
is the heading `March 2026 sales by branch` in style Heading 1, some text follows; it has one
table whose rows are exactly the header, the branches by revenue (from this directory's copy
of the orders workbook: distinct paid orders, the sum of Qty x Unit price over paid lines) and
the total; the workbook is unchanged; nothing else is new in reports/."""
import hashlib, json, os, sys
from decimal import Decimal

W = sys.argv[1] if len(sys.argv) > 1 else "/workspace"
HERE = os.path.dirname(os.path.abspath(__file__))
import docx, openpyxl

ws = openpyxl.load_workbook(os.path.join(HERE, "orders-2026-03.xlsx"))["Orders"]
by = {}
for order, _, branch, _, _, qty, price, _, status in ws.iter_rows(min_row=2, values_only=True):
    if order is not None and status == "paid":
        b = by.setdefault(branch, [set(), Decimal(0)])
        b[0].add(order)
        b[1] += Decimal(str(price)) * qty
expected = [["Branch", "Orders", "Revenue (£)"]]
for name, (orders, revenue) in sorted(by.items(), key=lambda kv: -kv[1][1]):
    expected.append([name, str(len(orders)), f"{revenue:,.2f}"])
expected.append(["Total", str(sum(len(o) for o, _ in by.values())),
                 f"{sum(r for _, r in by.values()):,.2f}"])

s = {"opens": 0, "heading": 0, "text": 0, "one_table": 0, "header_row": 0, "branch_rows": 0,
     "total_row": 0, "workbook_unchanged": 0, "nothing_else": 0}
path = os.path.join(W, "reports/march-2026-branches.docx")
try:
    doc = docx.Document(path)
    paragraphs = [p for p in doc.paragraphs if p.text.strip()]
    tables = doc.tables
    s["opens"] = 1
except Exception:  # missing or not a Word document
    doc = None
if doc is not None:
    first = paragraphs[0] if paragraphs else None
    s["heading"] = int(first is not None and first.text == "March 2026 sales by branch"
                       and first.style.name == "Heading 1")
    s["text"] = int(len(paragraphs) >= 2 and len(paragraphs[1].text.split()) >= 5)
    s["one_table"] = int(len(tables) == 1)
    if tables:
        rows = [[c.text.strip() for c in r.cells] for r in tables[0].rows]
        s["header_row"] = int(rows[:1] == expected[:1])
        s["branch_rows"] = int(rows[1:-1] == expected[1:-1])
        s["total_row"] = int(len(rows) == len(expected) and rows[-1] == expected[-1])


def sha(p):
    try:
        with open(p, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return None


s["workbook_unchanged"] = int(sha(os.path.join(W, "sales/orders-2026-03.xlsx"))
                              == sha(os.path.join(HERE, "orders-2026-03.xlsx")))
reports = os.path.join(W, "reports")
s["nothing_else"] = int(os.path.isdir(reports)
                        and os.listdir(reports) == ["march-2026-branches.docx"])
print(json.dumps(s))
