"""Running a study: an OpenMDAO problem around :class:`components.MultibodyResponse`,
driven by ``ScipyOptimizeDriver`` (L-BFGS-B or SLSQP), recorded with ``SqliteRecorder``.

A *study* is a builder function returning a :class:`StudySpec` (model, parameters with
bounds, responses, objective weights and constraints).  :func:`run_study` builds the
problem, runs it with the analytic gradient, repeats it with finite-difference totals for
comparison, checks the gradient at the optimum against central differences of the
simulation, and writes ``DIR/NAME/cases.db``, ``summary.json``, ``report.md`` and
figures (``report.html`` is the report site's rendering of ``report.md``, built by the
command line: :mod:`workbench.apps.site`).  The study description is stored inside
``cases.db`` (table ``workbench_study``) before the first analysis and every evaluation
as it happens (table ``workbench_evaluations``, :mod:`studies.recording`), so that
:func:`report_from_db` regenerates the report from the recording alone, also of an
interrupted run.
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import openmdao.api as om

from components import MultibodyResponse, StaticResponse
from workbench import simulate
from workbench.errors import ModelError, StudyError
from workbench.formulations import get as get_formulation
from workbench.model import catalog
from workbench.objectives import compile_objectives, model_objectives, resolve_objectives
from workbench.sensitivities import measure_values
from workbench.sensitivities.driver import sensitivity
from workbench.sensitivities.sweeps import FAMILY_SWEEPS
from workbench.statics import static_responses

from .recording import (DESIGN_FAILURES, EvaluationLog, FailureGuard, read_evaluations,
                        scaled_design)

OPTIMIZERS = ("SLSQP", "L-BFGS-B")


@dataclass
class Case:
    """One simulation of a study: a model (maneuver) and its responses.  Its outputs are
    named ``{label}_{objective}`` (just ``{objective}`` when ``label`` is empty)."""

    label: str
    model: str
    objectives: list | None = None
    t_end: float | None = None
    dt: float | None = None
    #: ``"dynamic"``: integral objectives of a simulation (:class:`MultibodyResponse`);
    #: ``"static"``: static responses at the equilibrium of the design
    #: (:class:`StaticResponse`; ``objectives`` are then power-1 position terms)
    kind: str = "dynamic"
    #: load-time values for :func:`workbench.model.catalog.load` (e.g. a maneuver's start ``x0``)
    load: dict | None = None

    def output(self, name: str) -> str:
        return f"{self.label}_{name}" if self.label else name

    def model_object(self):
        """The case's model (a fresh :class:`workbench.Model`)."""
        return catalog.load(self.model, **(self.load or {}))

    def compiled(self, design: dict | None = None):
        return self.model_object().compile(design or {})

    def grid(self, cm) -> tuple[float, float]:
        """``(t_end, dt)`` of the case's simulation: its own, else the model file's, else
        1 s and 1e-3 s."""
        meta = getattr(cm.model, "meta", {}) or {}
        return (self.t_end if self.t_end is not None else meta.get("t_end", 1.0),
                self.dt if self.dt is not None else meta.get("dt", 1e-3))

    def component(self, spec: "StudySpec"):
        """The OpenMDAO component of this case and the names of its responses."""
        cm = self.compiled()
        if self.kind == "static":
            comp = StaticResponse(model=cm, responses=self.objectives,
                                  parameters=spec.parameters)
            names = compile_objectives(cm, self.objectives).names
        elif self.kind == "dynamic":
            comp = MultibodyResponse(model=cm, objectives=self.objectives,
                                     parameters=spec.parameters, t_end=self.t_end,
                                     dt=self.dt, formulation=spec.formulation)
            names = resolve_objectives(cm, self.objectives).names
        else:
            raise ModelError(f"case {self.label!r}: kind must be 'dynamic' or 'static', "
                             f"got {self.kind!r}")
        return comp, names


@dataclass
class StudySpec:
    """What a study optimises.

    ``objective``: weights per response (the driver minimises ``sum w_k psi_k``);
    ``constraints``: ``{response: upper}`` or ``{response: (lower, upper)}`` (either may be
    None; SLSQP only, L-BFGS-B takes bounds only);
    ``bounds``: ``{parameter: (lower, upper)}`` in the parameter's unit.
    """

    name: str
    model: str
    parameters: list
    bounds: dict
    objective: dict
    constraints: dict = field(default_factory=dict)
    objectives: list | None = None          # workbench Objective list (None: the model's)
    t_end: float | None = None
    dt: float | None = None
    formulation: str = "sr-com"
    description: str = ""
    cases: list | None = None               # several simulations (default: one, `model`)

    def all_cases(self) -> list:
        return self.cases or [Case("", self.model, self.objectives, self.t_end, self.dt)]


