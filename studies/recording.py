"""What a study records as it runs, and how a driver survives a failed design.

:class:`EvaluationLog` appends one row per objective or gradient evaluation of the
optimiser to the table ``workbench_evaluations`` of the study's ``cases.db`` and commits
it at once, so that a run stopped at any point (Ctrl-C, SIGKILL, a power cut) leaves a
recording that :func:`studies.core.report_from_db` reports and ``--resume`` continues.
Each row holds the optimiser's point ``x`` (driver-scaled, as JSON: every float
round-trips exactly), the physical design, the status (``ok`` or ``failed`` with the
reason) and what the optimiser was given (objective and constraints, or the gradient).

:class:`FailureGuard` wraps ``ScipyOptimizeDriver``'s objective and gradient callbacks:

* **failed designs**: when the analysis of a trial design fails (``AnalysisError`` of a
  component, or any :class:`~workbench.errors.WorkbenchError`), the optimiser is given a
  *retreat model* instead of an exception: with ``x_g`` the last design that succeeded,
  ``f_g``, ``g_g``, ``c_g``, ``C_g`` its objective, gradient, constraints and constraint
  Jacobian and ``d = x - x_g`` (driver-scaled),

      f(x) = f_g + g_g . d + beta (1 + |d|^2),   grad f = g_g + 2 beta d,
      c(x) = c_g + C_g d,                        beta = 1 + |f_g|,

  i.e. the linear model of the last good design plus a penalty larger than any decrease
  the linear model promises; the line searches of SLSQP and L-BFGS-B then shorten the
  step back towards ``x_g``.  The failure is recorded with its reason, and the run goes
  on.  After :data:`MAX_CONSECUTIVE_FAILURES` failed evaluations in a row the study stops
  with :class:`~workbench.errors.StudyError`.
* **replay** (``--resume``): evaluations found in an interrupted recording are returned
  from it instead of being recomputed.  The optimisers are deterministic, so the resumed
  run retraces the interrupted one exactly and continues where it stopped: it ends at
  the same optimum as an uninterrupted run.
"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import numpy as np
import openmdao.api as om

from workbench.errors import StudyError, WorkbenchError

#: stop a study after this many failed evaluations in a row
MAX_CONSECUTIVE_FAILURES = 20

TABLE = "workbench_evaluations"
_COLUMNS = ("seq INTEGER, kind TEXT, x TEXT, design TEXT, status TEXT, reason TEXT, "
            "objective REAL, data TEXT, wall_s REAL, stamp TEXT, replayed INTEGER")

#: failures of a trial design that the guard turns into a retreat (anything else is a bug
#: and propagates)
DESIGN_FAILURES = (om.AnalysisError, WorkbenchError)


def scaled_design(driver) -> np.ndarray:
    """The driver's current design as the optimiser sees it (driver-scaled, flat)."""
    x = driver.get_design_var_values(driver_scaling=True)
    return np.concatenate([np.atleast_1d(v).ravel() for v in x.values()])


def _key(x) -> str:
    return json.dumps([float(v) for v in np.asarray(x, dtype=float).ravel()])


class EvaluationLog:
    """The ``workbench_evaluations`` table of one recording (rows committed one by one)."""

    def __init__(self, db: str | Path):
        self.db = Path(db)
        with sqlite3.connect(self.db) as con:
            con.execute(f"CREATE TABLE IF NOT EXISTS {TABLE} ({_COLUMNS})")
        self.seq = len(self.rows())

    def append(self, kind, x, design, status, reason, objective, data, wall, replayed=False):
        with sqlite3.connect(self.db) as con:
            con.execute(f"INSERT INTO {TABLE} VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                        (self.seq, kind, _key(x), json.dumps(design), status, reason,
                         None if objective is None else float(objective), json.dumps(data),
                         float(wall), time.strftime("%Y-%m-%d %H:%M:%S"), int(replayed)))
        self.seq += 1

    def rows(self) -> list[dict]:
        return read_evaluations(self.db)


