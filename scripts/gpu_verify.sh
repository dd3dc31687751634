#!/usr/bin/env bash
# The GPU checks of the CUDA issue in one run, on a machine with an NVIDIA GPU that lacks our
# build dependencies (it needs the CUDA runtime, cuBLAS and cuDNN, from a CUDA install or from
# PyTorch's nvidia-* wheels; env.sh finds either).
#
# Here (a machine with nvcc and our Debian packages):
#   scripts/package.sh --out .device/towerps.tar.xz --with-python \
#     --tests "$(scripts/gpu_verify.sh --tests)"
#   mkdir -p .device/fashion-mnist && cp /usr/share/datasets/fashion-mnist/*.gz .device/fashion-mnist/
#   (30 MB more: leave it out where the transfer is limited; step 2 then uses synthetic cifar10)
# There (the repository root, .device carried along):
#   bash scripts/gpu_verify.sh .device/towerps.tar.xz [OUTPUT_DIR] [STEPS]
#
# STEPS (default 1,2,3,4,5,6,7) picks the steps and their order, e.g. 1,5,6,4 (the most wanted
# first, so that a call that runs out of time loses the least), or 2,4 to redo the ones that
# failed. Every command runs under a time limit (GPU_VERIFY_LIMIT seconds, default 240) so that
# one hung step cannot eat the others' time; a step that runs out is a FAIL.
#
# It writes OUTPUT_DIR (default $OUT, else /tmp/gpu_verify): summary.txt (one line per check,
# PASS or FAIL, and the figures), bench.jsonl, and a log per step. Steps:
#   1. the test suites with GPU instances (none may be skipped for want of a GPU: that would
#      mean the bundle does not see it) and those of the code they use, then compute-sanitizer
#      memcheck on the conformance suites' GPU instances (0 errors to pass);
#   2. a cnn job (Fashion-MNIST; cifar10 on synthetic data without it) through towerps-launch
#      with 2 workers sharing gpu:0 at --gpu-memory-fraction 0.4, the same job on CPU towers
#      (its accuracy must be within 0.01 of the GPU job's), then 3 workers at 0.4, which must
#      fail with an out-of-memory error naming the fraction; dlrm_small, bag-mlp (a multi-hot
#      field) and regression_mlp on gpu:0 towers against CPU towers;
#   3. --log-device-placement, and soft placement (--towers gpu:7 fails listing the devices;
#      with --allow-soft-placement it warns and runs);
#   4. towerps-bench train --device gpu:0 --model cifar10 (then resnet20) --batch 128 against
#      PyTorch eager on the same GPU (bench/pytorch_baseline.py, with its TF32 defaults and in
#      strict float32, as TowerPS computes), alternating, 2 rounds, best of each; TowerPS also
#      with --gpu-filter-gradient cudnn (cuDNN's filter gradient instead of im2col + GEMM) and
#      --update host; then TowerPS's per-layer profile of the same step;
#   5. the step time of the cifar10 job with 1, 2 and 4 workers sharing gpu:0; then (the GPU
#      issue's figure) cifar10 and resnet20 at batch 128 through 1 server and 1 GPU worker
#      against the same worker alone (towerps-bench train), alternating, 2 rounds, best of
#      each: PASS at 0.9x or more; with the job's --profile-steps report (the critical path)
#      and the servers' update time per step with --server-threads 1 and auto;
#   6. PyTorch workers on the GPU: the bundle's python/build_extension.sh builds the extension
#      for this node's python3 and PyTorch; pytorch_workers_test.py CudaTest (CUDA parameters
#      train as CPU ones do); bench/pytorch_worker_bench.py --device cuda, a CNN through one
#      server against the same script in plain PyTorch on the GPU: PASS at 0.9x or more;
#   7. step 5's 1, 2 and 4 workers sharing gpu:0 again under MPS (nvidia-cuda-mps-control),
#      when the node has it; the table is step 5's lines beside these.
set -uo pipefail
cd "$(dirname "$0")/.."
# The suites with GPU instances, and the device-independent suites of the code they use. (The
# multi-process suites start binaries by their build-tree paths: they run in CI, not here.)
gpu_tests=(cuda_layers_test backend_conformance_test model_ops_conformance_test
           recommendation_ops_conformance_test elementwise_test
           model_backend_memory_test model_tables_memory_test towers_test tower_group_test caching_allocator_test model_test
           layer_gradient_test)
