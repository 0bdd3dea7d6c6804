"""Multi-start optimisation on Dask: Latin-hypercube starting designs, one
:func:`~studies.core.run_study` per start, ranked."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from studies.builtin import STUDIES
from studies.core import StudySpec, run_study, validate_spec
from workbench.errors import StudyError

# ----------------------------------------------------------------------------------------
# multi-start on Dask
# ----------------------------------------------------------------------------------------


def latin_hypercube(spec: StudySpec, k: int, seed: int = 0) -> list:
    """``k`` starting designs, a Latin hypercube inside the bounds."""
    from scipy.stats import qmc
    names = spec.parameters
    lo = np.array([spec.bounds[n][0] for n in names])
    hi = np.array([spec.bounds[n][1] for n in names])
    u = qmc.LatinHypercube(d=len(names), seed=seed).random(k)
    return [dict(zip(names, map(float, lo + r * (hi - lo)))) for r in u]


def _run_start(builder_name, kwargs, optimizer, out, maxiter, k, x0, existing="error"):
    """One start on a Dask worker (module-level: picklable)."""
    spec = STUDIES[builder_name](**kwargs)
    s = run_study(spec, optimizer, out=out, maxiter=maxiter, compare_fd=False,
                  echo=lambda *_: None, x0=x0, subdir=f"start-{k}", existing=existing,
                  source={"builder": builder_name, "kwargs": kwargs})
    return {"start": k, **{key: s[key] for key in ("success", "iterations",
                                                    "objective_initial", "objective_final",
                                                    "design_initial", "design_final",
                                                    "wall_time_s")}}


def run_multistart(builder_name: str, optimizer: str, starts: int, workers: int = 2,
                   scheduler: str | None = None, out: str | Path = "reports",
                   maxiter: int = 50, echo=print, existing: str = "error", **kwargs) -> list:
    """``starts`` independent optimisations from Latin-hypercube designs, run in parallel
    on Dask: a ``LocalCluster`` with ``workers`` single-threaded processes, or the
    existing cluster at ``scheduler``.  Each start records ``out/NAME/start-k/cases.db``;
    ``out/NAME/starts.md`` and ``starts.json`` rank them.  ``existing`` applies to every
    start's recording (see :func:`~studies.core.run_study`); with ``"error"`` nothing runs
    when any start's recording exists."""
    from dask.distributed import Client, LocalCluster, as_completed
    if isinstance(starts, bool) or not isinstance(starts, int) or starts < 1:
        raise StudyError(f"starts must be a positive whole number, got {starts!r}")
    if scheduler is None and (isinstance(workers, bool) or not isinstance(workers, int)
                              or workers < 1):
        raise StudyError(f"workers must be a positive whole number (local Dask worker "
                         f"processes), got {workers!r}")
    spec = STUDIES[builder_name](**kwargs)           # compiles the kernels once (disk cache)
    validate_spec(spec, optimizer, maxiter)
    designs = latin_hypercube(spec, starts)
    if existing == "error":
        taken = [k for k in range(starts)
                 if (Path(out) / spec.name / f"start-{k}" / "cases.db").exists()]
        if taken:
            raise StudyError(f"{Path(out) / spec.name} already holds recordings of starts "
                             f"{taken}: use --resume to continue them, --overwrite to replace "
                             "them, or --out for another folder")
    cluster = None
    if scheduler:
        client = Client(scheduler)
    else:
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                               dashboard_address=None)
        client = Client(cluster)
    try:
        futs = [client.submit(_run_start, builder_name, kwargs, optimizer, str(out), maxiter,
                              k, x0, existing, pure=False) for k, x0 in enumerate(designs)]
        echo(f"[{spec.name}] {starts} starts submitted to Dask")
        results = []
        for fut in as_completed(futs):
            r = fut.result()
            echo(f"  start {r['start']} ({len(results) + 1}/{starts} done): "
                 f"success={r['success']} iterations={r['iterations']} "
                 f"objective {r['objective_initial']:.6g} -> {r['objective_final']:.6g}")
            results.append(r)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
    results.sort(key=lambda r: (not r["success"], r["objective_final"]))
    d = Path(out) / spec.name
    d.mkdir(parents=True, exist_ok=True)
    (d / "starts.json").write_text(json.dumps(results, indent=2))
    lines = [f"# `{spec.name}`: {starts} starts ({optimizer}), ranked", "",
             "| rank | start | success | iterations | objective initial | objective final | "
             "recording |", "|---|---|---|---|---|---|---|"]
    for i, r in enumerate(results):
        lines.append(f"| {i + 1} | {r['start']} | {r['success']} | {r['iterations']} | "
                     f"{r['objective_initial']:.6g} | {r['objective_final']:.6g} | "
                     f"start-{r['start']}/cases.db |")
    (d / "starts.md").write_text("\n".join(lines) + "\n")
    echo(f"wrote {d / 'starts.md'}")
    return results
