#!/bin/sh
# The office environment's image, `office`: Debian bookworm (minbase) with python3,
# python3-openpyxl, python3-docx and poppler-utils, from Debian's packages. mmdebstrap builds the
# root filesystem into a tar once (kept in CACHE), and envcraft imports it once into STATE's
# image store; later calls find both and return at once.
#
#     sh workspaces/office/image.sh ENVCRAFT STATE CACHE
#
# Exit 0: `office` is in STATE's store. Exit 3: it cannot be made here, and one line on stderr
# says why and what to do (the callers, `make run` and `make test`, then skip the environment,
# unless ENVCRAFT_TEST_REQUIRE=all). Any other failure (an import that fails) is an error.
set -eu
[ $# -eq 3 ] || { echo "usage: image.sh ENVCRAFT STATE CACHE" >&2; exit 2; }
envcraft=$1 state=$2 cache=$3
suite=bookworm
packages=python3,python3-openpyxl,python3-docx,poppler-utils
tar=$cache/office-rootfs.tar
inputs=$cache/office-rootfs.inputs
imported=$cache/office-image.imported

if [ ! -f "$tar" ] || [ "$(cat "$inputs" 2>/dev/null)" != "$suite $packages" ]; then
  if ! command -v mmdebstrap >/dev/null 2>&1; then
    echo "office: skipped: its image is built with mmdebstrap, which is not installed here" \
      "(apt-get install mmdebstrap, then make office-image)" >&2
    exit 3
  fi
  echo "office: building its image from Debian's packages ($packages) with mmdebstrap;" \
    "once, a few minutes, kept in $tar" >&2
  mkdir -p "$cache"
  # A tar of this call's own, renamed whole: a killed or concurrent build leaves no half tar.
  part=$tar.partial.$$
  trap 'rm -f "$part"' EXIT
  trap 'exit 130' INT TERM
  # mmdebstrap prints a line per stage (I: downloading packages..., I: extracting...): the
  # progress. No mirror is named: Debian's default one, reached through apt as configured.
  if ! mmdebstrap --variant=minbase --format=tar --include="$packages" "$suite" "$part" \
      </dev/null; then
    echo "office: skipped: mmdebstrap could not build its image (see above: can apt reach" \
      "Debian's mirror?); retry with make office-image" >&2
    exit 3
  fi
  mv "$part" "$tar"
  trap - EXIT INT TERM
  echo "$suite $packages" >"$inputs"
  rm -f "$imported"
fi

if [ -f "$imported" ] && [ "$(cat "$imported")" = "$state" ] \
    && "$envcraft" image inspect office --state-dir "$state" >/dev/null 2>&1; then
  exit 0
fi
echo "office: importing its image into $state (once)" >&2
mkdir -p "$state"
"$envcraft" image import --rootfs "$tar" --name office --state-dir "$state"
echo "$state" >"$imported"
