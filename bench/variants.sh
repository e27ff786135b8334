#!/bin/bash
# A/B of kernel variants in one device call: builds a benchmark once per variant (in
# parallel), keeps each build's SASS, then runs every variant on a shapes file, alternating,
# for ROUNDS rounds. A variant is name:compiler flags, or name@dir:flags to build dir's own
# benchmark source against dir's library (another commit's tree, e.g. from
# `git archive <commit> include examples bench | tar -x -C dir`). BENCH picks the benchmark:
#   attention (default): bench/bench_attention.cu on bench/attention_shapes_core.txt, e.g.
#     VARIANTS="base:;b2:-DTP_ATTN_N64=128 -DTP_ATTN_N128=112 -DTP_ATTN_N256=64" bench/variants.sh
#   grouped: bench/bench_grouped_matmul.cu on bench/grouped_matmul_shapes.txt
#   ws: bench/bench_matmul_ws.cu against cuBLASLt (its own problems; TP_BENCH_ONLY,
#     TP_BENCH_SHAPES select them), each line a case with its ratio to cuBLAS in that run
# SHAPES= replaces the shapes file. ROUNDS=0 only builds; NO_BUILD=1 runs the builds of an
# earlier call (to run tests between the two). Writes $OUT/variants.log and $OUT/sass.tgz
# (cuobjdump -sass of each build).
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT" build-variants/sass
case ${BENCH:-attention} in
  attention) src=bench/bench_attention.cu shapes=bench/attention_shapes_core.txt
             result() { grep -o 'sq=.*TFLOP/s' | sed 's/ hkv=[0-9]*//; s/: .* ms / /'; } ;;
  grouped)   src=bench/bench_grouped_matmul.cu shapes=bench/grouped_matmul_shapes.txt
             result() { grep -o 'G=.*TFLOP/s  check [A-Za-z]*' | sed 's/ bf16: [0-9.]* ms / /; s/ rhs / /'; } ;;
  ws)        src=bench/bench_matmul_ws.cu shapes= libs=-lcublasLt
             result() { grep 'TFLOP/s  cuBLAS' | awk '{print $1, $2, $3, $NF}'; } ;;
  *) echo "variants.sh: BENCH is attention or grouped"; exit 2 ;;
esac
inc=$(dirname "$(command -v nvcc)")/../include
flags="-std=c++20 --expt-relaxed-constexpr -O3 -gencode=arch=compute_90a,code=sm_90a -isystem $inc/cccl -isystem $inc"
IFS=';' read -ra variants <<< "${VARIANTS:?name:flags;name:flags...}"
names=()
for v in "${variants[@]}"; do
  name=${v%%:*} root=.
  [[ $name == *@* ]] && root=${name#*@} name=${name%%@*}
  names+=("$name")
  [[ ${NO_BUILD:-0} == 1 ]] && continue
  # shellcheck disable=SC2086  # the flags are words
  source_file=$src
  [[ $root != . && -f $root/$src ]] && source_file=$root/$src
  ( nvcc $flags -I"$root/include" -I"$root/bench" ${v#*:} -Xptxas -v "$source_file" -o "build-variants/$name" ${libs:-} \
      > "build-variants/$name.log" 2>&1 \
      || echo "$name: build failed (build-variants/$name.log)"
    cuobjdump -sass "build-variants/$name" > "build-variants/sass/$name.sass" ) &
done
wait
for n in "${names[@]}"; do
  echo "$n: ptxas $(grep -c 'spill stores' "build-variants/$n.log") kernels, spills (stores/loads) $(grep -o '[0-9]* bytes spill stores, [0-9]* bytes spill loads' "build-variants/$n.log" | awk '{print $1"/"$5}' | tr '\n' ' ')"
done | tee -a "$OUT/variants.log"
for r in $(seq 1 "${ROUNDS:-2}"); do
  for n in "${names[@]}"; do
    echo "round $r $n: $("build-variants/$n" ${shapes:+--shapes "${SHAPES:-$shapes}"} | result | tr '\n' '|')"
  done
done | tee -a "$OUT/variants.log"
tar czf "$OUT/sass.tgz" -C build-variants sass
