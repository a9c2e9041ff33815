#!/usr/bin/env bash
# Produce the ground-truth recordings on a GPU machine without network access.
#
# Expects, in the repository root, a git-ignored folder .device/ holding:
#   flashinfer074_trim.tgz   flashinfer 0.7.4's Python files, data/include, data/cccl and the
#                            sampling sources of data/csrc (see tools/groundtruth/README.md)
#   apache_tvm_ffi-*.whl     the cp312 wheel flashinfer's JIT needs
#   flashinfer_python-0.6.4-py3-none-any.whl   (optional) for the element-0 comparison
# and writes into $OUT: curand_philox.json, flashinfer_074.json, flashinfer_064.json and logs.
# The three jobs run in parallel; each has its own time limit. JOBS selects a subset
# (e.g. JOBS=fi064 to redo only the 0.6.4 recording).
set -u
JOBS=${JOBS:-"curand fi074 fi064"}
OUT=${OUT:-/tmp/groundtruth-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
ROOT=$(pwd)

{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  nvcc --version | tail -2
  python3 -c 'import torch, sys; print(sys.version); print(torch.__version__, torch.version.cuda)'
} >"$OUT/env.txt" 2>&1

python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/tvmsite .device/apache_tvm_ffi-*.whl \
  >>"$OUT/env.txt" 2>&1

# 1. curand itself.
[[ " $JOBS " == *" curand "* ]] && (
  set -x
  inc=""
  if ! echo '#include <curand_kernel.h>' | nvcc -x cu -E - -o /dev/null 2>/dev/null; then
    hdr=$(find /usr/local /opt /usr/lib/python3* / -xdev -name curand_kernel.h 2>/dev/null | head -1)
    inc="-I$(dirname "$hdr")"
  fi
  nvcc -O2 -arch=sm_90 $inc -o /tmp/curand_oracle tools/groundtruth/curand_oracle.cu &&
    timeout 120 python3 tools/groundtruth/record_curand.py --oracle /tmp/curand_oracle \
      --out "$OUT/curand_philox.json"
) >"$OUT/curand.log" 2>&1 &

# 2. flashinfer 0.7.4 from the trimmed tree (the first sampling call JIT-builds the module).
[[ " $JOBS " == *" fi074 "* ]] && (
  set -x
  mkdir -p /tmp/fi074 && tar xzf .device/flashinfer074_trim.tgz -C /tmp/fi074
  PYTHONPATH=/tmp/fi074:/tmp/tvmsite FLASHINFER_WORKSPACE_BASE=/tmp/ws074 MAX_JOBS=12 \
    timeout 480 python3 tools/groundtruth/record_flashinfer.py --label 0.7.4 \
    --out "$OUT/flashinfer_074.json"
) >"$OUT/fi074.log" 2>&1 &

# 3. flashinfer 0.6.4 (reads only element 0 of the seed/offset tensors). topk_indices is left
# out: 0.6.4 reads top_k_arr[blockIdx.x] (not [indices[bx]]), past the end of a per-probs-row
# array, and the kernel did not finish within 8 minutes on the H200.
if [[ " $JOBS " == *" fi064 "* ]] && ls .device/flashinfer_python-0.6.4-*.whl >/dev/null 2>&1; then
  (
    set -x
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/fi064 \
      .device/flashinfer_python-0.6.4-*.whl
    PYTHONPATH=/tmp/fi064:/tmp/tvmsite FLASHINFER_WORKSPACE_BASE=/tmp/ws064 MAX_JOBS=12 \
      timeout 300 python3 tools/groundtruth/record_flashinfer.py --label 0.6.4 \
      --skip topk_indices --out "$OUT/flashinfer_064.json"
  ) >"$OUT/fi064.log" 2>&1 &
fi

wait
cd "$ROOT" && ls -la "$OUT"
for f in "$OUT"/*.log; do echo "== $f"; tail -n 5 "$f"; done
