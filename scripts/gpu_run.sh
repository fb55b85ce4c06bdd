#!/usr/bin/env bash
# One lease call on a lent GPU machine, in stages chosen by GPU_STAGES (comma list, in order):
#   build     kiln._C only (no C++ tests), against the PyTorch there
#   tests     tests/python/test_cuda*.py and test_fast_meta.py
#   profile   scripts/gpu_profile.py for each of GPU_PROFILE_CASES (default nanogpt), inductor beside kiln and eager
#   train     scripts/gpu_train_breakdown.py for each of GPU_TRAIN_CASES (host time of a training step, kiln's pieces)
#   layout    scripts/gpu_layout_probe.py (ResNet-18 eager in NCHW and channels-last)
#   micro     scripts/gpu_matmul_epilogue.py (cuBLAS(Lt) epilogues at nanogpt's sizes)
#   bench     ../shared/bench/run.py --device cuda (cases GPU_BENCH_CASES) for eager, inductor, kiln
#   first     scripts/gpu_first_call.py (kiln cold/warm first calls)
#   tune      scripts/gpu_autotune_ab.py (default vs max-autotune per case, configurations kept)
#   ro        scripts/gpu_reduce_overhead.py (NanoGPT b1 s32, default and reduce-overhead modes)
#   robreak   scripts/gpu_ro_breakdown.py (where a reduce-overhead call's time goes)
#   overhead  scripts/gpu_overhead.py (per-call overhead of a tiny CUDA graph, each mode)
#   bw        scripts/gpu_bandwidth.py (achieved bandwidth of the memory-bound cases vs a copy)
#   sizes     scripts/gpu_sizes.py (runtime sizes: how dyn_seq/decode_kv graphs serve their shapes, ms per shape)
#   launches  scripts/gpu_launch_order.py GPU_LAUNCH_CASE (default resnet18): one call launch by launch, kiln
#             beside inductor (GPU_LAUNCH_COMPILERS), per-kernel device us in order; tables and generated code
#             in $OUT/launches.tgz
#   lnvar     scripts/gpu_ln_variants.py (pointwise_ln's row kernel: the golden beside hand-written variants)
#   pwvar     scripts/gpu_pointwise_variants.py (hf_llama's silu(gate) * up: hand-written variants of its kernel)
#   r50       scripts/gpu_resnet50.py (ResNet-50 fp32 b32, the issue's row the bench lacks; GPU_R50_ARGS)
#   sdpa      scripts/gpu_sdpa_probe.py (hf_llama's attention: eager's SDPA arguments, kiln's, SDPA alone in variants)
#   stall     scripts/gpu_stall.py (GPU_STALL_CASE, default dyn_seq: the bench's call sequence, each call's
#             host and synced time, the first timed round's host events per call; trace under $OUT;
#             GPU_STALL_ARGS adds arguments)
# GPU_NO_CUDNN_SDPA=1: SDPA may not pick cuDNN attention in any script (gpu_common.py)
# Each stage has its own time limit (GPU_T_<stage> seconds); logs go under $OUT, a summary last.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${OUT:-$ROOT/gpu_run_out}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1 PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
export KILN_CACHE_DIR=$(mktemp -d /tmp/kiln_gpu_cache.XXXX)
S=$OUT/summary.txt
: > "$S"
t0=$(date +%s)
note() { echo "[$(( $(date +%s) - t0 ))s] $*" | tee -a "$S"; }
BENCH=""
for c in ../shared/bench/run.py shared/bench/run.py ../bench/run.py; do [ -z "$BENCH" ] && [ -f "$c" ] && BENCH=$c; done
for stage in ${GPU_STAGES//,/ }; do
  case $stage in
    build)
      GEN=(); command -v ninja >/dev/null && GEN=(-G Ninja)
      if timeout ${GPU_T_build:-300} cmake -S . -B build-gpu "${GEN[@]}" -DKILN_INPLACE=ON -DCMAKE_BUILD_TYPE=Release \
           -DPython_EXECUTABLE="$(command -v "$PY")" > "$OUT/build.log" 2>&1 &&
         timeout ${GPU_T_build:-300} cmake --build build-gpu --target _C -j "$(nproc)" >> "$OUT/build.log" 2>&1; then
        note "build: ok, $(grep -c -i 'warning' "$OUT/build.log") warning lines; $(grep -o 'kiln: CUDA code generation [^(]*' "$OUT/build.log" | head -1)"
      else
        note "build: FAILED"; grep -E 'error' "$OUT/build.log" | head -30 | tee -a "$S"; exit 1
      fi ;;
    tests)
      timeout ${GPU_T_tests:-240} "$PY" -m pytest -q -rfE -p no:cacheprovider tests/python/test_cuda*.py tests/python/test_fast_meta.py > "$OUT/tests.log" 2>&1
      note "tests: exit $?: $(tail -1 "$OUT/tests.log")"; grep -E '^(FAILED|ERROR)' "$OUT/tests.log" | head -20 | tee -a "$S" ;;
    profile)  # GPU_PROFILE_CASES: comma list; a case written case:noind leaves inductor out
      for pc in $(echo "${GPU_PROFILE_CASES:-nanogpt}" | tr , " "); do
        c=${pc%%:*}; ind=--inductor; [ "$pc" != "$c" ] && ind=""
        timeout ${GPU_T_profile:-150} "$PY" scripts/gpu_profile.py $c $ind --top ${GPU_TOP:-30} ${GPU_TRACE:+--trace $OUT/trace_$c} > "$OUT/profile_$c.log" 2>&1
        note "profile $c: exit $?"; grep -E '^==|wall per call|device time per call|graph:|by kind' "$OUT/profile_$c.log" | tee -a "$S"
      done ;;
    train)  # GPU_TRAIN_CASES: comma list of case[:N[:ind]] (N steps per host-time round; ind: inductor too)
      for tc in $(echo "${GPU_TRAIN_CASES:-train_mlp}" | tr , " "); do
        IFS=: read -r c n ind <<< "$tc"
        timeout ${GPU_T_train:-150} "$PY" scripts/gpu_train_breakdown.py $c --n ${n:-20} ${ind:+--inductor} > "$OUT/train_$c.log" 2>&1
        note "train breakdown $c: exit $?"; grep -v Warn "$OUT/train_$c.log" | head -${GPU_TRAIN_LINES:-40} | cut -c1-200 | tee -a "$S"
      done ;;
    layout)
      timeout ${GPU_T_layout:-120} "$PY" scripts/gpu_layout_probe.py > "$OUT/layout.log" 2>&1
      note "layout: exit $?"; tail -5 "$OUT/layout.log" | tee -a "$S" ;;
    micro)
      timeout ${GPU_T_micro:-90} "$PY" scripts/gpu_matmul_epilogue.py ${GPU_MICRO_ARGS:-} > "$OUT/micro.log" 2>&1
      note "micro: exit $?"; cat "$OUT/micro.log" | tail -12 | tee -a "$S" ;;
    bench)
      timeout ${GPU_T_bench:-300} "$PY" "$BENCH" --device cuda --compilers ${GPU_BENCH_COMPILERS:-eager,inductor,kiln} --no-warm --no-prime \
        --cases ${GPU_BENCH_CASES:-softmax,pointwise_ln,nanogpt} --timeout 200 --json "$OUT/bench.json" > "$OUT/bench.log" 2>&1
      note "bench: exit $?"; sed -n '/^case | compiler/,$p' "$OUT/bench.log" | tee -a "$S" ;;
    first)
      timeout ${GPU_T_first:-120} "$PY" scripts/gpu_first_call.py --compilers kiln ${GPU_FIRST_ARGS:-} > "$OUT/first.log" 2>&1
      note "first: exit $?"; tail -25 "$OUT/first.log" | tee -a "$S" ;;
    tune)
      timeout ${GPU_T_tune:-200} "$PY" scripts/gpu_autotune_ab.py ${GPU_TUNE_CASES:-} > "$OUT/tune.log" 2>&1
      note "tune: exit $?"; grep -v Warn "$OUT/tune.log" | tail -20 | tee -a "$S" ;;
    robreak)
      timeout ${GPU_T_robreak:-120} "$PY" scripts/gpu_ro_breakdown.py > "$OUT/robreak.log" 2>&1
      note "ro breakdown: exit $?"; grep -v Warn "$OUT/robreak.log" | head -40 | cut -c1-160 | tee -a "$S" ;;
    overhead)
      timeout ${GPU_T_overhead:-150} "$PY" scripts/gpu_overhead.py > "$OUT/overhead.log" 2>&1
      note "overhead: exit $?"; grep -v Warn "$OUT/overhead.log" | tail -12 | tee -a "$S" ;;
    bw)
      timeout ${GPU_T_bw:-150} "$PY" scripts/gpu_bandwidth.py > "$OUT/bw.log" 2>&1
      note "bandwidth: exit $?"; grep -v Warn "$OUT/bw.log" | tail -6 | cut -c1-250 | tee -a "$S" ;;
    sizes)
      timeout ${GPU_T_sizes:-150} "$PY" scripts/gpu_sizes.py ${GPU_SIZES_CASES:-} > "$OUT/sizes.log" 2>&1
      note "sizes: exit $?"; grep -v Warn "$OUT/sizes.log" | tail -30 | cut -c1-300 | tee -a "$S" ;;
    sdpa)
      timeout ${GPU_T_sdpa:-150} "$PY" scripts/gpu_sdpa_probe.py > "$OUT/sdpa.log" 2>&1
      note "sdpa: exit $?"; grep -v Warn "$OUT/sdpa.log" | tail -30 | cut -c1-400 | tee -a "$S" ;;
    stall)
      OUT=$OUT timeout ${GPU_T_stall:-150} "$PY" scripts/gpu_stall.py --case ${GPU_STALL_CASE:-dyn_seq} ${GPU_STALL_ARGS:-} > "$OUT/stall.log" 2>&1
      note "stall: exit $?"; grep -v Warn "$OUT/stall.log" | head -40 | cut -c1-300 | tee -a "$S" ;;
    launches)
      timeout ${GPU_T_launches:-200} "$PY" scripts/gpu_launch_order.py ${GPU_LAUNCH_CASE:-resnet18} --out /tmp/kiln_launches \
        --compilers ${GPU_LAUNCH_COMPILERS:-kiln,inductor} > "$OUT/launches.log" 2>&1
      note "launches: exit $?"; grep -E '^[a-z_]+: ' "$OUT/launches.log" | tee -a "$S"
      tar czf "$OUT/launches.tgz" -C /tmp kiln_launches ;;
    lnvar)
      timeout ${GPU_T_lnvar:-150} "$PY" scripts/gpu_ln_variants.py ${GPU_LNVAR_ARGS:-} > "$OUT/lnvar.log" 2>&1
      note "ln variants: exit $?"; grep -v Warn "$OUT/lnvar.log" | tail -40 | cut -c1-200 | tee -a "$S" ;;
    pwvar)
      timeout ${GPU_T_pwvar:-120} "$PY" scripts/gpu_pointwise_variants.py > "$OUT/pwvar.log" 2>&1
      note "pointwise variants: exit $?"; grep -v Warn "$OUT/pwvar.log" | tail -20 | cut -c1-200 | tee -a "$S" ;;
    r50)
      timeout ${GPU_T_r50:-200} "$PY" scripts/gpu_resnet50.py ${GPU_R50_ARGS:-} > "$OUT/r50.log" 2>&1
      note "resnet50: exit $?"; grep -v Warn "$OUT/r50.log" | tail -6 | tee -a "$S" ;;
    ro)
      timeout ${GPU_T_ro:-150} "$PY" scripts/gpu_reduce_overhead.py > "$OUT/ro.log" 2>&1
      note "reduce-overhead: exit $?"; tail -7 "$OUT/ro.log" | tee -a "$S" ;;
    *) note "unknown stage $stage" ;;
  esac
done
note "done"
