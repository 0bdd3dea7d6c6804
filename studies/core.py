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

from components import MultibodyResponse, om_units
from workbench.errors import ModelError

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

    def output(self, name: str) -> str:
        return f"{self.label}_{name}" if self.label else name


@dataclass
class StudySpec:
    """What a study optimises.

    ``objective``: weights per response (the driver minimises ``sum w_k psi_k``);
    ``constraints``: ``{response: upper bound}`` (SLSQP only; L-BFGS-B takes bounds only);
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


def build_problem(spec: StudySpec, optimizer: str, maxiter: int = 50, fd: bool = False,
                  recorder_path: str | None = None) -> om.Problem:
    """The OpenMDAO problem of a study (analytic derivatives unless ``fd``)."""
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {optimizer!r}; choose one of {OPTIMIZERS}")
    prob = om.Problem(name=f"{spec.name}-{optimizer}{'-fd' if fd else ''}".replace(".", ""),
                      reports=False)
    from workbench.sensitivity import _resolve_objectives
    from workbench.simulate import _compiled
    for i, case in enumerate(spec.all_cases()):
        comp = MultibodyResponse(model=case.model, objectives=case.objectives,
                                 parameters=spec.parameters, t_end=case.t_end, dt=case.dt,
                                 formulation=spec.formulation)
        outs = _resolve_objectives(_compiled(case.model), case.objectives).names
        prob.model.add_subsystem(f"mb{i}", comp, promotes_inputs=["*"],
                                 promotes_outputs=[(o, case.output(o)) for o in outs])
    terms = " + ".join(f"{float(w)!r} * {r}" for r, w in spec.objective.items())
    prob.model.add_subsystem("obj", om.ExecComp(f"J = {terms}"), promotes=["*"])
    for nm in spec.parameters:
        lo, hi = spec.bounds[nm]
        prob.model.add_design_var(nm, lower=lo, upper=hi, ref=max(abs(lo), abs(hi)))
    prob.model.add_objective("J")
    if optimizer == "SLSQP":
        for r, ub in spec.constraints.items():
            prob.model.add_constraint(r, upper=ub, ref=abs(ub) or 1.0)
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
        for r, ub in (spec.constraints.items() if prob.driver.options["optimizer"] == "SLSQP"
                      else []):
            viol = max(viol, float(prob.get_val(r)[0]) - ub)
        echo(f"  evaluation {it['n']:3d}  objective {float(prob.get_val('J')[0]):.6g}  "
             f"max constraint violation {max(viol, 0.0):.3g}")
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
    # gradient check at the optimum: analytic vs central differences of the simulation
    from workbench import catalog
    from workbench.sensitivity import sensitivity
    gcheck = []
    for case in spec.all_cases():
        cm = catalog.load(case.model).compile(x1)
        kw = dict(objectives=case.objectives, parameters=spec.parameters, t_end=case.t_end,
                  dt=case.dt, formulation=spec.formulation)
        an = sensitivity(cm, **kw, method="adjoint")
        fdg = sensitivity(cm, **kw, method="fd")
        gcheck += [{"response": case.output(r), "parameter": p,
                    "analytic": float(an.gradient[k, j]), "fd": float(fdg.gradient[k, j])}
                   for k, r in enumerate(an.objectives) for j, p in enumerate(an.parameters)]
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
               "constraints": spec.constraints if optimizer == "SLSQP" else {},
               "objective_weights": spec.objective,
               "wall_time_s": wall, "simulations": nsim,
               "t_end": spec.t_end, "dt": spec.dt, "formulation": spec.formulation,
               "cases": [asdict(c) | {"objectives": None} for c in spec.all_cases()],
               "gradient_check": gcheck, "fd_comparison": fdrun,
               "description": spec.description}
    (out / "summary.json").write_text(json.dumps(
        {k: summary[k] for k in ("optimizer", "success", "iterations", "objective_initial",
                                 "objective_final", "design_initial", "design_final",
                                 "wall_time_s")} | {"study": spec.name, "simulations": nsim,
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
    cons = {r: [float(c.get_val(r)[0]) for c in cases] for r in S["constraints"]}
    fig, ax = plt.subplots(1, 2 if cons else 1, figsize=(10 if cons else 6, 3.5),
                           squeeze=False)
    ax[0, 0].plot(range(len(Jh)), Jh, "o-")
    ax[0, 0].set_xlabel("driver iteration (recorded case)")
    ax[0, 0].set_ylabel("objective J")
    ax[0, 0].set_title(f"{S['study']} ({S['optimizer']})")
    if cons:
        for r, h in cons.items():
            ax[0, 1].plot(range(len(h)), np.array(h) / S["constraints"][r], "o-", label=r)
        ax[0, 1].axhline(1.0, color="k", lw=0.8)
        ax[0, 1].set_ylabel("constraint / bound")
        ax[0, 1].legend()
    fig.tight_layout()
    fig.savefig(out / "history.png", dpi=110)
    plt.close(fig)
    # baseline versus optimum time histories (re-simulated: the recording holds the designs)
    from workbench import catalog, simulate
    fig, ax = plt.subplots(figsize=(7, 3.5))
    case = (S.get("cases") or [{"model": S["model"], "t_end": S["t_end"], "dt": S["dt"]}])[0]
    for lab, x in (("baseline", S["design_initial"]), ("optimum", S["design_final"])):
        cm = catalog.load(case["model"]).compile(x)
        meta = getattr(cm.model, "meta", {}) or {}
        t_end = case["t_end"] or meta.get("t_end", 1.0)
        dt = case["dt"] or meta.get("dt", 1e-3)
        res = simulate(cm, t_end, dt, S["formulation"])
        for j, nm in enumerate(res.dof_names[:6]):
            ax.plot(res.t, res.zi[:, j], label=f"{nm} ({lab})", ls="-" if lab == "optimum" else "--")
    ax.set_xlabel("t [s]")
    ax.set_ylabel("degrees of freedom")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "histories.png", dpi=110)
    plt.close(fig)
    lines = [f"# Study `{S['study']}` — {S['optimizer']}", "",
             S.get("description", ""), "",
             f"Model `{S['model']}` (see its provenance; shipped benchmark models are "
             "reconstructions), formulation `{}`, t_end = {}, dt = {}.".format(
                 S["formulation"], S["t_end"], S["dt"]), "",
             f"success: **{S['success']}**, iterations: {S['iterations']}, simulations "
             f"(each with its analytic gradient): {S['simulations']}, wall time "
             f"{S['wall_time_s']:.1f} s", "",
             f"objective J = {' + '.join(f'{w:.4g} {r}' for r, w in S['objective_weights'].items())}: "
             f"{S['objective_initial']:.6g} -> {S['objective_final']:.6g}", "",
             "| parameter | lower | initial | optimum | upper |", "|---|---|---|---|---|"]
    for nm, x0 in S["design_initial"].items():
        lo, hi = S["bounds"][nm]
        lines.append(f"| {nm} | {lo:.6g} | {x0:.6g} | {S['design_final'][nm]:.6g} | {hi:.6g} |")
    if S["constraints"]:
        lines += ["", "| constraint | bound | initial | final |", "|---|---|---|---|"]
        for r, ub in S["constraints"].items():
            lines.append(f"| {r} <= | {ub:.6g} | {S['responses_initial'][r]:.6g} | "
                         f"{S['responses_final'][r]:.6g} |")
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


def _run_start(builder_name, kwargs, optimizer, out, maxiter, k, x0):
    """One start on a Dask worker (module-level: picklable)."""
    from .builtin import STUDIES
    spec = STUDIES[builder_name](**kwargs)
    s = run_study(spec, optimizer, out=out, maxiter=maxiter, compare_fd=False,
                  echo=lambda *_: None, x0=x0, subdir=f"start-{k}")
    return {"start": k, **{key: s[key] for key in ("success", "iterations",
                                                    "objective_initial", "objective_final",
                                                    "design_initial", "design_final",
                                                    "wall_time_s")}}


def run_multistart(builder_name: str, optimizer: str, starts: int, workers: int = 2,
                   scheduler: str | None = None, out: str | Path = "reports",
                   maxiter: int = 50, echo=print, **kwargs) -> list:
    """``starts`` independent optimisations from Latin-hypercube designs, run in parallel
    on Dask: a ``LocalCluster`` with ``workers`` single-threaded processes, or the
    existing cluster at ``scheduler``.  Each start records ``out/NAME/start-k/cases.db``;
    ``out/NAME/starts.md`` and ``starts.json`` rank them."""
    from dask.distributed import Client, LocalCluster, as_completed
    from .builtin import STUDIES
    spec = STUDIES[builder_name](**kwargs)           # compiles the kernels once (disk cache)
    designs = latin_hypercube(spec, starts)
    cluster = None
    if scheduler:
        client = Client(scheduler)
    else:
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                               dashboard_address=None)
        client = Client(cluster)
    try:
        futs = [client.submit(_run_start, builder_name, kwargs, optimizer, str(out), maxiter,
                              k, x0, pure=False) for k, x0 in enumerate(designs)]
        results = []
        for fut in as_completed(futs):
            r = fut.result()
            echo(f"  start {r['start']}: success={r['success']} iterations={r['iterations']} "
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
