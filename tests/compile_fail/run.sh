#!/usr/bin/env bash
# Compile-fail tests: every snippet here must fail to compile, and the compiler's output
# must contain the message its first line names ("// expect: ..."); a second line
# "// max-bytes: N" also bounds the size of the output (a message not buried in errors).
#   run.sh <c++ compiler> <flags...>
set -u
cxx=$1; shift
dir=$(dirname "$0")
fail=0
# Every snippet includes <tilepipe/tilepipe.cuh>: parse it once, as a precompiled header that
# the compiler finds ahead of the header itself (a third of the time per snippet). Without
# one (another compiler, or it fails to build) the snippets compile as they are.
pch=$(mktemp -d)
trap 'rm -rf "$pch"' EXIT
mkdir -p "$pch/tilepipe"
pch_flags=()
if "$cxx" "$@" -x c++-header "$dir/../../include/tilepipe/tilepipe.cuh" -o "$pch/tilepipe/tilepipe.cuh.gch" 2>/dev/null; then
  pch_flags=(-I"$pch")
fi
for f in "$dir"/*.cpp; do
  want=$(head -1 "$f" | sed 's|^// expect: ||')
  limit=$(sed -n '2s|^// max-bytes: ||p' "$f")
  out=$("$cxx" "${pch_flags[@]}" "$@" -fsyntax-only -x c++ "$f" 2>&1)
  if [ $? -eq 0 ]; then echo "FAIL $(basename "$f"): compiled, but should not"; fail=1
  elif ! grep -qF -- "$want" <<<"$out"; then echo "FAIL $(basename "$f"): no message '$want'"; echo "$out" | grep -m3 error; fail=1
  elif [ -n "$limit" ] && [ ${#out} -gt "$limit" ]; then echo "FAIL $(basename "$f"): ${#out} bytes of errors, more than $limit"; fail=1
  else echo "ok   $(basename "$f"): $want"; fi
done
exit $fail
