"""Does a worker's wait for the GPU burn a core? CPU seconds of import, context, and a 0.5 s sync,
with the default scheduling and with CU_CTX_SCHED_BLOCKING_SYNC on the primary context."""
import json, subprocess, sys
CHILD = r'''
import ctypes, json, sys, time
t0 = time.process_time(); w0 = time.perf_counter()
import torch
imp = time.process_time() - t0
if sys.argv[1] == "blocking":
    cu = ctypes.CDLL("libcuda.so.1"); assert cu.cuInit(0) == 0
    dev = ctypes.c_int(); assert cu.cuDeviceGet(ctypes.byref(dev), 0) == 0
    assert cu.cuDevicePrimaryCtxSetFlags_v2(dev, 4) == 0
t1 = time.process_time(); x = torch.ones(1 << 20, device="cuda"); torch.cuda.synchronize()
ctx = time.process_time() - t1
y = x * 2; torch.cuda.synchronize()
rates = torch.cuda.get_device_properties(0).clock_rate if hasattr(torch.cuda.get_device_properties(0), "clock_rate") else 1.98e6
out = {}
for n in (1, 50):
    t2 = time.process_time(); w2 = time.perf_counter()
    for _ in range(n):
        torch.cuda._sleep(int(1.5e9 / n)); torch.cuda.synchronize()
    out[f"sync{n}"] = [round(time.perf_counter() - w2, 3), round(time.process_time() - t2, 3)]
ev = torch.cuda.Event(enable_timing=True); ev2 = torch.cuda.Event(enable_timing=True)
t3 = time.process_time(); ev.record(); torch.cuda._sleep(int(1e9)); ev2.record(); ev2.synchronize()
out["event_wait"] = [round(ev.elapsed_time(ev2) / 1e3, 3), round(time.process_time() - t3, 3)]
t4 = time.process_time()
a = torch.randn(4096, 4096, device="cuda")
for _ in range(20): b = a.sin() + 1
torch.cuda.synchronize(); out["small_ops"] = round(time.process_time() - t4, 3)
print(json.dumps({"mode": sys.argv[1], "import": round(imp, 2), "context": round(ctx, 2), **out}))
'''
rows = []
for mode in ("default", "blocking", "default", "blocking"):
    p = subprocess.run([sys.executable, "-c", CHILD, mode], capture_output=True, text=True, timeout=120)
    line = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else p.stderr[-800:]
    print(line, flush=True); rows.append(line)
open(sys.argv[1], "w").write("\n".join(rows) + "\n")
