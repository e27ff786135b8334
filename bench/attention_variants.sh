#!/bin/bash
# A/B of attention kernel variants in one device call: builds bench_attention.cu once per
# variant (in parallel), keeps each build's SASS, then runs every variant on a shapes file,
# alternating, for ROUNDS rounds. A variant is name:compiler flags, e.g. KV block sizes:
#   VARIANTS="base:;b2:-DTP_ATTN_N64=128 -DTP_ATTN_N128=112 -DTP_ATTN_N256=64" \
#     SHAPES=bench/attention_shapes_core.txt ROUNDS=2 bench/attention_variants.sh
# Writes $OUT/variants.log and $OUT/sass.tgz (cuobjdump -sass of each build).
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT" build-variants/sass
inc=$(dirname "$(command -v nvcc)")/../include
flags="-std=c++20 --expt-relaxed-constexpr -O3 -gencode=arch=compute_90a,code=sm_90a -Iinclude -Ibench -isystem $inc/cccl -isystem $inc"
IFS=';' read -ra variants <<< "${VARIANTS:?name:flags;name:flags...}"
names=()
for v in "${variants[@]}"; do
  name=${v%%:*}; names+=("$name")
  # shellcheck disable=SC2086  # the flags are words
  ( nvcc $flags ${v#*:} -Xptxas -v bench/bench_attention.cu -o "build-variants/$name" > "build-variants/$name.log" 2>&1 \
      || echo "$name: build failed (build-variants/$name.log)"
    cuobjdump -sass "build-variants/$name" > "build-variants/sass/$name.sass" ) &
done
wait
for n in "${names[@]}"; do
  echo "$n: ptxas $(grep -c 'spill stores' "build-variants/$n.log") kernels, spills (stores/loads) $(grep -o '[0-9]* bytes spill stores, [0-9]* bytes spill loads' "build-variants/$n.log" | awk '{print $1"/"$5}' | tr '\n' ' ')"
done | tee "$OUT/variants.log"
for r in $(seq 1 "${ROUNDS:-2}"); do
  for n in "${names[@]}"; do
    echo "round $r $n: $("build-variants/$n" --shapes "${SHAPES:-bench/attention_shapes_core.txt}" | grep -o 'sq=.*TFLOP/s' | sed 's/ hkv=[0-9]*//; s/: .* ms / /' | tr '\n' '|')"
  done
done | tee -a "$OUT/variants.log"
tar czf "$OUT/sass.tgz" -C build-variants sass
