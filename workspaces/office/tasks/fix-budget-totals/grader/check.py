#!/usr/bin/env python3
"""Grader for fix-budget-totals: the workbook opens; N2:N9 are `=SUM(Br:Mr)` and B10:N10
`=SUM(X2:X9)`; every other cell (value and number format) and every sheet is as in the
original (this directory's copy of it)."""
import json, os, sys

W = sys.argv[1] if len(sys.argv) > 1 else "/workspace"
HERE = os.path.dirname(os.path.abspath(__file__))
COLS = "BCDEFGHIJKLMN"
s = {"opens": 0, "row_totals": 0, "column_totals": 0, "other_cells_unchanged": 0,
     "sheets_kept": 0}


def norm(v):
    return str(v).replace(" ", "").replace("$", "").upper() if v is not None else ""


def cells(wb):
    out = {}
    for ws in wb.worksheets:
        for row in ws.iter_rows():
            for c in row:
                if c.value is not None:
                    out[(ws.title, c.coordinate)] = (c.value, c.number_format)
    return out


try:
    import zipfile
    with zipfile.ZipFile(os.path.join(W, "finance/budget-2026.xlsx")) as z:
        if z.testzip() is not None:  # a member whose CRC does not match
            raise zipfile.BadZipFile("damaged member")
    import openpyxl
    wb = openpyxl.load_workbook(os.path.join(W, "finance/budget-2026.xlsx"))
    ws = wb["Budget 2026"]
except Exception:  # a missing, corrupt or renamed workbook or sheet scores 0
    print(json.dumps(s))
    sys.exit(0)
s["opens"] = 1
orig = openpyxl.load_workbook(os.path.join(HERE, "budget-2026.xlsx"))
rows = [norm(ws[f"N{r}"].value) == f"=SUM(B{r}:M{r})" for r in range(2, 10)]
s["row_totals"] = round(sum(rows) / len(rows), 3)
cols = [norm(ws[f"{c}10"].value) == f"=SUM({c}2:{c}9)" for c in COLS]
s["column_totals"] = round(sum(cols) / len(cols), 3)
fixed = {("Budget 2026", f"N{r}") for r in range(2, 10)} | {("Budget 2026", f"{c}10") for c in COLS}
a, b = cells(orig), cells(wb)
same = all(b.get(k) == v for k, v in a.items() if k not in fixed)
extra = [k for k in b if k not in a and k not in fixed]
formats = all(ws[k[1]].number_format == orig["Budget 2026"][k[1]].number_format for k in fixed)
s["other_cells_unchanged"] = 1 if same and not extra and formats else 0
s["sheets_kept"] = 1 if wb.sheetnames == orig.sheetnames else 0
print(json.dumps(s))
