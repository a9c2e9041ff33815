#!/usr/bin/env bash
# Build the git-ignored .device/ folder that run_on_device.sh needs on a GPU machine without
# network access. Run here, with network, from the repository root:
#   bash tools/groundtruth/make_device_bundle.sh
# flashinfer 0.7.4's wheel (97 MiB) is too big to travel whole; its sampling module JIT-builds
# from the Python files, data/include, data/cccl and four sampling sources of data/csrc.
set -euo pipefail
work=$(mktemp -d)
mkdir -p .device
# One call per version: asked for both pins at once, pip's resolver refuses them as a conflict.
python3 -m pip download -q --no-deps flashinfer-python==0.7.4 -d "$work"
python3 -m pip download -q --no-deps flashinfer-python==0.6.4 -d "$work"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
  --implementation cp --platform manylinux_2_28_x86_64 "apache-tvm-ffi==0.1.15.post2" -d .device
cp "$work"/flashinfer_python-0.6.4-py3-none-any.whl .device/
mkdir -p "$work/074" && (cd "$work/074" && unzip -q "$work"/flashinfer_python-0.7.4-py3-none-any.whl)
(
  cd "$work/074"
  tar czf - \
    $(find flashinfer -name '*.py' -o -name '*.json' | grep -v '^flashinfer/data/') \
    flashinfer/data/include flashinfer/data/cccl \
    flashinfer/data/csrc/sampling.cu flashinfer/data/csrc/renorm.cu \
    flashinfer/data/csrc/flashinfer_sampling_binding.cu flashinfer/data/csrc/*.h \
    flashinfer_python-0.7.4.dist-info
) >.device/flashinfer074_trim.tgz
rm -rf "$work"
du -sh .device/*
