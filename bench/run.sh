#!/usr/bin/env bash
# bench/run.sh: envcraft benchmark harness (`make bench`).
#
# Usage: bash bench/run.sh [ENVCRAFT_BINARY]   (default: target/<host tuple>/release/envcraft)
#
#   A. Sandbox start cost, side by side in 10 interleaved hyperfine rounds (5 runs of each per
#      round, the order reversed every other round, statistics over all 50 runs of each):
#        envcraft exec --workspace W -- true   (W: a 1-file template)
#        bwrap --unshare-all --ro-bind / / --dev /dev --proc /proc true
#        /usr/bin/true
#      Target: envcraft <= 1.0x bwrap (aim 0.5x).
#   B. Workspace creation cost against template size (1, 1,000 and 10,000 files of 10 KiB,
#      100 files per directory; the largest is ~100 MiB):
#        envcraft exec --workspace T -- true   against   cp -a T DEST (DEST removed and the
#        page cache's dirty data written out before each run: otherwise each copy waits for
#        the previous copies' writeback, and cp -a's time moves 0.6-4 s between runs)
#      Targets: envcraft 10,000 files / 1 file <= 1.5x; cp -a / envcraft at 10,000 files >= 500x.
#
# Installs its peers if missing (apt-get: bubblewrap, hyperfine; python3 if absent); a peer that
# cannot be installed gets a 'not installed' row. Templates live in a temporary directory under
# $BENCH_TMP (default /tmp), removed on exit. Caches are left warm: nothing is dropped (B writes
# dirty data out before each cp -a run).
#
# Output: hyperfine's progress on stderr, then one Markdown block (machine info and the tables) on
# stdout, also written to bench/results.md (override with BENCH_RESULTS=FILE). Set
# BENCH_JSON_DIR=DIR to keep hyperfine's JSON exports.
#
# Exit status: 0 when every envcraft row was measured (whether or not the targets are met);
# 1 when some envcraft row could not be (binary missing, command failing); results.md is written
# either way. 2 on usage errors, or when hyperfine or python3 are missing and cannot be installed.
set -euo pipefail

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; }

