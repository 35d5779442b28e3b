#!/bin/sh
# Written by `envcraft export harbor`: envcraft's hash-manifest verifier (docs/verifiers.md) as a
# POSIX sh + awk program, so that it runs on any Harbor provider's image (Debian's essential
# tools: find, sha256sum, readlink, awk). Reads /tests/rules.tsv (the task's expected.json, its
# globs made regular expressions) and /tests/initial.tsv (the initial workspace: kind, mode,
# hash, path), lists the working directory as it is now (`.harbor/`, where envcraft keeps
# Harbor's /logs and /solution, left out) and prints the reward: the fraction of checks passed
# (1 or 0 with all_or_nothing), one failed check per line on stderr.
set -u
tab=$(printf '\t')
final=$(mktemp)
find . -mindepth 1 -path ./.harbor -prune -o -printf '%y\t%m\t%P\n' | while IFS="$tab" read -r kind mode path; do
  case "$kind" in
    f) hash=$(sha256sum < "$path" | cut -d' ' -f1) ;;
    l) hash=$(printf '%s' "$(readlink "$path")" | sha256sum | cut -d' ' -f1) ;;
    *) hash=- ;;
  esac
  printf '%s\t%s\t%s\t%s\n' "$kind" "$mode" "$hash" "$path"
done > "$final"
awk -F'\t' '
function strip(m) { sub(/^0+/, "", m); return m == "" ? "0" : m }
function ignored(p,   i) { for (i = 1; i <= nign; i++) if (p ~ ign[i]) return 1; return 0 }
function check(ok, what) { total++; if (ok) passed++; else print "failed: " what > "/dev/stderr" }
FILENAME == ARGV[1] {
  if ($1 == "file") { nfile++; fpath[nfile] = $2; fkind[nfile] = $3; fhash[nfile] = $4; fmode[nfile] = $5 }
  else if ($1 == "absent") { nabs++; apath[nabs] = $2 }
  else if ($1 == "unchanged") { nunch++; unch[nunch] = $2 }
  else if ($1 == "ignore") { nign++; ign[nign] = $2 }
  else if ($1 == "extra") { deny = ($2 == "deny") }
  else if ($1 == "all_or_nothing") { aon = ($2 == "1") }
  next
}
FILENAME == ARGV[2] { ik[$4] = $1; im[$4] = strip($2); ih[$4] = $3; next }
{ fk[$4] = $1; fm[$4] = strip($2); fh[$4] = $3; order[++nfinal] = $4 }
END {
  for (i = 1; i <= nfile; i++) {
    p = fpath[i]
    if (ignored(p)) continue
    ok = (p in fk) && fk[p] == fkind[i] && (fkind[i] == "d" || fh[p] == fhash[i]) && (fmode[i] == "-" || fm[p] == strip(fmode[i]))
    check(ok, "file " p)
  }
  for (i = 1; i <= nabs; i++) {
    p = apath[i]
    if (ignored(p)) continue
    check(!(p in fk), "absent " p)
  }
  for (i = 1; i <= nunch; i++) {
    ok = 1
    for (p in ik) if (p ~ unch[i] && !ignored(p)) {
      if (!(p in fk) || fk[p] != ik[p] || fh[p] != ih[p] || (ik[p] == "f" && fm[p] != im[p])) ok = 0
    }
    for (p in fk) if (p ~ unch[i] && !ignored(p) && !(p in ik)) ok = 0
    check(ok, "unchanged " unch[i])
  }
  if (deny) {
    for (i = 1; i <= nfile; i++) {
      p = fpath[i]; named[p] = 1
      while (sub(/\/[^\/]*$/, "", p)) named[p] = 1
    }
    for (i = 1; i <= nabs; i++) named[apath[i]] = 1
    for (j = 1; j <= nfinal; j++) {
      p = order[j]
      if ((p in ik) || (p in named) || ignored(p)) continue
      skip = 0
      for (i = 1; i <= nunch; i++) if (p ~ unch[i]) skip = 1
      if (!skip) check(0, "extra " p)
    }
  }
  if (total == 0 || (aon && passed == total)) reward = 1
  else if (aon) reward = 0
  else reward = passed / total
  printf "%.17g\n", reward
}' /tests/rules.tsv /tests/initial.tsv "$final"
status=$?
rm -f "$final"
exit $status
