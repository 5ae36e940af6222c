"""The scheduler's gates: who waits for whom, and their own account of busy and waiting time,
checked against intervals worked out by hand (a fake clock moved step by step)."""

from __future__ import annotations

import asyncio

import pytest
from conftest import RELU

from agent.gates import EvalGates, Meter
from agent.runner import execute
from agent.settings import RefineSettings


def test_meter_busy_is_the_union_of_holds():
    meter = Meter()
    meter.enter(0.0, 0.0)   # A holds [0, 4]
    meter.enter(1.0, 2.0)   # B waits 1 s, holds [2, 6]
    meter.leave(0.0, 4.0)
    meter.leave(2.0, 6.0)
    meter.enter(5.0, 8.0)   # C waits 3 s, holds [8, 9]
    meter.leave(8.0, 9.0)
    assert meter.busy_s(10.0) == 7.0          # [0, 6] + [8, 9]
    assert meter.held_s == 9.0                # 4 + 4 + 1
    assert (meter.calls, meter.wait_s, meter.max_wait_s) == (3, 4.0, 3.0)


def test_meter_counts_an_open_hold_up_to_now():
    meter = Meter()
    meter.enter(1.0, 1.0)
    assert meter.busy_s(3.5) == 2.5


class Scenario:
    """Stage calls that enter and leave gates at times the test sets."""

    def __init__(self, gates_args: dict):
        self.now = 0.0
        self.gates = EvalGates(**gates_args, trace=True, clock=lambda: self.now)
        self.release: dict[str, asyncio.Event] = {}
        self.tasks: list[asyncio.Task] = []

    async def at(self, t: float) -> None:
        self.now = t
        for _ in range(20):  # let every woken task run at this instant
            await asyncio.sleep(0)

    def ask(self, stage: str, name: str) -> None:
        self.release[name] = asyncio.Event()

        async def hold() -> None:
            async with self.gates.stage(stage, name):
                await self.release[name].wait()

        self.tasks.append(asyncio.create_task(hold()))

    def leave(self, name: str) -> None:
        self.release[name].set()


def test_gpu_backend_device_gate_and_compile_slots_by_hand():
    async def run() -> dict:
        s = Scenario({"backend": "cuda", "cpu_slots": 2})
        s.ask("compile", "C1")
        s.ask("correct", "D1")
        await s.at(0)                      # C1 [0, 4]; D1 [0, 3]
        s.ask("compile", "C2")
        s.ask("perform", "D2")
        await s.at(1)                      # C2 [1, 6]; D2 waits for D1
        s.ask("compile", "C3")
        await s.at(2)                      # C3 waits: both compile slots are taken
        s.leave("D1")
        await s.at(3)                      # D2 enters at 3 (waited 2)
        s.leave("C1")
        await s.at(4)                      # C3 enters at 4 (waited 2)
        s.leave("D2")
        await s.at(5)
        s.leave("C2")
        await s.at(6)
        s.leave("C3")
        await s.at(7)
        await asyncio.gather(*s.tasks)
        await s.at(10)
        return {"stats": s.gates.stats(), "calls": s.gates.calls}

    out = asyncio.run(run())
    compile_, device = out["stats"]["compile"], out["stats"]["device"]
    assert (compile_.calls, compile_.busy_s, compile_.held_s, compile_.wait_s) == (3, 7, 12, 2)
    assert (device.calls, device.busy_s, device.held_s, device.wait_s) == (2, 5, 5, 2)
    assert device.wall_s == 10 and device.busy_share == 0.5
    assert compile_.max_wait_s == 2
    entered = {c.key: (c.requested, c.acquired, c.released) for c in out["calls"]}
    assert entered == {"C1": (0, 0, 4), "C2": (1, 1, 6), "C3": (2, 4, 7),
                       "D1": (0, 0, 3), "D2": (1, 3, 5)}


def test_cpp_timing_waits_for_compiles_and_correctness():
    async def run() -> dict:
        s = Scenario({"backend": "cpp", "cpu_slots": 4})
        s.ask("compile", "C1")
        s.ask("correct", "K1")
        await s.at(0)                      # both share the host
        s.ask("perform", "T1")
        await s.at(1)                      # timing waits for both
        s.ask("compile", "C2")
        await s.at(2)                      # a new compile waits behind the waiting timing
        s.leave("C1")
        await s.at(3)
        s.leave("K1")
        await s.at(4)                      # T1 [4, 6] alone
        s.leave("T1")
        await s.at(6)                      # C2 [6, 7]
        s.leave("C2")
        await s.at(7)
        await asyncio.gather(*s.tasks)
        return {"stats": s.gates.stats(), "calls": s.gates.calls}

    out = asyncio.run(run())
    entered = {c.key: (c.acquired, c.released) for c in out["calls"]}
    assert entered == {"C1": (0, 3), "K1": (0, 4), "T1": (4, 6), "C2": (6, 7)}
    device = out["stats"]["device"]   # correctness and timing: [0, 4] + [4, 6]
    assert (device.calls, device.busy_s, device.wait_s) == (2, 6, 3)
    assert out["stats"]["compile"].busy_s == 4   # [0, 3] + [6, 7]


def test_a_run_reports_its_gates(tmp_path, scripted, transcript, capsys):
    model = transcript({(RELU, 0, 0): "compile_error", (RELU, 0, 1): "mismatch",
                        (RELU, 0, 2): "ok 0.5 0.01"})
    settings = RefineSettings(model=model, problems="suite:level1/19", backend="cuda",
                              out=tmp_path / "runs", turns=3, log_format="json")
    outcome = execute(settings, "refine", evaluator=scripted)
    compile_, device = outcome.gates["compile"], outcome.gates["device"]
    assert compile_.calls == 3 and device.calls == 3   # 3 compiles; correct x2 + perform x1
    assert 0 < device.busy_s <= device.wall_s
    assert device.busy_share == pytest.approx(device.busy_s / device.wall_s)
    log = (outcome.path / "run.log").read_text()
    assert '"event": "scheduler"' in log and '"device_calls": 3' in log
