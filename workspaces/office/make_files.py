#!/usr/bin/env python3
"""Makes the office environment's documents, byte for byte the same on every run.

    python3 make_files.py OUT

writes OUT/files/ (the environment's initial workspace) and OUT/tasks/ID/grader/ (the copies of
inputs that graders compare against). It needs openpyxl and python-docx, so run it over the
office image (`make office-files` does: `envcraft exec --image office ... --keep-changes`).

Reproducible: no clock, no randomness. Zip members (xlsx, docx) get one fixed timestamp and the
documents' core properties fixed dates; the PDFs are written by hand below (Helvetica, one text
object per cell), so `pdftotext -layout` gives back their columns. A different openpyxl or
python-docx may write other bytes: re-record the manifest tasks (`envcraft record`) after
regenerating with another image.
"""
import datetime as dt
import io
import os
import re
import sys
import zipfile

import docx
import openpyxl
from docx.shared import Pt
from openpyxl.styles import Font

FIXED_ZIP_TIME = (2026, 1, 5, 9, 0, 0)
FIXED_PROP_TIME = dt.datetime(2026, 1, 5, 9, 0, 0)
COMPANY = "Tern Valley Cycles Ltd"


def normalise_zip(path):
    """Rewrite a zip with fixed member times and fixed core-property dates."""
    with zipfile.ZipFile(path) as src:
        members = [(i.filename, src.read(i.filename)) for i in src.infolist()]
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as out:
        for name, data in members:
            if name == "docProps/core.xml":
                text = data.decode("utf-8")
                text = re.sub(
                    r"(<dcterms:(created|modified)[^>]*>)[^<]*(</dcterms:)",
                    r"\g<1>2026-01-05T09:00:00Z\g<3>",
                    text,
                )
                data = text.encode("utf-8")
            info = zipfile.ZipInfo(name, date_time=FIXED_ZIP_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            out.writestr(info, data)
    with open(path, "wb") as f:
        f.write(buf.getvalue())


def save_workbook(wb, path):
    wb.properties.creator = "Ruth Calder"
    wb.properties.lastModifiedBy = "Ruth Calder"
    wb.properties.created = FIXED_PROP_TIME
    wb.properties.modified = FIXED_PROP_TIME
    os.makedirs(os.path.dirname(path), exist_ok=True)
    wb.save(path)
    normalise_zip(path)


def save_document(doc, path):
    props = doc.core_properties
    props.author = "Ruth Calder"
    props.last_modified_by = "Ruth Calder"
    props.created = FIXED_PROP_TIME
    props.modified = FIXED_PROP_TIME
    props.revision = 1
    os.makedirs(os.path.dirname(path), exist_ok=True)
    doc.save(path)
    normalise_zip(path)


# --- sales/orders-2026-03.xlsx -------------------------------------------------------------

ORDERS = [
    # order, day, branch, customer, item, qty, unit price, status
    ("TV-2301", 2, "Hebden Bridge", "Alys Pryce", "Inner tube 700x28", 2, 6.50, "paid"),
    ("TV-2301", 2, "Hebden Bridge", "Alys Pryce", "Tyre levers (pair)", 1, 3.25, "paid"),
    ("TV-2302", 2, "Halifax", "Dev Mistry", "Full service", 1, 85.00, "paid"),
    ("TV-2303", 3, "Todmorden", "Carys Holt", "Brake pads, disc (set)", 2, 17.99, "paid"),
    ("TV-2304", 4, "Hebden Bridge", "Owen Marsh", "Gravel bike Ridgeway 2", 1, 1249.00, "paid"),
    ("TV-2304", 4, "Hebden Bridge", "Owen Marsh", "Bottle cage", 2, 8.99, "paid"),
    ("TV-2305", 5, "Halifax", "Priya Shah", "Chain 11-speed", 1, 34.50, "paid"),
    ("TV-2305", 5, "Halifax", "Priya Shah", "Chain fitting", 1, 12.00, "paid"),
    ("TV-2306", 6, "Todmorden", "Ben Ackroyd", "Helmet Aero M", 1, 64.99, "cancelled"),
    ("TV-2307", 9, "Hebden Bridge", "Nia Roberts", "Puncture repair", 1, 15.00, "paid"),
    ("TV-2308", 9, "Halifax", "Sam Oduya", "E-bike battery 500Wh", 1, 489.00, "paid"),
    ("TV-2309", 10, "Todmorden", "Lena Fischer", "Full service", 1, 85.00, "paid"),
    ("TV-2309", 10, "Todmorden", "Lena Fischer", "Cassette 11-32", 1, 42.75, "paid"),
    ("TV-2310", 11, "Hebden Bridge", "Tom Greenwood", "Lights set USB", 1, 39.99, "paid"),
    ("TV-2311", 12, "Halifax", "Dev Mistry", "Inner tube 700x28", -1, 6.50, "paid"),
    ("TV-2312", 13, "Todmorden", "Carys Holt", "Mudguards 45mm", 1, 29.99, "paid"),
    ("TV-2313", 16, "Hebden Bridge", "Grace Lumb", "Kids bike Sprout 16", 1, 219.00, "paid"),
    ("TV-2313", 16, "Hebden Bridge", "Grace Lumb", "Helmet Kids S", 1, 24.99, "paid"),
    ("TV-2314", 17, "Halifax", "Imran Aziz", "Tubeless conversion", 1, 45.00, "paid"),
    ("TV-2314", 17, "Halifax", "Imran Aziz", "Sealant 125ml", 2, 7.99, "paid"),
    ("TV-2315", 18, "Todmorden", "Ben Ackroyd", "Helmet Aero L", 1, 64.99, "paid"),
    ("TV-2316", 19, "Hebden Bridge", "Alys Pryce", "Bar tape", 1, 14.50, "paid"),
    ("TV-2317", 20, "Halifax", "Priya Shah", "Pedals SPD", 1, 49.95, "cancelled"),
    ("TV-2318", 23, "Todmorden", "Mo Haddad", "Gravel bike Ridgeway 1", 1, 899.00, "paid"),
    ("TV-2318", 23, "Todmorden", "Mo Haddad", "Pedals flat", 1, 22.00, "paid"),
    ("TV-2319", 24, "Hebden Bridge", "Nia Roberts", "Full service", 1, 85.00, "paid"),
    ("TV-2320", 25, "Halifax", "Sam Oduya", "Brake bleed", 1, 30.00, "paid"),
    ("TV-2321", 26, "Todmorden", "Lena Fischer", "Inner tube 700x32", 3, 6.75, "paid"),
    ("TV-2322", 27, "Hebden Bridge", "Owen Marsh", "Bottle cage", -1, 8.99, "paid"),
    ("TV-2323", 30, "Halifax", "Ellen Dyson", "Commuter bike Canal 3", 1, 649.00, "paid"),
    ("TV-2323", 30, "Halifax", "Ellen Dyson", "Lock D 13mm", 1, 54.99, "paid"),
    ("TV-2324", 31, "Todmorden", "Carys Holt", "Chain lube 100ml", 2, 6.99, "paid"),
]


def orders_workbook():
    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "Orders"
    ws.append(["Order", "Date", "Branch", "Customer", "Item", "Qty", "Unit price (£)",
               "Line total (£)", "Status"])
    for c in ws[1]:
        c.font = Font(bold=True)
    for i, (order, day, branch, customer, item, qty, price, status) in enumerate(ORDERS, start=2):
        ws.append([order, dt.datetime(2026, 3, day), branch, customer, item, qty, price,
                   f"=F{i}*G{i}", status])
        ws.cell(i, 2).number_format = "dd/mm/yyyy"
        ws.cell(i, 7).number_format = "#,##0.00"
        ws.cell(i, 8).number_format = "#,##0.00"
    ws.freeze_panes = "A2"
    notes = wb.create_sheet("Notes")
    notes.append(["Exported from the till system on 1 April 2026 by Ruth Calder."])
    notes.append(["A negative Qty is a return; cancelled orders were never charged."])
    return wb


# --- finance/budget-2026.xlsx --------------------------------------------------------------

MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
BUDGET = [
    ("Stock purchases", [18000, 16500, 21000, 26000, 28500, 30000, 31000, 29000, 24000, 19500,
                         17000, 22000]),
    ("Staff", [14200] * 3 + [15800] * 6 + [14200] * 3),
    ("Rent", [4500] * 12),
    ("Utilities", [820, 790, 700, 610, 540, 500, 480, 490, 560, 650, 740, 830]),
    ("Marketing", [600, 600, 1200, 1800, 1500, 900, 900, 700, 600, 500, 800, 2400]),
    ("Insurance", [310] * 12),
    ("Workshop tools", [250, 0, 400, 1200, 0, 300, 0, 0, 650, 0, 200, 0]),
    ("IT & software", [385, 385, 385, 385, 385, 385, 385, 385, 385, 1185, 385, 385]),
]


def budget_workbook():
    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "Budget 2026"
    ws.append(["Category"] + MONTHS + ["Total"])
    for c in ws[1]:
        c.font = Font(bold=True)
    for r, (name, values) in enumerate(BUDGET, start=2):
        ws.append([name] + values + [f"=SUM(B{r}:M{r})"])
    last = 1 + len(BUDGET)
    total_row = last + 1
    ws.append(["Total"] + [f"=SUM({col}2:{col}{last})" for col in "BCDEFGHIJKLMN"])
    for c in ws[total_row]:
        c.font = Font(bold=True)
    for row in ws.iter_rows(min_row=2, min_col=2, max_col=14):
        for c in row:
            c.number_format = "#,##0"
    # What went wrong over the year: a stale hard-coded total, a range one month short, and a
    # totals cell that stops one category early.
    ws["N4"] = 52800
    ws["N6"] = "=SUM(B6:L6)"
    ws[f"M{total_row}"] = f"=SUM(M2:M{last - 1})"
    ws.column_dimensions["A"].width = 18
    notes = wb.create_sheet("Assumptions")
    notes.append(["Staff: two seasonal mechanics from April to September."])
    notes.append(["Rent: Hebden Bridge, Todmorden and Halifax leases, 1,500 a month each."])
    notes.append(["IT & software: the till system's annual licence renews in October."])
    return wb


# --- finance/purchase-ledger.xlsx ----------------------------------------------------------

LEDGER = [
    # date, supplier, invoice, terms days, net
    ((2026, 3, 2), "Calder Valley Energy", "CVE-88120", 14, 684.17),
    ((2026, 3, 4), "Pennine Bike Parts Ltd", "PBP-4390", 30, 2315.40),
    ((2026, 3, 9), "Northern Tyre Supply", "NTS-20731", 30, 918.00),
    ((2026, 3, 12), "Mill Yard Estates", "MYE-0326", 7, 4500.00),
    ((2026, 3, 16), "Pennine Bike Parts Ltd", "PBP-4428", 30, 1187.25),
    ((2026, 3, 20), "Hebden Print Co", "HPC-1177", 30, 240.00),
]


def ledger_workbook():
    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "Ledger"
    ws.append(["Date", "Supplier", "Invoice", "Due", "Net (£)", "VAT (£)", "Gross (£)"])
    for c in ws[1]:
        c.font = Font(bold=True)
    for r, (ymd, supplier, invoice, terms, net) in enumerate(LEDGER, start=2):
        date = dt.datetime(*ymd)
        vat = round(net * 0.2 + 1e-9, 2)
        ws.append([date, supplier, invoice, date + dt.timedelta(days=terms), net, vat,
                   f"=E{r}+F{r}"])
        ws.cell(r, 1).number_format = "dd/mm/yyyy"
        ws.cell(r, 4).number_format = "dd/mm/yyyy"
        for col in (5, 6, 7):
            ws.cell(r, col).number_format = "#,##0.00"
    ws.column_dimensions["B"].width = 26
    return wb


# --- hr/new-starters.xlsx and templates/offer-letter.docx ----------------------------------

STARTERS = [
    # first, last, role, branch, start, hourly rate, hours, manager, status
    ("Hollie", "Sutcliffe", "Seasonal mechanic", "Hebden Bridge", (2026, 5, 4), 13.40, 37.5,
     "Gareth Booth", "accepted verbally"),
    ("Kwame", "Asante", "Sales assistant", "Halifax", (2026, 4, 20), 12.60, 24,
     "Ellie Crabtree", "accepted verbally"),
    ("Joe", "Whitworth", "Seasonal mechanic", "Todmorden", (2026, 5, 4), 13.40, 37.5,
     "Priya Lodge", "withdrawn"),
    ("Marta", "Nowak", "Workshop apprentice", "Todmorden", (2026, 9, 7), 8.00, 30,
     "Priya Lodge", "accepted verbally"),
]


def starters_workbook():
    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "Starters"
    ws.append(["First name", "Last name", "Role", "Branch", "Start date", "Hourly rate (£)",
               "Hours a week", "Manager", "Status"])
    for c in ws[1]:
        c.font = Font(bold=True)
    for r, (first, last, role, branch, start, rate, hours, manager, status) in enumerate(
            STARTERS, start=2):
        ws.append([first, last, role, branch, dt.datetime(*start), rate, hours, manager, status])
        ws.cell(r, 5).number_format = "d mmmm yyyy"
        ws.cell(r, 6).number_format = "0.00"
    return wb


OFFER_PARAGRAPHS = [
    ("Tern Valley Cycles Ltd", True),
    ("Unit 4, Mill Yard, Hebden Bridge HX7 8AD", False),
    ("{{date}}", False),
    ("Dear {{first_name}},", False),
    ("Offer of employment: {{role}}", True),
    ("We are delighted to offer you the role of {{role}} at our {{branch}} branch, starting on "
     "{{start_date}}. You will report to {{manager}}.", False),
    ("Your hourly rate will be {{hourly_rate}} for {{hours}} hours a week, paid monthly in "
     "arrears.", False),
    ("Please sign and return a copy of this letter by {{reply_by}}.", False),
    ("Yours sincerely,", False),
    ("Ruth Calder", False),
    ("Operations Manager", False),
]


def offer_template():
    doc = docx.Document()
    style = doc.styles["Normal"]
    style.font.name = "Calibri"
    style.font.size = Pt(11)
    for text, bold in OFFER_PARAGRAPHS:
        run = doc.add_paragraph().add_run(text)
        run.bold = bold
    return doc


MINUTES_PRESENT = [("Ruth Calder", "RC"), ("Gareth Booth", "GB"), ("Ellie Crabtree", "EC"),
                   ("Priya Lodge", "PL")]
MINUTES_ACTIONS = [
    # action, owner's initials, due, status
    ("Order the spring stock of gravel tyres", "GB", "3 April 2026", "Done"),
    ("Book the Halifax shop-front repair", "EC", "8 April 2026", "Open"),
    ("Draft the summer workshop rota", "PL", "17 April 2026", "Open"),
    ("Renew the public liability insurance", "RC", "30 April 2026", "Open"),
    ("Price up a second workshop stand", "GB", "10 April 2026", "Open"),
    ("Send the March figures to the accountant", "RC", "7 April 2026", "Open"),
    ("Reorder the branded bottles", "EC", "27 March 2026", "Done"),
    ("Set up the e-bike demo day at Todmorden", "PL", "10 April 2026", "Open"),
]


def minutes_document():
    doc = docx.Document()
    doc.add_heading("Managers' meeting, 30 March 2026", level=1)
    doc.add_paragraph("Present: " + ", ".join(f"{n} ({i})" for n, i in MINUTES_PRESENT) + ".")
    doc.add_heading("Notes", level=2)
    for text in (
        "March closed ahead of last year at all three branches; Hebden Bridge sold two gravel "
        "bikes in the last week.",
        "Pennine Bike Parts' new prices came in before the date on their price list: check "
        "their invoices against the list before paying.",
        "The seasonal mechanics start in May; offer letters to go out on 6 April.",
    ):
        doc.add_paragraph(text, style="List Bullet")
    doc.add_heading("Actions", level=2)
    table = doc.add_table(rows=1, cols=5)
    table.style = "Table Grid"
    for cell, text in zip(table.rows[0].cells, ["No.", "Action", "Owner", "Due", "Status"]):
        cell.text = text
    for n, (action, owner, due, status) in enumerate(MINUTES_ACTIONS, start=1):
        for cell, text in zip(table.add_row().cells, [str(n), action, owner, due, status]):
            cell.text = text
    doc.add_paragraph("Next meeting: Monday 27 April 2026, 08:30, Hebden Bridge.")
    return doc


# --- PDFs, written by hand -----------------------------------------------------------------

def pdf_text(s):
    raw = s.encode("cp1252")
    out = bytearray()
    for b in raw:
        ch = bytes([b])
        if ch in (b"(", b")", b"\\"):
            out += b"\\" + ch
        elif b < 32 or b > 126:
            out += b"\\%03o" % b
        else:
            out += ch
    return bytes(out)


def write_pdf(path, pages):
    """pages: lists of (x, y, size, bold, text, align) with align 'l' or 'r' (x is the right
    edge for 'r', measured with Helvetica's widths below)."""
    objects = []

    def add(body):
        objects.append(body)
        return len(objects)

    font = add(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica "
               b"/Encoding /WinAnsiEncoding >>")
    bold = add(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica-Bold "
               b"/Encoding /WinAnsiEncoding >>")
    pages_id = len(objects) + 1 + 2 * len(pages)
    kids = []
    for items in pages:
        ops = []
        for x, y, size, is_bold, text, align in items:
            if align == "r":
                x = x - text_width(text, size)
            ops.append(b"BT /%s %d Tf 1 0 0 1 %.2f %.2f Tm (%s) Tj ET" % (
                b"F2" if is_bold else b"F1", size, x, y, pdf_text(text)))
        stream = b"\n".join(ops)
        content = add(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream))
        kids.append(add(b"<< /Type /Page /Parent %d 0 R /MediaBox [0 0 595 842] "
                        b"/Resources << /Font << /F1 %d 0 R /F2 %d 0 R >> >> /Contents %d 0 R >>"
                        % (pages_id, font, bold, content)))
    assert add(b"<< /Type /Pages /Kids [%s] /Count %d >>" % (
        b" ".join(b"%d 0 R" % k for k in kids), len(kids))) == pages_id
    catalog = add(b"<< /Type /Catalog /Pages %d 0 R >>" % pages_id)
    info = add(b"<< /Producer (Tern Valley Cycles make_files.py) "
               b"/CreationDate (D:20260105090000Z) >>")
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for n, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (n, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    for off in offsets:
        out += b"%010d 00000 n \n" % off
    out += b"trailer\n<< /Size %d /Root %d 0 R /Info %d 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1, catalog, info, xref)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(bytes(out))


# Helvetica advance widths (per 1000 em) of the characters the PDFs use.
_W = {" ": 278, ",": 278, ".": 278, "-": 333, "/": 278, "(": 333, ")": 333, "£": 556,
      "%": 889, ":": 278, "&": 667, "x": 500}
for _c in "0123456789":
    _W[_c] = 556


def text_width(text, size):
    return sum(_W.get(c, 556) for c in text) * size / 1000


PRICE_LIST = [
    # code, description, pack, price
    ("PBP-1010", "Inner tube 700x28 Presta", "10", 38.50),
    ("PBP-1011", "Inner tube 700x32 Presta", "10", 40.00),
    ("PBP-1020", "Tyre levers, nylon (pair)", "25", 31.25),
    ("PBP-1105", "Brake pads, disc, organic (set)", "10", 89.90),
    ("PBP-1106", "Brake pads, disc, sintered (set)", "10", 104.50),
    ("PBP-1210", "Chain 11-speed, 116 links", "5", 112.00),
    ("PBP-1211", "Chain 12-speed, 126 links", "5", 139.75),
    ("PBP-1302", "Cassette 11-32, 11-speed", "1", 26.40),
    ("PBP-1303", "Cassette 11-34, 11-speed", "1", 28.10),
    ("PBP-1401", "Bottle cage, alloy", "20", 74.00),
    ("PBP-1410", "Bar tape, cork, black", "10", 62.50),
    ("PBP-1502", "Sealant 125ml", "12", 46.20),
    ("PBP-1503", "Sealant 1 litre", "4", 71.60),
    ("PBP-1601", "Chain lube, dry, 100ml", "12", 39.00),
    ("PBP-1602", "Chain lube, wet, 100ml", "12", 39.00),
    ("PBP-1710", "Mudguards 45mm, pair", "4", 63.80),
    ("PBP-1801", "Lights set, USB, 400/30 lm", "6", 117.00),
    ("PBP-1902", "Lock, D, 13mm shackle", "4", 118.40),
    ("PBP-2001", "Pedals, flat, nylon", "6", 57.00),
    ("PBP-2002", "Pedals, SPD, dual sided", "4", 101.20),
    ("PBP-2105", "Helmet Aero, M", "2", 71.50),
    ("PBP-2106", "Helmet Aero, L", "2", 71.50),
    ("PBP-2110", "Helmet Kids, S", "4", 55.60),
    ("PBP-2201", "Workshop stand, folding", "1", 129.00),
    ("PBP-2202", "Torque wrench 2-24 Nm", "1", 84.95),
    ("PBP-2301", "Bleed kit, mineral oil", "1", 44.00),
    ("PBP-2401", "E-bike battery 500Wh, frame", "1", 1065.00),
    ("PBP-2402", "E-bike charger 4A", "1", 138.00),
]


def price_list_pages():
    per_page = 16
    chunks = [PRICE_LIST[i:i + per_page] for i in range(0, len(PRICE_LIST), per_page)]
    pages = []
    for n, chunk in enumerate(chunks, start=1):
        items = [
            (50, 790, 16, True, "Pennine Bike Parts Ltd", "l"),
            (50, 772, 10, False, "Trade price list 2026, valid from 1 February 2026", "l"),
            (50, 740, 10, True, "Code", "l"),
            (130, 740, 10, True, "Description", "l"),
            (380, 740, 10, True, "Pack", "l"),
            (545, 740, 10, True, "Price (£)", "r"),
        ]
        y = 720
        for code, desc, pack, price in chunk:
            items += [(50, y, 10, False, code, "l"), (130, y, 10, False, desc, "l"),
                      (380, y, 10, False, pack, "l"),
                      (545, y, 10, False, f"{price:,.2f}", "r")]
            y -= 18
        items.append((50, 60, 8, False, "Prices are per pack and exclude VAT at 20%. "
                      "Carriage free over £250 net.", "l"))
        items.append((545, 60, 8, False, f"Page {n} of {len(chunks)}", "r"))
        pages.append(items)
    return pages


# The invoice: some lines priced above the list (the supplier's new prices came early).
INVOICE_LINES = [
    # code, qty (packs), unit price invoiced
    ("PBP-1010", 3, 38.50),
    ("PBP-1105", 2, 94.40),
    ("PBP-1210", 1, 112.00),
    ("PBP-1502", 2, 46.20),
    ("PBP-1801", 1, 122.85),
    ("PBP-2106", 3, 71.50),
    ("PBP-2401", 1, 1118.25),
    ("PBP-1601", 1, 39.00),
]


def invoice_pages():
    desc = {code: d for code, d, _, _ in PRICE_LIST}
    items = [
        (50, 790, 16, True, "Pennine Bike Parts Ltd", "l"),
        (50, 774, 9, False, "Units 9-11, Sowerby Works, Sowerby Bridge HX6 2QG   VAT GB 318 4471 22",
         "l"),
        (380, 740, 12, True, "INVOICE", "l"),
        (380, 722, 10, False, "Invoice no: PBP-4471", "l"),
        (380, 708, 10, False, "Invoice date: 27/03/2026", "l"),
        (380, 694, 10, False, "Terms: 30 days from invoice date", "l"),
        (50, 740, 10, True, "Invoice to", "l"),
        (50, 726, 10, False, COMPANY, "l"),
        (50, 712, 10, False, "Unit 4, Mill Yard", "l"),
        (50, 698, 10, False, "Hebden Bridge HX7 8AD", "l"),
        (50, 650, 10, True, "Code", "l"),
        (125, 650, 10, True, "Description", "l"),
        (365, 650, 10, True, "Qty", "r"),
        (455, 650, 10, True, "Unit (£)", "r"),
        (545, 650, 10, True, "Amount (£)", "r"),
    ]
    y = 630
    net = 0.0
    for code, qty, unit in INVOICE_LINES:
        amount = round(qty * unit, 2)
        net = round(net + amount, 2)
        items += [(50, y, 10, False, code, "l"), (125, y, 10, False, desc[code], "l"),
                  (365, y, 10, False, str(qty), "r"), (455, y, 10, False, f"{unit:,.2f}", "r"),
                  (545, y, 10, False, f"{amount:,.2f}", "r")]
        y -= 18
    vat = round(net * 0.2 + 1e-9, 2)
    y -= 12
    for label, value, b in (("Net", net, False), ("VAT at 20%", vat, False),
                            ("Total due", round(net + vat, 2), True)):
        items += [(365, y, 10, b, label, "l"), (545, y, 10, b, f"{value:,.2f}", "r")]
        y -= 16
    items.append((50, 60, 8, False, "Payment by BACS to sort code 40-11-62, account 71804421. "
                  "Please quote the invoice number.", "l"))
    return [items]


# --- everything ----------------------------------------------------------------------------

def main(out):
    files = os.path.join(out, "files")
    save_workbook(orders_workbook(), os.path.join(files, "sales/orders-2026-03.xlsx"))
    save_workbook(budget_workbook(), os.path.join(files, "finance/budget-2026.xlsx"))
    save_workbook(ledger_workbook(), os.path.join(files, "finance/purchase-ledger.xlsx"))
    save_workbook(starters_workbook(), os.path.join(files, "hr/new-starters.xlsx"))
    save_document(offer_template(), os.path.join(files, "templates/offer-letter.docx"))
    save_document(minutes_document(), os.path.join(files, "meetings/2026-03-30-managers.docx"))
    write_pdf(os.path.join(files, "suppliers/price-list-2026.pdf"), price_list_pages())
    write_pdf(os.path.join(files, "suppliers/invoice-PBP-4471.pdf"), invoice_pages())
    # The graders' own copies of the inputs they compare against.
    graders = {
        "fix-budget-totals": ["finance/budget-2026.xlsx"],
        "ledger-entry": ["finance/purchase-ledger.xlsx"],
        "offer-letters": ["hr/new-starters.xlsx", "templates/offer-letter.docx"],
        "branch-report-docx": ["sales/orders-2026-03.xlsx"],
    }
    for task, paths in graders.items():
        for rel in paths:
            dst = os.path.join(out, "tasks", task, "grader", os.path.basename(rel))
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            with open(os.path.join(files, rel), "rb") as src, open(dst, "wb") as f:
                f.write(src.read())


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: make_files.py OUT")
    main(sys.argv[1])
