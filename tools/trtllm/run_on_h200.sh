#!/usr/bin/env bash
# NOT RUN YET: the device tool sends the session's own checkout, not a helper's worktree.
# Record flashinfer tap data on a GPU machine without network: the calls TensorRT-LLM's strict
# one-model path makes, on the real flashinfer 0.7.4 and 0.6.4 kernels
# (tools/trtllm/record_strict_calls.py --real). Needs .device/ as
# tools/groundtruth/make_device_bundle.sh makes it, plus .device/whl/ (pydantic, pydantic-core,
# annotated-types, typing-inspection, typing-extensions for cp312). Writes to $OUT.
set -u
OUT=${OUT:-/tmp/trtllm-out}
mkdir -p "$OUT/taps"
{
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c 'import sys, torch; print(sys.version.split()[0], torch.__version__, torch.version.cuda)'
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site \
    .device/whl/*.whl .device/apache_tvm_ffi-*.whl
  mkdir -p /tmp/fi074 && tar xzf .device/flashinfer074_trim.tgz -C /tmp/fi074
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/fi064 \
    .device/flashinfer_python-0.6.4-py3-none-any.whl
} >"$OUT/env.log" 2>&1
for v in 074 064; do
  PYTHONPATH=/tmp/fi$v:/tmp/site:src FLASHINFER_WORKSPACE_BASE=/tmp/ws$v MAX_JOBS=8 \
    timeout 400 python3 tools/trtllm/record_strict_calls.py --real "$OUT/taps" \
    >"$OUT/record$v.log" 2>&1 &
done
wait
tail -n 5 "$OUT"/*.log
