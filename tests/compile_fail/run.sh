#!/usr/bin/env bash
# Compile-fail tests: every snippet here must fail to compile, and the compiler's output
# must contain the message its first line names ("// expect: ...").
#   run.sh <c++ compiler> <flags...>
set -u
cxx=$1; shift
dir=$(dirname "$0")
fail=0
for f in "$dir"/*.cpp; do
  want=$(head -1 "$f" | sed 's|^// expect: ||')
  out=$("$cxx" "$@" -fsyntax-only -x c++ "$f" 2>&1)
  if [ $? -eq 0 ]; then echo "FAIL $(basename "$f"): compiled, but should not"; fail=1
  elif ! grep -qF -- "$want" <<<"$out"; then echo "FAIL $(basename "$f"): no message '$want'"; echo "$out" | grep -m3 error; fail=1
  else echo "ok   $(basename "$f"): $want"; fi
done
exit $fail
