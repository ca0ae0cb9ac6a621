#!/usr/bin/env bash
# Issue 41's GPU checks in one call, for a machine with a CUDA device and no network:
#   1. CUDA float32 against CPU float32 on every logit method (bench_device_equality.py);
#   2. bench_gpu.py with the issue's command (1B random Llama, bf16, all of WikiMIA, batch 32),
#      plus the plain-PyTorch floor, kernel/sync counts of one warm detect, and two token budgets;
#   3. the same warm passes on a SmolLM2-135M-shaped model, where the host's share is largest.
# Everything it writes goes to $OUT (default benchmarks/results); what it printed is the record.
#
# Such a machine lacks a few pure-Python packages and the bundled SmolLM2 tokenizer (its GGUF is
# too large to send): put their wheels in $GPU_DIR/wheels and the tokenizer, saved with
# save_pretrained, in $GPU_DIR/tokenizer (benchmarks/results/gpu_cuda.md says how).
#   OUT=/somewhere bash benchmarks/gpu_check.sh
# For a dry run on a CPU: PARAMS=micro EQ_PARAMS=micro EQ_DEVICE=cpu PASSAGES=64 bash benchmarks/gpu_check.sh
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-benchmarks/results}
GPU_DIR=${GPU_DIR:-.gpu}
PY=${PYTHON:-python3}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
if ls "$GPU_DIR"/wheels/*.whl >/dev/null 2>&1; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/gpu-site \
    "$GPU_DIR"/wheels/*.whl && export PYTHONPATH=/tmp/gpu-site${PYTHONPATH:+:$PYTHONPATH}
fi
if [ -d "$GPU_DIR/tokenizer" ]; then export BENCH_TOKENIZER="hf:$PWD/$GPU_DIR/tokenizer"; fi

{
  date -u
  git rev-parse --short HEAD 2>/dev/null || true
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm --format=csv 2>&1
  "$PY" -c "import torch, transformers, numpy; print('torch', torch.__version__, 'transformers', \
transformers.__version__, 'numpy', numpy.__version__, 'cuda', torch.cuda.is_available())"
  nproc
} 2>&1 | tee "$OUT/gpu_env.txt"

echo "== CUDA float32 against CPU float32"
timeout "${EQ_TIMEOUT:-120}" "$PY" benchmarks/bench_device_equality.py --params "${EQ_PARAMS:-135M}" \
  --device "${EQ_DEVICE:-cuda}" --json "$OUT/device_equality.json" 2>&1 | grep -v "Writing model" \
  | tee "$OUT/device_equality.txt" | tail -12

echo "== bench_gpu.py"
timeout "${BENCH_TIMEOUT:-360}" "$PY" benchmarks/bench_gpu.py --params "${PARAMS:-1B}" --dtype "${DTYPE:-bfloat16}" \
  --passages "${PASSAGES:-wikimia}" --batch-size 32 --sizes 8,32,128 --budgets "${BUDGETS:-8192,32768}" \
  --repeats "${REPEATS:-2}" --cold "${COLD:-1}" --load-repeats 1 --gguf '' --skip "${SKIP:-}" --floor --profile \
  --json "$OUT/gpu_cuda.json" 2>&1 \
  | grep -v "Writing model" | tee "$OUT/gpu_cuda.txt" | tail -45

echo "== bench_gpu.py, 135M"
timeout "${SMALL_TIMEOUT:-90}" "$PY" benchmarks/bench_gpu.py --params "${SMALL_PARAMS:-135M}" --dtype "${DTYPE:-bfloat16}" \
  --passages "${PASSAGES:-wikimia}" --batch-size 32 --sizes 32 --repeats 2 --cold 0 --skip load --gguf '' \
  --json "$OUT/gpu_cuda_small.json" 2>&1 | grep -v "Writing model" | tee "$OUT/gpu_cuda_small.txt" | tail -12

# a section's partial record is kept only where its run was cut short
for partial in "$OUT"/*.partial.json; do
  if [ -e "${partial%.partial.json}.json" ]; then rm -f "$partial"; fi
done
ls -la "$OUT"
