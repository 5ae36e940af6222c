"""The `Problem` record: one PyTorch reference program in KernelBench format."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class Problem(BaseModel):
    """A reference program (`class Model`, `get_inputs()`, `get_init_inputs()`) to be sped up.

    The record holds the source text, never live objects: executing it is the job of
    `problems.module.load_module`, which gives each execution its own module namespace.
    """

    model_config = ConfigDict(frozen=True)

    id: str = Field(description="Stable identifier, e.g. `level1/19_relu` (level folder / file stem).")
    level: int = Field(description="KernelBench level: 1 single operator, 2 fusion, 3 architecture.")
    number: int = Field(description="The numeric prefix of the file name (`19` in `19_relu.py`).")
    name: str = Field(description="Human name, the file stem without its number (`relu`).")
    source: str = Field(description="The full Python source of the reference program.")
    origin: str = Field(description="Where it came from: a file path, `suite:...`, or `parquet:FILE#row`.")
    tags: tuple[str, ...] = Field(default=(), description="Categories such as `gemm`, `elementwise`, `fusion`.")
    sizes: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="Named size presets (e.g. `small`): module-level constants to override before "
        "`get_inputs()`/`get_init_inputs()` are called. The default size is the file's own constants.",
    )

    @property
    def origin_path(self) -> Path | None:
        """The file this problem was read from, when it came from a file."""
        p = Path(self.origin)
        return p if p.suffix == ".py" and p.exists() else None


class Selection(BaseModel):
    """What a spec or a folder yielded: the problems that loaded and one line per file that did not.

    A folder with one broken file still yields all its good problems; callers decide whether the
    errors matter (the list CLI prints them; a sweep records them).
    """

    model_config = ConfigDict(frozen=True)

    problems: tuple[Problem, ...] = Field(default=(), description="Loaded problems, in spec order.")
    errors: tuple[str, ...] = Field(
        default=(), description="One line per file that failed to load: `FILE: what is wrong`.")

    def __add__(self, other: Selection) -> Selection:
        """Concatenate, keeping the first occurrence of each problem id."""
        seen: dict[str, Problem] = {p.id: p for p in self.problems}
        for p in other.problems:
            seen.setdefault(p.id, p)
        return Selection(problems=tuple(seen.values()), errors=self.errors + other.errors)