_PROBLEM_NAMES: dict = {}


def build_problem(spec: StudySpec, optimizer: str, maxiter: int = 50, fd: bool = False,
                  recorder_path: str | None = None) -> om.Problem:
    """The OpenMDAO problem of a study (analytic derivatives unless ``fd``)."""
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {optimizer!r}; choose one of {OPTIMIZERS}")
    base = f"{spec.name}-{optimizer}{'-fd' if fd else ''}".replace(".", "")
    # OpenMDAO problem names must be unique within a process (multi-start workers build
    # several problems of the same study one after another)
    serial = _PROBLEM_NAMES.get(base, 0)
    _PROBLEM_NAMES[base] = serial + 1
    prob = om.Problem(name=base if serial == 0 else f"{base}-{serial + 1}", reports=False)
    for i, case in enumerate(spec.all_cases()):
        comp, outs = case.component(spec)
        prob.model.add_subsystem(f"mb{i}", comp, promotes_inputs=["*"],
                                 promotes_outputs=[(o, case.output(o)) for o in outs])
    terms = " + ".join(f"{float(w)!r} * {r}" for r, w in spec.objective.items())
    prob.model.add_subsystem("obj", om.ExecComp(f"J = {terms}"), promotes=["*"])
    for nm in spec.parameters:
        lo, hi = spec.bounds[nm]
        prob.model.add_design_var(nm, lower=lo, upper=hi, ref=max(abs(lo), abs(hi)))
    prob.model.add_objective("J")
    if optimizer == "SLSQP":
        for r, (lo, ub) in constraint_bounds(spec).items():
            ref = max(abs(lo or 0.0), abs(ub or 0.0)) or 1.0
            prob.model.add_constraint(r, lower=lo, upper=ub, ref=ref)
    prob.driver = om.ScipyOptimizeDriver(optimizer=optimizer, maxiter=maxiter, tol=1e-8,
                                         disp=False)
    if recorder_path is not None:
        rec = om.SqliteRecorder(recorder_path, record_viewer_data=False)
        prob.driver.add_recorder(rec)
        for opt in ("record_desvars", "record_objectives", "record_constraints",
                    "record_derivatives"):
            prob.driver.recording_options[opt] = True
    if fd:
        prob.model.approx_totals(method="fd", step=1e-6, form="central", step_calc="rel")
    prob.setup()
    return prob


def constraint_bounds(spec_or_summary) -> dict:
    """``{response: (lower or None, upper or None)}`` of a spec's (or a recorded
    summary's) constraints; a bare number is an upper bound."""
    cons = (spec_or_summary.constraints if isinstance(spec_or_summary, StudySpec)
            else spec_or_summary["constraints"])
    out = {}
    for r, b in cons.items():
        lo, ub = (None, b) if not isinstance(b, (tuple, list)) else tuple(b)
        out[r] = (None if lo is None else float(lo), None if ub is None else float(ub))
    return out


def violation(bounds: tuple, value: float) -> float:
    """How far ``value`` lies outside ``(lower, upper)`` (0 inside)."""
    lo, ub = bounds
    return max(0.0, (value - ub) if ub is not None else 0.0,
               (lo - value) if lo is not None else 0.0)


def _design(prob, spec):
    return {nm: float(prob.get_val(nm)[0]) for nm in spec.parameters}


def _positive_or_none(what: str, value) -> None:
    if value is None:
        return
    try:
        ok = bool(np.isfinite(float(value)) and float(value) > 0)
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise StudyError(f"{what} must be a positive number of seconds, got {value!r}")


