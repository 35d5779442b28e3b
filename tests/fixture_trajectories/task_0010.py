# ClawGym task_0010: the June 2026 compliance audit, the ranked issues and the owner's email.
import csv
import os
from datetime import date


def rows(name):
    return list(csv.DictReader(open("input/" + name, newline="", encoding="utf-8")))


policy = {}
for line in open("input/policies.yaml", encoding="utf-8"):
    key, sep, value = line.split("#", 1)[0].partition(":")
    if sep:
        value = value.strip().strip("\"'")
        policy[key.strip()] = int(value) if value.isdigit() else value
licenses = {}
for lic in rows("licenses.csv"):
    licenses.setdefault(lic["film_title"], []).append(lic)
equipment = {e["equipment_id"]: e for e in rows("equipment_checks.csv")}


def recent(eq_id, on, max_days, missing, overdue):
    eq = equipment.get(eq_id)
    if eq is None:
        return missing
    return None if (on - date.fromisoformat(eq["last_inspection_date"])).days <= max_days else overdue


report = []
for s in rows("schedule.csv"):
    on = date.fromisoformat(s["screening_date"])
    if not date(2026, 6, 1) <= on <= date(2026, 6, 30):
        continue
    found = licenses.get(s["film_title"], [])
    lic = next((l for l in found if date.fromisoformat(l["license_start"]) <= on <= date.fromisoformat(l["license_end"])), None)
    status = "valid" if lic else ("expired" if found else "missing")
    fmt_ok = ("yes" if s["format"] == lic["allowed_format"] else "no") if lic else "n/a"
    cap_ok = ("yes" if int(s["estimated_audience"]) <= int(lic["audience_cap"]) else "no") if lic else "n/a"
    kind = "dcp" if s["format"].lower() == "dcp" else "film"
    projector = recent(s["projector_id"], on, policy[kind + "_projector_max_days_since_inspection"], "projector_missing", "projector_overdue")
    extinguisher = recent(policy["extinguisher_equipment_id"], on, policy["extinguisher_max_days_since_inspection"], "extinguisher_missing", "extinguisher_out_of_date")
    nitrate = None
    if s["nitrate_flag"] == "yes":
        cab = equipment.get(policy["nitrate_cabinet_equipment_id"])
        nitrate = ("nitrate_cabinet_missing" if cab is None else "nitrate_cabinet_status_bad" if cab["status"] != "ok"
                   else recent(cab["equipment_id"], on, policy["nitrate_cabinet_max_days_since_inspection"], None, "nitrate_cabinet_overdue"))
    violations = [v for v in [None if lic else "license_" + status, "format_mismatch" if fmt_ok == "no" else None,
                              "audience_over_cap" if cap_ok == "no" else None, projector, extinguisher, nitrate] if v]
    report.append({
        "screening_date": s["screening_date"], "film_title": s["film_title"], "format": s["format"],
        "projector_id": s["projector_id"], "estimated_audience": s["estimated_audience"],
        "license_status": status, "format_match": fmt_ok, "audience_within_cap": cap_ok,
        "projector_inspection_ok": "no" if projector else "yes", "extinguisher_ok": "no" if extinguisher else "yes",
        "nitrate_compliance_ok": "n/a" if s["nitrate_flag"] != "yes" else ("no" if nitrate else "yes"),
        "overall_status": "fail" if violations else "pass", "violations": ";".join(violations)})
ranked = sorted(({"screening_date": r["screening_date"], "film_title": r["film_title"],
                  "issue_count": len(r["violations"].split(";")), "violation_list": r["violations"]}
                 for r in report if r["overall_status"] == "fail"),
                key=lambda r: (-r["issue_count"], r["screening_date"]))
os.makedirs("output", exist_ok=True)
for name, data in [("compliance_report.csv", report), ("ranked_issues.csv", ranked)]:
    with open("output/" + name, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(data[0]))
        w.writeheader()
        w.writerows(data)
failed = len(ranked)
lines = ["Subject: June 2026 compliance audit - findings and actions", "", "Hello,", "",
         "I audited the June 2026 screenings: %d total screenings analyzed, %d passed, %d failed."
         % (len(report), len(report) - failed, failed), "", "Top issues (ranked):"]
lines += ["- %s %s: %s" % (r["screening_date"], r["film_title"], r["violation_list"]) for r in ranked[:5]]
lines += ["", "Recommended actions:",
          "- Renew or obtain the missing and expired film licenses before screening.",
          "- Reduce ticket sales to stay within each license's audience cap.",
          "- Schedule a projector inspection for any projector past its inspection window.",
          "- Schedule the fire extinguisher inspection if it falls out of date.",
          "- Confirm the nitrate cabinet is ready and inspected before nitrate screenings.",
          "", "Files: output/compliance_report.csv, output/ranked_issues.csv, output/draft_email_to_owner.txt",
          "", "Best regards,", "The projectionist"]
open("output/draft_email_to_owner.txt", "w", encoding="utf-8").write("\n".join(lines) + "\n")
