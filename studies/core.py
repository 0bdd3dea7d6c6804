"""Running a study: an OpenMDAO problem around :class:`components.MultibodyResponse`,
driven by ``ScipyOptimizeDriver`` (L-BFGS-B or SLSQP), recorded with ``SqliteRecorder``.

A *study* is a builder function returning a :class:`StudySpec` (model, parameters with
bounds, responses, objective weights and constraints).  :func:`run_study` builds the
problem, runs it with the analytic gradient, repeats it with finite-difference totals for
comparison, checks the gradient at the optimum against central differences of the
simulation, and writes ``DIR/NAME/cases.db``, ``summary.json``, ``report.md``,
``report.html`` and figures.  The study description and the comparison figures are also
stored inside ``cases.db`` (table ``workbench_study``) so that :func:`report_from_db`
regenerates the report from the recording alone.
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
from workbench.errors import ModelError
from workbench.model import catalog
from workbench.objectives import compile_objectives, model_objectives, resolve_objectives
from workbench.sensitivities import measure_values
from workbench.sensitivities.driver import sensitivity
from workbench.statics import static_responses

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


def _run(prob, spec, echo):
    """Run the driver with per-iteration progress; returns (success, iterations, wall)."""
    comps = list(prob.model.system_iter(recurse=True, typ=MultibodyResponse))
    it = {"n": 0}
    orig = prob.driver._objfunc

    def objfunc(x_new):
        f = orig(x_new)
        it["n"] += 1
        viol = 0.0
        for r, b in (constraint_bounds(spec).items()
                     if prob.driver.options["optimizer"] == "SLSQP" else []):
            viol = max(viol, violation(b, float(prob.get_val(r)[0])))
        echo(f"  evaluation {it['n']:3d}  objective {float(prob.get_val('J')[0]):.6g}  "
             f"max constraint violation {viol:.3g}")
        return f

    prob.driver._objfunc = objfunc
    t0 = time.perf_counter()
    failed = prob.run_driver()
    wall = time.perf_counter() - t0
    success = not (failed.success is False if hasattr(failed, "success") else bool(failed))
    return success, prob.driver.iter_count, wall, sum(c.n_simulations for c in comps)


def run_study(spec: StudySpec, optimizer: str, out: str | Path = "reports", maxiter: int = 50,
              compare_fd: bool = True, echo=print, x0: dict | None = None,
              subdir: str | None = None) -> dict:
    """Run a study and write its recording and report under ``out/spec.name`` (or
    ``out/spec.name/subdir``), starting from the design ``x0`` (default: the model's)."""
    out = Path(out) / spec.name
    if subdir:
        out = out / subdir
    out.mkdir(parents=True, exist_ok=True)
    db = out / "cases.db"
    if db.exists():
        db.unlink()
    prob = build_problem(spec, optimizer, maxiter, fd=False, recorder_path=str(db))
    for nm, v in (x0 or {}).items():
        prob.set_val(nm, v)
    prob.run_model()
    x0 = _design(prob, spec)
    J0 = float(prob.get_val("J")[0])
    resp0 = {r: float(prob.get_val(r)[0]) for r in spec.objective} | \
        {r: float(prob.get_val(r)[0]) for r in spec.constraints}
    echo(f"[{spec.name}] {optimizer} with analytic gradients (adjoint/direct), "
         f"objective {J0:.6g}")
    success, iters, wall, nsim = _run(prob, spec, echo)
    x1 = _design(prob, spec)
    J1 = float(prob.get_val("J")[0])
    resp1 = {r: float(prob.get_val(r)[0]) for r in list(spec.objective) + list(spec.constraints)}
    viol1 = max([violation(b, resp1[r]) for r, b in constraint_bounds(spec).items()]
                if optimizer == "SLSQP" else [0.0], default=0.0)
    # gradient check at the optimum: analytic vs central differences of the simulation
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
    prob.cleanup()
    fdrun = None
    if compare_fd:
        echo(f"[{spec.name}] the same optimisation with finite-difference gradients ...")
        pf = build_problem(spec, optimizer, maxiter, fd=True)
        for nm, v in (x0 or {}).items():
            pf.set_val(nm, v)
        okf, itf, wallf, nsimf = _run(pf, spec, lambda s: None)
        fdrun = {"success": okf, "iterations": itf, "wall_time_s": wallf,
                 "simulations": nsimf, "objective_final": float(pf.get_val("J")[0])}
        pf.cleanup()
    summary = {"study": spec.name, "model": spec.model, "optimizer": optimizer,
               "success": bool(success), "iterations": int(iters),
               "objective_initial": J0, "objective_final": J1,
               "design_initial": x0, "design_final": x1,
               "bounds": {k: list(v) for k, v in spec.bounds.items()},
               "responses_initial": resp0, "responses_final": resp1,
               "constraints": ({r: list(b) for r, b in constraint_bounds(spec).items()}
                               if optimizer == "SLSQP" else {}),
               "max_constraint_violation": viol1,
               "objective_weights": spec.objective,
               "wall_time_s": wall, "simulations": nsim,
               "t_end": spec.t_end, "dt": spec.dt, "formulation": spec.formulation,
               "cases": [asdict(c) | {"objectives": None} for c in spec.all_cases()],
               "gradient_check": gcheck, "fd_comparison": fdrun,
               "description": spec.description}
    (out / "summary.json").write_text(json.dumps(
        {k: summary[k] for k in ("optimizer", "success", "iterations", "objective_initial",
                                 "objective_final", "design_initial", "design_final",
                                 "wall_time_s", "max_constraint_violation",
                                 "responses_initial", "responses_final", "constraints")}
        | {"study": spec.name, "simulations": nsim,
                                                    "fd_comparison": fdrun}, indent=2))
    with sqlite3.connect(db) as con:
        con.execute("CREATE TABLE IF NOT EXISTS workbench_study (json TEXT)")
        con.execute("DELETE FROM workbench_study")
        con.execute("INSERT INTO workbench_study VALUES (?)", (json.dumps(summary),))
    write_report(db, echo=echo)
    echo(f"[{spec.name}] success={success} iterations={iters} objective {J0:.6g} -> {J1:.6g} "
         f"({wall:.1f} s, {nsim} simulations); wrote {out}/")
    return summary


def report_from_db(db: str | Path, echo=print) -> Path:
    """Regenerate ``report.md``/``report.html`` and figures from a study's ``cases.db``."""
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


def write_report(db: Path, echo=print) -> Path:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    db = Path(db)
    with sqlite3.connect(db) as con:
        try:
            row = con.execute("SELECT json FROM workbench_study").fetchone()
        except sqlite3.OperationalError:
            row = None
    if row is None:
        raise ModelError(f"{db}: not a workbench study recording (no workbench_study table)")
    S = json.loads(row[0])
    out = db.parent
    cr = om.CaseReader(str(db))
    cases = cr.get_cases("driver", recurse=False)
    Jh = [float(c.get_objectives()["J"][0]) for c in cases]
    cbounds = constraint_bounds(S)
    cons = {r: [float(c.get_val(r)[0]) for c in cases] for r in cbounds}
    fig, ax = plt.subplots(1, 2 if cons else 1, figsize=(10 if cons else 6, 3.5),
                           squeeze=False)
    ax[0, 0].plot(range(len(Jh)), Jh, "o-")
    ax[0, 0].set_xlabel("driver iteration (recorded case)")
    ax[0, 0].set_ylabel("objective J")
    ax[0, 0].set_title(f"{S['study']} ({S['optimizer']})")
    if cons:
        for r, h in cons.items():
            lo, ub = cbounds[r]
            # signed distance to the active side, relative to the bound (<= 0: satisfied)
            scale = max(abs(lo or 0.0), abs(ub or 0.0)) or 1.0
            g = [max((v - ub) if ub is not None else -np.inf,
                     (lo - v) if lo is not None else -np.inf) / scale for v in h]
            ax[0, 1].plot(range(len(h)), g, "o-", label=r)
        ax[0, 1].axhline(0.0, color="k", lw=0.8)
        ax[0, 1].set_ylabel("(value - bound) / |bound|  (<= 0 satisfied)")
        ax[0, 1].legend()
    fig.tight_layout()
    fig.savefig(out / "history.png", dpi=110)
    plt.close(fig)
    # baseline versus optimum time histories of the measures behind each dynamic response
    # (re-simulated: the recording holds the designs)
    dyn = [c for c in (S.get("cases") or [{"label": "", "model": S["model"], "t_end": S["t_end"],
                                            "dt": S["dt"]}]) if c.get("kind", "dynamic") == "dynamic"]
    fig, axs = plt.subplots(len(dyn), 1, figsize=(7, 3.0 * len(dyn)), squeeze=False)
    for ax, case in zip(axs[:, 0], dyn):
        for lab, x in (("baseline", S["design_initial"]), ("optimum", S["design_final"])):
            cm = catalog.load(case["model"], **(case.get("load") or {})).compile(x)
            meta = getattr(cm.model, "meta", {}) or {}
            t_end = case["t_end"] or meta.get("t_end", 1.0)
            dt = case["dt"] or meta.get("dt", 1e-3)
            res = simulate(cm, t_end, dt, S["formulation"])
            co = resolve_objectives(cm, model_objectives(cm.model))
            MV = measure_values(res, co)
            for t in range(min(MV.shape[1], 3)):
                kind = {0: "position", 1: "velocity", 2: "acceleration", 3: "angular velocity",
                        4: "angular velocity (body)"}.get(int(co.ms_type[t]), "measure")
                ax.plot(res.t, MV[:, t], ls="-" if lab == "optimum" else "--",
                        label=f"{co.names[co.term_obj[t]]}: {kind} ({lab})")
        ax.set_xlabel("t [s]")
        ax.set_ylabel("measure (SI units)")
        ax.set_title(f"{case['model']}" + (f" ({case['label']})" if case.get("label") else ""),
                     fontsize=9)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "histories.png", dpi=110)
    plt.close(fig)
    import inspect
    lines = [f"# Study `{S['study']}` — {S['optimizer']}", "",
             inspect.cleandoc(S.get("description", "")), "",
             "Analyses per design (formulation `{}`; shipped benchmark models are "
             "reconstructions, see each model's provenance): ".format(S["formulation"])
             + "; ".join(_case_label(c) for c in (S.get("cases") or [
                 {"label": "", "model": S["model"], "t_end": S["t_end"], "dt": S["dt"]}]))
             + ".", "",
             f"success: **{S['success']}**, iterations: {S['iterations']}, simulations "
             f"(forward runs; each design's analytic gradient reuses its run): "
             f"{S['simulations']}, wall time {S['wall_time_s']:.1f} s", "",
             f"objective J = {' + '.join(f'{w:.4g} {r}' for r, w in S['objective_weights'].items())}: "
             f"{S['objective_initial']:.6g} -> {S['objective_final']:.6g}", "",
             "| parameter | lower | initial | optimum | upper |", "|---|---|---|---|---|"]
    for nm, x0 in S["design_initial"].items():
        lo, hi = S["bounds"][nm]
        lines.append(f"| {nm} | {lo:.6g} | {x0:.6g} | {S['design_final'][nm]:.6g} | {hi:.6g} |")
    if cbounds:
        fmt = lambda v: "" if v is None else f"{v:.6g}"                       # noqa: E731
        lines += ["", "| constraint | lower | upper | initial | final | satisfied |",
                  "|---|---|---|---|---|---|"]
        for r, b in cbounds.items():
            v1 = S["responses_final"][r]
            lines.append(f"| {r} | {fmt(b[0])} | {fmt(b[1])} | "
                         f"{S['responses_initial'][r]:.6g} | {v1:.6g} | "
                         f"{'yes' if violation(b, v1) <= 1e-6 * (abs(b[1] or b[0]) or 1) else 'NO'} |")
    others = [r for r in S.get("responses_final", {})
              if r not in cbounds and r not in S["objective_weights"]]
    if others:
        lines += ["", f"Other responses (not constrained by {S['optimizer']}):", "",
                  "| response | initial | final |", "|---|---|---|"]
        lines += [f"| {r} | {S['responses_initial'][r]:.6g} | {S['responses_final'][r]:.6g} |"
                  for r in others]
    lines += ["", "![objective history](history.png)", "",
              "![baseline vs optimum](histories.png)", "",
              "## Gradient check at the optimum", "",
              "Analytic (adjoint) against central differences of the simulation "
              "(relative step 1e-5):", "",
              "| response | parameter | analytic | central differences | relative difference |",
              "|---|---|---|---|---|"]
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
    html = ["<html><head><meta charset='utf-8'><title>" + S["study"] + "</title></head><body>"]
    in_table = False
    for ln in lines:
        if ln.startswith("|") and not in_table:
            html.append("<table border='1' cellspacing='0' cellpadding='3'>")
            in_table = True
        elif not ln.startswith("|") and in_table:
            html.append("</table>")
            in_table = False
        if ln.startswith("# "):
            html.append(f"<h1>{ln[2:]}</h1>")
        elif ln.startswith("## "):
            html.append(f"<h2>{ln[3:]}</h2>")
        elif ln.startswith("!["):
            src = ln[ln.index("(") + 1:-1]
            html.append(f"<img src='{src}'>")
        elif ln.startswith("|---"):
            continue
        elif ln.startswith("|"):
            cells = [c.strip() for c in ln.strip("|").split("|")]
            html.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
        else:
            html.append(f"<p>{ln}</p>")
    if in_table:
        html.append("</table>")
    text = "\n".join(html)
    text = text.replace("<p></p>", "")
    (out / "report.html").write_text(text + "</body></html>\n")
    echo(f"report: {out / 'report.md'}, {out / 'report.html'}")
    return out