def validate_spec(spec: StudySpec, optimizer: str, maxiter: int, x0: dict | None = None):
    """Check a study's input before any work: StudyError naming the study and the
    parameter, bound, option or case at fault."""
    name = f"study {spec.name!r}"
    if optimizer not in OPTIMIZERS:
        raise StudyError(f"{name}: unknown optimizer {optimizer!r}; choose one of "
                         f"{', '.join(OPTIMIZERS)}")
    if isinstance(maxiter, bool) or not isinstance(maxiter, (int, np.integer)) or maxiter < 1:
        raise StudyError(f"{name}: maxiter must be a positive whole number, got {maxiter!r}")
    if not spec.parameters:
        raise StudyError(f"{name}: no design parameters")
    family = get_formulation(spec.formulation).family
    if family not in FAMILY_SWEEPS:
        raise StudyError(f"{name}: formulation {spec.formulation!r} has no design "
                         "sensitivities yet, and a study needs them")
    if not spec.objective:
        raise StudyError(f"{name}: empty objective (no response weights)")
    for nm in spec.parameters:
        if nm not in spec.bounds:
            raise StudyError(f"{name}: parameter {nm!r} has no bounds")
        try:
            lo, hi = (float(v) for v in spec.bounds[nm])
        except (TypeError, ValueError):
            raise StudyError(f"{name}: bounds of {nm!r} must be two numbers (lower, upper), "
                             f"got {spec.bounds[nm]!r}") from None
        if not (np.isfinite(lo) and np.isfinite(hi)):
            raise StudyError(f"{name}: bounds of {nm!r} must be finite, got ({lo}, {hi})")
        if not lo < hi:
            raise StudyError(f"{name}: lower bound of {nm!r} ({lo:g}) must be below its upper "
                             f"bound ({hi:g})")
        if x0 and nm in x0 and not lo <= float(x0[nm]) <= hi:
            raise StudyError(f"{name}: starting value {nm} = {x0[nm]:g} lies outside its "
                             f"bounds ({lo:g}, {hi:g})")
    for nm in (x0 or {}):
        if nm not in spec.parameters:
            raise StudyError(f"{name}: starting value given for {nm!r}, which is not a design "
                             f"parameter ({', '.join(spec.parameters)})")
    _positive_or_none(f"{name}: t_end", spec.t_end)
    _positive_or_none(f"{name}: dt", spec.dt)
    for case in spec.all_cases():
        label = f"{name}, case {case.label or case.model!r}"
        _positive_or_none(f"{label}: t_end", case.t_end)
        _positive_or_none(f"{label}: dt", case.dt)
        if case.t_end is not None and case.dt is not None and case.t_end < case.dt:
            raise StudyError(f"{label}: t_end = {case.t_end:g} s is shorter than one time step "
                             f"dt = {case.dt:g} s")


def _scipy_iterations(prob) -> int | None:
    """The optimiser's own iteration count (SciPy's ``nit``), not the evaluation count."""
    res = getattr(prob.driver, "_scipy_optimize_result", None)
    nit = getattr(res, "nit", None)
    return None if nit is None else int(nit)


def _run(prob, spec, guard, echo):
    """Run the driver (the guard reports each evaluation); returns (success, iterations,
    wall time, simulations)."""
    comps = list(prob.model.system_iter(recurse=True, typ=MultibodyResponse))
    t0 = time.perf_counter()
    failed = prob.run_driver()
    wall = time.perf_counter() - t0
    success = not (failed.success is False if hasattr(failed, "success") else bool(failed))
    nit = _scipy_iterations(prob)
    return (success, prob.driver.iter_count if nit is None else nit, wall,
            sum(c.n_simulations for c in comps))


def _ends_failed(prob, guard) -> bool:
    return guard.is_failed(scaled_design(prob.driver))


def _progress(prob, spec, echo, label="evaluation"):
    """The per-evaluation progress line of a run."""
    cons = constraint_bounds(spec) if prob.driver.options["optimizer"] == "SLSQP" else {}

    def tick(n, f, replayed):
        if replayed:
            echo(f"  {label} {n:3d}  objective {f:.6g}  (replayed from the recording)")
            return
        viol = max([violation(b, float(prob.get_val(r)[0])) for r, b in cons.items()],
                   default=0.0)
        echo(f"  {label} {n:3d}  objective {f:.6g}  max constraint violation {viol:.3g}")
    return tick


def _free_name(folder: Path, stem: str) -> Path:
    k = 1
    while (folder / f"{stem}-{k}.db").exists():
        k += 1
    return folder / f"{stem}-{k}.db"


def read_study(db: str | Path) -> dict | None:
    """The study description/summary stored in a recording (None when absent)."""
    with sqlite3.connect(db) as con:
        try:
            row = con.execute("SELECT json FROM workbench_study").fetchone()
        except sqlite3.OperationalError:
            return None
    return None if row is None else json.loads(row[0])


def _write_study(db: Path, summary: dict) -> None:
    with sqlite3.connect(db) as con:
        con.execute("CREATE TABLE IF NOT EXISTS workbench_study (json TEXT)")
        con.execute("DELETE FROM workbench_study")
        con.execute("INSERT INTO workbench_study VALUES (?)", (json.dumps(summary),))


#: fields of the study description that a resumed run must match
_RESUME_KEYS = ("study", "optimizer", "maxiter", "parameters", "bounds", "objective_weights",
                "constraints", "t_end", "dt", "formulation", "x0_request")


def _description(spec, optimizer, maxiter, x0, source) -> dict:
    return {"study": spec.name, "model": spec.model, "optimizer": optimizer,
            "maxiter": int(maxiter), "status": "running", "parameters": list(spec.parameters),
            "bounds": {k: list(map(float, spec.bounds[k])) for k in spec.parameters},
            "objective_weights": spec.objective,
            "constraints": ({r: list(b) for r, b in constraint_bounds(spec).items()}
                            if optimizer == "SLSQP" else {}),
            "t_end": spec.t_end, "dt": spec.dt, "formulation": spec.formulation,
            "cases": [asdict(c) | {"objectives": None} for c in spec.all_cases()],
            "description": spec.description, "x0_request": x0 or None, "source": source,
            "started": time.strftime("%Y-%m-%d %H:%M:%S")}


