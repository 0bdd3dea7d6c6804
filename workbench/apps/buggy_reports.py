"""Buggy-vehicle gradient reports (``workbench reproduce buggy-step`` / ``buggy-dlc``).

Same shape as the five-bar report (:mod:`workbench.apps.reports`): ``gradients.csv`` (every
method beside the published values and a sign-agreement column), ``timings.json``,
``report.md`` and figures.  Every number is computed on the run that writes it, except the
column ``published``: seed 001 (Lopez Varela, Dopico, Luaces, Computers and Structures 308
(2025) 107642), Table 2 (step descent) and Table 3 (double lane change), "Reference"
column, for the OFFICIAL buggy, whose data we do not have.  Our vehicle is a documented
RECONSTRUCTION (``workbench/model/data/buggy-step.toml``), so only the sign pattern is a
plausibility check; the numbers are not expected to agree.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numba
import numpy as np

from workbench import objectives as O
from workbench.apps.reports import (OPTIMISATION_NOTE, TIMING_REPEATS, _cpu_comparison,
                                    _cpu_figure, cpu_table, gradient_table, markdown_table,
                                    published_beside, timed_runs, timings_table)
from workbench.apps.vehicle import iso3888_1_lanes, prepare
from workbench.integrators.simulation import simulate as _simulate
from workbench.kernels import tree as K
from workbench.model import catalog
from workbench.sensitivities.driver import (FD_NEWTON_TOL, FD_REL_STEP, measure_values,
                                            objective_values, sensitivity)

#: seed 001 Tables 2 and 3, column "Reference" (IFToMM reference values, official model)
PUBLISHED = {
    "buggy-step": {"kf": 2.06e-4, "cf": 9.34e-4, "kr": -3.90e-5, "cr": 7.53e-4, "mc": 4.06e-2},
    "buggy-dlc": {"kf": 3.96e-8, "cf": -1.28e-8, "kr": -5.11e-8, "cr": -4.12e-8, "mc": 2.56e-6},
}
PUBLISHED_SOURCE = {
    "buggy-step": "seed 001 (Lopez Varela, Dopico, Luaces, Computers and Structures 308 (2025) "
                  "107642), Table 2, column 'Reference'",
    "buggy-dlc": "seed 001 (Lopez Varela, Dopico, Luaces, Computers and Structures 308 (2025) "
                 "107642), Table 3, column 'Reference'",
}
#: unit of psi: int (z'' of chassis.p1)^2 dt (step descent), int (roll rate)^2 dt (lane change)
OBJECTIVE_UNITS = {"buggy-step": {"psi": "m^2/s^3"}, "buggy-dlc": {"psi": "rad^2/s"}}
#: Tables 2 and 3 give 3 significant digits (e.g. -3.90e-5): written so, as .2e
PUBLISHED_FORMAT = ".2e"
#: the seed's table of each maneuver
PUBLISHED_TABLE = {"buggy-step": "seed 001 Table 2", "buggy-dlc": "seed 001 Table 3"}
#: step-size study: the maneuver's step divided by these factors
STUDY_FACTORS = (1, 2, 4)


#: repetitions of dynamics + adjoint gradient for the real-time factor of the report
RTF_REPEATS = 5


def _measures(sim, objectives):
    """Measure histories (N, nm) of ``objectives`` along ``sim`` (exact kinematics)."""
    return measure_values(sim, O.compile_objectives(sim.compiled, objectives))


def _spring_lengths(sim):
    """Lengths (N, ns) of the spring-dampers along ``sim`` (m)."""
    cm = sim.compiled
    ma = cm.arrays
    nf = ma.fr_parent.shape[0]
    A, r, u = np.zeros((nf, 3, 3)), np.zeros((nf, 3)), np.zeros((nf, 3))
    ns = ma.sp_pt.shape[0]
    out = np.zeros((len(sim.t), ns))
    x1, x2 = np.zeros(3), np.zeros(3)
    for k in range(len(sim.t)):
        K.frame_positions(ma, ma.p, sim.z[k], A, r, u)
        for s in range(ns):
            K.point_position(ma, ma.p, A, r, ma.sp_pt[s, 0], x1)
            K.point_position(ma, ma.p, A, r, ma.sp_pt[s, 1], x2)
            out[k, s] = np.linalg.norm(x2 - x1)
    return out


def buggy(maneuver: str, out_dir, formulation: str = "sr-com", t_end=None,
          study: bool = True) -> dict:
    """Gradient report of the buggy maneuver ``"buggy-step"`` or ``"buggy-dlc"`` (see the
    module docstring); ``t_end`` shortens the run (smoke tests); ``study`` adds the
    step-size study (the adjoint gradient at the maneuver's step / 1, 2, 4).  Returns the
    timings."""
    import pandas as pd
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    t_prep = time.perf_counter()
    model = prepare(maneuver)
    t_prep = time.perf_counter() - t_prep
    cm = model.compile()
    meta = model.meta
    dt = float(meta["dt"])
    t_end = float(meta["t_end"]) if t_end is None else \
        max(1, int(round(float(t_end) / dt))) * dt
    # one thread: the simulation and the sweeps timed apart, the single-core figures (the
    # real-time factor is also measured on all threads below)
    kw = dict(formulation=formulation, t_end=t_end, dt=dt, threads=1)
    # warm-up on a short horizon so that timings exclude numba compilation
    for m, v in (("direct", "discrete"), ("adjoint", "discrete"), ("adjoint", "continuous"),
                 ("fd", "discrete")):
        sensitivity(cm, method=m, variant=v, formulation=formulation, t_end=3 * dt, dt=dt)
    started = time.strftime("%Y-%m-%d %H:%M:%S")
    D, A, Dc, Ac = timed_runs(cm, kw)
    F = sensitivity(cm, method="fd", **kw)
    # the global formulation in natural coordinates on the same independent coordinates
    # (issue 6; seed 001 section 4.2, Tables 2-3 and Figs 4-5), measured in this run
    kwg = dict(kw, formulation="global")
    for m in ("direct", "adjoint"):
        sensitivity(cm, method=m, formulation="global", t_end=3 * dt, dt=dt)
    Dg = sensitivity(cm, method="direct", **kwg)
    Ag = sensitivity(cm, method="adjoint", simulation=Dg.simulation, **kwg)
    t_feq = time.perf_counter()
    Feq = _fd_reequilibrated(maneuver, cm, list(D.parameters), formulation, t_end, dt)
    t_feq = time.perf_counter() - t_feq
    # exact gradient with every design starting from its own equilibrium (the model file
    # as loaded: initial_state = "equilibrium"; implicit-function derivative of the start)
    Aeq = sensitivity(catalog.load(maneuver).compile(), method="adjoint", **kw)
    pub = PUBLISHED[maneuver]
    rows = []
    for k, o in enumerate(D.objectives):
        for j, p in enumerate(D.parameters):
            ours = D.gradient[k, j]
            rows.append({
                "objective": o, "parameter": p, "unit": D.units[j],
                "direct_sr": ours, "adjoint_sr": A.gradient[k, j],
                "direct_sr_cont": Dc.gradient[k, j], "adjoint_sr_cont": Ac.gradient[k, j],
                "direct_global": Dg.gradient[k, j], "adjoint_global": Ag.gradient[k, j],
                "fd": F.gradient[k, j], "fd_step": F.fd_steps[j],
                "fd_reequilibrated": Feq[k, j], "adjoint_sr_eq": Aeq.gradient[k, j],
                "published": pub.get(p, np.nan),
                "sign_agrees": bool(np.sign(ours) == np.sign(pub[p])) if p in pub else None,
            })
    df = pd.DataFrame(rows)
    df.to_csv(out / "gradients.csv", index=False, float_format="%.10g")
    span = float(D.t[-1] - D.t[0])
    sim_s, adj_s = D.timings["simulation_s"], A.timings["sensitivity_s"]
    # the real-time factor of dynamics + adjoint gradient, repeated: the wall time of a
    # sub-second run on a shared machine varies by tens of percent from one run to the next
    rtf_runs = [span / (sim_s + adj_s)]
    for _ in range(RTF_REPEATS - 1):
        Ar = sensitivity(cm, method="adjoint", **kw)
        rtf_runs.append(span / (Ar.timings["simulation_s"] + Ar.timings["sensitivity_s"]))
    # on all of numba's threads (the step Jacobians beside the running simulation)
    kwt = dict(kw, threads=None)
    rtf_threads = [span / sensitivity(cm, method="adjoint", **kwt).timings["total_s"]
                   for _ in range(RTF_REPEATS)]
    timings = {
        "simulation_s": sim_s,
        "direct_s": D.timings["sensitivity_s"],
        "adjoint_s": adj_s,
        "adjoint_continuous_s": Ac.timings["sensitivity_s"],
        "fd_s": F.timings["total_s"],
        "fd_reequilibrated_s": t_feq,
        "simulation_global_s": Dg.timings["simulation_s"],
        "direct_global_s": Dg.timings["sensitivity_s"],
        "adjoint_global_s": Ag.timings["sensitivity_s"],
        "real_time_factor": rtf_runs[0],
        "real_time_factor_repeats": rtf_runs,
        "real_time_factor_best": max(rtf_runs),
        "real_time_factor_median": float(np.median(rtf_runs)),
        "real_time_factor_all_threads_median": float(np.median(rtf_threads)),
        "threads": numba.get_num_threads(),
        "simulation_real_time_factor": span / sim_s,
        "equilibrium_s": t_prep,
        "steps": int(len(D.t) - 1),
        "dt": dt,
        "t_end": float(D.t[-1]),
        "formulation": formulation,
        "note": "wall seconds measured in this run after numba compilation (one core); "
                "semi-recursive simulation_s, direct_s, adjoint_s: the run of median time of "
                f"{TIMING_REPEATS} after a full-length warm-up; direct_s/adjoint_s exclude "
                "the forward simulation (simulation_s); "
                "real_time_factor = simulated seconds / (simulation_s + adjoint_s); "
                "real_time_factor_repeats: the same figure for this run and for repeated "
                "adjoint runs (each with its own simulation) in the same process; fd_s is "
                "1 + 2 x (number of parameters) simulations; equilibrium_s includes loading; "
                "real_time_factor_all_threads_median: the adjoint on all `threads` "
                "(pipelined with the simulation)",
    }
    study_rows = []
    if study:
        for f in STUDY_FACTORS:
            h = dt / f
            Sx = A if f == 1 else sensitivity(cm, method="adjoint", formulation=formulation,
                                              t_end=t_end, dt=h)
            for j, p in enumerate(Sx.parameters):
                study_rows.append({"dt": h, "parameter": p, "psi": Sx.psi[0],
                                   "gradient": Sx.gradient[0, j]})
        sdf = pd.DataFrame(study_rows)
        sdf.to_csv(out / "step_size_study.csv", index=False, float_format="%.10g")
    cpu = _cpu_comparison(D, A, Dg, Ag)
    timings["saving_percent"] = {k: v[2] for k, v in cpu.items()}
    (out / "timings.json").write_text(json.dumps(timings, indent=2) + "\n")
    figs = _figures(maneuver, model, D, A, out)
    _cpu_figure(cpu, out / "cpu_sr_vs_global.png", title=f"{maneuver} (reconstruction)")
    _write_report(maneuver, model, D, A, Ac, F, df, timings, study_rows, figs, started, out,
                  global_=(Dg, Ag, cpu))
    return timings


def _fd_reequilibrated(maneuver, cm, names, formulation, t_end, dt):
    """Central differences in which every perturbed design starts from ITS OWN static
    equilibrium (the physical question; the exact gradients hold the nominal initial state
    fixed): shows how much the choice of initial state matters.  Same steps as
    ``sensitivity(method="fd")``."""
    base = dict(zip(cm.param_names, cm.param_values))
    objs = O.model_objectives(cm.model)
    out = np.zeros((len(objs), len(names)))
    for j, nm in enumerate(names):
        delta = FD_REL_STEP * max(abs(base[nm]), 1e-3)
        vals = []
        for s in (+1, -1):
            m = prepare(maneuver, parameters={nm: base[nm] + s * delta})
            cmj = m.compile()
            sim = _simulate(cmj, t_end, dt, formulation, newton_tol=FD_NEWTON_TOL)
            vals.append(objective_values(sim, O.compile_objectives(cmj, objs)))
        out[:, j] = (vals[0] - vals[1]) / (2.0 * delta)
    return out


def _rel(a, b) -> float:
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


def _write_report(maneuver, model, D, A, Ac, F, df, timings, study_rows, figs, started, out,
                  global_=None):
    meta = model.meta
    title = meta.get("title", maneuver)
    eq = meta.get("equilibrium", {})
    lines = [
        f"# {title}: gradients of psi",
        "",
        "**This is a RECONSTRUCTION**, not the IFToMM benchmark "
        f"{meta.get('benchmark', '')!s}: the official vehicle (points, masses, suspension, tire "
        "model, initial conditions, steering input) is not available to us, so our gradients "
        "are NOT expected to match the published ones; the `published` column "
        f"({PUBLISHED_SOURCE[maneuver]}) is shown only beside ours, and `sign_agrees` compares "
        "signs only.  Every value of the model and its provenance: "
        f"`workbench/model/data/{maneuver}.toml` (vehicle data in `buggy-step.toml`), "
        "`workbench models --json`.",
        "",
        f"Generated on {started}; formulation `{timings['formulation']}`; t_end = "
        f"{timings['t_end']:g} s, dt = {timings['dt']:g} s ({timings['steps']} trapezoidal "
        "steps, every one a plain step: the sensitivities check it).",
        "",
        f"Objective: {meta.get('objectives', '')}.  Parameters: kf, cf (front coil-over "
        "stiffness and damping, both sides), kr, cr (rear), mc (chassis mass).",
        "",
        "Initial state: static equilibrium of the nominal design "
        f"(`workbench equilibrium {maneuver}`: max |Qbar| = {eq.get('residual', float('nan')):.2e} "
        f"after {eq.get('iterations', '?')} Newton iterations), rolling without slip; held "
        "fixed when a parameter is perturbed (every method differentiates the same map).",
        "",
        f"psi = {D.psi[0]:.10g} {OBJECTIVE_UNITS[maneuver]['psi']}",
        "",
        f"## {PUBLISHED_TABLE[maneuver][9:]} beside the published values",
        "",
        f"Our discrete direct gradient (per unit of the parameter) beside "
        f"{PUBLISHED_TABLE[maneuver]}, column 'Reference', which is for the OFFICIAL buggy "
        "(not ours: a reconstruction; only the sign pattern is a plausibility check).",
        "",
        published_beside(df, OBJECTIVE_UNITS[maneuver], PUBLISHED_TABLE[maneuver],
                         PUBLISHED_FORMAT),
        "",
        "## Every method",
        "",
        "Columns: `direct_sr`, `adjoint_sr`: exact derivatives of the discrete trapezoidal "
        "solution (semi-recursive Matrix-R, tire-contact tangent included); "
        "`direct_sr_cont`, `adjoint_sr_cont`: differentiate-then-discretise (seed 001 route; "
        "the continuous adjoint differs from the discrete one by O(h^2)); `fd`: central "
        "differences of our simulation with step `fd_step`; `fd_reequilibrated`: the same, each perturbed design starting from its own equilibrium; `adjoint_sr_eq`: exact adjoint gradient of that re-equilibrated map; `published`: seed 001 for the "
        "official model; `sign_agrees`: sign(direct_sr) = sign(published); "
        "`direct_global`, `adjoint_global`: the global formulation (section below).",
        "",
        gradient_table(df, extra=("fd_reequilibrated", "adjoint_sr_eq"),
                       published_format=PUBLISHED_FORMAT),
        "",
        "Agreement measured in this run (max abs difference / max abs value):",
        "",
        f"* direct vs adjoint (discrete): {_rel(A.gradient, D.gradient):.2e}",
        f"* direct vs central differences: {_rel(F.gradient, D.gradient):.2e} "
        f"(per parameter: "
        + ", ".join(f"{p} {abs(F.gradient[0, j] - D.gradient[0, j]) / abs(D.gradient[0, j]):.1e}"
                    for j, p in enumerate(D.parameters)) + ")",
        f"* continuous adjoint vs discrete: {_rel(Ac.gradient, D.gradient):.2e}",
        "* effect of the initial state: central differences in which each perturbed design "
        "starts from its own static equilibrium (`fd_reequilibrated`) differ from the "
        "fixed-start gradient by "
        + ", ".join(f"{p} {abs(df['fd_reequilibrated'][j] - D.gradient[0, j]) / abs(D.gradient[0, j]):.1e}"
                    for j, p in enumerate(D.parameters)) + " (relative)",
        "* the exact gradient of that re-equilibrated map (`adjoint_sr_eq`: the adjoint "
        "seeded with the implicit-function derivative of the equilibrium, dz_i0/drho = "
        "-Kbar^+ dQbar/drho) against `fd_reequilibrated`: "
        f"{_rel(df['fd_reequilibrated'].to_numpy(), df['adjoint_sr_eq'].to_numpy()):.2e}; this is the map the optimisation study "
        "(`workbench study buggy-suspension`) uses.",
        f"* signs agreeing with the published reference: "
        f"{int(df['sign_agrees'].sum())}/{len(df)}",
        "",
        "Timings (wall seconds, this run, one core; `timings.json`):",
        "",
        timings_table(timings),
        "",
        f"Real-time factor of dynamics + adjoint gradient: {timings['real_time_factor']:.2f} "
        f"(simulation alone {timings['simulation_real_time_factor']:.1f}); over "
        f"{len(timings['real_time_factor_repeats'])} repetitions in this run: median "
        f"{timings['real_time_factor_median']:.2f}, best {timings['real_time_factor_best']:.2f}"
        f"; on {timings['threads']} threads (step Jacobians beside the running simulation) "
        f"median {timings['real_time_factor_all_threads_median']:.2f}"
        "; seed 001 reports 3.1 for its semi-recursive DLC (Fortran, i7-8700).",
    ]
    if global_ is not None:
        Dg, Ag, cpu = global_
        relg = float(np.max(np.abs(np.concatenate([Dg.gradient - D.gradient,
                                                    Ag.gradient - A.gradient]))
                            / np.abs(np.concatenate([D.gradient, A.gradient]))))
        lines += [
            "", "## Semi-recursive vs global formulation (seed 001 Figs 4-5)", "",
            "`direct_global`, `adjoint_global`: the same discrete gradients computed with the "
            "global Matrix-R formulation in natural coordinates (`workbench.formulations.natural.build`: points "
            "and unit vectors of every body; the tire law is evaluated on the wheel state "
            "taken from them) on the SAME independent coordinates.  Max relative difference "
            f"per entry from the semi-recursive `{timings['formulation']}` gradients (direct "
            f"and adjoint): {relg:.2e}; global direct vs adjoint: "
            f"{_rel(Ag.gradient, Dg.gradient):.2e}.  CPU (wall) time of this run, after numba "
            "compilation, on a shared 2-core machine, one thread (semi-recursive: the run of "
            f"median time of {TIMING_REPEATS} after a full-length warm-up; global: one run):",
            "",
            cpu_table(cpu),
        ] + [
            "",
            "Saving = 1 - t_semi-recursive / t_global.  Seed 001 (Figs 4-5, buggy, Fortran): "
            "the semi-recursive formulation saves 48.2 % (direct) and 50.2 % (adjoint) on the "
            "step descent, 48-50 % on the double lane change.  Measured here: "
            f"{cpu['simulation + direct'][2]:.1f} % (simulation + direct) and "
            f"{cpu['simulation + adjoint'][2]:.1f} % (simulation + adjoint).",
            "",
            OPTIMISATION_NOTE,
            "",
            "![CPU time semi-recursive vs global](cpu_sr_vs_global.png)",
            "",
            "Figure: CPU (wall) time of objective plus gradient, semi-recursive vs global "
            "(as seed 001 Figs 4-5), measured in this run.",
        ]
    if study_rows:
        import pandas as pd
        sdf = pd.DataFrame(study_rows)
        piv = sdf.pivot(index="parameter", columns="dt", values="gradient")
        piv = piv[sorted(piv.columns, reverse=True)].reindex(
            list(dict.fromkeys(sdf["parameter"])))                  # the parameters' order
        hs = list(piv.columns)
        lines += ["", "## Step-size study", "",
                  "Discrete adjoint gradient at dt, dt/2, dt/4 (`step_size_study.csv`); the "
                  "last columns are the relative changes between successive step sizes "
                  "(second-order convergence: each change about 1/4 of the previous).", ""]
        tab = piv.copy()
        tab.columns = [f"dt = {h:g} s" for h in hs]
        fmts = {c: ".6g" for c in tab.columns}
        for a, b in zip(hs[:-1], hs[1:]):
            col = f"change {a:g} s -> {b:g} s (relative)"
            tab[col] = np.abs(piv[b] - piv[a]) / np.abs(piv[hs[-1]])
            fmts[col] = ".2e"
        lines += [markdown_table(tab, list(tab.columns), formats=fmts, index="parameter")]
        psis = sdf.groupby("dt")["psi"].first().sort_index(ascending=False)
        lines += ["", "psi: " + ", ".join(f"{v:.8g} (dt={h:g})" for h, v in psis.items())]
    lines += [""] + [f"![{c}]({f})\n\nFigure: {c}.\n" for f, c in figs]
    (out / "report.md").write_text("\n".join(lines) + "\n")


def _figures(maneuver, model, D, A, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    sim = D.simulation
    cm = sim.compiled
    figs = []
    t = sim.t
    acc = _measures(sim, [O.point_acceleration("a", "chassis.p1", components="z")])[:, 0]
    roll = _measures(sim, [O.angular_velocity("w", "chassis", components="x",
                                              frame="body")])[:, 0]
    fig, ax = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
    ax[0].plot(t, acc)
    ax[0].set_ylabel("z'' of chassis.p1 [m/s^2]")
    ax[1].plot(t, roll)
    ax[1].set_ylabel("roll rate [rad/s]")
    ax[1].set_xlabel("t [s]")
    for a in ax:
        a.grid(True, alpha=0.3)
    fig.suptitle(f"{maneuver} (reconstruction): objective integrands")
    fig.tight_layout()
    fig.savefig(out / "histories.png", dpi=100)
    plt.close(fig)
    figs.append(("histories.png", "vertical acceleration of the front chassis point p1 and "
                                  "chassis roll rate"))
    L = _spring_lengths(sim)
    names = list(model.springs)
    fig, ax = plt.subplots(figsize=(9, 4))
    for s, nm in enumerate(names):
        ax.plot(t, 1e3 * (L[0, s] - L[:, s]), label=nm)
    ax.set_ylabel("spring compression from the start [mm]")
    ax.set_xlabel("t [s]")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "suspension_travel.png", dpi=100)
    plt.close(fig)
    figs.append(("suspension_travel.png", "suspension travel (coil-over compression)"))
    if maneuver == "buggy-dlc":
        x = sim.coordinate("chassis.x")
        y = sim.coordinate("chassis.y")
        P = {nm: p.si_value for nm, p in model.parameters.items()}
        xg = x - P["a_G"]                      # chassis centre of mass
        fig, ax = plt.subplots(figsize=(11, 4))
        ax.plot(xg, y, label="chassis centre of mass")
        half = 0.5 * P["dlc_width"]
        ax.fill_between(xg, y - half, y + half, alpha=0.15, label="vehicle width")
        for lane in iso3888_1_lanes(model):
            xs = np.linspace(lane["x0"], lane["x1"], 6)
            ax.plot(xs, np.full_like(xs, lane["y_left"]), "v", color="tab:orange")
            ax.plot(xs, np.full_like(xs, lane["y_right"]), "^", color="tab:orange")
        ax.set_xlabel("x [m]")
        ax.set_ylabel("y [m]")
        ax.set_title("path against the ISO 3888-1 cones (open-loop steering)")
        ax.grid(True, alpha=0.3)
        ax.legend(loc="upper left")
        fig.tight_layout()
        fig.savefig(out / "path.png", dpi=100)
        plt.close(fig)
        figs.append(("path.png", "path of the chassis against the lane cones"))
    k = 0
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for j, p in enumerate(D.parameters):
        sc = abs(D.gradient[k, j]) or 1.0
        axes[0].plot(D.t, D.running[:, k, j] / sc, label=p)
        axes[1].plot(A.t, A.running[:, k, j] / sc, label=p)
    axes[0].set_title("direct: running gradient / final value")
    axes[1].set_title("adjoint: accumulated backward / final value")
    for a in axes:
        a.set_xlabel("t [s]")
        a.grid(True, alpha=0.3)
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(out / "running_gradient.png", dpi=100)
    plt.close(fig)
    figs.append(("running_gradient.png", "running gradient (direct forward, adjoint backward)"))
    return figs


__all__ = ["buggy", "PUBLISHED"]
