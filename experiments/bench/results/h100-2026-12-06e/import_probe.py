"""CPU seconds of a worker's imports (feedback.worker.run.import_ahead) in a fresh process, as
jobs run them (PYTHONDONTWRITEBYTECODE=1), without a prefix (the installed byte-code, if any) and with the byte-code folder as
PYTHONPYCACHEPREFIX; three processes each. Writes one JSON line per process to argv[1]."""

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

from feedback import bytecode

CODE = "from feedback.worker.run import import_ahead; import_ahead()"
prefix = bytecode.folder()
out = open(sys.argv[1], "a")
for arm in ("no_prefix", "prefix") * 3:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPYCACHEPREFIX"}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["CUDA_VISIBLE_DEVICES"] = ""
    if arm == "prefix":
        env["PYTHONPYCACHEPREFIX"] = str(prefix)
    before, t = resource.getrusage(resource.RUSAGE_CHILDREN), time.monotonic()
    subprocess.run([sys.executable, "-c", CODE], env=env, check=True, capture_output=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    row = {"arm": arm, "cpu_s": round(after.ru_utime + after.ru_stime
                                      - before.ru_utime - before.ru_stime, 3),
           "wall_s": round(time.monotonic() - t, 3),
           "pyc_in_folder": sum(1 for _ in Path(prefix).rglob("*.pyc"))}
    print(json.dumps(row), file=out, flush=True)
    print(row)