def _check_resumable(db: Path, old: dict | None, new: dict) -> None:
    if old is None:
        raise StudyError(f"{db}: cannot resume: not a workbench study recording (no "
                         "workbench_study table)")
    if "status" not in old:
        raise StudyError(f"{db}: cannot resume: recorded by an older version without an "
                         "evaluation log; run again with --overwrite")
    diff = [k for k in _RESUME_KEYS if json.dumps(old.get(k), sort_keys=True)
            != json.dumps(json.loads(json.dumps(new.get(k))), sort_keys=True)]
    if diff:
        raise StudyError(f"{db}: cannot resume: the recorded study differs in "
                         f"{', '.join(diff)} (recorded {[old.get(k) for k in diff]}, now "
                         f"{[new.get(k) for k in diff]}); use the same options, or "
                         "--overwrite")


def run_study(spec: StudySpec, optimizer: str, out: str | Path = "runs", maxiter: int = 50,
              compare_fd: bool = True, echo=print, x0: dict | None = None,
              subdir: str | None = None, existing: str = "error",
              source: dict | None = None) -> dict:
    """Run a study and write its recording and report under ``out/spec.name`` (or
    ``out/spec.name/subdir``), starting from the design ``x0`` (default: the model's).

    ``existing`` says what to do with a recording already in that folder: ``"error"``
    (default: :class:`StudyError`, nothing touched), ``"overwrite"`` (replace it) or
    ``"resume"`` (continue it: the interrupted recording is kept as
    ``cases.interrupted-K.db`` and its evaluations are replayed, see
    :mod:`studies.recording`; a complete recording is returned as it is).  ``source``
    (``{"builder": name, "kwargs": {...}}``) is stored so that the command line can
    rebuild the study to resume it.

    The study description is written into ``cases.db`` before the first analysis and
    every evaluation is committed as it happens, so that an interrupted run (Ctrl-C,
    SIGKILL) is reportable by :func:`report_from_db`.  A failed trial design is recorded
    and the optimiser steps back (:class:`studies.recording.FailureGuard`); a study that
    cannot go on raises :class:`StudyError` after writing the report of what was done.
    """
    if existing not in ("error", "overwrite", "resume"):
        raise StudyError(f"existing must be 'error', 'overwrite' or 'resume', got {existing!r}")
    validate_spec(spec, optimizer, maxiter, x0)
    out = Path(out) / spec.name
    if subdir:
        out = out / subdir
    db = out / "cases.db"
    desc = _description(spec, optimizer, maxiter, x0, source)
    replay = []
    if db.exists():
        if existing == "error":
            raise StudyError(f"{out} already holds a study recording (cases.db): use --resume "
                             "to continue it, --overwrite to replace it, or --out for another "
                             "folder")
        if existing == "resume":
            old = read_study(db)
            _check_resumable(db, old, desc)
            if old["status"] == "complete":
                echo(f"[{spec.name}] {db} is complete; nothing to resume")
                return old
            replay = read_evaluations(db)
            kept = _free_name(out, "cases.interrupted")
            db.rename(kept)
            echo(f"[{spec.name}] resuming: {len(replay)} recorded evaluations replayed from "
                 f"{kept.name}")
    elif existing == "resume":
        echo(f"[{spec.name}] no recording in {out} to resume; starting")
    out.mkdir(parents=True, exist_ok=True)
    prob = build_problem(spec, optimizer, maxiter, fd=False, recorder_path=str(db))
    prob.final_setup()                       # creates cases.db (the recorder starts empty)
    _write_study(db, desc)
    log = EvaluationLog(db)
    try:
        return _run_recorded(prob, spec, optimizer, maxiter, compare_fd, echo, x0, out, db,
                             desc, log, replay)
    except KeyboardInterrupt:
        _stop(db, desc, "interrupted", "interrupted (Ctrl-C)", echo)
        raise
    except StudyError as exc:
        _stop(db, desc, "failed", str(exc), echo)
        raise
    finally:
        prob.cleanup()


def _stop(db, desc, status, reason, echo) -> None:
    """Mark an unfinished recording and report what it holds."""
    _write_study(db, desc | {"status": status, "reason": reason})
    try:
        write_report(db, echo=echo)
    except Exception as exc:                          # noqa: BLE001 - the first error wins
        echo(f"  (the report of the partial recording failed too: {exc})")
    echo(f"[{desc['study']}] {status}: {reason}; the recording {db} holds every evaluation "
         "so far (workbench report, or run again with --resume)")


