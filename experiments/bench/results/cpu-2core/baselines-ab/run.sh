#!/bin/bash
export LITELLM_LOCAL_MODEL_COST_MAP=True CUDA_HOME=/usr/local/cuda
for round in 1 2; do
  for arm in old new; do
    dir=/work/main; [ $arm = old ] && dir=/tmp/ci40
    cd $dir && KERNEL_REFINE_CACHE=/tmp/ab/cache-$arm-$round .venv/bin/python -m experiments.bench.throughput experiments/bench/candidates/cpp --problems problems/suite --backend cpp --compile-workers 2 --arms framework --size small --out /tmp/ab/$arm-$round.json > /tmp/ab/$arm-$round.log 2>&1
    echo "$arm $round rc=$?"
  done
done
