#!/bin/bash
# one throughput arm: arm.sh LABEL ARMS LIMIT TIMEOUT [SRC]; SRC = a source tree to run (default: .)
set -u
LABEL=$1; ARMS=$2; LIMIT=$3; T=$4; SRC=${5:-$PWD}
if [ ! -d /tmp/site/torch ]; then mkdir -p /tmp/site && tar -xJf .device/site.tar.xz -C /tmp/site; fi
[ -s $OUT/nvidia-smi.txt ] || nvidia-smi --query-gpu=name,driver_version,uuid --format=csv > $OUT/nvidia-smi.txt 2>&1
cd $SRC
export PYTHONPATH=/tmp/site:$SRC
[ -s $OUT/versions.txt ] || python3 -c "import torch,triton,sys;print('torch',torch.__version__,'cuda',torch.version.cuda,'triton',triton.__version__,'python',sys.version.split()[0])" | tee $OUT/versions.txt
LIM=""; [ "$LIMIT" != "all" ] && LIM="--limit $LIMIT"
echo "== $LABEL $(date -u +%H:%M:%S) arms=$ARMS limit=$LIMIT src=$SRC opts=${OPTS:-}"
timeout $T python3 -m experiments.bench.throughput experiments/bench/candidates/cuda --problems problems/suite --backend cuda --compile-workers 8 --arms $ARMS $LIM --pch-from /tmp/kr-machine ${OPTS:+--options $OPTS} --out $OUT/$LABEL.json > $OUT/$LABEL.log 2>&1
echo "rc $? $(date -u +%H:%M:%S)"
grep -E "per hour|candidates/hour|build median|device" $OUT/$LABEL.log | tail -8
python3 - "$OUT/$LABEL.joblog.jsonl" <<'PY'
import json, sys, statistics as st, collections
rows = [json.loads(l) for l in open(sys.argv[1])]
by = collections.defaultdict(list)
for r in rows:
    by[(r["kind"], r.get("role"))].append(r)
for k, v in sorted(by.items(), key=lambda x: str(x[0])):
    if k[0] not in ("time", "correct"): continue
    ph = collections.defaultdict(list)
    for r in v:
        for n, s in (r.get("phases") or {}).items():
            ph[n].append(s)
    al = sum(h[1] - h[0] for r in v for h in r.get("holds") or [] if not h[2])
    sh = sum(h[1] - h[0] for r in v for h in r.get("holds") or [] if h[2])
    print(k, len(v), "alone %.1f shared %.1f" % (al, sh))
    for n, xs in sorted(ph.items(), key=lambda x: -sum(x[1]))[:10]:
        print("   %-16s n=%d sum=%.2f med=%.3f" % (n, len(xs), sum(xs), st.median(xs)))
PY
