#!/usr/bin/env bash
# The GPU calls of a session (results/<dir>/README.md says which), run on the device:
#   BUDGET_S=540 bash tools/gpu_session.sh env|sweep|kb|kbcorpus|kbset|kbset-resume|kbcut|kprofile|default|hostile|sandboxtests|pytests|small|full ...
# Carry target/release/dlrm-bench and .bwrap/ (a bubblewrap .deb from `apt-get download
# bubblewrap`, unpacked there: the device has no bwrap). Every step's time limit comes out of
# BUDGET_S (set it below the call's limit_s, which shrinks with the session's device time), so
# the results are always tarred into $OUT/r.tgz (files deeper than two folders under $OUT do not
# come back).
set -uo pipefail
START=$(date +%s)
BUDGET_S=${BUDGET_S:-540}
O=$OUT/r
mkdir -p "$O"
# Seconds left for a step, keeping 20 for the tar.
left() { echo $(( BUDGET_S - 20 - ($(date +%s) - START) )); }
step() { # name, command...
  local name=$1 s rc
  shift
  s=$(date +%s)
  if (( $(left) > 10 )); then
    timeout -k 10 "$(left)" "$@"
    rc=$?
  else
    rc=skipped
  fi
  echo "$name rc=$rc $(( $(date +%s) - s ))s" >> "$O/env.txt"
  [[ $rc == 0 || $rc == skipped ]]
}
finish() {
  rm -rf "$O"/*/inputs
  (cd "$OUT" && tar czf r.tgz r && rm -rf r)
}
trap finish EXIT
# Every call records its card and driver (a result set's README must name them), whatever steps
# it runs.
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } \
  >> "$O/env.txt" 2>&1

for f in .bwrap/*.deb; do dpkg -x "$f" /tmp/bw; done
export PATH=/tmp/bw/usr/bin:$PATH
site=$(python3 -c 'import site; print(site.getsitepackages()[0])')
lib=$(dirname "$(find "$site/nvidia" -name 'libnvrtc.so*' | head -1)")
export LD_LIBRARY_PATH=$lib
corpus=(--candidates candidates/examples --candidates candidates/tuned
        --candidates candidates/exploits --candidates candidates/tripwires)
answers=(sweeps/demo/answers/demo-kernelbench-s0 sweeps/demo/answers/demo-kernelbench-s1)
for what in "$@"; do
  case "$what" in
  env)
    {
      command -v bwrap; bwrap --version; command -v python3
      python3 -c 'import torch; print(torch.__version__, torch.__file__)'
      bwrap --ro-bind / / --dev-bind /dev /dev --proc /proc --unshare-net --die-with-parent true \
        && echo bwrap-works
      nvidia-smi --query-gpu=name,driver_version --format=csv; nproc; pwd
      setpriv --reuid 2000000 --regid 2000000 --clear-groups python3 -c \
        'import torch; open("tools/kernelbench_eval.py").read(); print("uid 2000000 reads torch and tools")'
    } >> "$O/env.txt" 2>&1 ;;
  sweep)
    # TORCH=eager,compile SHARD=1/2 (with DLRM_BENCH_SECRET_SEED, the shards' common seed)
    step sweep target/release/dlrm-bench sweep score sweeps/demo --torch="${TORCH:-eager}" \
      ${SHARD:+--shard "$SHARD"} --timeout-s 60 --out "$O/sweep" > "$O/sweep.log" 2>&1 ;;
  kb)
    step kb target/release/dlrm-bench kernelbench "${answers[@]}" --torch=eager --timeout-s 60 \
      --out "$O/kb" > "$O/kb.log" 2>&1 ;;
  kbcorpus)
    # candidates/kernelbench: the answers with a known verdict (correct, wrong, all zeros,
    # partial write, cached result, mutated input), each group one directory.
    step kbcorpus target/release/dlrm-bench kernelbench candidates/kernelbench/*/ --torch=eager \
      --timeout-s 60 --out "$O/kbcorpus" > "$O/kbcorpus.log" 2>&1 ;;
  kbset)
    # The 60 load_inline answers of tools/inline_set.py (issue 35's throughput set); SHARD=i/n
    # splits them (with DLRM_BENCH_SECRET_SEED) where one call's time is too short;
    # DLRM_BENCH_BUILD_JOBS=N builds N at a time (default half the cores). The run lives in
    # target/kbset-runs (ignored: it stays on a warm machine between calls), so a run cut by
    # its call's time goes on in the next call with `kbset-resume`; a copy comes back.
    mkdir -p target/kbset-runs
    step kbset target/release/dlrm-bench kernelbench candidates/kernelbench-throughput/*/ \
      --torch=eager --timeout-s 60 ${SHARD:+--shard "$SHARD"} --out target/kbset-runs \
      > "$O/kbset.log" 2>&1
    newest=$(ls -dt target/kbset-runs/*/ 2>/dev/null | head -1)
    [[ -n $newest ]] && mkdir -p "$O/kbset" && cp -r "$newest" "$O/kbset/" ;;
  kbset-resume)
    # The newest run of `kbset` on this warm machine, resumed (its records kept, its answers
    # not yet done evaluated).
    run=$(ls -dt target/kbset-runs/*/ 2>/dev/null | head -1)
    if [[ -n $run ]]; then
      step kbset-resume target/release/dlrm-bench run --resume "$run" > "$O/kbset-resume.log" 2>&1
      mkdir -p "$O/kbset" && cp -r "$run" "$O/kbset/"
    else
      echo "kbset-resume: no run in target/kbset-runs on this machine" >> "$O/env.txt"
    fi ;;
  kbcut)
    # A KernelBench run cut (SIGTERM after CUT_S, 50 by default: after problem 1's reference,
    # before its answers) and resumed: the resume must make the answers' sets (no worker of
    # the unit runs) and name them from the run's secret seed.
    mkdir -p target/kbcut
    timeout -s TERM "${CUT_S:-50}" target/release/dlrm-bench kernelbench \
      candidates/kernelbench/correct_fast/ candidates/kernelbench/correct_slow/ --torch=eager \
      --timeout-s 60 --out target/kbcut > "$O/kbcut.log" 2>&1
    echo "kbcut rc=$? (cut)" >> "$O/env.txt"
    run=$(ls -dt target/kbcut/*/ 2>/dev/null | head -1)
    if [[ -n $run ]]; then
      step kbcut-resume target/release/dlrm-bench run --resume "$run" > "$O/kbcut-resume.log" 2>&1
      mkdir -p "$O/kbcut" && cp -r "$run" "$O/kbcut/"
    fi ;;
  kprofile)
    # Issue 40's per-kernel profiles: the tuned kernels of the problems furthest under their
    # floor (PROBLEMS overrides), with Nsight Compute's throughput, occupancy and stall
    # figures beside each kernel's time (tools/profile_kernels.sh; without the extra metrics
    # where this ncu refuses them).
    m=dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__throughput.avg.pct_of_peak_sustained_elapsed
    m+=,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread
    m+=,launch__occupancy_limit_registers,dram__bytes_read.sum,dram__bytes_write.sum
    for s in long_scoreboard short_scoreboard barrier lg_throttle mio_throttle membar; do
      m+=,smsp__warp_issue_stalled_${s}_per_warp_active.pct
    done
    for p in ${PROBLEMS:-embedding_bag_int8_rowwise block_bucketize_sparse_features unique_indices embedding_backward_rowwise_adagrad}; do
      step "kprofile-$p" env SKIP_TORCH=1 CANDIDATE="candidates/tuned/$p" NCU_METRICS="$m" \
        tools/profile_kernels.sh "$O/kprofile" "$p" full > "$O/kprofile-$p.txt" 2>&1 \
        || step "kprofile-$p-plain" env SKIP_TORCH=1 CANDIDATE="candidates/tuned/$p" \
          tools/profile_kernels.sh "$O/kprofile" "$p" full > "$O/kprofile-$p.txt" 2>&1
    done ;;
  default)
    # The default run (examples and tuned) at `full`, every shape: issue 39's wall-time target.
    # SHARD=i/n (with DLRM_BENCH_SECRET_SEED) splits it where one call is too short.
    tools/build_cubin.sh candidates/examples/embedding_bag_sum/cubin_warp_per_bag > "$O/cubin.txt" 2>&1
    step default-full tools/gpu_run.sh "$O/default-full" full --timeout-s 60 \
      ${SHAPES:+--shapes "$SHAPES"} ${SHARD:+--shard "$SHARD"} > /dev/null 2>&1 ;;
  hostile)
    # The exploits and tripwires at PRESET (full by default), every shape.
    step "hostile-${PRESET:-full}" tools/gpu_run.sh "$O/hostile-${PRESET:-full}" "${PRESET:-full}" \
      --candidates candidates/exploits --candidates candidates/tripwires --timeout-s 60 \
      ${SHAPES:+--shapes "$SHAPES"} > /dev/null 2>&1 ;;
  sandboxtests)
    # host/tests/sandbox.rs's trials on the GPU host, where torch is real: build them here with
    # `cargo test --release -p dlrm-bench --test sandbox --no-run` and carry the binary. Its
    # paths were baked in at /work/main: that name is linked to this copy when free.
    mkdir -p /work && { [[ -e /work/main ]] || ln -s "$PWD" /work/main; }
    for t in target/release/deps/sandbox-*; do
      [[ -x $t && $t != *.d ]] && step sandboxtests timeout 120 "$t" --nocapture > "$O/sandboxtests.log" 2>&1
    done ;;
  pytests)
    # The tools' Python tests with torch and CUDA (skipped on the CPU machines).
    step pytests timeout 300 python3 -m unittest discover -v -s tools -p 'test_*.py' \
      > "$O/pytests.log" 2>&1 ;;
  small|full)
    # Every shape by default; SHAPES=default,d32 picks, SHARD=i/n (with DLRM_BENCH_SECRET_SEED)
    # splits the corpus where one call's time is too short for every shape.
    tools/build_cubin.sh candidates/examples/embedding_bag_sum/cubin_warp_per_bag > "$O/cubin.txt" 2>&1
    step "corpus-$what" tools/gpu_run.sh "$O/corpus-$what" "$what" "${corpus[@]}" --timeout-s 60 \
      ${SHAPES:+--shapes "$SHAPES"} ${SHARD:+--shard "$SHARD"} > /dev/null 2>&1 ;;
  *) echo "unknown step $what" >> "$O/env.txt" ;;
  esac
done
