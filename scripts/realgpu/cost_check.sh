#!/usr/bin/env bash
# The cost of watching on a real GPU (run from the repository root with nvitop's wheel in .whl/, output in $OUT):
# gpusight from this checkout and nvitop 1.7.2 side by side, in a pty, beside a real training job. See cost_check.py.
set -u
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH
python3 -m compileall -q gpusight
{ nvidia-smi; python3 -c "import nvitop, gpusight; print('nvitop', nvitop.__version__, 'gpusight', gpusight.__file__)"; } > "$OUT/env.txt" 2>&1
python3 scripts/realgpu/cost_check.py "$OUT" "$@" 2>&1 | tee "$OUT/cost.log" | tail -40