def read_evaluations(db: str | Path) -> list[dict]:
    """Every evaluation recorded in ``db`` (oldest first); [] when the recording has none
    (an interrupted run before its first evaluation, or a recording of an older version)."""
    with sqlite3.connect(db) as con:
        try:
            cur = con.execute(f"SELECT * FROM {TABLE} ORDER BY seq")
        except sqlite3.OperationalError:
            return []
        names = [c[0] for c in cur.description]
        rows = [dict(zip(names, r)) for r in cur.fetchall()]
    for r in rows:
        r["design"] = json.loads(r["design"])
        r["data"] = json.loads(r["data"])
    return rows


class FailureGuard:
    """Failure handling, evaluation log and replay around a ``ScipyOptimizeDriver``
    (see the module docstring).  ``good`` is the analysis of the starting design:
    ``(x, f, constraints)`` in driver scaling."""

    def __init__(self, prob, design_of, log: EvaluationLog | None, replay: list, echo,
                 progress=None, responses_of=None):
        self.driver = d = prob.driver
        self.design_of = design_of
        self.responses_of = responses_of or dict
        self.log = log if log is not None else _NoLog()
        self.echo, self.progress = echo, progress
        self._obj, self._grad = d._objfunc, d._gradfunc
        d._objfunc, d._gradfunc = self.objfunc, self.gradfunc
        self.values, self.grads = {}, {}
        for r in replay:
            if r["kind"] in ("value", "gradient"):
                (self.values if r["kind"] == "value" else self.grads)[r["x"]] = r
        self.failed = {}            # key -> reason
        self.good = None            # (x, f, con) of the last design that succeeded
        self.good_design = None     # its physical design (parameter values)
        self.good_grad = None       # (key, full Jacobian) of that design, when computed
        self.model_key = None       # the design the model holds (last run that succeeded)
        self.run_in_row = 0
        self.evaluations = 0
        self.failures = 0

    # -- the starting design (the driver's initial run) ----------------------------------
    def start(self):
        d = self.driver
        x = scaled_design(d)
        f = float(next(iter(d.get_objective_values(driver_scaling=True).values()))[0])
        con = {k: np.array(v, dtype=float) for k, v in
               d.get_constraint_values(driver_scaling=True).items()}
        self.good = (x.copy(), f, con)
        self.good_design = self.design_of()
        self.model_key = _key(x)
        self.log.append("start", x, self.good_design, "ok", "", f,
                        {"con": {k: v.tolist() for k, v in con.items()},
                         "responses": self.responses_of()}, 0.0)

    def is_failed(self, x) -> bool:
        """Whether the analysis of the driver-scaled design ``x`` failed."""
        return _key(x) in self.failed

    # -- callbacks --------------------------------------------------------------------
    def objfunc(self, x_new):
        d = self.driver
        key = _key(x_new)
        self.evaluations += 1
        hit = self.values.get(key)
        if hit is not None:
            self._replayed(hit)
            if hit["status"] == "ok":
                d._con_cache = {k: np.array(v) for k, v in hit["data"]["con"].items()}
                self.good = (np.array(x_new, dtype=float), hit["objective"], d._con_cache)
                self.good_design = hit["design"]
                self.run_in_row = 0
                return hit["objective"]
            return self._retreat(x_new, key, hit["reason"], log=False)
        return self._run_value(x_new, key)

    def _run_value(self, x_new, key):
        d = self.driver
        t0 = time.perf_counter()
        f = self._obj(x_new)
        wall = time.perf_counter() - t0
        exc = d._exc_info
        if exc is not None and isinstance(exc[1], DESIGN_FAILURES):
            d._exc_info = None
            return self._retreat(x_new, key, _reason(exc[1]), wall=wall)
        if exc is not None:
            return f                                   # a bug: OpenMDAO re-raises it
        f = float(np.asarray(f).ravel()[0])
        con = {k: np.array(v, dtype=float) for k, v in d._con_cache.items()}
        self.good = (np.array(x_new, dtype=float), f, con)
        self.good_design = self.design_of()
        self.model_key = key
        self.run_in_row = 0
        self.log.append("value", x_new, self.good_design, "ok", "", f,
                        {"con": {k: v.tolist() for k, v in con.items()},
                         "responses": self.responses_of()}, wall)
        self._tick(f, False)
        return f

    def gradfunc(self, x_new):
        d = self.driver
        key = _key(x_new)
        hit = self.grads.get(key)
        if hit is not None:
            self._replayed(hit)
            if hit["status"] != "ok":
                self.failed[key] = hit["reason"]
                self.run_in_row += 1
                return self._retreat_gradient(x_new)
            d._grad_cache = np.array(hit["data"]["jac"], dtype=float)
            self.good_grad = (key, d._grad_cache)
            return d._grad_cache[0, :]
        if key in self.failed:
            return self._retreat_gradient(x_new)
        if self.model_key != key:
            # the model holds another design (a replayed point): evaluate this one first
            self._run_value(x_new, key)
            if key in self.failed:
                return self._retreat_gradient(x_new)
        t0 = time.perf_counter()
        g = self._grad(x_new)
        wall = time.perf_counter() - t0
        exc = d._exc_info
        if exc is not None and isinstance(exc[1], DESIGN_FAILURES):
            d._exc_info = None
            self.failed[key] = _reason(exc[1])
            self._count_failure(x_new, key, self.failed[key], "gradient", wall)
            return self._retreat_gradient(x_new)
        if exc is not None:
            return g
        jac = np.array(d._grad_cache, dtype=float)
        self.good_grad = (key, jac)
        self.log.append("gradient", x_new, self.design_of(), "ok", "", None,
                        {"jac": jac.tolist()}, wall)
        return g

    # -- the retreat model ------------------------------------------------------------
    def _retreat(self, x_new, key, reason, wall=0.0, log=True):
        self.failed[key] = reason
        if log:
            self._count_failure(x_new, key, reason, "value", wall)
        else:
            self.run_in_row += 1
        xg, fg, cg = self.good
        dx = np.asarray(x_new, dtype=float) - xg
        gg = self._good_jac()
        beta = 1.0 + abs(fg)
        f = fg + (gg[0] @ dx if gg is not None else 0.0) + beta * (1.0 + dx @ dx)
        con, row = {}, 1
        for name, v in cg.items():
            n = v.size
            con[name] = v + (gg[row:row + n] @ dx if gg is not None else 0.0)
            row += n
        self.driver._con_cache = con
        return float(f)

    def _retreat_gradient(self, x_new):
        xg, fg, cg = self.good
        dx = np.asarray(x_new, dtype=float) - xg
        gg = self._good_jac()
        ncon = sum(v.size for v in cg.values())
        jac = np.zeros((1 + ncon, dx.size)) if gg is None else gg.copy()
        jac[0] += 2.0 * (1.0 + abs(fg)) * dx
        self.driver._grad_cache = jac
        return jac[0, :]

    def _good_jac(self):
        if self.good_grad is not None and self.good_grad[0] == _key(self.good[0]):
            return self.good_grad[1]
        return None

    def _count_failure(self, x_new, key, reason, kind, wall):
        self.failures += 1
        self.run_in_row += 1
        self.log.append(kind, x_new, self.design_of(), "failed", reason, None, {}, wall)
        self.echo(f"  evaluation {self.evaluations:3d}  FAILED ({kind}): {reason}; stepping "
                  "back towards the last design that succeeded")
        if self.run_in_row >= MAX_CONSECUTIVE_FAILURES:
            raise StudyError(f"{self.run_in_row} failed designs in a row; the last: {reason}")

    def _replayed(self, row):
        self.log.append(row["kind"], json.loads(row["x"]), row["design"], row["status"],
                        row["reason"], row["objective"], row["data"], row["wall_s"],
                        replayed=True)
        if row["status"] == "ok" and row["kind"] == "value":
            self._tick(row["objective"], True)

    def _tick(self, f, replayed):
        if self.progress is not None:
            self.progress(self.evaluations, f, replayed)


class _NoLog:
    """The log of a run that records nothing (the finite-difference comparison run)."""

    def append(self, *args, **kwargs):
        pass


def _reason(exc) -> str:
    """The message of the failure that started it all (OpenMDAO wraps a component's error
    in its own; the workbench error inside names the element and the time)."""
    root, seen = exc, set()
    while id(root) not in seen:
        seen.add(id(root))
        inner = root.__cause__ or root.__context__
        if inner is None:
            break
        root = inner
    if not isinstance(root, WorkbenchError):
        root = exc
    return " ".join(str(root).split()) or type(root).__name__
