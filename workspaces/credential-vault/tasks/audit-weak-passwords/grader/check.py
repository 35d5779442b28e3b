#!/usr/bin/env python3
"""Grader of credential-vault/audit-weak-passwords: reads the workspace, prints sub-scores."""
import csv, hashlib, io, json, os, sys

WS = sys.argv[1] if len(sys.argv) > 1 else "/workspace"
EXPECTED = {
    "grafana-admin": ["short", "classes", "common", "name"],
    "jenkins-deploy": ["short", "classes", "common"],
    "ldap-bind": ["short"],
    "redis-cache": ["name"],
    "reporting-db": ["short", "classes", "name"],
    "smtp-relay": ["short", "common"],
}
HASHES = {
    "billing-db": "a6efe23fb4187ea5f00f5a8d8029d5cab0183d64b4fc8d9b600f1f0ce5861835",
    "grafana-admin": "ea8841421c45b3b65a839ad5d0745ef9d7b35d2205e7d17bae82de860e151de0",
    "jenkins-deploy": "c51826ec95b036df771fe6ba93b6ff9c936138bd7022baa5468e4fe8a3fc4a6b",
    "ldap-bind": "bee00098b08e648b45236dddf5362c66661052e29b04ddc5091f67e407ca9397",
    "redis-cache": "30be7a326ddfccb4a6561ed21b842b7a1f77e06ad6b6a55ea45f04a9017fcb89",
    "reporting-db": "8b3e11e3e8090d9099eb6b6589aa46e6b32e1fdd4a80453ced2bf58e0e4bd8a3",
    "s3-backup": "d6692543a5a6d7461e156979fb6fd6f204dea185cd625163cf5bcadfdb9fa977",
    "sentry-dsn": "880eccd1d412d5400b1b4fffb45f5821d77a71af99a0827aaf6338f535853564",
    "smtp-relay": "dd253917622661a97ecca75d47f1a6650af9cbff7cf51f6566b8e6eb035a0dcd",
    "stripe-api": "5d13c73bc9b661af84f78568968beccbd882739fcc55cd873ccac7f3bea6254c",
    "vpn-psk": "4f6e326992863304f8cb65ba2510aecfaf6998f232d9bc1aeda0c0eeedeacc1d",
    "header": "e89531bc26decfda0009d326c6603e94b160357fe9b088660b35d73c3054156e"
}

def main():
    s = {"header": 0.0, "rows": 0.0, "codes_in_order": 0.0, "rows_sorted": 0.0, "vault_unchanged": 0.0}
    try:
        ok = 0
        for n, h in HASHES.items():
            p = os.path.join(WS, "vault", "header.json" if n == "header" else "entries/%s.json" % n)
            if os.path.isfile(p) and hashlib.sha256(open(p, "rb").read()).hexdigest() == h:
                ok += 1
        s["vault_unchanged"] = 1.0 if ok == len(HASHES) else 0.0
    except Exception:
        pass
    path = os.path.join(WS, "reports", "weak-passwords.csv")
    try:
        text = open(path, encoding="utf-8").read()
    except Exception:
        print(json.dumps(s)); return
    try:
        rows = list(csv.reader(io.StringIO(text)))
    except Exception:
        print(json.dumps(s)); return
    rows = [r for r in rows if r and any(x.strip() for x in r)]
    if not rows:
        print(json.dumps(s)); return
    s["header"] = 1.0 if [x.strip().lower() for x in rows[0]] == ["name", "reasons"] else 0.0
    body = rows[1:] if s["header"] else rows
    got = {}
    for r in body:
        name = r[0].strip() if r else ""
        codes = [x.strip() for x in (r[1] if len(r) > 1 else "").split(";") if x.strip()]
        got[name] = codes
    names = [r[0].strip() for r in body if r]
    right = sum(1 for n, codes in EXPECTED.items() if n in got and sorted(got[n]) == sorted(codes))
    wrong = sum(1 for n in got if n not in EXPECTED)
    s["rows"] = max(0.0, (right - wrong) / len(EXPECTED))
    s["codes_in_order"] = 1.0 if all(got.get(n) == codes for n, codes in EXPECTED.items()) and not wrong else 0.0
    s["rows_sorted"] = 1.0 if names == sorted(names) and set(names) == set(EXPECTED) else 0.0
    print(json.dumps(s))

try:
    main()
except Exception:
    print(json.dumps({"header": 0, "rows": 0, "codes_in_order": 0, "rows_sorted": 0, "vault_unchanged": 0}))
