python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl >/dev/null 2>&1; export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH
python3 -m compileall -q gpusight
(python3 -m gpusight.examples.convnet --duration 80 --num-workers 4 --device cuda --precision bf16 >/dev/null 2>&1 &); sleep 20
python3 -m zipfile -e .whl/py_spy-*.whl /tmp/pyspy; PYSPY=$(find /tmp/pyspy -name 'py-spy' -type f | head -1); chmod +x "$PYSPY"; "$PYSPY" record -r 250 -f raw -o $OUT/record.txt -d 20 -- python3 -m gpusight --record /tmp/r.gtr --interval 0.5 > $OUT/pyspy.log 2>&1
ls /proc | grep -c '^[0-9]' > $OUT/nprocs.txt; nproc >> $OUT/nprocs.txt
tail -3 $OUT/pyspy.log
