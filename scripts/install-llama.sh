#!/usr/bin/env bash
# Install llama-cpp-python built for a portable CPU baseline, never for the build machine.
#
# pip's default source build compiles llama.cpp with GGML_NATIVE (-march=native plus whatever
# cpuid reports, AMX and AVX-512 included), and pip caches that wheel keyed by the source
# archive only: a wheel built on one CPU is silently reused on another, where it can die with
# SIGILL. Here the CMake flags are explicit (x86-64: AVX2/FMA/F16C/BMI2, no AVX-512, no AMX;
# other architectures: GGML_NATIVE=OFF with llama.cpp's defaults), the build skips pip's cache,
# and the wheel is kept in a folder keyed by version + flags, so only an identical build is
# ever reused.
#
# Usage: scripts/install-llama.sh PYTHON   (the venv's python)
set -euo pipefail

PY=${1:?usage: install-llama.sh PYTHON}
VERSION=0.3.36
case "$(uname -m)" in
  x86_64|amd64)
    FLAGS="-DGGML_NATIVE=OFF -DGGML_CPU_ALL_VARIANTS=OFF -DGGML_BACKEND_DL=OFF \
-DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON \
-DGGML_AVX_VNNI=OFF -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF \
-DGGML_AVX512_BF16=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF" ;;
  *)
    FLAGS="-DGGML_NATIVE=OFF -DGGML_CPU_ALL_VARIANTS=OFF -DGGML_BACKEND_DL=OFF" ;;
esac
# OpenMP stays on: with the worker's OMP_WAIT_POLICY=PASSIVE (agentkit/models/llama_process.py)
# a thread waiting at a barrier sleeps, where ggml's own pool (GGML_OPENMP=OFF) always spins;
# on two busy cores that read prompts 2-3x faster for a third of the CPU per token, and was no
# slower on quiet ones (bench/bench_llama_build.py --neighbour, bench/results/llama_neighbour.csv).
FLAGS="$FLAGS -DLLAVA_BUILD=OFF -DGGML_OPENMP=ON"
KEY=$(printf '%s %s %s' "$VERSION" "$(uname -m)" "$FLAGS" | sha256sum | cut -c1-16)
CACHE_ROOT=${AGENTKIT_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/agentkit/wheels}
WHEEL_DIR="$CACHE_ROOT/llama-cpp-python-$VERSION-$KEY"

wheel=$(ls "$WHEEL_DIR"/llama_cpp_python-*.whl 2>/dev/null | head -n1 || true)
if [ -z "$wheel" ]; then
  echo "building llama-cpp-python $VERSION for a portable CPU baseline (one time, ~10 min)"
  tmp="$WHEEL_DIR.tmp.$$"
  rm -rf "$tmp" && mkdir -p "$tmp"
  CMAKE_ARGS="$FLAGS" FORCE_CMAKE=1 "$PY" -m pip wheel --quiet --no-deps --no-cache-dir \
    --no-binary llama-cpp-python "llama-cpp-python==$VERSION" -w "$tmp"
  printf '%s\n' "$FLAGS" > "$tmp/FLAGS"
  rm -rf "$WHEEL_DIR" && mv "$tmp" "$WHEEL_DIR"
  wheel=$(ls "$WHEEL_DIR"/llama_cpp_python-*.whl | head -n1)
fi

# Reinstall unless the venv already holds exactly this wheel (pip records where it came from).
installed=$("$PY" - <<'PYEOF'
import json
from importlib import metadata
try:
    text = metadata.distribution("llama-cpp-python").read_text("direct_url.json") or "{}"
    print(json.loads(text).get("url", ""))
except metadata.PackageNotFoundError:
    print("")
PYEOF
)
if [ "$installed" != "file://$wheel" ]; then
  "$PY" -m pip install --quiet --no-deps --force-reinstall "$wheel"
fi
