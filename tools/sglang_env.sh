#!/usr/bin/env bash
# Sets up a virtualenv with a pinned SGLang and runs gramc's SGLang tests in it.
#
# As tools/vllm_env.sh does for vLLM: SGLang pins its own torch and brings CUDA wheels, so it
# gets a virtualenv of its own, outside the repository: ${GRAMC_SGLANG_VENV:-$HOME/.cache/gramc-sglang-venv}.
# gramc is installed editable (with its test extra) in the same pip call. Arguments are
# passed to pytest. No GPU is needed.
#
#   tools/sglang_env.sh
#   GRAMC_SGLANG_SKIP_INSTALL=1 tools/sglang_env.sh -k walks
set -euo pipefail

venv=${GRAMC_SGLANG_VENV:-$HOME/.cache/gramc-sglang-venv}
sglang_version=${GRAMC_SGLANG_VERSION:-0.5.23}
python=${PYTHON:-python3}
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

if [ "${GRAMC_SGLANG_SKIP_INSTALL:-0}" != 1 ]; then
    if [ ! -x "$venv/bin/python" ]; then
        "$python" -m venv "$venv"
    fi
    "$venv/bin/python" -m pip install --quiet --upgrade pip
    "$venv/bin/python" -m pip install "sglang==$sglang_version" -e "$repo[test]"
fi

cd "$repo"
export HF_HUB_OFFLINE=${HF_HUB_OFFLINE:-1}
"$venv/bin/python" -c 'import sglang, torch; print("sglang", sglang.__version__, "torch", torch.__version__)'
exec "$venv/bin/python" -m pytest -q -rs tests/test_sglang_backend.py "$@"