if [ "${1:-}" = "--tests" ]; then (IFS=,; echo "${gpu_tests[*]}"); exit 0; fi
if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then
  sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'
  echo "  --tests    print the test suites the bundle needs (for scripts/package.sh --tests)"
  exit 0
fi
bundle="${1:?usage: scripts/gpu_verify.sh BUNDLE.tar.gz [OUTPUT_DIR] [STEPS]}"
out="${2:-${OUT:-/tmp/gpu_verify}}"
steps="${3:-1,2,3,4,5,6,7}"
for s in ${steps//,/ }; do
  [[ "$s" =~ ^[1-7]$ ]] || { echo "gpu_verify: no step '$s' (the steps are 1 to 7)" >&2; exit 2; }
done
limit="${GPU_VERIFY_LIMIT:-240}"
bench_seconds="${GPU_VERIFY_BENCH_SECONDS:-10}"
mkdir -p "$out"
# Runs a command under the step time limit, naming it if the limit is reached.
limited() {
  timeout -k 10 "$limit" "$@"
  local rc=$?
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then echo "gpu_verify: '$*' ran past ${limit} s" >&2; fi
  return $rc
}
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
tar -C "$work" -xf "$bundle" || { echo "gpu_verify: cannot unpack $bundle" >&2; exit 1; }
home="$(ls -d "$work"/towerps-*)"
# shellcheck disable=SC1091
. "$home/env.sh"
export PYTHONUNBUFFERED=1
summary="$out/summary.txt"
: > "$summary"
result() { echo "$1 $2" | tee -a "$summary"; }
data_dir=""
if [ -f .device/fashion-mnist/train-images-idx3-ubyte.gz ]; then data_dir="$PWD/.device/fashion-mnist"; fi

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee -a "$summary"
# The GPU backend is a plugin the programs load from lib/ (kernels/gpu_plugin.h): its CUDA
# libraries must resolve on this node.
if [ ! -f "$home/lib/libtowerps_cuda.so" ]; then result FAIL "the bundle has no lib/libtowerps_cuda.so"; exit 1; fi
missing="$(ldd "$home/bin/towerps-worker" "$home/lib/libtowerps_cuda.so" | grep "not found")"
if [ -n "$missing" ]; then result FAIL "libraries not found: $missing"; exit 1; fi

# 1. Tests.
step1() {
for name in "${gpu_tests[@]}"; do
  t="$home/tests/$name"
  if [ ! -x "$t" ]; then result FAIL "test $name is not in the bundle"; continue; fi
  limited "$t" > "$out/test-$name.log" 2>&1
  rc=$?
  gpu_skips="$(grep -c "no GPU\|without a GPU\|no CUDA" "$out/test-$name.log")"
  if [ $rc -eq 0 ] && [ "$gpu_skips" -eq 0 ]; then result PASS "test $name"
  else result FAIL "test $name (exit $rc, GPU skips $gpu_skips; log test-$name.log)"; fi
done
# What the CUDA-against-CPU tests measured: each op's error at the cifar10 model's shapes, and
# the 50-step loss trajectories.
grep -h "^gpu0 .*largest error\|largest relative gap over" "$out"/test-model_ops_conformance_test.log \
  "$out"/test-model_backend_memory_test.log 2>/dev/null | sed 's/^/INFO /' | tee -a "$summary"
# compute-sanitizer memcheck on the conformance suites' GPU instances.
if ! command -v compute-sanitizer > /dev/null; then
  result FAIL "memcheck: compute-sanitizer is not on this node"
  return
fi
# (model_ops_conformance_test: the ResNet-20 shapes' kernels, not the cifar10 convolutions'
# rerun with every cuDNN algorithm, which take minutes under memcheck.)
for check in "backend_conformance_test *gpu0*" \
             "model_ops_conformance_test *ConvolutionsAtResNet20s*gpu0*:*BatchNorm*gpu0*:*GlobalAvg*gpu0*" \
             "recommendation_ops_conformance_test *gpu0*"; do
  read -r name filter <<< "$check"
  limited compute-sanitizer --tool memcheck --error-exitcode 3 "$home/tests/$name" \
    --gtest_filter="$filter" > "$out/memcheck-$name.log" 2>&1
  rc=$?
  errors="$(grep -o "ERROR SUMMARY: [0-9]* error" "$out/memcheck-$name.log" | tail -1)"
  if [ $rc -eq 0 ] && [ -n "$errors" ]; then result PASS "memcheck $name: $errors(s)"
  else result FAIL "memcheck $name (exit $rc, ${errors:-no summary}; memcheck-$name.log)"; fi
done
}

# 2. Two workers share the GPU at 0.4 and train as on the CPU; a third does not fit.
if [ -n "$data_dir" ]; then job=(--model cnn --data-dir "$data_dir"); length=(--epochs 1)
else job=(--model cifar10 --dataset synthetic); length=(--max-steps 300); fi
accuracy() { grep -o "test accuracy = [0-9.]*" "$1" | tail -1 | grep -o "[0-9.]*$"; }
step2() {
limited towerps-launch --servers 1 --workers 2 --towers gpu:0 --gpu-memory-fraction 0.4 \
  "${job[@]}" "${length[@]}" --run-dir "$work/share2" > "$out/share2.log" 2>&1
rc=$?
gpu_acc="$(accuracy "$out/share2.log")"
if [ $rc -eq 0 ]; then result PASS "2 workers at 0.4 on gpu:0: test accuracy $gpu_acc"
else result FAIL "2 workers at 0.4 on gpu:0 (exit $rc; share2.log)"; fi
limited towerps-launch --servers 1 --workers 2 --towers cpu:0 "${job[@]}" "${length[@]}" \
  --run-dir "$work/cpu2" > "$out/cpu2.log" 2>&1
rc=$?
cpu_acc="$(accuracy "$out/cpu2.log")"
if [ $rc -eq 0 ] && [ -n "$gpu_acc" ] && [ -n "$cpu_acc" ] &&
   python3 -c "import sys; sys.exit(abs($gpu_acc - $cpu_acc) > 0.01)"; then
  result PASS "the same job on CPU towers: test accuracy $cpu_acc (GPU $gpu_acc)"
else result FAIL "the same job on CPU towers (exit $rc, accuracy ${cpu_acc:-none} against GPU ${gpu_acc:-none}; cpu2.log)"; fi
limited towerps-launch --servers 1 --workers 3 --towers gpu:0 --gpu-memory-fraction 0.4 "${job[@]}" \
  "${length[@]}" \
  --run-dir "$work/share3" > "$out/share3.log" 2>&1
rc=$?
if [ $rc -ne 0 ] && grep -qi "fraction" "$out/share3.log" && grep -qi "memory" "$out/share3.log"; then
  result PASS "3 workers at 0.4 fail: $(grep -i -m1 "fraction" "$out/share3.log" | cut -c1-200)"
else result FAIL "3 workers at 0.4 (exit $rc; share3.log)"; fi
# Embedding tables on GPU towers: dlrm_small on generated click logs, against CPU towers.
python3 scripts/make_ctr_data.py --out "$work/ctr" --train 20000 --test 5000 > "$out/ctr.json"
auc() { grep -o "test AUC = [0-9.]*" "$1" | tail -1 | grep -o "[0-9.]*$"; }
for towers in gpu:0 cpu:0; do
  limited towerps-launch --servers 1 --workers 2 --towers "$towers" --model dlrm_small \
    --dataset criteo --data-dir "$work/ctr" --epochs 1 --run-dir "$work/dlrm-${towers%%:*}" \
    > "$out/dlrm-${towers%%:*}.log" 2>&1
done
gpu_auc="$(auc "$out/dlrm-gpu.log")"; cpu_auc="$(auc "$out/dlrm-cpu.log")"
if [ -n "$gpu_auc" ] && [ -n "$cpu_auc" ] &&
   python3 -c "import sys; sys.exit(abs($gpu_auc - $cpu_auc) > 0.01 or $gpu_auc < 0.65)"; then
  result PASS "dlrm_small (26 tables) on gpu:0 towers: test AUC $gpu_auc (CPU towers $cpu_auc)"
else result FAIL "dlrm_small on gpu:0 towers: AUC ${gpu_auc:-none} against CPU ${cpu_auc:-none} (dlrm-gpu.log)"; fi
# A multi-hot field (bag-mlp) and a regression (regression_mlp): the CPU's results on gpu:0.
metric() { grep -o "\"$2\":[0-9.]*" "$1" | grep -o "[0-9.]*$"; }
for check in "bag-mlp categorical test_accuracy --epochs 100 --max-steps 300 --batch-size 512 --table-lr 0.5" \
             "regression_mlp regression test_rmse --epochs 3 --batch-size 64"; do
  read -r model dataset key flags <<< "$check"
  for towers in gpu:0 cpu:0; do
    # shellcheck disable=SC2086
    limited towerps-launch --servers 2 --workers 2 --towers "$towers" --model "$model" \
      --dataset "$dataset" $flags --run-dir "$work/$model-${towers%%:*}" \
      --summary-out "$work/$model-${towers%%:*}.json" > "$out/$model-${towers%%:*}.log" 2>&1
  done
  g="$(metric "$work/$model-gpu.json" "$key")"; c="$(metric "$work/$model-cpu.json" "$key")"
  if [ -n "$g" ] && [ -n "$c" ] && python3 -c "import sys; sys.exit(abs($g - $c) > 1e-4)"; then
    result PASS "$model on gpu:0 towers: $key $g (CPU towers $c)"
  else result FAIL "$model on gpu:0 towers: $key ${g:-none} against CPU ${c:-none} ($model-gpu.log)"; fi
done
}

# 3. Placement logging and soft placement.
step3() {
limited towerps-launch --servers 2 --workers 1 --towers gpu:0 --log-device-placement "${job[@]}" \
  --max-steps 5 --run-dir "$work/placement" > "$out/placement.log" 2>&1
if grep -q "gpu:0" "$out/placement.log" && grep -qi "server" "$out/placement.log"; then
  result PASS "placement logged: $(grep -c -i placement "$out/placement.log") lines"
else result FAIL "placement log (placement.log)"; fi
limited towerps-launch --servers 1 --workers 1 --towers gpu:7 "${job[@]}" --max-steps 5 \
  --run-dir "$work/missing" > "$out/missing.log" 2>&1
rc=$?
if [ $rc -ne 0 ] && grep -q "gpu:0" "$out/missing.log"; then
  result PASS "gpu:7 refused: $(grep -m1 "gpu:7" "$out/missing.log" | cut -c1-200)"
else result FAIL "gpu:7 without soft placement (exit $rc; missing.log)"; fi
limited towerps-launch --servers 1 --workers 1 --towers gpu:7 --allow-soft-placement "${job[@]}" \
  --max-steps 5 --run-dir "$work/soft" > "$out/soft.log" 2>&1
rc=$?
if [ $rc -eq 0 ] && grep -q "soft placement: gpu:7" "$out/soft.log"; then result PASS "soft placement"
else result FAIL "soft placement (exit $rc; soft.log)"; fi
}

# 4. Throughput against PyTorch eager, same GPU, alternating.
step4() {
: > "$out/bench.jsonl"
for round in 1 2; do
  for model in cifar10 resnet20; do
    variants=("device gemm" "device cudnn")
    if [ "$round" = 1 ]; then variants+=("host gemm"); fi
    for variant in "${variants[@]}"; do
      read -r update filter <<< "$variant"
      limited towerps-bench train --device gpu:0 --update "$update" --model "$model" \
        --gpu-filter-gradient "$filter" --batch 128 --seconds "$bench_seconds" --json \
        2>> "$out/bench.log" | tee -a "$out/bench.jsonl"
    done
    for tf32 in default off; do
      limited python3 bench/pytorch_baseline.py --device cuda:0 --model "$model" --batch 128 \
        --seconds "$bench_seconds" --tf32 "$tf32" --json 2>> "$out/bench.log" |
        tee -a "$out/bench.jsonl"
    done
  done
done
python3 - "$out/bench.jsonl" <<'PY' | tee -a "$summary"
import json, sys
best = {}
for line in open(sys.argv[1]):
    try:
        r = json.loads(line)
    except ValueError:
        continue
    impl = r.get("impl", "towerps") + ("-tf32-" + r["tf32"] if "tf32" in r else "")
    if r.get("update") == "host":
        impl += "-host-update"
    elif r.get("gpu_filter_gradient") == "cudnn":
        impl += "-cudnn-filter"
    key = (r.get("model"), impl)
    best[key] = max(best.get(key, 0), r.get("examples_per_sec", 0))
for model in ("cifar10", "resnet20"):
    t = best.get((model, "towerps"), 0)
    for name, label in (("pytorch-tf32-default", "PyTorch defaults (TF32 convolutions)"),
                        ("pytorch-tf32-off", "PyTorch strict float32")):
        p = best.get((model, name), 0)
        verdict = "PASS" if p and t >= p else "FAIL"
        print(f"{verdict} bench {model} b128 vs {label}: towerps {t:.0f} img/s, pytorch "
              f"{p:.0f} img/s, ratio {t / p if p else 0:.2f}")
    print(f"INFO {model}: towerps with SGD on the host (the parameter-server split): "
          f"{best.get((model, 'towerps-host-update'), 0):.0f} img/s")
    c = best.get((model, "towerps-cudnn-filter"), 0)
    print(f"INFO {model}: towerps with cuDNN's filter gradient (--gpu-filter-gradient cudnn): "
          f"{c:.0f} img/s; im2col + GEMM is {t / c if c else 0:.2f}x that")
PY
for model in cifar10 resnet20; do
  limited towerps-bench train --device gpu:0 --model "$model" --batch 128 --seconds 5 --profile \
    > "$out/profile-$model.log" 2>&1 || result FAIL "towerps-bench train --profile ($model)"
done
}

# 1, 2 and 4 cifar10 workers sharing gpu:0 through one server; $1 names how they share it
# (time-slicing, MPS).
share_gpu() {
  for n in 1 2 4; do
    limited towerps-launch --servers 1 --workers "$n" --towers gpu:0 --gpu-memory-fraction 0.2 \
      --model cifar10 --dataset synthetic --max-steps 300 --batch-size 128 \
      --summary-out "$work/share-$1-$n.json" --run-dir "$work/s-$1-$n" \
      > "$out/share-$1-n$n.log" 2>&1
    python3 -c "
import json; s = json.load(open('$work/share-$1-$n.json'))
print(f'INFO $1: {$n} worker(s) on gpu:0: {1000 * s[\"train_seconds\"] / s[\"steps\"]:.1f} ms/step, '
      f'{s[\"examples_per_sec\"]:.0f} img/s in all')" | tee -a "$summary" ||
      result FAIL "$1: $n workers sharing gpu:0 (share-$1-n$n.log)"
  done
}

# 5. Workers sharing one GPU, then one worker through one server against the worker alone.
step5() {
share_gpu time-slicing
: > "$out/ratio.jsonl"
for round in 1 2; do
  for model in cifar10 resnet20; do
    limited towerps-bench train --device gpu:0 --model "$model" --batch 128 \
      --seconds "$bench_seconds" --json 2>> "$out/ratio.log" | tee -a "$out/ratio.jsonl"
    for threads in auto 1; do
      limited towerps-launch --servers 1 --workers 1 --towers gpu:0 --model "$model" \
        --dataset synthetic --max-steps 400 --batch-size 128 --server-threads "$threads" \
        --profile-steps 200 --summary-out "$work/ratio-$model-$round-$threads.json" \
        --run-dir "$work/r-$model-$round-$threads" > "$out/ratio-$model-$round-$threads.log" 2>&1
    done
  done
done
python3 scripts/through_server_ratio.py "$out/ratio.jsonl" "$work" 128 cifar10 resnet20 |
  tee -a "$summary"
}

# 6. PyTorch workers on the GPU.
step6() {
if ! limited bash "$home/python/build_extension.sh" > "$out/pytorch-extension.log" 2>&1; then
  result FAIL "the towerps extension does not build for $(python3 -V 2>&1) (pytorch-extension.log)"
  return
fi
result PASS "the towerps extension built for $(python3 -V 2>&1), PyTorch $(python3 -c 'import torch; print(torch.__version__)')"
TOWERPS_LAUNCH="$(command -v towerps-launch)" limited python3 tests/python/pytorch_workers_test.py \
  -v CudaTest > "$out/pytorch-cuda-test.log" 2>&1
rc=$?
if [ $rc -eq 0 ] && ! grep -q "skipped" "$out/pytorch-cuda-test.log"; then
  result PASS "pytorch_workers.CudaTest: CUDA parameters train as CPU ones"
else result FAIL "pytorch_workers.CudaTest (exit $rc; pytorch-cuda-test.log)"; fi
limited python3 bench/pytorch_worker_bench.py --launch towerps-launch --device cuda \
  --steps "${GPU_VERIFY_TORCH_STEPS:-300}" --rounds 2 > "$out/pytorch-gpu-bench.log" 2>&1
python3 - "$out/pytorch-gpu-bench.log" <<'PY' | tee -a "$summary"
import re, sys
text = open(sys.argv[1]).read()
found = re.findall(r"median on (\S+): plain PyTorch ([0-9.]+) ms/step, 1 server \+ 1 PyTorch "
                   r"worker \((\S+)\) ([0-9.]+) ms/step: ([0-9.]+)x", text)
if not found:
    print("FAIL PyTorch CNN on the GPU through one server: no figures (pytorch-gpu-bench.log)")
for device, plain, mode, ms, ratio in found:
    verdict = "PASS" if mode == "towerps" and float(ratio) >= 0.9 else \
        ("FAIL" if mode == "towerps" else "INFO")
    print(f"{verdict} PyTorch CNN on {device} through 1 server ({mode}) vs plain PyTorch: "
          f"{ms} vs {plain} ms/step, ratio {ratio}")
PY
}

# 7. The sharing of step 5 under MPS, where the node has it.
step7() {
if ! command -v nvidia-cuda-mps-control > /dev/null; then
  result INFO "MPS: nvidia-cuda-mps-control is not on this node"
  return
fi
export CUDA_MPS_PIPE_DIRECTORY="$work/mps-pipe" CUDA_MPS_LOG_DIRECTORY="$work/mps-log"
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
if ! nvidia-cuda-mps-control -d > "$out/mps.log" 2>&1; then
  result INFO "MPS: the control daemon did not start ($(head -c 200 "$out/mps.log"))"
  unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
  return
fi
share_gpu MPS
echo get_server_list | nvidia-cuda-mps-control >> "$out/mps.log" 2>&1
cat "$CUDA_MPS_LOG_DIRECTORY"/*.log >> "$out/mps.log" 2>/dev/null
echo quit | nvidia-cuda-mps-control >> "$out/mps.log" 2>&1
unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
}

for s in ${steps//,/ }; do
  started=$SECONDS
  "step$s"
  echo "INFO step $s took $((SECONDS - started)) s" | tee -a "$summary"
done
echo "gpu_verify: $(grep -c '^PASS' "$summary") passed, $(grep -c '^FAIL' "$summary") failed"
