"""The agent: the LangGraph refinement loop, repeated sampling, the LLM client and the run store.

Run it with `python -m agent.refine` / `python -m agent.sample`, or from Python with
`agent.refine.run(RefineSettings(...))` / `agent.sample.run(SampleSettings(...))`, which return
the run directory. Importing this package does not import litellm (only `agent.llm` does).
"""

from agent.records import Attempt, Candidate, RunRecord, Trajectory, Usage, best_per_turn, improves
from agent.settings import MissingModelError, RefineSettings, RunSettings, SampleSettings
from agent.store import RunStore, new_run_dir

__all__ = ["Attempt", "Candidate", "MissingModelError", "RefineSettings", "RunRecord",
           "RunSettings", "RunStore", "SampleSettings", "Trajectory", "Usage", "best_per_turn",
           "improves", "new_run_dir"]
