#!/usr/bin/env bash
# Builds the portable llama-cpp-python wheel that requirements/local.lock pins (same version, the
# sdist checked against the lock's hash) into wheels/ of the repository (gitignored).
#
# Why portable: pip's default build compiles with GGML_NATIVE=ON, i.e. for every instruction set
# the building CPU reports; on CPUs that report AMX that build crashes with a segmentation fault.
# This build leaves native detection, AVX-512 and AMX out and keeps AVX2.
#
# Usage: tools/build-local-wheel.sh [OUT_DIR]   (PYTHON=... picks the interpreter, default .venv)
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:-$repo/wheels}"
python="${PYTHON:-$repo/.venv/bin/python}"
lock="$repo/requirements/local.lock"

req="$(mktemp)"
trap 'rm -f "$req"' EXIT
# The lock's llama-cpp-python entry only (its pin and hash lines): the rest of the lock is
# installed from the index as usual, this one package is the one that needs building.
awk '/^llama-cpp-python==/ {keep = 1} keep {print} keep && !/\\$/ {exit}' "$lock" >"$req"
if ! grep -q '^llama-cpp-python==' "$req"; then
    echo "build-local-wheel: no llama-cpp-python pin in $lock" >&2
    exit 1
fi

export CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
mkdir -p "$out"
# --no-cache-dir: pip's wheel cache is keyed by the sdist, not by CMAKE_ARGS, so a cached native
# build would otherwise be handed back as if it were this one.
# build-dir: scikit-build-core keeps the CMake tree there (under the gitignored wheels/), so a
# second run can reuse what the first compiled.
"$python" -m pip wheel --no-deps --no-cache-dir --require-hashes --no-binary llama-cpp-python \
    --config-settings=build-dir="$out/build" -r "$req" -w "$out"
echo "build-local-wheel: wrote $(ls "$out"/llama_cpp_python-*.whl)"