case ${1:-} in -h | --help) usage; exit 0 ;; esac
[[ $# -le 1 ]] || { usage >&2; exit 2; }

bin_arg=${1:-target/$(rustc --print host-tuple 2>/dev/null)/release/envcraft}
script_dir=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
results_md=${BENCH_RESULTS:-$script_dir/results.md}

log() { printf '[bench] %s\n' "$*" >&2; }

# ---------------------------------------------------------------------------------------------
# 1. Peers.
# ---------------------------------------------------------------------------------------------
install_peers() {
  local missing=()
  command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)
  command -v hyperfine >/dev/null 2>&1 || missing+=(hyperfine)
  command -v python3 >/dev/null 2>&1 || missing+=(python3)
  ((${#missing[@]})) || return 0
  log "missing: ${missing[*]}; installing with apt-get"
  if [[ $(id -u) -ne 0 ]]; then
    log "not root: cannot apt-get install ${missing[*]}; continuing with what is there"
    return 0
  fi
  if ! command -v apt-get >/dev/null 2>&1; then
    log "no apt-get on this machine: cannot install ${missing[*]}; continuing with what is there"
    return 0
  fi
  apt-get update -qq || log "apt-get update failed; trying to install anyway"
  # The packages named in the brief, plus python3 only when it is absent.
  local pkgs=(bubblewrap hyperfine)
  [[ " ${missing[*]} " == *" python3 "* ]] && pkgs+=(python3)
  if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${pkgs[@]}" >&2; then
    log "apt-get install ${pkgs[*]} failed; continuing with what is there"
  fi
}
install_peers
for tool in hyperfine python3; do
  command -v "$tool" >/dev/null 2>&1 || { log "$tool is required and not installed; giving up"; exit 2; }
done

# ---------------------------------------------------------------------------------------------
# Scratch space and templates.
# ---------------------------------------------------------------------------------------------
load_at_start=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null) || load_at_start=unknown
work=$(mktemp -d "${BENCH_TMP:-/tmp}/envcraft-bench.XXXXXX")
trap 'rm -rf -- "$work"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

sizes=(1 1000 10000)
file_bytes=10240
log "generating templates (${sizes[*]} files of $file_bytes bytes) in $work"
python3 - "$work" "$file_bytes" "${sizes[@]}" <<'PY'
import os, sys
root, size, counts = sys.argv[1], int(sys.argv[2]), [int(n) for n in sys.argv[3:]]
for n in counts:
    base = os.path.join(root, f"tpl-{n}")
    for i in range(n):
        d = os.path.join(base, f"d{i // 100:03d}")
        if i % 100 == 0:
            os.makedirs(d)
        with open(os.path.join(d, f"f{i:05d}.bin"), "wb") as fh:
            fh.write(os.urandom(size))  # distinct, incompressible content
PY
# The templates' ~110 MB are written out now: left dirty, their writeback would start within
# the kernel's 30 s expiry, in the middle of A, and share this machine's cores with whatever is
# being timed (envcraft, which overlaps its setup on two cores, more than bwrap).
sync

# ---------------------------------------------------------------------------------------------
# Rows: a label, a command (a string hyperfine -N splits like a shell would), and either a
# status saying why it was not measured or, once measured, its statistics.
# ---------------------------------------------------------------------------------------------
declare -A LABEL=() CMD=() STATUS=() MED=() MEAN=() SD=() RUNS=()
NOTES=()

# quote ARGS...: one string that hyperfine -N splits back into ARGS.
quote() { local s; s=$(printf '%q ' "$@"); printf '%s' "${s% }"; }

# one_line TEXT: TEXT as a single short line that cannot break a Markdown table, in a code span
# (so that `<COMMAND>`, `*` and the like show as they are).
one_line() {
  local s=${1//$'\n'/ }
  s=${s//|/\/}
  s=${s//\`/\'}
  ((${#s} <= 90)) || s="${s:0:87}..."
  printf '%s%s%s' '`' "$s" '`'
}

# preflight ID: run the row's command once (60 s bound); on failure, record why in STATUS.
preflight() {
  local id=$1 out rc=0
  local -a argv
  eval "argv=(${CMD[$id]})" # CMD holds printf %q words: this splits them back, nothing else
  out=$(cd "$work" && timeout 60 "${argv[@]}" </dev/null 2>&1) || rc=$?
  if ((rc == 124)); then
    STATUS[$id]="timed out (> 60 s)"
  elif ((rc != 0)); then
    STATUS[$id]="failed (exit $rc${out:+: $(one_line "$out")})"
  fi
  [[ -z ${STATUS[$id]:-} ]] || log "${LABEL[$id]}: ${STATUS[$id]}"
}

# check_envcraft ID TEMPLATE: before timing `envcraft exec ... -- true` (which would also
# "succeed" with a binary that ignores its arguments), check that envcraft really runs a command
# in a sandbox on the template: cwd is the workspace view and the hostname is `envcraft`
# (docs/exec-contract.md). Then preflight the timed command itself.
check_envcraft() {
  local id=$1 tpl=$2 out rc=0 want
  want="envcraft $(find "$tpl/d000" -type f | wc -l)"
  # shellcheck disable=SC2016 # expanded by the sh inside the sandbox
  out=$(cd "$work" && timeout 60 "$envcraft" exec --workspace "$tpl" -- \
    sh -c 'echo "$(cat /proc/sys/kernel/hostname) $(ls d000 | wc -l)"' </dev/null 2>&1) || rc=$?
  if ((rc == 124)); then
    STATUS[$id]="timed out (> 60 s)"
  elif ((rc != 0)); then
    STATUS[$id]="failed (exit $rc${out:+: $(one_line "$out")})"
  elif [[ $out != "$want" ]]; then
    STATUS[$id]="did not run the command in a sandboxed workspace (expected \`$want\`, got $(one_line "$out"))"
  fi
  if [[ -n ${STATUS[$id]:-} ]]; then
    log "${LABEL[$id]}: ${STATUS[$id]}"
  else
    preflight "$id"
  fi
}

# run_group JSON ID...: one hyperfine run over the rows not already failed, with the options in
# HF_OPTS; records their statistics. Returns hyperfine's exit status (124: hit HF_TIMEOUT).
HF_TIMEOUT=${BENCH_GROUP_TIMEOUT:-180}
run_group() {
  local json=$1 id rc=0 i=0 med mean sd runs
  shift
  local -a ids=() args=()
  for id in "$@"; do [[ -n ${STATUS[$id]:-} ]] || ids+=("$id"); done
  ((${#ids[@]})) || return 0
  for id in "${ids[@]}"; do args+=(-n "${LABEL[$id]}" "${CMD[$id]}"); done
  (cd "$work" && timeout "$HF_TIMEOUT" hyperfine -N --style basic "${HF_OPTS[@]}" \
    --export-json "$json" "${args[@]}" </dev/null >&2) || rc=$?
  ((rc == 0)) || return "$rc"
  while read -r med mean sd runs; do
    id=${ids[i]}
    MED[$id]=$med MEAN[$id]=$mean SD[$id]=$sd RUNS[$id]=$runs
    i=$((i + 1))
  done < <(python3 - "$json" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))["results"]:
    print(f'{r["median"] * 1e3:.4f} {r["mean"] * 1e3:.4f} {(r["stddev"] or 0) * 1e3:.4f} {len(r["times"])}')
PY
  )
}

# interleaved NAME ROUNDS RUNS ID...: ROUNDS hyperfine runs of RUNS runs of each row (one
# warm-up each), the rows' order reversed every other round; records each row's statistics over
# all its runs. A failing round falls back to bench_group.
interleaved() {
  local name=$1 rounds=$2 runs=$3 r rc=0 i=0 med mean sd n id
  shift 3
  local -a ids=() order=() jsons=()
  for id in "$@"; do [[ -n ${STATUS[$id]:-} ]] || ids+=("$id"); done
  ((${#ids[@]})) || return 0
  for ((r = 0; r < rounds; r++)); do
    if ((r % 2)); then
      order=()
      for ((i = ${#ids[@]} - 1; i >= 0; i--)); do order+=("${ids[i]}"); done
    else
      order=("${ids[@]}")
    fi
    local -a args=()
    for id in "${order[@]}"; do args+=(-n "$id" "${CMD[$id]}"); done
    rc=0
    (cd "$work" && timeout "$HF_TIMEOUT" hyperfine -N --style basic --warmup 1 --runs "$runs" \
      --export-json "$work/$name.$r.json" "${args[@]}" </dev/null >&2) || rc=$?
    if ((rc)); then
      log "$name: an interleaved round failed (exit $rc); one run side by side instead"
      HF_OPTS=(--warmup 5 --runs $((rounds * runs)))
      bench_group "$name" "$@"
      return 0
    fi
    jsons+=("$work/$name.$r.json")
  done
  i=0
  while read -r id med mean sd n; do
    MED[$id]=$med MEAN[$id]=$mean SD[$id]=$sd RUNS[$id]=$n
  done < <(python3 - "${jsons[@]}" <<'PY'
import json, statistics, sys
times = {}
for path in sys.argv[1:]:
    for r in json.load(open(path))["results"]:
        times.setdefault(r["command"], []).extend(r["times"])
for name, t in times.items():
    sd = statistics.stdev(t) if len(t) > 1 else 0
    print(f'{name} {statistics.median(t) * 1e3:.4f} {statistics.mean(t) * 1e3:.4f} {sd * 1e3:.4f} {len(t)}')
PY
  )
}

# bench_group NAME ID...: the rows side by side in one run; should that run fail, each row alone,
# so that one failing command does not cost the others their figures.
bench_group() {
  local name=$1 id rc=0
  shift
  run_group "$work/$name.json" "$@" || rc=$?
  ((rc)) || return 0
  log "$name: hyperfine failed (exit $rc); measuring each command on its own"
  NOTES+=("$name: the side-by-side hyperfine run failed (exit $rc), so each command was measured in a run of its own.")
  for id in "$@"; do
    [[ -z ${STATUS[$id]:-} ]] || continue
    rc=0
    run_group "$work/$name.$id.json" "$id" || rc=$?
    if ((rc == 124)); then
      STATUS[$id]="timed out (hyperfine run > $HF_TIMEOUT s)"
    elif ((rc)); then
      STATUS[$id]="failed during the benchmark (hyperfine exit $rc; see its output)"
    fi
  done
}

# Binary and peers.
envcraft=$(realpath -m -- "$bin_arg")
true_bin=$(type -P true || echo /bin/true)
envcraft_missing=
[[ -x $envcraft ]] || envcraft_missing="not built ($bin_arg not found)"
bwrap_missing=
command -v bwrap >/dev/null 2>&1 || bwrap_missing="not installed"

# ---------------------------------------------------------------------------------------------
# 2. Benchmark A: sandbox start cost.
# ---------------------------------------------------------------------------------------------
LABEL[A_envcraft]="envcraft exec --workspace W -- true"
CMD[A_envcraft]=$(quote "$envcraft" exec --workspace "$work/tpl-1" -- true)
LABEL[A_bwrap]="bwrap --unshare-all --ro-bind / / --dev /dev --proc /proc true"
CMD[A_bwrap]=$(quote bwrap --unshare-all --ro-bind / / --dev /dev --proc /proc true)
LABEL[A_true]="$true_bin"
CMD[A_true]=$(quote "$true_bin")

[[ -z $envcraft_missing ]] || STATUS[A_envcraft]=$envcraft_missing
[[ -z $bwrap_missing ]] || STATUS[A_bwrap]=$bwrap_missing
[[ -n ${STATUS[A_envcraft]:-} ]] || check_envcraft A_envcraft "$work/tpl-1"
for id in A_bwrap A_true; do [[ -n ${STATUS[$id]:-} ]] || preflight "$id"; done

log "A: sandbox start cost (interleaved rounds)"
# This machine's speed drifts over seconds (other work, CPU frequency): one hyperfine run of
# 50 envcraft runs, then 50 bwrap runs, compares two different moments. Instead, 10 rounds of
# 5 runs of each, the order reversed every other round, and the statistics over all 50 runs of
# each command: both see the same moments.
interleaved A 10 5 A_envcraft A_bwrap A_true

# ---------------------------------------------------------------------------------------------
# 3. Benchmark B: workspace creation cost against template size.
# ---------------------------------------------------------------------------------------------
dest=$work/cp-dest
for n in "${sizes[@]}"; do
  LABEL[B_env_$n]="envcraft exec, $n file(s)"
  CMD[B_env_$n]=$(quote "$envcraft" exec --workspace "$work/tpl-$n" -- true)
  [[ -z $envcraft_missing ]] || STATUS[B_env_$n]=$envcraft_missing
  [[ -n ${STATUS[B_env_$n]:-} ]] || check_envcraft "B_env_$n" "$work/tpl-$n"
  LABEL[B_cp_$n]="cp -a, $n file(s)"
  CMD[B_cp_$n]=$(quote cp -a "$work/tpl-$n" "$dest")
done

log "B: envcraft exec against template size"
# hyperfine picks the number of runs (about 3 s per command) within these bounds.
HF_OPTS=(--warmup 2 --min-runs 10 --max-runs 50)
bench_group B-envcraft B_env_1 B_env_1000 B_env_10000

log "B: cp -a against template size"
# (hyperfine -N runs the prepare command without a shell too: the shell is asked for.)
HF_OPTS=(--warmup 1 --min-runs 10 --max-runs 50
  --prepare "$(quote sh -c 'rm -rf -- "$1" && sync' sh "$dest")")
bench_group B-cp B_cp_1 B_cp_1000 B_cp_10000
rm -rf -- "$dest"

if [[ -n ${BENCH_JSON_DIR:-} ]]; then
  mkdir -p -- "$BENCH_JSON_DIR"
  cp -- "$work"/*.json "$BENCH_JSON_DIR"/ 2>/dev/null || true
fi

# ---------------------------------------------------------------------------------------------
# 4. Report.
# ---------------------------------------------------------------------------------------------
measured() { [[ -n ${MED[$1]:-} ]]; }
ms() { awk -v x="$1" 'BEGIN { printf "%.2f", x }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf (a / b >= 100 ? "%.0fx" : "%.2fx"), a / b }'; }
# verdict A B OP LIMIT: whether A / B OP LIMIT ("met" or "not met"; OP is <= or >=).
verdict() {
  awk -v a="$1" -v b="$2" -v op="$3" -v l="$4" \
    'BEGIN { v = a / b; ok = (op == "<=") ? (v <= l) : (v >= l); print (ok ? "met" : "**not met**") }'
}
cell() { # cell ID: the median, or why there is none
  if measured "$1"; then ms "${MED[$1]}"; else printf '%s' "${STATUS[$1]:-not measured}"; fi
}
spread() { # spread ID: mean ± sd (runs)
  if measured "$1"; then printf '%s ± %s (%s runs)' "$(ms "${MEAN[$1]}")" "$(ms "${SD[$1]}")" "${RUNS[$1]}"; else printf -- '-'; fi
}

os=$(sed -n 's/^PRETTY_NAME="\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' /etc/os-release 2>/dev/null) || true
cpu=$(awk -F': *' '/^model name/ { print $2; exit }' /proc/cpuinfo 2>/dev/null) || true
mem=$(awk '/^MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo 2>/dev/null) || true
tpl_fs=$(df --output=fstype "$work" 2>/dev/null | tail -n1) || tpl_fs=unknown
hf_ver=$(hyperfine --version 2>/dev/null | head -n1) || hf_ver="hyperfine (version unknown)"
bwrap_ver=$(bwrap --version 2>/dev/null | head -n1) || bwrap_ver="bubblewrap not installed"
git_rev=$(git -C "$script_dir/.." rev-parse --short HEAD 2>/dev/null) || git_rev="no commit"
if [[ $git_rev != "no commit" ]] && [[ -n $(git -C "$script_dir/.." status --porcelain -- src Cargo.toml Cargo.lock 2>/dev/null) ]]; then
  git_rev+=" (+ uncommitted changes)"
fi
tpl_bytes=$(du -sb "$work/tpl-10000" 2>/dev/null | cut -f1) || tpl_bytes=0

report() {
  local id n ratio_a="" env_growth="" cp_over_env=""
  echo "## Benchmarks"
  echo
  echo "- Date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "- Kernel: $(uname -srm); ${os:-unknown OS}"
  echo "- CPUs: $(nproc) (${cpu:-unknown model}); memory ${mem:-unknown}; load average at start: $load_at_start"
  echo "- Templates on: $tpl_fs (${BENCH_TMP:-/tmp}); caches warm, nothing dropped"
  echo "- Tools: $hf_ver, $bwrap_ver; envcraft \`$bin_arg\` at $git_rev"
  echo
  echo "### A. Sandbox start cost (hyperfine -N, 10 interleaved rounds of 5 runs each, order reversed every other round)"
  echo
  echo "| Command | Median (ms) | Mean ± σ (ms) | Relative to bwrap |"
  echo "| --- | ---: | ---: | ---: |"
  for id in A_envcraft A_bwrap A_true; do
    local rel="-"
    measured "$id" && measured A_bwrap && rel=$(ratio "${MED[$id]}" "${MED[A_bwrap]}")
    echo "| \`${LABEL[$id]}\` | $(cell "$id") | $(spread "$id") | $rel |"
  done
  echo
  echo "W is a 1-file template (10 KiB)."
  if measured A_envcraft && measured A_bwrap; then
    ratio_a=$(ratio "${MED[A_envcraft]}" "${MED[A_bwrap]}")
    echo "envcraft / bwrap (medians): **$ratio_a**; target <= 1.0x: $(verdict "${MED[A_envcraft]}" "${MED[A_bwrap]}" '<=' 1.0);" \
      "aim <= 0.5x: $(verdict "${MED[A_envcraft]}" "${MED[A_bwrap]}" '<=' 0.5)."
  else
    echo "envcraft / bwrap: not available (a row was not measured)."
  fi
  echo
  echo "### B. Workspace creation cost against template size (files of 10 KiB, 100 per directory)"
  echo
  echo "| Template | \`envcraft exec --workspace T -- true\` median (ms) | Mean ± σ (ms) | \`cp -a T DEST\` median (ms) | Mean ± σ (ms) | cp -a / envcraft |"
  echo "| --- | ---: | ---: | ---: | ---: | ---: |"
  for n in "${sizes[@]}"; do
    local rel="-" what
    measured "B_env_$n" && measured "B_cp_$n" && rel=$(ratio "${MED[B_cp_$n]}" "${MED[B_env_$n]}")
    case $n in
      1) what="1 file (10 KiB)" ;;
      1000) what="1,000 files (~10 MiB)" ;;
      *) what="10,000 files ($(awk -v b="$tpl_bytes" 'BEGIN { printf "%.0f MiB", b / 1048576 }'))" ;;
    esac
    echo "| $what | $(cell "B_env_$n") | $(spread "B_env_$n") | $(cell "B_cp_$n") | $(spread "B_cp_$n") | $rel |"
  done
  echo
  if measured B_env_10000 && measured B_env_1; then
    env_growth=$(ratio "${MED[B_env_10000]}" "${MED[B_env_1]}")
    echo "- envcraft, 10,000 files / 1 file (medians): **$env_growth**; target <= 1.5x: $(verdict "${MED[B_env_10000]}" "${MED[B_env_1]}" '<=' 1.5)."
  else
    echo "- envcraft, 10,000 files / 1 file: not available (a row was not measured)."
  fi
  if measured B_cp_10000 && measured B_env_10000; then
    cp_over_env=$(ratio "${MED[B_cp_10000]}" "${MED[B_env_10000]}")
    echo "- cp -a / envcraft at 10,000 files (medians): **$cp_over_env**; target >= 500x: $(verdict "${MED[B_cp_10000]}" "${MED[B_env_10000]}" '>=' 500)."
  else
    echo "- cp -a / envcraft at 10,000 files: not available (a row was not measured)."
  fi
  echo "- DEST is removed and dirty data written out (\`sync\`) before each \`cp -a\` run (hyperfine --prepare, not timed), so that no copy waits for the previous ones' writeback."
  for n in "${NOTES[@]}"; do echo "- Note: $n"; done
  echo
  echo "Generated by \`bash bench/run.sh\` (\`make bench\`)."
}

out=$(report)
printf '%s\n' "$out" >"$results_md"
log "wrote $results_md"
echo
printf '%s\n' "$out"

status=0
for id in A_envcraft B_env_1 B_env_1000 B_env_10000; do measured "$id" || status=1; done
exit "$status"
