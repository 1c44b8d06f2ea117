#!/usr/bin/env bash
# Searches for new failing inputs: runs every Go fuzz target of nodelet for DURATION each. Run by
# hand, never by hack/test.sh (a test command must not depend on what a random search finds); the
# checked-in seed corpora (testdata/fuzz/) are replayed by every plain `go test`.
#   hack/fuzz.sh DURATION          e.g. hack/fuzz.sh 10m
# A target that finds a failing input writes it under its package's testdata/fuzz/ and fails: fix
# the code and keep the input there, so every later go test replays it.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# = 1 ] || { echo "usage: hack/fuzz.sh DURATION   (e.g. 10m: the time each fuzz target searches)" >&2; exit 2; }
fuzztime=$1
export GOFLAGS=${GOFLAGS:--buildvcs=false}

# Every func FuzzXxx in a _test.go file, as "package-dir target".
mapfile -t targets < <(grep -rl --include='*_test.go' '^func Fuzz' agent runtime internal cmd test 2>/dev/null |
  xargs grep -h -o '^func Fuzz[A-Za-z0-9_]*' /dev/null --with-filename |
  sed -E 's|^(.*)/[^/]*_test.go:func (Fuzz[A-Za-z0-9_]*)$|\1 \2|' | sort -u)
[ ${#targets[@]} -gt 0 ] || { echo "fuzz.sh: no fuzz targets found" >&2; exit 1; }

# fuzz DIR NAME runs one target, its output on stdout and in $out.
out=$(mktemp)
trap 'rm -f "$out"' EXIT
fuzz() {
  # -parallel 1: two cores are shared with whatever else runs; one worker finds as much per second here.
  go test "./$1" -run '^$' -fuzz "^${2}\$" -fuzztime "$fuzztime" -parallel 1 2>&1 | tee "$out"
  return "${PIPESTATUS[0]}"
}

failed=0
for t in "${targets[@]}"; do
  dir=${t% *}; name=${t#* }
  printf '==> %s %s (%s)\n' "$dir" "$name" "$fuzztime"
  fuzz "$dir" "$name" && continue
  # Go before 1.27 can fail a target with a bare "context deadline exceeded" when -fuzztime ends
  # while a worker is busy (golang/go#75804): no input failed, none was written. That, and only
  # that, is run again once; a written input, a panic or a failed check fails at once.
  if grep -q 'context deadline exceeded' "$out" && ! grep -qE 'Failing input written|panic:|_test\.go:[0-9]+:' "$out"; then
    echo "fuzz.sh: $name stopped on Go's fuzztime deadline race (golang/go#75804), no failing input: running it again"
    fuzz "$dir" "$name" && continue
  fi
  failed=$((failed + 1))
done
[ "$failed" = 0 ] || { echo "fuzz.sh: $failed of ${#targets[@]} targets failed" >&2; exit 1; }
echo "fuzz.sh: ${#targets[@]} targets ran for $fuzztime each, none failed"
