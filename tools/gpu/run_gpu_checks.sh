#!/usr/bin/env bash
# Issue 11 on a GPU machine without network: flashinfer backend audits (0.7.4 and 0.6.4), the
# GPU-marked tests, and benchmarks/bench_flashinfer.py. Logs go to $OUT.
#
# Expects the folder this script sits in (DEV) to hold: repo/ (src, tests, benchmarks,
# pyproject.toml of the checkout), whl/*.whl (pydantic, pydantic-core, annotated-types,
# typing-inspection, typing-extensions: cp312), apache_tvm_ffi-*.whl, flashinfer074_trim.tgz
# and flashinfer_python-0.6.4-py3-none-any.whl, as tools/groundtruth/make_device_bundle.sh
# makes them. STEPS selects a subset of "jit tests audits cudatests bench oracle jobs"
# (default: all but oracle and jobs). BENCH_ARGS go to bench_flashinfer.py (default --engine),
# ORACLE_ARGS to benchmarks/bench_oracle.py (the oracle's tokens/s per model size, run last,
# alone). "jobs" runs benchmarks/bench_default_audit.py (the default audit on the CPU, serial
# against --jobs 2 and auto) on 4 and on 2 of the machine's CPUs (taskset), JOBS_ARGS added.
set -u
DEV=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/gpu-out}
STEPS=${STEPS:-"jit tests audits cudatests bench"}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 COLUMNS=${COLUMNS:-100} MAX_JOBS=8
T0=$(date +%s)
stamp() { echo "[$(($(date +%s) - T0)) s] $*"; }

{
  stamp setup
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  python3 -c 'import torch, sys; print(sys.version); print(torch.__version__, torch.version.cuda)'
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site \
    "$DEV"/whl/*.whl "$DEV"/apache_tvm_ffi-*.whl
  mkdir -p /tmp/fi074 && tar xzf "$DEV/flashinfer074_trim.tgz" -C /tmp/fi074
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/fi064 \
    "$DEV"/flashinfer_python-0.6.4-py3-none-any.whl
  stamp setup done
} >"$OUT/env.log" 2>&1

site() { echo "/tmp/fi$1:/tmp/site:$DEV/repo/src:$DEV/repo"; }
py() {  # py VERSION args...: python3 with flashinfer VERSION (074 | 064)
  local v=$1; shift
  PYTHONPATH=$(site "$v") FLASHINFER_WORKSPACE_BASE=/tmp/ws$v python3 "$@"
}

if [[ " $STEPS " == *" jit "* ]]; then
  for v in 074 064; do
    (
      stamp "jit $v"
      timeout 200 env PYTHONPATH=$(site $v) FLASHINFER_WORKSPACE_BASE=/tmp/ws$v python3 -c '
import time, torch, flashinfer, flashinfer.sampling as fs
t = time.time()
p = torch.full((2, 64), 1 / 64, device="cuda")
s = torch.zeros(2, dtype=torch.int64, device="cuda")
print(flashinfer.__version__, fs.sampling_from_probs(p, seed=s, offset=s).tolist(), round(time.time() - t, 1), "s")
'
      stamp "jit $v done rc=$?"
    ) >"$OUT/jit$v.log" 2>&1 &
  done
  wait
fi

audit() {  # audit VERSION CONTRACT
  local v=$1 c=$2 y=/tmp/model-$1-$2.yaml
  printf 'engine:\n  device: cuda\n  contract: %s\n  options:\n    sampling_backend: flashinfer\n' "$c" >"$y"
  stamp "audit flashinfer $v contract $c"
  (cd /tmp && timeout 130 env PYTHONPATH=$(site "$v") FLASHINFER_WORKSPACE_BASE=/tmp/ws$v \
    python3 -m specseed audit "$y" --no-progress --json "/tmp/audits/$v-$c.json")
  stamp "audit $v $c exit $?"
}

job() {  # job VERSION: the GPU tests of the tap and backend, then the audits
  local v=$1
  if [[ " $STEPS " == *" tests "* ]]; then
    stamp "pytest gpu, flashinfer $v"
    (cd "$DEV/repo" && timeout 200 env PYTHONPATH=$(site "$v") FLASHINFER_WORKSPACE_BASE=/tmp/ws$v \
      python3 -m pytest -q -m gpu -p no:cacheprovider tests/taps tests/sampling/test_backend_gpu.py)
    stamp "pytest $v exit $?"
  fi
  if [[ " $STEPS " == *" audits "* ]]; then
    audit "$v" ideal
    audit "$v" trtllm-pr17599
  fi
}

mkdir -p /tmp/audits
job 074 >"$OUT/fi074.log" 2>&1 &
job 064 >"$OUT/fi064.log" 2>&1 &
if [[ " $STEPS " == *" cudatests "* ]]; then
  (
    stamp "pytest gpu: the engine on CUDA with the CPU sampling backend"
    cd "$DEV/repo" && timeout 300 env PYTHONPATH=$(site 074) python3 -m pytest -q -m gpu \
      -p no:cacheprovider tests/engine_adapters/reference/test_engine_cuda.py \
      tests/distribution/test_oracle_device.py
    stamp "exit $?"
  ) >"$OUT/cuda.log" 2>&1 &
fi
wait
(cd /tmp && tar czf "$OUT/audits.tgz" audits) 2>/dev/null

if [[ " $STEPS " == *" bench "* ]]; then
  {
    stamp bench
    cd "$DEV/repo" && timeout "${BENCH_TIMEOUT:-170}" env PYTHONPATH=$(site 074) \
      FLASHINFER_WORKSPACE_BASE=/tmp/ws074 python3 benchmarks/bench_flashinfer.py ${BENCH_ARGS---engine}
    stamp "bench exit $?"
  } >"$OUT/bench.log" 2>&1
fi

if [[ " $STEPS " == *" oracle "* ]]; then
  {
    stamp oracle
    nvidia-smi --query-gpu=memory.used,memory.total --format=csv
    cd "$DEV/repo" && timeout "${ORACLE_TIMEOUT:-300}" env PYTHONPATH=$(site 074) \
      python3 benchmarks/bench_oracle.py ${ORACLE_ARGS-}
    stamp "oracle exit $?"
  } >"$OUT/oracle.log" 2>&1
fi
if [[ " $STEPS " == *" jobs "* ]]; then
  for cpus in 0-3 0-1; do
    {
      stamp "default audit on CPUs $cpus"
      cd "$DEV/repo" && timeout "${JOBS_TIMEOUT:-400}" env PYTHONPATH=/tmp/site:$DEV/repo/src \
        taskset -c "$cpus" python3 benchmarks/bench_default_audit.py --kernels blocked \
        --jobs 2,auto ${JOBS_ARGS-}
      stamp "default audit exit $?"
    } >"$OUT/jobs-cpus$cpus.log" 2>&1
  done
fi
stamp all done
for f in "$OUT"/*.log; do echo "== $f"; tail -n 25 "$f"; done