def _run_recorded(prob, spec, optimizer, maxiter, compare_fd, echo, x0, out, db, desc, log,
                  replay) -> dict:
    for nm, v in (x0 or {}).items():
        prob.set_val(nm, v)
    try:
        prob.run_model()
    except DESIGN_FAILURES as exc:
        raise StudyError(f"study {spec.name!r}: the starting design "
                         f"{_design(prob, spec)} fails: {' '.join(str(exc).split())}") from exc
    x0 = _design(prob, spec)
    J0 = float(prob.get_val("J")[0])
    resp0 = {r: float(prob.get_val(r)[0]) for r in spec.objective} | \
        {r: float(prob.get_val(r)[0]) for r in spec.constraints}
    echo(f"[{spec.name}] {optimizer} with analytic gradients (adjoint/direct), "
         f"objective {J0:.6g}")
    watched = list(spec.objective) + [r for r in spec.constraints if r not in spec.objective]
    guard = FailureGuard(prob, lambda: _design(prob, spec), log, replay, echo,
                         _progress(prob, spec, echo),
                         lambda: {r: float(prob.get_val(r)[0]) for r in watched})
    guard.start()
    success, iters, wall, nsim = _run(prob, spec, guard, echo)
    if _ends_failed(prob, guard):
        # the optimiser stopped on a design whose analysis failed: report the last design
        # that succeeded (re-evaluated from the component's cache)
        echo(f"[{spec.name}] the optimiser stopped on a failed design; reporting the last "
             "design that succeeded")
        for nm, v in guard.good_design.items():
            prob.set_val(nm, v)
        prob.run_model()
    x1 = _design(prob, spec)
    J1 = float(prob.get_val("J")[0])
    resp1 = {r: float(prob.get_val(r)[0]) for r in list(spec.objective) + list(spec.constraints)}
    viol1 = max([violation(b, resp1[r]) for r, b in constraint_bounds(spec).items()]
                if optimizer == "SLSQP" else [0.0], default=0.0)
    echo(f"[{spec.name}] gradient check at the optimum: adjoint against central differences "
         "...")
    gcheck = _gradient_check(spec, x1)
    fdrun = None
    if compare_fd:
        echo(f"[{spec.name}] the same optimisation with finite-difference gradients ...")
        pf = build_problem(spec, optimizer, maxiter, fd=True)
        for nm, v in (x0 or {}).items():
            pf.set_val(nm, v)
        pf.final_setup()
        pf.run_model()
        fguard = FailureGuard(pf, lambda: _design(pf, spec), None, [], echo,
                              _progress(pf, spec, echo, label="fd evaluation"))
        fguard.start()
        okf, itf, wallf, nsimf = _run(pf, spec, fguard, echo)
        fdrun = {"success": okf, "iterations": itf, "evaluations": fguard.evaluations,
                 "failed_evaluations": fguard.failures, "wall_time_s": wallf,
                 "simulations": nsimf, "objective_final": float(pf.get_val("J")[0])}
        pf.cleanup()
    summary = desc | {
        "status": "complete", "success": bool(success), "iterations": int(iters),
        "evaluations": guard.evaluations, "failed_evaluations": guard.failures,
        "objective_initial": J0, "objective_final": J1,
        "design_initial": x0, "design_final": x1,
        "responses_initial": resp0, "responses_final": resp1,
        "max_constraint_violation": viol1, "wall_time_s": wall, "simulations": nsim,
        "gradient_check": gcheck, "fd_comparison": fdrun}
    (out / "summary.json").write_text(json.dumps(
        {k: summary[k] for k in ("study", "optimizer", "status", "success", "iterations",
                                 "evaluations", "failed_evaluations", "objective_initial",
                                 "objective_final", "design_initial", "design_final",
                                 "wall_time_s", "simulations", "max_constraint_violation",
                                 "responses_initial", "responses_final", "constraints",
                                 "fd_comparison")}, indent=2))
    _write_study(db, summary)
    write_report(db, echo=echo)
    echo(f"[{spec.name}] success={success} iterations={iters} evaluations={guard.evaluations} "
         f"(failed {guard.failures}) objective {J0:.6g} -> {J1:.6g} ({wall:.1f} s, {nsim} "
         f"simulations); wrote {out}/")
    return summary


