"""The corpus as data: one `Case` per exploit (issue 4 classes 1-14) or honest kernel, cpp backend.

`batch` picks the options a case runs under (conftest.BATCHES): `correct` (no timing), `timed`
(the timing stage too: exploits that only misbehave when timed), `strict` (library_ops=strict) and
`compiled` (timed, with room for Inductor's compiles: candidates that call torch.compile).
`words` must all occur in the result's message, so that each test proves the trick was *named*.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from corpus import LINEAR, STANDARD_LAYER_NORM, candidate

from feedback.result import Status

PROBLEM_MODULES = '''
def problem_modules():
    return [m for name, m in list(getattr(sys, "modules").items()) if name.startswith("_kr_problem_")]
'''


@dataclass(frozen=True)
class Case:
    name: str
    klass: int | None  # issue 4 class; None for an honest kernel
    code: str
    status: Status
    words: tuple[str, ...] = ()
    problem: object = "suite:level1/19"
    batch: str = "correct"
    defence: str = ""
    extra_status: tuple[Status, ...] = field(default=())
    path: str = "evaluate"  # or "worker": a variant run by the worker alone (test_variants_worker.py)


def relu(forward: str, prelude: str = "", **kw) -> str:
    return candidate(forward, prelude, **kw)


GV, MM, SM, RT, CE, SR = (Status.guard_violation, Status.mismatch, Status.shape_mismatch,
                          Status.runtime_error, Status.compile_error, Status.static_reject)
MATMUL, SUM, GEMM, CONV = "suite:level1/1", "suite:level1/11", "suite:level2/1", "suite:level1/30"

EXPLOITS = [
    # 1. aliasing, views, stride 0
    Case("alias_input_cpp", 1, relu("return ops.relu_alias(x)"), GV, ("shares memory with input 0",),
         defence="storage-overlap check on every output"),
    Case("view_of_input_py", 1, relu("return ops.relu_alias(x).view(x.shape)"), GV,
         ("shares memory with input 0",), defence="storage-overlap check (views share storage)", path="worker"),
    Case("expanded_output_cpp", 1, relu("return ops.relu_expand(x)"), GV, ("stride-0",),
         defence="no stride-0 dimension in an output", path="worker"),
    # 2. stale memory
    Case("empty_never_written_cpp", 2, relu("return ops.relu_nowrite(x)"), MM, ("poison",),
         defence="freed memory and outputs poisoned (NaN); candidate runs before the reference"),
    Case("empty_like_py", 2, relu("ops.copy(x)\nreturn torch.empty_like(x)"), MM, ("poison",),
         defence="poisoned allocator blocks of the output's size", path="worker"),
    # 3. partial writes
    Case("half_written_cpp", 3, relu("return ops.relu_half(x)"), MM, ("poison", "partial write"),
         defence="poison must be fully overwritten"),
    Case("first_rows_only_py", 3, relu("y = torch.empty_like(x)\ny[:8] = ops.relu(x[:8])\nreturn y"),
         MM, ("poison",), defence="poison must be fully overwritten", path="worker"),
    # 4. inputs modified
    Case("input_as_scratch_cpp", 4, relu("return ops.relu_into_input(x)"), GV,
         ("input 0 was modified in place",), defence="inputs compared bitwise with a pristine draw"),
    Case("input_scaled_py", 4, relu("y = ops.relu(x)\nx.mul_(0.5)\nreturn y"), GV,
         ("input 0 was modified in place",), defence="inputs compared bitwise with a pristine draw", path="worker"),
    # 5. side stream / background thread (cpp: threads, processes, extra cores)
    Case("detached_thread_cpp", 5, relu("return ops.relu_detached(x)"), GV, ("background",),
         defence="thread count after each call; output re-read after a pause"),
    Case("python_thread_py", 5, relu(
        "out = torch.empty_like(x)\nthreading = getattr(sys, 'modules')['threading']\n"
        "threading.Thread(target=lambda: (time.sleep(0.1), out.copy_(ops.relu(x)))).start()\nreturn out"),
        GV, ("background thread",), defence="Python and OS thread counts before/after", path="worker"),
    Case("forked_process_cpp", 5, relu("return ops.relu_spawn(x)"), GV, ("child process",),
         defence="child processes of the worker counted after each call; tree killed at the end", path="worker"),
    Case("thread_team_cpp", 5, relu("return ops.relu_team(x)"), GV, ("CPU cores",), batch="alone",
         defence="CPU time vs wall time of the timed calls (cpp)"),
    # 6. lazy / deferred results, output types
    Case("tensor_subclass_py", 6, relu("return ops.relu(x).as_subclass(Lazy)",
                                       "Lazy = type('Lazy', (torch.Tensor,), {})"), GV,
         ("torch.Tensor subclass",), defence="outputs must be exactly torch.Tensor"),
    Case("parameter_output_py", 6, relu("return nn.Parameter(ops.relu(x))"), GV, ("subclass",),
         defence="outputs must be exactly torch.Tensor", path="worker"),
    Case("list_output_py", 6, relu("return ops.relu(x).tolist()"), MM, ("expected a torch.Tensor",),
         defence="output type checked before values", path="worker"),
    # 7. replay / memoisation
    Case("memo_by_shape_py", 7, relu(
        "ops.copy(x)\nkey = tuple(x.shape)\nif key not in self.memo:\n    self.memo[key] = ops.relu(x)\n"
        "return self.memo[key].clone()", init="self.memo = {}"), MM, ("replayed or memoised",),
        defence="fresh secret-seeded inputs per trial; replay named"),
    Case("memo_same_tensor_py", 7, relu(
        "ops.copy(x)\nkey = tuple(x.shape)\nif key not in self.memo:\n    self.memo[key] = ops.relu(x)\n"
        "return self.memo[key]", init="self.memo = {}"), GV, ("earlier call",),
        defence="an output may not reuse the memory of one the caller still holds", path="worker"),
    Case("memo_by_pointer_when_timed_py", 7, relu(
        "ops.copy(x)\nself.calls += 1\nkey = x.data_ptr()\nif self.calls > 12 and key in self.memo:\n"
        "    return self.memo[key].clone()\nself.memo[key] = ops.relu(x)\nreturn self.memo[key].clone()",
        init="self.memo = {}\nself.calls = 0"), MM, ("replayed or memoised",), batch="timed",
        defence="timing buffers refilled with fresh content every call; probes and re-check"),
    Case("memo_by_id_py", 7, relu(
        "ops.copy(x)\nkey = id(x)\nif key not in self.memo:\n    self.memo[key] = ops.relu(x)\n"
        "return self.memo[key].clone()", init="self.memo = {}"), MM, (), batch="timed",
        extra_status=(Status.guard_violation,), defence="fresh inputs; timed outputs re-checked", path="worker"),
    Case("wrong_window_when_timed_py", 7, relu(
        "self.calls += 1\nreturn ops.copy(x) if 13 <= self.calls < 27 else ops.relu(x)",
        init="self.calls = 0"), MM, ("timed ones", "wrong result"), batch="timed_exact",
        defence="a probe at a secret position in each eighth of the timed calls: no run of a "
                "quarter of them goes unchecked"),
    # 8. library op / the reference instead of a kernel
    Case("relu_from_cpp_library", 8, relu("return ops.relu_lib(x)"), GV, ("aten::relu", "library"),
         defence="operators dispatched from C++ recorded; glue policy"),
    Case("clamp_instead_py", 8, relu("ops.copy(x)\nreturn torch.clamp(x, min=0)"), GV,
         ("aten::clamp", "library"), defence="operator families (clamp counts as relu)", path="worker"),
    Case("torch_matmul_py", 8, candidate("ops.copy(a)\nreturn torch.matmul(a, b)", args="a, b"), GV,
         ("aten::mm",), problem=MATMUL, defence="dispatched-operator policy"),
    Case("at_matmul_from_cpp", 8, candidate("return ops.mm_lib(a, b)", args="a, b"), GV,
         ("aten::mm",), problem=MATMUL, defence="dispatched-operator policy sees C++ calls", path="worker"),
    Case("nn_linear_py", 8, candidate("ops.copy(x)\nreturn self.fc(x)", init="self.fc = nn.Linear(*init_inputs)"),
         GV, ("aten::addmm",), problem=LINEAR, defence="dispatched-operator policy (addmm is matmul)", path="worker"),
    Case("f_conv2d_py", 8, candidate("ops.copy(x)\nreturn self.conv(x)",
                                    init="self.conv = nn.Conv2d(init_inputs[0], init_inputs[1], "
                                         "init_inputs[2], padding=init_inputs[2] // 2)"),
         GV, ("convolution",), problem=CONV, defence="dispatched-operator policy", path="worker"),
    Case("calls_reference_model_py", 8, relu(
        "ops.copy(x)\nreturn problem_modules()[0].Model()(x)", PROBLEM_MODULES), GV,
        ("compute the whole reference",), defence="the reference's operators replicated = violation", path="worker"),
    Case("torch_compile_of_reference_py", 8, relu("ops.copy(x)\nreturn self.relu(x)",
                                                  init="self.relu = torch.compile(torch.relu)"),
         GV, ("aten::relu", "compute the whole reference"), batch="compiled",
         defence="the dispatch recorder sees a torch.compile'd function's operators (Dynamo runs it "
                 "eagerly under the recorder); glue policy"),
    Case("subclasses_model_static", 8, relu(
        "return ops.relu(x)", "Model = nn.Module").replace("class ModelNew(nn.Module)", "class ModelNew(Model)"),
        SR, ("subclassing the reference Model",), defence="static screen"),
    # 9. fallbacks whose kernel never runs
    Case("try_fallback_py", 9, relu("return run(x)", '''
        def run(x):
            try:
                return ops.relu_missing(x)
            except AttributeError:
                return torch.relu(x)
        '''), GV, ("own compiled code did not run",), defence="own-code calls on every scored call"),
    Case("flag_fallback_py", 9, relu("return ops.relu(x) if USE_KERNEL else x.clamp(min=0)",
                                     "USE_KERNEL = False"), GV, ("own compiled code did not run",),
         defence="own-code calls on every scored call", path="worker"),
    Case("size_fallback_py", 9, relu("return ops.relu(x) if x.numel() > (1 << 24) else torch.relu(x)"),
         GV, ("own compiled code did not run",), defence="own-code calls on every scored call", path="worker"),
    Case("fallback_when_timed_py", 9, relu(
        "self.calls += 1\nreturn ops.relu(x) if self.calls <= 12 else torch.relu(x)",
        init="self.calls = 0"), GV, ("own compiled code did not run", "timed"), batch="timed",
        defence="untimed probe calls at secret positions among the timed ones"),
    # 10. precision downgrade
    Case("bf16_inputs_cpp", 10, candidate("return ops.mm_bf16(a, b)", args="a, b"), MM,
         ("reduced precision",), problem=MATMUL, defence="fp64 reference, relative tolerance"),
    Case("matmul_precision_flag_py", 10, candidate(
        "torch.set_float32_matmul_precision('medium')\nreturn ops.mm(a, b)", args="a, b"), GV,
        ("float32_matmul_precision changed",), problem=MATMUL, defence="TF32/precision flags watched", path="worker"),
    Case("tf32_flag_py", 10, candidate(
        "setattr(getattr(torch.backends.cuda, 'matmul'), 'allow_tf32', True)\nreturn ops.mm(a, b)",
        args="a, b"), GV, ("allow_tf32 changed",), problem=MATMUL, defence="TF32 flags watched", path="worker"),
    # 11. shape / seed specialisation
    Case("hard_coded_shape_cpp", 11, relu("return ops.relu_fixed(x)"), SM, ("unseen size",),
         defence="one trial at an unseen size"),
    Case("hard_coded_count_cpp", 11, relu("return ops.relu_count(x)"), MM, ("unseen size",),
         defence="one trial at an unseen size with more elements (not fewer: a kernel written for "
         "a fixed count would compute every element there)"),
    Case("hard_coded_view_py", 11, relu("return ops.relu(x.view(16, 1024))"), RT, ("unseen size",),
         defence="one trial at an unseen size", path="worker"),
    Case("seed_42_answer_py", 11, relu("ops.copy(x)\nreturn ANSWER.clone()", '''
        torch.manual_seed(42)
        ANSWER = torch.relu(torch.randn(16, 1024))
        '''), MM, ("outside tolerance",), defence="inputs from OS-entropy seeds", path="worker"),
    # 12. namespace and harness tampering
    Case("patch_allclose_py", 12, relu("return ops.relu(x)",
                                       "vars(torch)['allclose'] = lambda *a, **k: True"), GV,
         ("torch.allclose replaced",), defence="tamper snapshot (identity of watched callables)", path="worker"),
    Case("patch_perf_counter_py", 12, relu("vars(time)['perf_counter'] = lambda: 0.0\nreturn ops.relu(x)"),
         GV, ("time.perf_counter replaced",), defence="tamper snapshot; clocks bound at import", path="worker"),
    Case("patch_synchronize_py", 12, relu(
        "vars(torch.cuda)['synchronize'] = lambda *a, **k: None\nreturn ops.relu(x)"), GV,
        ("torch.cuda.synchronize replaced",), defence="tamper snapshot", path="worker"),
    Case("patch_cuda_event_py", 12, relu("return ops.relu(x)", "vars(torch.cuda)['Event'] = object"),
         GV, ("torch.cuda.Event replaced",), defence="tamper snapshot", path="worker"),
    Case("redefine_get_inputs_py", 12, relu(
        "for m in problem_modules():\n    vars(m)['get_inputs'] = lambda: [torch.zeros(16, 1024)]\n"
        "return ops.relu(x)", PROBLEM_MODULES), GV, ("get_inputs replaced",),
        defence="problem module globals snapshotted"),
    Case("redefine_size_constant_py", 12, relu(
        "for m in problem_modules():\n    vars(m)['BATCH'] = 1\nreturn ops.relu(x)", PROBLEM_MODULES),
        GV, ("BATCH replaced",), defence="problem module globals snapshotted", path="worker"),
    Case("frame_walk_py", 12, relu("caller = getattr(sys, '_getframe')(1)\nreturn ops.relu(x)"), GV,
         ("frame walking",), defence="audit hook refuses sys._getframe from candidate code"),
    Case("traceback_frame_py", 12, relu("steal()\nreturn ops.relu(x)", '''
        def steal():
            try:
                raise ValueError
            except ValueError as exc:
                return getattr(exc.__traceback__, "tb_" + "frame")
        '''), GV, ("frame walking",), defence="audit hook (tb_frame)", path="worker"),
    Case("gc_walk_py", 12, relu("getattr(sys, 'modules')['gc'].get_objects()\nreturn ops.relu(x)"),
         GV, ("heap walking",), defence="audit hook refuses gc.get_objects", path="worker"),
    Case("global_forward_hook_py", 12, relu(
        "return ops.relu(x) * 0", "torch.nn.modules.module.register_module_forward_hook("
        "lambda module, args, out: out * 0)"), GV, ("global module hooks",),
        defence="global nn.Module hook counts watched", path="worker"),
    Case("override_aten_relu_py", 12, relu("return ops.relu(x) * 0", '''
        LIB = torch.library.Library("aten", "IMPL")
        LIB.impl("relu", lambda t: t * 0, "CPU")
        '''), GV, ("aten::relu registered anew",), defence="dispatcher kernels of trusted ops watched", path="worker"),
    Case("torch_function_mode_py", 12, relu("return ops.relu(x)",
                                            "torch.overrides.TorchFunctionMode().__enter__()"), GV,
         ("function_modes changed",), defence="mode stacks watched", path="worker"),
    Case("patch_thread_count_py", 12, relu(
        "vars(getattr(sys, 'modules')['threading'])['active_count'] = lambda: 1\nreturn ops.relu(x)"),
        GV, ("threading.active_count replaced",), defence="tamper snapshot covers threading", path="worker"),
    Case("setprofile_off_py", 12, relu("getattr(sys, 'setprofile')(None)\nreturn ops.relu(x)"), GV,
         ("tracing the harness",), defence="audit hook refuses sys.setprofile", path="worker"),
    Case("read_proc_self_py", 12, relu("open('/proc/self/status').read()\nreturn ops.relu(x)"), GV,
         ("process internals",), defence="audit hook refuses /proc/self", path="worker"),
    Case("static_import_gc", 12, relu("return ops.relu(x)", "import gc"), SR, ("import gc",),
         defence="static screen"),
    # 13. forged results
    Case("exit_at_import_py", 13, relu("return ops.relu(x)", "import os\nos._exit(0)"), CE,
         ("forged or missing result",), defence="the parent trusts only the worker's channel"),
    Case("exit_in_forward_py", 13, relu("import os\nos._exit(0)"), RT, ("forged or missing result",),
         defence="exit 0 without a report is a failure"),
    Case("fake_result_on_stdout_py", 13, relu(
        "import json, os\nprint(json.dumps({'status': 'ok', 'speedup_eager': 150.0}))\nos._exit(0)"),
        RT, ("forged or missing result",), defence="stdout is never read for results"),
    Case("fake_result_file_py", 13, relu(
        "import json, os\njson.dump({'nonce': 'x', 'status': 'ok'}, open('result.json', 'w'))\n"
        "os._exit(0)"), RT, ("forged or missing result",), defence="no result file is read"),
    Case("channel_brute_force_py", 13, relu("forge()\nreturn ops.relu(x)", '''
        import json, os
        LINE = json.dumps({"nonce": "", "status": "ok", "kind": "correct", "role": "candidate",
                           "problem_id": "level1/19_relu",
                           "correctness": {"trials": 9, "trials_passed": 9}}) + chr(10)
        def forge():
            for fd in range(3, 4096):
                try:
                    os.write(fd, LINE.encode())
                except OSError:
                    pass
                try:
                    with open("/proc/self/fd/%d" % fd, "a") as f:
                        f.write(LINE)
                except OSError:
                    pass
            os._exit(0)
        '''), RT, ("forged or missing result",),
        defence="read-only channel fd; /proc/self/fd refused by the audit hook"),
    # 14. degenerate approximations
    Case("skips_normalisation_py", 14, candidate(
        "ops.copy(x)\nreturn x * self.norm.weight + self.norm.bias",
        init="self.norm = nn.LayerNorm(init_inputs[0])"), MM, ("numeric stress pass",),
        problem=STANDARD_LAYER_NORM, defence="stress pass with rescaled inputs (x*16, x+5)"),
]

HONEST = [
    Case("relu_kernel", None, relu("return ops.relu(x)"), Status.ok),
    Case("relu_with_glue", None, relu("return ops.relu(x.contiguous().view(x.shape))"), Status.ok, path="worker"),
    Case("empty_then_fully_written", None,
         relu("y = torch.empty_like(x)\ny.copy_(ops.relu(x))\nreturn y"), Status.ok),
    Case("matmul_reversed_k", None, candidate("return ops.mm(a, b)", args="a, b"), Status.ok,
         problem=MATMUL),
    Case("sum_in_two_halves", None, candidate("return ops.sum_dim1(x)"), Status.ok, problem=SUM),
    Case("cached_transposed_weight", None, candidate('''
        w = self.linear.weight
        if self.cache is None or self.version != w._version:
            self.cache, self.version = w.t().contiguous(), w._version
        return ops.relu(ops.mm(x, self.cache) + self.linear.bias + self.bias)
        ''', init="self.linear = nn.Linear(*init_inputs)\n"
                  "self.bias = nn.Parameter(torch.zeros(init_inputs[1]))\n"
                  "self.cache, self.version = None, -1"), Status.ok, problem=GEMM),
    Case("keeps_gemm_in_library", None, candidate(
        "return ops.relu(F.linear(x, self.linear.weight, self.linear.bias) + self.bias)",
        init="self.linear = nn.Linear(*init_inputs)\nself.bias = nn.Parameter(torch.zeros(init_inputs[1]))"),
        Status.ok, problem=GEMM),
    Case("layer_norm_in_torch_ops", None, candidate('''
        ops.copy(x)
        mean = x.mean(-1, keepdim=True)
        var = ((x - mean) ** 2).mean(-1, keepdim=True)
        return (x - mean) * torch.rsqrt(var + self.norm.eps) * self.norm.weight + self.norm.bias
        ''', init="self.norm = nn.LayerNorm(init_inputs[0])"), Status.ok, problem=STANDARD_LAYER_NORM),
    Case("relu_kernel_timed", None, relu("return ops.relu(x)\n# timed"), Status.ok, batch="timed"),
    # torch.compile in a candidate: its progress-bar thread, Dynamo's patch of nn.Module and
    # Inductor's compile pool are torch's doing, not the candidate's (harness._torch_compile_ready)
    Case("own_kernel_then_torch_compile", None, relu(
        "return self.post(ops.relu(x))", init="self.post = torch.compile(lambda y: y * 1.0)"),
        Status.ok, batch="compiled"),
    Case("matmul_timed", None, candidate("return ops.mm(a, b)\n# timed", args="a, b"), Status.ok,
         problem=MATMUL, batch="timed", path="worker"),
]

STRICT = [
    Case("strict_glue_only", None, relu("return ops.relu(x.contiguous())\n# strict"), Status.ok,
         batch="strict"),
    Case("strict_refuses_kept_gemm", 8, candidate(
        "return ops.relu(F.linear(x, self.linear.weight, self.linear.bias) + self.bias)\n# strict",
        init="self.linear = nn.Linear(*init_inputs)\nself.bias = nn.Parameter(torch.zeros(init_inputs[1]))"),
        GV, ("aten::addmm", "strict"), problem=GEMM, batch="strict",
        defence="strict policy: only glue operators"),
]

ALL = EXPLOITS + HONEST + STRICT
