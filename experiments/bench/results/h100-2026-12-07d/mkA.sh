#!/bin/bash
# /tmp/A: this tree less the patch (the code before it)
rm -rf /tmp/A && mkdir -p /tmp/A && tar --exclude=./.device --exclude=./experiments/bench/results -cf - . | tar -xf - -C /tmp/A && cd /tmp/A && patch -s -p1 -R < $OLDPWD/.device/A.patch && echo "A ready: $(grep -c judge_call feedback/worker/harness.py) judge_call"