def _gradient_check(spec, x1) -> list:
    """Analytic (adjoint) against central differences of the simulation at ``x1``."""
    gcheck = []
    for case in spec.all_cases():
        cm = case.compiled(x1)
        if case.kind == "static":
            an = static_responses(cm, case.objectives, spec.parameters)
            fdg = static_responses(cm, case.objectives, spec.parameters, method="fd")
            resp = an.responses
        else:
            kw = dict(objectives=case.objectives, parameters=spec.parameters,
                      t_end=case.t_end, dt=case.dt, formulation=spec.formulation)
            an = sensitivity(cm, **kw, method="adjoint")
            fdg = sensitivity(cm, **kw, method="fd")
            resp = an.objectives
        gcheck += [{"response": case.output(r), "parameter": p,
                    "analytic": float(an.gradient[k, j]), "fd": float(fdg.gradient[k, j])}
                   for k, r in enumerate(resp) for j, p in enumerate(an.parameters)]
    return gcheck


def report_from_db(db: str | Path, echo=print) -> Path:
    """Regenerate ``report.md`` and figures from a study's ``cases.db`` (StudyError for a
    path that is not a study recording; nothing is created then)."""
    return write_report(Path(db), echo=echo)


def _case_label(c: dict) -> str:
    """One analysis of a recorded study, for the report."""
    tag = f"`{c['label']}_*`: " if c.get("label") else ""
    load = ", ".join(f"{k} = {v:g}" for k, v in (c.get("load") or {}).items())
    if c.get("kind", "dynamic") == "static":
        return f"{tag}static equilibrium of `{c['model']}`"
    span = ", ".join(x for x in (
        f"t_end = {c['t_end']:g} s" if c.get("t_end") else "t_end of the model file",
        f"dt = {c['dt']:g} s" if c.get("dt") else "", load) if x)
    return f"{tag}simulation of `{c['model']}` ({span})"


def _open_recording(db) -> dict:
    """The study stored in ``db``; StudyError for a missing path, a folder, a file that
    is not SQLite or a database that is not a study recording (nothing is created)."""
    db = Path(db)
    if not db.exists():
        raise StudyError(f"{db}: no such file (expected a study recording DIR/NAME/cases.db)")
    if db.is_dir():
        hint = " (it holds a cases.db: pass that)" if (db / "cases.db").is_file() else ""
        raise StudyError(f"{db}: is a folder, not a study recording{hint}")
    with open(db, "rb") as fh:
        if fh.read(16) != b"SQLite format 3\x00":
            raise StudyError(f"{db}: not a study recording (not an SQLite database)")
    S = read_study(db)
    if S is None:
        raise StudyError(f"{db}: not a workbench study recording (no workbench_study table)")
    return S


def _partial_summary(S: dict, evals: list) -> dict:
    """Summary fields of an unfinished recording, from its evaluation log: the starting
    design and the best design so far (lowest objective among the successful evaluations
    that satisfy the constraints, else the lowest)."""
    S = dict(S)
    start = [r for r in evals if r["kind"] == "start"]
    vals = [r for r in evals if r["kind"] in ("start", "value") and r["status"] == "ok"]
    S.setdefault("success", None)
    S["iterations"] = None
    S["evaluations"] = sum(r["kind"] == "value" for r in evals)
    S["failed_evaluations"] = sum(r["status"] == "failed" for r in evals)
    S.setdefault("wall_time_s", sum(r["wall_s"] for r in evals))
    S.setdefault("simulations", None)
    S["gradient_check"], S["fd_comparison"] = [], None
    if not start or not vals:
        return S
    cb = constraint_bounds(S)

    def feasible(r):
        resp = r["data"].get("responses", {})
        return all(violation(b, resp.get(k, np.inf)) <= 1e-6 * (abs(b[1] or b[0]) or 1.0)
                   for k, b in cb.items())
    pool = [r for r in vals if feasible(r)] or vals
    best = min(pool, key=lambda r: r["objective"])
    S.update({"design_initial": start[0]["design"], "objective_initial": start[0]["objective"],
              "responses_initial": start[0]["data"].get("responses", {}),
              "design_final": best["design"], "objective_final": best["objective"],
              "responses_final": best["data"].get("responses", {})})
    return S


#: at most this many measures drawn per analysis in ``histories.png``
MAX_MEASURES_DRAWN = 6
_MEASURE_KINDS = {0: "position", 1: "velocity", 2: "acceleration", 3: "angular velocity",
                  4: "angular velocity (body)"}


