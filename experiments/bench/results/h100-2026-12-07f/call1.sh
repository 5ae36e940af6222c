#!/bin/bash
# session 45, call 1: the trusted lead (baselines) against defaults, first 12 candidates, one host
set -u
if [ ! -d /tmp/site/torch ]; then mkdir -p /tmp/site && tar -xJf .device/site.tar.xz -C /tmp/site; fi
echo "== pytest $(date -u +%H:%M:%S)"
PYTHONPATH=/tmp/site:$PWD timeout 100 python3 -m pytest -p no:randomly -q -m gpu tests/feedback/worker/test_worker_gpu.py -k "lead or l2_flush or waited_wake" > $OUT/run104-pytest.log 2>&1; echo "pytest rc $?"; tail -4 $OUT/run104-pytest.log
bash .device/arm.sh run104-default framework 12 185
OPTS=trusted_lead=true bash .device/arm.sh run105-lead framework 12 185
python3 .device/cmp.py $OUT/run104-default.json $OUT/run105-lead.json 2>&1 | tee $OUT/cmp.txt | head -70
