#!/usr/bin/env bash
# Sets up a virtualenv with a pinned vLLM and runs gramc's vLLM tests in it.
#
# vLLM pins its own torch and brings CUDA wheels (several GB), so it gets a virtualenv of its
# own, outside the repository: ${GRAMC_VLLM_VENV:-$HOME/.cache/gramc-vllm-venv}. gramc is
# installed editable (with its test extra) from the checkout this script lives in, in the same
# pip call as vLLM so one resolver sees both sets of pins. Arguments are passed to pytest.
# No GPU is needed: the tests drive vLLM's structured-output classes on the CPU.
#
#   tools/vllm_env.sh                 # create/update the venv, then run the vLLM tests
#   GRAMC_VLLM_SKIP_INSTALL=1 tools/vllm_env.sh -k rollback   # reuse the venv as it is
set -euo pipefail

venv=${GRAMC_VLLM_VENV:-$HOME/.cache/gramc-vllm-venv}
vllm_version=${GRAMC_VLLM_VERSION:-0.33.0}
python=${PYTHON:-python3}
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

if [ "${GRAMC_VLLM_SKIP_INSTALL:-0}" != 1 ]; then
    if [ ! -x "$venv/bin/python" ]; then
        "$python" -m venv "$venv"
    fi
    "$venv/bin/python" -m pip install --quiet --upgrade pip
    "$venv/bin/python" -m pip install "vllm==$vllm_version" -e "$repo[test]"
fi

cd "$repo"
# The tests read only local files (a model directory they write, ../shared); never the Hub.
export HF_HUB_OFFLINE=${HF_HUB_OFFLINE:-1}
"$venv/bin/python" -c 'import vllm, torch; print("vllm", vllm.__version__, "torch", torch.__version__)'
exec "$venv/bin/python" -m pytest -q -rs tests/test_integrations_vllm.py tests/test_vllm_backend.py "$@"