def _histories_figure(S: dict, path: Path) -> None:
    """Baseline against optimum (or best so far) time histories of the measures behind
    each dynamic response, re-simulated (the recording holds the designs)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    dyn = [c for c in (S.get("cases") or [{"label": "", "model": S["model"], "t_end": S["t_end"],
                                            "dt": S["dt"]}]) if c.get("kind", "dynamic") == "dynamic"]
    if not dyn:
        return
    final = "optimum" if S.get("status", "complete") == "complete" else "best so far"
    fig, axs = plt.subplots(len(dyn), 1, figsize=(7, 3.4 * len(dyn)), squeeze=False)
    for ax, case in zip(axs[:, 0], dyn):
        shown = 0
        for lab, x in (("baseline", S["design_initial"]), (final, S["design_final"])):
            c = Case(case.get("label", ""), case["model"], t_end=case.get("t_end"),
                     dt=case.get("dt"), load=case.get("load"))
            cm = c.compiled(x)
            res = simulate(cm, *c.grid(cm), S["formulation"])
            co = resolve_objectives(cm, model_objectives(cm.model))
            MV = measure_values(res, co)
            shown = min(MV.shape[1], MAX_MEASURES_DRAWN)
            for t in range(shown):
                kind = _MEASURE_KINDS.get(int(co.ms_type[t]), "measure")
                ax.plot(res.t, MV[:, t], ls="-" if lab != "baseline" else "--",
                        color=f"C{t}", label=f"{co.names[co.term_obj[t]]} term {t + 1}: {kind} "
                                             f"({lab})")
        ax.set_xlabel("t [s]")
        ax.set_ylabel("measure (SI units)")
        more = f"; first {shown} of {MV.shape[1]} measures" if MV.shape[1] > shown else ""
        ax.set_title(f"{case['model']}" + (f" ({case['label']})" if case.get("label") else "")
                     + f": dashed baseline, solid {final}{more}", fontsize=9)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _status_line(S: dict, status: str) -> str:
    evals = ("" if S.get("evaluations") is None else
             f", evaluations: {S['evaluations']} (failed designs: "
             f"{S.get('failed_evaluations', 0)})")
    sims = ("" if S.get("simulations") is None else
            f", simulations (forward runs; each design's analytic gradient reuses its run): "
            f"{S['simulations']}")
    if status != "complete":
        reason = S.get("reason", "the run stopped before it finished: killed, or still "
                                 "running")
        return (f"status: **{status.upper()}** ({reason}){evals}; resume with `workbench "
                f"study {S['study']} --resume` and the same options")
    return (f"success: **{S['success']}**, iterations: {S['iterations']}{evals}{sims}, "
            f"wall time {S['wall_time_s']:.1f} s")


def write_report(db: Path, echo=print) -> Path:
    """Write ``report.md``, ``history.png`` and ``histories.png`` of the
    recording ``db`` (complete, or interrupted: then the best design so far)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    db = Path(db)
    S = _open_recording(db)
    evals = read_evaluations(db)
    status = S.get("status", "complete")       # recordings of older versions: complete
    if status != "complete":
        S = _partial_summary(S, evals)
    out = db.parent
    cbounds = constraint_bounds(S)
    if evals:
        rows = [r for r in evals if r["kind"] in ("start", "value")]
        Jh = [np.nan if r["status"] != "ok" else r["objective"] for r in rows]
        failed_at = [i for i, r in enumerate(rows) if r["status"] != "ok"]
        cons = {r: [np.nan if e["status"] != "ok" else
                    e["data"].get("responses", {}).get(r, np.nan) for e in rows]
                for r in cbounds}
        xlabel = "evaluation (0: starting design; x: failed design)"
    else:
        cases = om.CaseReader(str(db)).get_cases("driver", recurse=False)
        Jh = [float(c.get_objectives()["J"][0]) for c in cases]
        failed_at = []
        cons = {r: [float(c.get_val(r)[0]) for c in cases] for r in cbounds}
        xlabel = "driver iteration (recorded case)"
    fig, ax = plt.subplots(1, 2 if cons else 1, figsize=(10 if cons else 6, 3.5),
                           squeeze=False)
    ax[0, 0].plot(range(len(Jh)), Jh, "o-")
    finite = [v for v in Jh if np.isfinite(v)]
    for i in failed_at:
        ax[0, 0].plot([i], [max(finite) if finite else 0.0], "rx", ms=8)
    ax[0, 0].set_xlabel(xlabel)
    ax[0, 0].set_ylabel("objective J")
    ax[0, 0].set_title(f"{S['study']} ({S['optimizer']})"
                       + ("" if status == "complete" else f" [{status}]"))
    if cons:
        for r, h in cons.items():
            lo, ub = cbounds[r]
            # signed distance to the active side, relative to the bound (<= 0: satisfied)
            scale = max(abs(lo or 0.0), abs(ub or 0.0)) or 1.0
            g = [max((v - ub) if ub is not None else -np.inf,
                     (lo - v) if lo is not None else -np.inf) / scale for v in h]
            ax[0, 1].plot(range(len(h)), g, "o-", label=r)
        ax[0, 1].axhline(0.0, color="k", lw=0.8)
        ax[0, 1].set_xlabel(xlabel)
        ax[0, 1].set_ylabel("(value - bound) / |bound|  (<= 0 satisfied)")
        ax[0, 1].legend()
    fig.tight_layout()
    fig.savefig(out / "history.png", dpi=110)
    plt.close(fig)
    if "design_final" not in S:
        # interrupted before the first evaluation: only the description is recorded
        S.update({"design_initial": {}, "design_final": {}, "objective_initial": np.nan,
                  "objective_final": np.nan, "responses_initial": {}, "responses_final": {}})
    else:
        _histories_figure(S, out / "histories.png")
    import inspect
    lines = [f"# Study `{S['study']}` — {S['optimizer']}", "",
             inspect.cleandoc(S.get("description", "")), "",
             "Analyses per design (formulation `{}`; shipped benchmark models are "
             "reconstructions, see each model's provenance): ".format(S["formulation"])
             + "; ".join(_case_label(c) for c in (S.get("cases") or [
                 {"label": "", "model": S["model"], "t_end": S["t_end"], "dt": S["dt"]}]))
             + ".", "",
             _status_line(S, status), "",
             f"objective J = {' + '.join(f'{w:.4g} {r}' for r, w in S['objective_weights'].items())}: "
             f"{S['objective_initial']:.6g} -> {S['objective_final']:.6g}"
             + ("" if status == "complete" else " (best so far)"), "",
             "| parameter | lower | initial | {} | upper |".format(
                 "optimum" if status == "complete" else "best so far"), "|---|---|---|---|---|"]
    for nm, x0 in S["design_initial"].items():
        lo, hi = S["bounds"][nm]
        lines.append(f"| {nm} | {lo:.6g} | {x0:.6g} | {S['design_final'][nm]:.6g} | {hi:.6g} |")
    if cbounds:
        fmt = lambda v: "" if v is None else f"{v:.6g}"                       # noqa: E731
        lines += ["", "| constraint | lower | upper | initial | final | satisfied |",
                  "|---|---|---|---|---|---|"]
        for r, b in cbounds.items():
            v1 = S["responses_final"].get(r, np.nan)
            lines.append(f"| {r} | {fmt(b[0])} | {fmt(b[1])} | "
                         f"{S['responses_initial'].get(r, np.nan):.6g} | {v1:.6g} | "
                         f"{'yes' if violation(b, v1) <= 1e-6 * (abs(b[1] or b[0]) or 1) else 'NO'} |")
    others = [r for r in S.get("responses_final", {})
              if r not in cbounds and r not in S["objective_weights"]]
    if others:
        lines += ["", f"Other responses (not constrained by {S['optimizer']}):", "",
                  "| response | initial | final |", "|---|---|---|"]
        lines += [f"| {r} | {S['responses_initial'].get(r, np.nan):.6g} | "
                  f"{S['responses_final'].get(r, np.nan):.6g} |" for r in others]
    lines += ["", "![objective history](history.png)", ""]
    if S["design_final"]:
        lines += ["![baseline vs optimum](histories.png)", ""]
    lines += ["## Gradient check at the optimum", ""]
    if S["gradient_check"]:
        lines += ["Analytic (adjoint) against central differences of the simulation "
                  "(relative step 1e-5):", "",
                  "| response | parameter | analytic | central differences | relative "
                  "difference |", "|---|---|---|---|---|"]
    else:
        lines += ["Not computed: the run did not finish."]
    for g in S["gradient_check"]:
        rel = abs(g["analytic"] - g["fd"]) / max(abs(g["fd"]), 1e-300)
        lines.append(f"| {g['response']} | {g['parameter']} | {g['analytic']:.8g} | "
                     f"{g['fd']:.8g} | {rel:.1e} |")
    fdr = S.get("fd_comparison")
    if fdr:
        lines += ["", "## Analytic versus finite-difference gradients", "",
                  "The same problem with OpenMDAO's finite-difference totals (central, "
                  "relative step 1e-6), measured in the same run:", "",
                  "| gradients | success | iterations | simulations | wall time [s] | final objective |",
                  "|---|---|---|---|---|---|",
                  f"| analytic | {S['success']} | {S['iterations']} | {S['simulations']} | "
                  f"{S['wall_time_s']:.1f} | {S['objective_final']:.6g} |",
                  f"| finite differences | {fdr['success']} | {fdr['iterations']} | "
                  f"{fdr['simulations']} | {fdr['wall_time_s']:.1f} | "
                  f"{fdr['objective_final']:.6g} |"]
    md = "\n".join(lines) + "\n"
    (out / "report.md").write_text(md)
    # the HTML page (report.html) is the report site's rendering of report.md
    # (workbench.apps.site.build_site, run by `workbench study` and `workbench report`)
    echo(f"report: {out / 'report.md'}")
    return out
