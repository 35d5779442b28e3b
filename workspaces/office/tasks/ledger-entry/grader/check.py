#!/usr/bin/env python3
"""Grader for ledger-entry: the ledger opens; row 8 is invoice PBP-4471 as the PDF gives it
(date 27/03/2026, due 30 days later, net 2,003.30, VAT 400.66, gross `=E8+F8`) with the
number formats of the rows above; rows 1 to 7, the other sheets and the rest are as in the
original (this directory's copy); nothing below row 8."""
import datetime as dt, json, os, sys

W = sys.argv[1] if len(sys.argv) > 1 else "/workspace"
HERE = os.path.dirname(os.path.abspath(__file__))
s = {"opens": 0, "date": 0, "supplier": 0, "invoice": 0, "due": 0, "net": 0, "vat": 0,
     "gross_formula": 0, "formats": 0, "earlier_rows_unchanged": 0, "nothing_else": 0}


def as_date(v):
    return v.date() if isinstance(v, dt.datetime) else v


try:
    import zipfile
    with zipfile.ZipFile(os.path.join(W, "finance/purchase-ledger.xlsx")) as z:
        if z.testzip() is not None:  # a member whose CRC does not match
            raise zipfile.BadZipFile("damaged member")
    import openpyxl
    wb = openpyxl.load_workbook(os.path.join(W, "finance/purchase-ledger.xlsx"))
    ws = wb["Ledger"]
except Exception:  # a missing, corrupt or renamed workbook or sheet scores 0
    print(json.dumps(s))
    sys.exit(0)
s["opens"] = 1
orig = openpyxl.load_workbook(os.path.join(HERE, "purchase-ledger.xlsx"))["Ledger"]
r = orig.max_row + 1
v = {c: ws[f"{c}{r}"].value for c in "ABCDEFG"}
s["date"] = int(as_date(v["A"]) == dt.date(2026, 3, 27))
s["supplier"] = int(v["B"] == "Pennine Bike Parts Ltd")
s["invoice"] = int(v["C"] == "PBP-4471")
s["due"] = int(as_date(v["D"]) == dt.date(2026, 4, 26))
s["net"] = int(isinstance(v["E"], (int, float)) and abs(v["E"] - 2003.30) < 0.001)
s["vat"] = int(isinstance(v["F"], (int, float)) and abs(v["F"] - 400.66) < 0.001)
s["gross_formula"] = int(str(v["G"]).replace(" ", "").replace("$", "").upper() == f"=E{r}+F{r}")
s["formats"] = int(all(ws[f"{c}{r}"].number_format == orig[f"{c}{r - 1}"].number_format
                       for c in "ABCDEFG"))
s["earlier_rows_unchanged"] = int(all(
    ws.cell(i, j).value == orig.cell(i, j).value
    and ws.cell(i, j).number_format == orig.cell(i, j).number_format
    for i in range(1, r) for j in range(1, 8)))
s["nothing_else"] = int(ws.max_row == r and ws.max_column == 7 and wb.sheetnames == ["Ledger"])
print(json.dumps(s))
