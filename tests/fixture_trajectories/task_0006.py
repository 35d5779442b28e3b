# ClawGym task_0006: security.txt and robots.txt of each vendor domain, over HTTPS, then the
# per-domain meta.json and the consolidated reports. Every attempt is recorded, whether it
# succeeded or not: where the machine has no network (envcraft's sandbox) each fetch records
# its error, no file is saved, and every domain is rated from what was found.
import csv
import json
import os
import urllib.error
import urllib.request
from datetime import datetime, timezone

SECURITY_PATHS = ["/.well-known/security.txt", "/security.txt"]


def now():
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat()


def fetch(domain, path):
    """(status or error text, body or None)"""
    try:
        with urllib.request.urlopen("https://" + domain + path, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, None
    except Exception as e:  # DNS, TLS, no route: the error is the outcome
        return "error: %s" % (getattr(e, "reason", None) or e), None


def parse_security(text):
    contacts, expires, acks = [], "", ""
    for line in text.splitlines():
        key, _, value = line.strip().partition(":")
        key, value = key.strip().lower(), value.strip()
        if key == "contact":
            contacts.append(value)
        elif key == "expires" and not expires:
            expires = value
        elif key == "acknowledgments" and not acks:
            acks = value
    return contacts, expires, acks


records = []
for row in csv.DictReader(open("input/vendor_domains.csv", newline="", encoding="utf-8")):
    domain = row["domain"].strip()
    out = os.path.join("output/downloads", domain)
    os.makedirs(out, exist_ok=True)
    statuses, chosen, security = {}, None, None
    for path in SECURITY_PATHS:
        status, body = fetch(domain, path)
        statuses[path] = status
        if status == 200 and body is not None:
            chosen, security = path, body.decode("utf-8", "replace")
            with open(os.path.join(out, "security.txt"), "w", encoding="utf-8") as f:
                f.write(security)
            break
    for path in SECURITY_PATHS:
        statuses.setdefault(path, "not attempted: an earlier path succeeded")
    robots_status, robots = fetch(domain, "/robots.txt")
    if robots_status == 200 and robots is not None:
        robots = robots.decode("utf-8", "replace")
        with open(os.path.join(out, "robots.txt"), "w", encoding="utf-8") as f:
            f.write(robots)
    else:
        robots = None
    checked = now()
    json.dump({"domain": domain, "attempted_paths": SECURITY_PATHS,
               "security_txt_status": statuses, "robots_txt_status": robots_status,
               "chosen_security_txt_path": chosen, "fetched_at_utc": checked},
              open(os.path.join(out, "meta.json"), "w"), indent=2)
    contacts, expires, acks = parse_security(security) if security else ([], "", "")
    disallow = sum(1 for l in (robots or "").splitlines() if l.strip().lower().startswith("disallow:"))
    records.append({
        "domain": domain, "org_name": row["org_name"].strip(),
        "used_by_clients": row["used_by_clients"].strip().lower() == "true",
        "security_txt_present": security is not None, "security_txt_path": chosen,
        "contacts": contacts, "policy_expires": expires, "acknowledgments": acks,
        "robots_txt_present": robots is not None, "robots_disallow_count": disallow,
        "last_checked_utc": checked,
        "risk_rating": "Low" if security else ("Medium" if robots else "High"),
    })
os.makedirs("output/report", exist_ok=True)
json.dump(records, open("output/report/security_posture.json", "w"), indent=2)
with open("output/report/security_posture.csv", "w", newline="", encoding="utf-8") as f:
    w = csv.DictWriter(f, fieldnames=list(records[0]))
    w.writeheader()
    for r in records:
        w.writerow(dict(r, contacts=";".join(r["contacts"]), security_txt_path=r["security_txt_path"] or "",
                        **{k: str(r[k]).lower() for k in ("used_by_clients", "security_txt_present", "robots_txt_present")}))
