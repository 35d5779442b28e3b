# ClawGym task_0100: sustainability pages fetched with curl (the candidate paths in order, the
# first 200 kept), the inventory, keyword signals, spend per company, the error summary, the
# report and the email. Every attempt is recorded as curl reports it: where the machine has no
# network (envcraft's sandbox) each one is a transport error and nothing is saved.
import csv
import os
import subprocess
from collections import Counter

PATHS = ["/sustainability", "/sustainability-report", "/esg", "/responsibility",
         "/corporate-responsibility", "/social-responsibility", "/impact"]
SIGNALS = ["science based targets", "sbti", "renewable", "carbon neutral", "net zero",
           "scope 1", "scope 2", "scope 3"]
brands = list(csv.DictReader(open("input/brands.csv", newline="", encoding="utf-8")))
for d in ["output", "data/web"]:
    os.makedirs(d, exist_ok=True)


def write_csv(name, header, rows):
    with open("output/" + name, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)


status, first_page, log = [], {}, []
for b in brands:
    company, domain = b["company"], b["domain"]
    for path in PATHS:
        target = "data/web/%s/%s.html" % (company, path.strip("/"))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        run = subprocess.run(["curl", "-sS", "-L", "--max-time", "10", "-o", target, "-w", "%{http_code}",
                              "https://%s%s" % (domain, path)], capture_output=True, text=True)
        log.append("$ curl https://%s%s\nexit=%d stdout=%s stderr=%s\n" % (domain, path, run.returncode, run.stdout, run.stderr.strip()))
        code = run.stdout.strip() if run.returncode == 0 else ""
        if code == "200":
            status.append([company, domain, path, code, target, ""])
            first_page[company] = (path, target)
            break
        if os.path.exists(target):
            os.remove(target)
        status.append([company, domain, path, code, "", run.stderr.strip() or "HTTP " + code])
    if company not in first_page and not os.listdir("data/web/" + company):
        os.rmdir("data/web/" + company)
open("output/download_raw.log", "w", encoding="utf-8").write("".join(log))
write_csv("download_status.csv", ["company", "domain", "attempted_path", "http_status", "saved_html_path", "error"], status)

inventory = []
for root, _, files in os.walk("data/web"):
    for name in sorted(files):
        p = os.path.join(root, name)
        inventory.append("%s %d bytes" % (p, os.path.getsize(p)))
open("output/web_inventory.txt", "w").write("data/web/ (recursive)\n" + "\n".join(inventory) + ("\n" if inventory else "(no files: no page returned 200)\n"))

signal_rows, summary, totals = [], [], {}
for b in brands:
    company = b["company"]
    counts = {k: 0 for k in SIGNALS}
    if company in first_page:
        path, target = first_page[company]
        html = open(target, encoding="utf-8", errors="ignore").read().lower()
        counts = {k: html.count(k) for k in SIGNALS}
        signal_rows += [[company, b["domain"], target, k, counts[k]] for k in SIGNALS]
    totals[company] = sum(counts.values())
    summary.append([company] + [counts[k] for k in SIGNALS] + [totals[company]])
write_csv("sustainability_signals.csv", ["company", "domain", "page_path", "keyword", "count"], signal_rows)
write_csv("sustainability_signals_summary.csv", ["company"] + SIGNALS + ["total_signal_count"], summary)

spend = {b["company"]: [0.0, 0] for b in brands}
for t in csv.DictReader(open("input/spending_2025_Q1.csv", newline="", encoding="utf-8")):
    for b in brands:
        if any(k.strip().lower() in t["vendor"].lower() for k in b["keywords"].split("|") if k.strip()):
            spend[b["company"]][0] += float(t["amount"])
            spend[b["company"]][1] += 1
            break
write_csv("spend_by_company.csv", ["company", "total_spend", "transaction_count"],
          [[c, "%.2f" % s, n] for c, (s, n) in spend.items()])


def category(code):
    if code == "200":
        return "success_200"
    if code[:1] == "4":
        return "client_error_4xx"
    if code[:1] == "5":
        return "server_error_5xx"
    return "transport_or_other_error"


cats = Counter(category(r[3]) for r in status)
names = ["success_200", "client_error_4xx", "server_error_5xx", "transport_or_other_error"]
write_csv("error_summary.csv", ["category", "count"], [[c, cats[c]] for c in names])

no_page = [b["company"] for b in brands if b["company"] not in first_page]
ranking = sorted(spend, key=lambda c: (-totals[c], -spend[c][0]))
report = ["# Q1 2025 spending vs. sustainability signals", "", "## Methods",
          "Inputs: input/brands.csv, input/spending_2025_Q1.csv, input/colleague_chat_excerpt.md. Official pages "
          "were requested with curl on each brand's domain at the candidate paths in order; any 200 OK page is "
          "archived under data/web.", "", "## Web download status summary"]
report += ["- %s: %d" % (c, cats[c]) for c in names]
report += ["- Companies with no 200 OK page: " + (", ".join(no_page) or "none"), "", "## Spend summary"]
report += ["- %s: %.2f (%d transactions)" % (c, s, n) for c, (s, n) in spend.items()]
report += ["", "## Sustainability signals summary"]
report += ["- %s: total_signal_count %d" % (c, totals[c]) for c in spend]
report += ["", "## Combined view (ranked by total_signal_count, ties by total_spend)"]
report += ["%d. %s: total_spend %.2f, total_signal_count %d" % (i + 1, c, spend[c][0], totals[c]) for i, c in enumerate(ranking)]
open("output/report.md", "w", encoding="utf-8").write("\n".join(report) + "\n")

chat = open("input/colleague_chat_excerpt.md", encoding="utf-8").read().lower()
mentions = {b["company"]: sum(chat.count(k.strip().lower()) for k in b["keywords"].split("|") if k.strip()) for b in brands}
most = sorted(mentions, key=lambda c: (-mentions[c], c))[0]
strongest = [c for c in ranking if totals[c] > 0 and totals[c] == totals[ranking[0]]][:2]
signals_line = ("The strongest sustainability signals came from %s." % " and ".join(strongest) if strongest else
                "None of the brands' official pages could be retrieved, so no brand shows sustainability signals yet.")
email = """Subject: Q1 pop-culture spending vs. sustainability signals (quick read)

Hi all, I don't own a TV, so I follow trends through our office chats; lately %s comes up the most. I compared my Q1 spending (from input/spending_2025_Q1.csv) with each brand's official sustainability page.

%s The raw pages are archived under data/web, and the full numbers are in output/report.md.

As next steps, I plan to read each brand's sustainability report before any merch purchase or subscription renewal, and to retry the official pages that could not be fetched.
""" % (most, signals_line)
open("output/email_draft.txt", "w", encoding="utf-8").write(email)
