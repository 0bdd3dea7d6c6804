"""Command-line interface: ``workbench <command> ...``.

Commands
--------
``workbench models``
    Table of the shipped models.
``workbench simulate MODEL``
    Simulate a shipped model (by name) or a model file (``.toml``/``.json``) and write
    ``history.csv``, ``plot.png`` and ``summary.json``.
``workbench equilibrium MODEL``
    Static equilibrium of a model: residual, iterations, degrees of freedom (``--out``
    writes JSON).
``workbench reproduce``
    The main job: simulate every shipped model on its default settings and write an
    index ``README.md`` of the results.

Every :class:`~workbench.errors.WorkbenchError` (and every bad command-line value) is
reported as one line ``error: ...`` on stderr with exit status 2, without a traceback.

Adding a command
----------------
Write ``_add_<name>(sub)`` that creates the sub-parser and sets ``func=_cmd_<name>``,
then list it in :data:`_COMMANDS`.  ``_cmd_<name>(args)`` returns the exit status.
Planned: ``bench``, ``study``, ``report``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
from pathlib import Path

from workbench import __version__
from workbench.apps.progress import compile_report, simulation_bar, watch_compilation
from workbench.apps.vehicle import prepare as _prepare
from workbench.errors import UnknownNameError, WorkbenchError
from workbench.formulations import REGISTRY, formulation_code
from workbench.integrators.simulation import energy_trend, run_settings, simulate
from workbench.model import catalog
from workbench.model.files import load_model as _load_file
from workbench.sensitivities.driver import sensitivity
from workbench.statics import equilibrium

#: Default end time and time step when a model does not say (``model.meta``).
DEFAULT_T_END = 1.0
DEFAULT_DT = 1e-3
#: ``--quick`` end time of ``workbench reproduce``.
QUICK_T_END = 1.0
#: ``--quick`` end times of the buggy reports: the double lane change until shortly after
#: the first steering input (starts at 1.86 s), the step descent until the front wheels
#: have just left the step (2.0 s)
QUICK_BUGGY_T_END = {"buggy-dlc": 2.4, "buggy-step": 2.25}

#: The main job: (model name, catalog options, t_end, dt); ``None`` = the model's default.
REPRODUCE_RUNS = (
    ("pendulum", {}, None, None),
    ("n-four-bar", {"N": 40}, 20.0, 1e-3),
    ("slider-crank", {}, None, None),
    ("five-bar", {}, None, None),
    ("bricard", {}, None, None),
    ("quick-return", {}, None, None),
    ("point-to-line", {}, None, None),
    ("cam-follower", {}, None, None),
    ("spatial-four-bar", {}, None, None),
    ("four-bar-grid", {"ny": 4}, None, None),
    ("coach", {}, None, None),
)
#: buggy reports included in ``workbench reproduce all``: the double lane change (~35 s
#: with the global-formulation comparison); the step descent (4500 steps of 1 ms,
#: step-size study down to 0.25 ms: ~2 min) only by name
REPRODUCE_ALL_BUGGY = ("buggy-dlc",)
#: ``workbench reproduce`` writes the history every this many seconds (at most).
REPRODUCE_HISTORY_INTERVAL = 0.01
#: ``workbench simulate`` writes the history every this many seconds by default
#: (``--history-stride 1``: every step)
SIMULATE_HISTORY_INTERVAL = 0.01
#: default output folder of user runs (``simulate``, ``study``): never ``reports/``, whose
#: content is the published output of the main job and of the shipped studies
RUNS_DIR = "runs"

MODEL_SUFFIXES = (".toml", ".json")


class CLIError(Exception):
    """A bad command-line value or a failed job (printed as ``error: ...``, exit 2)."""


# ----------------------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------------------


def _parse_scalar(text: str):
    """``"40"`` -> 40, ``"0.5"`` -> 0.5, ``"true"`` -> True, anything else stays a string."""
    low = text.strip().lower()
    if low in ("true", "yes", "on"):
        return True
    if low in ("false", "no", "off"):
        return False
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


def _parse_pairs(items, flag: str, numeric: bool) -> dict:
    """``["a=1", "b=2"]`` -> ``{"a": 1.0, "b": 2.0}`` (``numeric``) or parsed scalars."""
    out = {}
    for item in items or ():
        name, sep, value = item.partition("=")
        name, value = name.strip(), value.strip()
        if not sep or not name or not value:
            raise CLIError(f"{flag} expects NAME=VALUE, got {item!r}")
        if numeric:
            try:
                val = float(value)
            except ValueError:
                raise CLIError(f"{flag} {name}: {value!r} is not a number") from None
            if not math.isfinite(val):
                raise CLIError(f"{flag} {name}: value must be finite, got {value!r}")
            out[name] = val
        else:
            out[name] = _parse_scalar(value)
    return out


def _is_model_file(spec: str) -> bool:
    return spec.lower().endswith(MODEL_SUFFIXES) or os.sep in spec or (
        os.altsep is not None and os.altsep in spec) or Path(spec).is_file()


def load_model(spec: str, options: dict | None = None, parameters: dict | None = None,
               prepare: bool = True):
    """The :class:`~workbench.model.Model` named ``spec`` (shipped) or stored in the file
    ``spec``.

    ``options`` are generator options (``N`` for ``n-four-bar``) or parameter values;
    ``parameters`` are parameter values only (checked to be parameters of the model).
    Both are applied when the model is built, so that load-time fields that refer to a
    parameter (e.g. gravity) follow the new value; values are in the parameter's unit.
    With ``prepare`` a model whose ``meta.initial_state`` is ``"equilibrium"`` (the buggy
    maneuvers) starts from its static equilibrium (:func:`workbench.apps.vehicle.prepare`).
    """
    options = dict(options or {})
    parameters = dict(parameters or {})
    both = sorted(set(options) & set(parameters))
    if both:
        raise CLIError(f"{', '.join(both)} given both with --option and --set")
    kwargs = {**options, **parameters}
    if _is_model_file(spec):
        path = Path(spec)
        if not path.is_file():
            raise CLIError(f"model file not found: {spec}")
        model = _load_file(path, **kwargs)
    else:
        model = catalog.load(spec, **kwargs)
    for name in parameters:
        if name not in model.parameters:
            raise UnknownNameError("parameter", name, model.parameters)
    if prepare and str(model.meta.get("initial_state", "")).startswith("equilibrium") \
            and model.meta.get("initial_state") != "equilibrium (applied)":
        model = _prepare(model)
    return model


def _model_defaults(model) -> tuple[float, float]:
    meta = getattr(model, "meta", None) or {}
    t_end = meta.get("t_end", DEFAULT_T_END)
    dt = meta.get("dt", DEFAULT_DT)
    try:
        return float(t_end), float(dt)
    except (TypeError, ValueError):
        raise CLIError(f"model {model.name!r}: metadata t_end={t_end!r}, dt={dt!r} are not "
                       f"numbers") from None


def _positive(name: str):
    def conv(text: str) -> float:
        try:
            val = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be a number, got {text!r}") from None
        if not (math.isfinite(val) and val > 0):
            raise argparse.ArgumentTypeError(f"{name} must be positive and finite, got {text!r}")
        return val
    return conv


def _positive_int(text: str) -> int:
    try:
        val = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if val < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return val


def _fmt(x, spec=".3g") -> str:
    if x is None:
        return "-"
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    return format(x, spec)


def _json_safe(obj):
    """Replace non-finite floats (not valid JSON) by ``None``; convert numpy scalars."""
    if isinstance(obj, dict):
        return {str(k): _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    if hasattr(obj, "item") and not isinstance(obj, (str, bytes)):
        try:
            obj = obj.item()
        except (TypeError, ValueError):
            pass
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


# ----------------------------------------------------------------------------------------
# simulation job (shared by ``simulate`` and ``reproduce``)
# ----------------------------------------------------------------------------------------


def run_simulation(spec: str, out_dir, t_end: float | None = None, dt: float | None = None,
                   formulation: str = "sr-com", parameters: dict | None = None,
                   options: dict | None = None, history_stride: int | None = 1,
                   plot: bool = True, warm_up: bool = True, progress: bool = False,
                   integrator: str | None = None, rods: dict | None = None) -> dict:
    """Load, simulate and write ``history.csv``, ``plot.png`` and ``summary.json`` to
    ``out_dir``.  Returns the summary dictionary (also written as JSON).
    ``integrator`` and ``rods``: as :func:`workbench.simulate`.

    ``history_stride`` writes every k-th step (None: every
    :data:`SIMULATE_HISTORY_INTERVAL` seconds of simulated time); ``progress`` draws a
    progress bar on a terminal."""

    formulation_code(formulation)            # fail early on a bad name
    t_start = time.perf_counter()
    model = load_model(spec, options, parameters)
    d_end, d_dt = _model_defaults(model)
    t_end = d_end if t_end is None else float(t_end)
    dt = d_dt if dt is None else float(dt)
    cm = model.compile()
    warmup = 0.0
    if warm_up:
        # one step first, so that the reported wall time excludes the just-in-time
        # compilation of the kernels (cached on disk after the first run)
        w0 = time.perf_counter()
        simulate(cm, t_end=dt, dt=dt, formulation=formulation, integrator=integrator,
                 rods=rods)
        warmup = time.perf_counter() - w0
    bar = simulation_bar(f"{model.name}") if progress else None
    try:
        result = simulate(cm, t_end=t_end, dt=dt, formulation=formulation, progress=bar,
                          integrator=integrator, rods=rods)
    finally:
        if bar is not None:
            bar.close()
    total = time.perf_counter() - t_start
    if history_stride is None:
        history_stride = max(1, int(round(SIMULATE_HISTORY_INTERVAL / dt)))

    summary = result.summary()
    span = float(result.t[-1] - result.t[0])
    summary.update({
        "source": spec,
        "options": dict(options or {}),
        "parameters": dict(parameters or {}),
        "t_end": t_end,
        "newton_iterations_per_step": (summary["newton_iterations"] / result.steps
                                       if result.steps else 0.0),
        "real_time_factor": (span / result.wall_time_s if result.wall_time_s > 0
                             else float("inf")),
        "warm_up_time_s": warmup,
        "total_wall_time_s": total,
        "conservative": result.energy is not None,
        "history_stride": history_stride,
    })
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    frame = result.to_frame()
    if history_stride > 1:
        keep = list(range(0, len(frame), history_stride))
        if keep[-1] != len(frame) - 1:
            keep.append(len(frame) - 1)
        frame = frame.iloc[keep]
    frame.to_csv(out / "history.csv", index=False)
    if plot:
        write_plot(result, out / "plot.png")
    summary["files"] = ["history.csv"] + (["plot.png"] if plot else []) + ["summary.json"]
    summary = _json_safe(summary)
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def write_plot(result, path) -> None:
    """Independent coordinates, constraint violation (log) and energy drift vs time."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    conservative = result.energy is not None
    nrow = 3 if conservative else 2
    fig, axes = plt.subplots(nrow, 1, sharex=True, figsize=(8, 2.6 * nrow), squeeze=False)
    axes = axes[:, 0]
    t = result.t
    ax = axes[0]
    shown = min(len(result.dof_names), 8)
    for k in range(shown):
        ax.plot(t, result.zi[:, k], label=result.dof_names[k])
    if shown:
        title = "independent coordinates"
        if shown < len(result.dof_names):
            title += f" (first {shown} of {len(result.dof_names)})"
        ax.set_title(title)
        ax.legend(loc="best", fontsize="small")
    else:
        ax.set_title("no degrees of freedom (fully driven: a kinematic simulation)")
    ax.set_ylabel("z_i")
    ax.grid(True, alpha=0.3)

    ax = axes[1]
    floor = 1e-18
    ax.semilogy(t, np.maximum(result.constraint_violation, floor), label="position: max|Phi|")
    ax.semilogy(t, np.maximum(result.velocity_violation, floor), label="velocity: max|Phi_z zd + Phi_t|",
                alpha=0.7)
    ax.set_ylabel("constraint violation")
    ax.set_title(f"constraint violation (values below {floor:g} drawn at {floor:g})")
    ax.legend(loc="best", fontsize="small")
    ax.grid(True, which="both", alpha=0.3)

    if conservative:
        ax = axes[2]
        ax.plot(t, result.energy - result.energy[0], label="E - E(0)")
        trend = energy_trend(t, result.energy)
        ax.plot([t[0], t[-1]], [0.0, trend], "--", label=f"secular drift {trend:.3g} J")
        ax.set_ylabel("E - E(0)  [J]")
        ax.legend(loc="best", fontsize="small")
        ax.set_title("energy: bounded oscillation of the rule and secular drift (trend)")
        ax.grid(True, alpha=0.3)
    axes[-1].set_xlabel("t  [s]")
    fig.suptitle(f"{result.model}: {result.formulation}, dt = {result.dt:g} s")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _print_summary(s: dict, out_dir, stream=None) -> None:
    stream = sys.stdout if stream is None else stream    # the current stdout, not import-time
    rows = [
        ("model", s["model"] + (f"  (from {s['source']})" if s["source"] != s["model"] else "")),
        ("formulation", f"{s['formulation']}: {s.get('formulation_label', '')}"),
        ("time", f"0 .. {_fmt(s['t_end'], 'g')} s, dt = {_fmt(s['dt'], 'g')} s"),
        ("steps", str(s["steps"])),
        ("Newton iterations", f"{s['newton_iterations']} "
                              f"({_fmt(s['newton_iterations_per_step'], '.2f')}/step, "
                              f"max {s['max_newton_iterations_per_step']})"),
        ("max constraint violation", _fmt(s["max_constraint_violation"])),
        ("energy drift", _fmt(s["energy_drift"]) + (
            f" J secular (trend); max |E - E0| {_fmt(s['energy_error_max'])} J, "
            f"E(end) - E0 {_fmt(s['energy_change'])} J" if s["energy_drift"] is not None
            else "  (not conservative)")),
        ("wall time", f"{_fmt(s['wall_time_s'], '.3f')} s integration, "
                      f"{_fmt(s['total_wall_time_s'], '.3f')} s total (incl. "
                      f"{_fmt(s['warm_up_time_s'], '.3f')} s one-step warm-up/JIT)"),
        ("real-time factor", _fmt(s["real_time_factor"], ".3g")),
        ("output", str(out_dir)),
    ]
    for rev in s.get("dof_revisions") or []:
        rows.insert(-1, ("DOF revised", f"{rev['from']} -> {rev['to']}: the automatic "
                                        f"choice stopped determining the configuration "
                                        f"at t = {_fmt(rev['time'], '.6g')} s; run repeated"))
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"  {k:<{width}}  {v}", file=stream)


# ----------------------------------------------------------------------------------------
# workbench models
# ----------------------------------------------------------------------------------------


def _provenance_summary(text, width: int = 60) -> str:
    text = " ".join(str(text or "").split())
    if not text:
        return "-"
    first = text.split(". ")[0]
    if len(first) > width:
        first = first[: width - 3].rstrip() + "..."
    return first


def _add_models(sub):
    p = sub.add_parser("models", help="list the shipped models",
                       description="Table of the shipped models (name, title, reconstruction "
                                   "flag, provenance).")
    p.add_argument("--json", action="store_true", help="print catalog.describe() of each "
                                                       "model as JSON")
    p.set_defaults(func=_cmd_models)


def _cmd_models(args) -> int:
    infos = [catalog.describe(n) for n in catalog.names()]
    if args.json:
        print(json.dumps(_json_safe(infos), indent=2, default=str))
        return 0
    header = ("name", "title", "reconstruction", "provenance")
    rows = [(str(i.get("name", "")), str(i.get("title", "")),
             "yes" if i.get("reconstruction") else "no",
             _provenance_summary(i.get("provenance"))) for i in infos]
    widths = [max(len(r[c]) for r in [header] + rows) for c in range(4)]
    line = "  ".join("{:<%d}" % w for w in widths)
    print(line.format(*header).rstrip())
    print(line.format(*("-" * w for w in widths)).rstrip())
    for r in rows:
        print(line.format(*r).rstrip())
    return 0


# ----------------------------------------------------------------------------------------
# workbench simulate
# ----------------------------------------------------------------------------------------


def _add_common_sim_args(p):
    p.add_argument("--formulation", default="sr-com", choices=tuple(REGISTRY),
                   help="sr-com: SR-I/RTdyn0, centre-of-mass reference points (default); "
                        "sr-origin: SR-II/RTdyn1, global-origin reference point; "
                        "global: global Matrix-R formulation in natural coordinates (same "
                        "independent coordinates); multipliers, multipliers-origin: the "
                        "semi-recursive equations with the loop closures solved by Lagrange "
                        "multipliers and Baumgarte stabilisation (seed 000; simulation only); "
                        "penalty: loops closed by penalty forces, seed 003 (--penalty); "
                        "rcr: recursive coordinate reduction, O(n + m), seed 004 (the "
                        "trapezoidal rule by Newton steps on the O(n + m) accelerations, or "
                        "--integrator rk4)")
    p.add_argument("--penalty", action="append", default=None, metavar="KEY=VALUE",
                   help="an option of the penalty formulation (repeatable): alpha=1e8, "
                        "jacobian=nd|nd-colored|exact|exact-colored, reuse=3, "
                        "projection=tangent|none, predictor=previous|zero|extrapolated "
                        "(docs/penalty.md)")


def _add_simulate(sub):
    p = sub.add_parser(
        "simulate", help="simulate a model and write history, plot and summary",
        description="Simulate a shipped model or a model file with the implicit trapezoidal "
                    "rule and write DIR/history.csv, DIR/plot.png and DIR/summary.json.")
    p.add_argument("model", metavar="MODEL",
                   help="shipped model name (see `workbench models`) or a .toml/.json file")
    p.add_argument("--t-end", type=_positive("--t-end"), default=None, metavar="T",
                   help=f"end time in s (default: the model's, else {DEFAULT_T_END:g})")
    p.add_argument("--dt", type=_positive("--dt"), default=None, metavar="H",
                   help=f"time step in s (default: the model's, else {DEFAULT_DT:g})")
    _add_common_sim_args(p)
    p.add_argument("--out", default=None, metavar="DIR",
                   help=f"output directory (default: {RUNS_DIR}/simulate/MODEL)")
    p.add_argument("--set", dest="set_", action="append", default=[], metavar="NAME=VALUE",
                   help="override a model parameter (value in the parameter's own unit); "
                        "repeatable")
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="model option, e.g. N=40 for n-four-bar (generator options or "
                        "parameter values); repeatable")
    p.add_argument("--history-stride", type=_positive_int, default=None, metavar="K",
                   help="write every K-th step to history.csv (1: every step; default: "
                        f"every {SIMULATE_HISTORY_INTERVAL:g} s of simulated time)")
    p.add_argument("--no-plot", action="store_true", help="do not write plot.png")
    p.add_argument("--integrator", default=None, choices=("trapezoidal", "rk4"),
                   help="trapezoidal: implicit, the default (and the one of the gradients); "
                        "rk4: explicit fourth-order Runge-Kutta on the independent "
                        "coordinates (seed 002; sr-com, sr-origin; the rule of rcr)")
    p.add_argument("--rods", action="append", default=None, metavar="KEY=VALUE",
                   help="treatment of rod elements (repeatable): mode=exact|extrapolated|"
                        "partitioned (other than exact with --integrator rk4), "
                        "extrapolation=point|linear|quadratic (docs/rods.md)")
    p.set_defaults(func=_cmd_simulate)


def _default_out(spec: str) -> Path:
    name = Path(spec).stem if _is_model_file(spec) else spec
    return Path(RUNS_DIR) / "simulate" / name


def _cmd_simulate(args) -> int:
    parameters = _parse_pairs(args.set_, "--set", numeric=True)
    options = _parse_pairs(args.option, "--option", numeric=False)
    out = Path(args.out) if args.out else _default_out(args.model)
    s = run_simulation(args.model, out, t_end=args.t_end, dt=args.dt,
                       formulation=args.formulation, parameters=parameters, options=options,
                       history_stride=args.history_stride, plot=not args.no_plot,
                       progress=True, integrator=args.integrator,
                       rods=_rod_settings(args.rods))
    print(f"simulated {s['model']}")
    _print_summary(s, out)
    return 0


# ----------------------------------------------------------------------------------------
# workbench sensitivity
# ----------------------------------------------------------------------------------------


def _add_sensitivity(sub):
    p = sub.add_parser(
        "sensitivity", help="objectives and their exact gradient w.r.t. parameters",
        description="Integral objectives declared in the model ([objectives]) and their "
                    "gradient with respect to named parameters, by the direct or adjoint "
                    "method (exact derivatives of the discrete solution, or the seed's "
                    "continuous variant) or central differences.")
    p.add_argument("model", help="shipped model name or path to a .toml/.json model file")
    p.add_argument("--method", default="adjoint", choices=("direct", "adjoint", "fd"))
    p.add_argument("--variant", default="discrete", choices=("discrete", "continuous"))
    p.add_argument("--threads", type=int, default=None,
                   help="threads of the step Jacobians (default: numba's, the cores); "
                        "the gradient does not depend on it")
    p.add_argument("--products", default="auto", choices=("auto", "forward", "reverse"),
                   help="discrete adjoint: step Jacobians by forward tangents, or "
                        "reverse-mode step products without Jacobians (trees and closed "
                        "loops with joint-coordinate DOF, point-coincidence and distance "
                        "closures, gravity, joint and linear point spring-dampers); auto "
                        "(default): reverse where covered and the DOF are many per "
                        "objective")
    p.add_argument("--params", default=None, metavar="P1,P2,...",
                   help="parameters (default: the model's design_parameters)")
    p.add_argument("--out", default=None, metavar="FILE.csv",
                   help="also write the gradient table as CSV")
    p.add_argument("--t-end", type=_positive("--t-end"), default=None, metavar="T",
                   help="end time in s (default: the model's)")
    p.add_argument("--dt", type=_positive("--dt"), default=None, metavar="H",
                   help="time step in s (default: the model's)")
    p.add_argument("--set", dest="set_", action="append", default=[], metavar="NAME=VALUE",
                   help="override a model parameter (own unit); repeatable")
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="model option; repeatable")
    _add_common_sim_args(p)
    p.set_defaults(func=_cmd_sensitivity)


def _cmd_sensitivity(args) -> int:
    model = load_model(args.model, _parse_pairs(args.option, "--option", False),
                       _parse_pairs(args.set_, "--set", True))
    params = [s.strip() for s in args.params.split(",")] if args.params else None
    print(f"[{model.name}] objectives and their gradient by the {args.method} method ...",
          file=sys.stderr, flush=True)
    bar = simulation_bar(f"{model.name} (forward run)")
    try:
        with run_settings(progress=bar):
            res = sensitivity(model, parameters=params, method=args.method,
                              variant=args.variant, formulation=args.formulation,
                              t_end=args.t_end, dt=args.dt, threads=args.threads,
                              products=args.products)
    finally:
        bar.close()
    df = res.to_frame()
    print(f"model {res.model!r}, method {res.method} ({res.variant}), formulation "
          f"{res.formulation}, {len(res.t) - 1} steps")
    print(df.to_string(index=False, float_format=lambda x: f"{x:.8g}"))
    times = {k: v for k, v in res.timings.items()
             if k.endswith("_s") and isinstance(v, float)}
    flags = {k: v for k, v in res.timings.items() if k not in times}

    def flag(v):
        return ("yes" if v is True else "no" if v is False else
                f"{v:.3g}" if isinstance(v, float) else v)
    print("timings: " + ", ".join(f"{k} {v:.3f} s" for k, v in times.items())
          + "".join(f"; {k}: {flag(v)}" for k, v in flags.items()))
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        df.to_csv(args.out, index=False, float_format="%.12g")
        print(f"wrote {args.out}")
    return 0


# ----------------------------------------------------------------------------------------
# workbench equilibrium
# ----------------------------------------------------------------------------------------


def _add_equilibrium(sub):
    p = sub.add_parser(
        "equilibrium", help="static equilibrium of a model (prints the residual)",
        description="Solve the static equilibrium Qbar(z^i) = R^T Q(z, 0) = 0 of a shipped "
                    "model or a model file by Newton's method with the exact stiffness "
                    "(workbench.statics), starting from the model's initial coordinates; "
                    "print the residual max |Qbar|, the iterations and the degrees of "
                    "freedom; with --out write them (and every coordinate) as JSON.")
    p.add_argument("model", metavar="MODEL",
                   help="shipped model name (see `workbench models`) or a .toml/.json file")
    p.add_argument("--set", dest="set_", action="append", default=[], metavar="NAME=VALUE",
                   help="override a model parameter (repeatable)")
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="option of a shipped model (repeatable)")
    p.add_argument("--tol", type=float, default=None,
                   help="tolerance on max |Qbar| (default 1e-10 x total weight)")
    p.add_argument("--out", default=None, metavar="FILE.json", help="write the result")
    _add_common_sim_args(p)
    p.set_defaults(func=_cmd_equilibrium)


def _cmd_equilibrium(args) -> int:
    model = load_model(args.model, _parse_pairs(args.option, "--option", False),
                       _parse_pairs(args.set_, "--set", True), prepare=False)
    t0 = time.perf_counter()
    eq = equilibrium(model, formulation=args.formulation, tol=args.tol)
    wall = time.perf_counter() - t0
    print(f"model {eq.model!r}: static equilibrium, residual max |Qbar| = {eq.residual:.3e} "
          f"(tolerance {eq.tolerance:.3e}) after {eq.iterations} Newton iterations, "
          f"{wall:.2f} s")
    for nm, v in zip(eq.dof_names, eq.zi):
        print(f"  {nm:<24s} {v: .9g}")
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        data = _json_safe({**eq.summary(), "formulation": args.formulation,
                           "wall_time_s": wall})
        out.write_text(json.dumps(data, indent=2) + "\n")
        print(f"wrote {out}")
    return 0


# ----------------------------------------------------------------------------------------
# workbench reproduce (the main job)
# ----------------------------------------------------------------------------------------


def _add_reproduce(sub):
    p = sub.add_parser(
        "reproduce", help="main job: simulate every shipped model, write an index",
        description="Simulate the shipped models on their default settings (n-four-bar with "
                    "N=40, 20 s, dt 1e-3) and write DIR/simulate/<model>/ for each model and "
                    "an index DIR/README.md; then the five-bar gradient report "
                    "DIR/five-bar/ (gradients.csv, timings.json, report.md, figure).  "
                    "then the double-lane-change gradient report DIR/buggy-dlc/ "
                    "(reconstruction; gradients.csv, timings.json, report.md, figures, "
                    "step-size study); 'workbench reproduce buggy-step' writes the "
                    "step-descent report DIR/buggy-step/ (about 2 minutes once the kernels "
                    "are compiled).  "
                    "'workbench reproduce five-bar' (buggy-step, buggy-dlc) runs only that "
                    "gradient report, 'workbench reproduce simulate' only the simulations, "
                    "'workbench reproduce penalty' the comparison of seed 003 (penalty "
                    "formulation, four Jacobian methods) in DIR/penalty/, "
                    "'workbench reproduce rods' seed 002's Tables 4-6 (rods as elements, "
                    "RK4, the sedan slalom) in DIR/rods/, 'workbench reproduce rcr' seed "
                    "004's five-bar (ACS and GCL runs) and the N-four-bar through RCR "
                    "against Matrix-R in DIR/rcr/.")
    p.add_argument("target", nargs="?", default="all",
                   choices=("all", "simulate", "five-bar", "buggy-step", "buggy-dlc",
                            "penalty", "rods", "rcr"),
                   help="what to reproduce (default: all)")
    p.add_argument("--out", default="reports", metavar="DIR",
                   help="output directory (default: reports)")
    p.add_argument("--quick", action="store_true",
                   help=f"smoke test: end every run at {QUICK_T_END:g} s")
    _add_common_sim_args(p)
    p.set_defaults(func=_cmd_reproduce)


def _quick_t_end(t_end: float, dt: float) -> float:
    n = max(1, int(round(min(t_end, QUICK_T_END) / dt)))
    return n * dt


def _cmd_reproduce(args) -> int:
    out = Path(args.out)
    produced = []                       # the Markdown reports this run writes (provenance)
    if args.target in ("all", "simulate"):
        produced.append(out / "README.md")
        _reproduce_simulations(args, out)
    if args.target in ("all", "five-bar"):
        from workbench.apps.reports import five_bar
        print("[five-bar] gradients of psi1-psi3: direct, adjoint (discrete and continuous), "
              "central differences ...", flush=True)
        t_end = 1.0 if args.quick else None
        tm = five_bar(out / "five-bar", formulation=args.formulation, t_end=t_end)
        produced.append(out / "five-bar" / "report.md")
        print(f"wrote {out / 'five-bar'}/ (gradients.csv, timings.json, report.md); "
              f"simulation {tm['simulation_s']:.2f} s, direct {tm['direct_s']:.2f} s, "
              f"adjoint {tm['adjoint_s']:.2f} s, fd {tm['fd_s']:.2f} s; global: simulation "
              f"{tm['simulation_global_s']:.2f} s, direct {tm['direct_global_s']:.2f} s, "
              f"adjoint {tm['adjoint_global_s']:.2f} s")
    for name in ("buggy-step", "buggy-dlc"):
        if args.target != name and not (args.target == "all" and name in REPRODUCE_ALL_BUGGY):
            continue
        from workbench.apps.buggy_reports import buggy
        print(f"[{name}] (reconstruction) gradients of psi: direct, adjoint (discrete and "
              "continuous), central differences, step-size study ...", flush=True)
        t_end = QUICK_BUGGY_T_END[name] if args.quick else None
        tm = buggy(name, out / name, formulation=args.formulation, t_end=t_end)
        produced.append(out / name / "report.md")
        print(f"wrote {out / name}/ (gradients.csv, timings.json, report.md, figures); "
              f"simulation {tm['simulation_s']:.2f} s, direct {tm['direct_s']:.2f} s, "
              f"adjoint {tm['adjoint_s']:.2f} s, fd {tm['fd_s']:.2f} s, real-time factor "
              f"(dynamics + adjoint gradient) {tm['real_time_factor']:.2f} (median of "
              f"{len(tm['real_time_factor_repeats'])} repetitions "
              f"{tm['real_time_factor_median']:.2f}, best {tm['real_time_factor_best']:.2f}); "
              "global: "
              f"simulation {tm['simulation_global_s']:.2f} s, direct "
              f"{tm['direct_global_s']:.2f} s, adjoint {tm['adjoint_global_s']:.2f} s")
    if args.target in ("all", "penalty"):
        from workbench.apps.penalty_report import penalty_report
        print("[penalty] seed 003: four Jacobian methods on the spatial four-bar, the "
              "four-bar grids and the coach ...", flush=True)
        meta = penalty_report(out / "penalty", quick=args.quick,
                              log=lambda msg: print(msg, flush=True))
        produced.append(out / "penalty" / "report.md")
        print(f"wrote {out / 'penalty'}/ (runs.csv, sparsity.csv, alpha.csv, report.md, "
              f"times.png) in {meta['total_s']:.1f} s")
    if args.target in ("all", "rods"):
        from workbench.apps.rods_report import rods_report
        print("[rods] seed 002: the sedan slalom with RK4, rods exact, extrapolated and "
              "partitioned (Tables 4-6) ...", flush=True)
        meta = rods_report(out / "rods", quick=args.quick,
                           log=lambda msg: print(msg, flush=True))
        produced.append(out / "rods" / "report.md")
        print(f"wrote {out / 'rods'}/ (table4.csv, table5.csv, table6.csv, orders.csv, "
              f"report.md, errors.png) in {meta['total_s']:.1f} s")
    if args.target in ("all", "rcr"):
        from workbench.apps.rcr_report import rcr_report
        print("[rcr] seed 004: the five-bar (ACS and GCL runs) and the N-four-bar through "
              "RCR against Matrix-R ...", flush=True)
        meta = rcr_report(out / "rcr", quick=args.quick, log=lambda msg: print(msg, flush=True))
        produced.append(out / "rcr" / "report.md")
        print(f"wrote {out / 'rcr'}/ (five_bar.csv, summary.csv, fig7.png, report.md) in "
              f"{meta['total_s']:.1f} s")
    _publish(args, out, produced)
    return 0


def _reproduce_simulations(args, out: Path) -> None:
    rows, failures = [], []
    started = time.strftime("%Y-%m-%d %H:%M:%S")
    t0 = time.perf_counter()
    for name, options, t_end, dt in REPRODUCE_RUNS:
        info = {}
        try:
            info = catalog.describe(name)
            if t_end is None or dt is None:
                d_end, d_dt = _model_defaults(catalog.load(name, **options))
                t_end = d_end if t_end is None else t_end
                dt = d_dt if dt is None else dt
            if args.quick:
                t_end = _quick_t_end(t_end, dt)
            stride = max(1, int(round(REPRODUCE_HISTORY_INTERVAL / dt)))
            opt_txt = "".join(f" {k}={v}" for k, v in options.items())
            print(f"[{name}{opt_txt}] t_end = {t_end:g} s, dt = {dt:g} s ...", flush=True)
            s = run_simulation(name, out / "simulate" / name, t_end=t_end, dt=dt,
                               formulation=args.formulation, options=options,
                               history_stride=stride)
            _print_summary(s, out / "simulate" / name)
            rows.append((name, info, options, s, None))
        except (WorkbenchError, ValueError, CLIError) as exc:
            msg = " ".join(str(exc).split())
            print(f"error: {name}: {msg}", file=sys.stderr)
            rows.append((name, info, options, None, msg))
            failures.append(name)
    total = time.perf_counter() - t0
    _write_index(out, rows, args, started, total)
    print(f"wrote {out / 'README.md'} ({len(rows) - len(failures)}/{len(rows)} models ok, "
          f"{total:.1f} s)")
    if failures:
        raise CLIError(f"{len(failures)} of {len(rows)} models failed: {', '.join(failures)}")


def _write_index(out: Path, rows, args, started: str, total: float) -> None:
    out.mkdir(parents=True, exist_ok=True)
    lines = [
        "# workbench reproduce",
        "",
        f"Generated by `workbench reproduce{' --quick' if args.quick else ''}"
        f"{'' if args.formulation == 'sr-com' else ' --formulation ' + args.formulation}` "
        f"on {started} (workbench {__version__}, Python {platform.python_version()}, "
        f"{platform.machine()}); total {total:.1f} s.",
        "",
        f"Formulation: `{args.formulation}`; fixed-step implicit trapezoidal rule. "
        "Max violation is max |Phi| (position level) over all steps; energy drift is "
        "the secular drift (least-squares trend of E(t) times the duration) and max "
        "|E - E0| the drift plus the trapezoidal rule's bounded O(h^2) oscillation, for "
        "conservative models (`-` otherwise); wall time is the "
        "integration time (excluding compilation).  history.csv is written every "
        f"{REPRODUCE_HISTORY_INTERVAL:g} s.",
        "",
        "| model | options | reconstruction? | t_end [s] | dt [s] | steps | Newton it. "
        "| max violation | energy drift [J] | max abs(E - E0) [J] | wall time [s] "
        "| real-time factor | results |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, info, options, s, err in rows:
        rec = "yes" if info.get("reconstruction") else ("no" if info else "?")
        opts = ", ".join(f"{k}={v}" for k, v in options.items()) or "-"
        if s is None:
            lines.append(f"| {name} | {opts} | {rec} | | | | | | | | | | FAILED: "
                         f"{err.replace('|', '/')} |")
            continue
        link = f"simulate/{name}/"
        lines.append(
            f"| {name} | {opts} | {rec} | {_fmt(s['t_end'], 'g')} | {_fmt(s['dt'], 'g')} "
            f"| {s['steps']} | {s['newton_iterations']} "
            f"| {_fmt(s['max_constraint_violation'])} | {_fmt(s['energy_drift'])} "
            f"| {_fmt(s.get('energy_error_max'))} "
            f"| {_fmt(s['wall_time_s'], '.3f')} | {_fmt(s['real_time_factor'], '.3g')} "
            f"| [summary]({link}summary.json), [plot]({link}plot.png), "
            f"[history]({link}history.csv) |")
    recon = [name for name, info, *_ in rows if info.get("reconstruction")]
    if recon:
        lines += ["", "Models marked *reconstruction* are rebuilt from published descriptions, "
                      "not official benchmark data: " + ", ".join(recon) + "."]
    (out / "README.md").write_text("\n".join(lines) + "\n")


# ----------------------------------------------------------------------------------------
# entry point
# ----------------------------------------------------------------------------------------

#: Sub-command registrars, in the order shown by ``workbench --help``.


# ----------------------------------------------------------------------------------------
# workbench bench (measured, not tested)
# ----------------------------------------------------------------------------------------


def _add_bench(sub):
    p = sub.add_parser(
        "bench", help="benchmarks: gradient cost, closed-loop scaling, peers",
        description="'workbench bench sensitivity' times, in one run, the simulation, the "
                    "direct and adjoint gradients and central differences on the five-bar "
                    "(p = 5) and on a generated closed chain with p = 5 and p = 50 "
                    "parameters, and prints them as ratios to the simulation.  "
                    "'workbench bench scaling' times the closed-loop acceleration solve, "
                    "RCR (seed 004) against Matrix-R, on the N-four-bar and on a chain "
                    "closed once of growing size, and prints the fitted exponents and the "
                    "crossover (with --out: DIR/scaling.csv and DIR/scaling.png).  "
                    "'workbench bench peers' times the workbench beside JAX, Pinocchio and "
                    "MuJoCo on identical models (open chains n = 5 and 20, a 10-link closed "
                    "chain) and the buggy lane change on one core, with how each peer's "
                    "trajectory compares with ours (with --out: DIR/peers.json and "
                    "DIR/peers.md; the peers are optional: pip install workbench[peers]).")
    p.add_argument("what", choices=("sensitivity", "scaling", "peers"),
                   help="which benchmark")
    p.add_argument("--quick", action="store_true",
                   help="peers: short horizons, chain n = 5 only, at most 2 runs (a smoke "
                        "run, not the table)")
    p.add_argument("--families", default=None, metavar="F[,F]",
                   help="scaling: n-four-bar, closed-chain, ladder, ladder-ground (default "
                        "all)")
    p.add_argument("--sizes", default=None, metavar="S[,S...]",
                   help="scaling: loop counts N / link counts / ladder cells (default "
                        "10,30,100,300,1000; ladders 3,10,30,100,300 and 3,10,30,100)")
    p.add_argument("--t-end", type=float, default=5.0, help="five-bar end time (default 5)")
    p.add_argument("--chain-t-end", type=float, default=2.0,
                   help="closed-chain end time (default 2)")
    p.add_argument("--dt", type=float, default=1e-3, help="time step (default 1e-3)")
    p.add_argument("--formulation", default="sr-com", choices=tuple(REGISTRY))
    p.add_argument("--out", default=None, metavar="DIR",
                   help="also write DIR/bench.json (scaling: DIR/scaling.csv, .png; peers: "
                        "DIR/peers.json, DIR/peers.md)")
    p.add_argument("--repeat", type=_positive_int, default=5,
                   help="sensitivity, peers: each timing is the median of this many runs "
                        "(default 5); scaling: the best of this many timing loops (default 7)")
    p.set_defaults(func=_cmd_bench)


def _cmd_bench(args) -> int:
    if args.quick and args.what != "peers":
        raise CLIError("--quick belongs to 'workbench bench peers'")
    if args.what == "peers":
        from workbench.apps.peers_bench import bench_peers
        bench_peers(quick=args.quick, out=args.out, repeat=args.repeat)
        return 0
    if args.what == "scaling":
        from workbench.apps.rcr_scaling import FAMILIES, bench_scaling
        fams = tuple(args.families.split(",")) if args.families else tuple(FAMILIES)
        for f in fams:
            if f not in FAMILIES:
                raise CLIError(f"--families: unknown family {f!r}; known: {tuple(FAMILIES)}")
        try:
            sizes = (tuple(int(s) for s in args.sizes.split(",")) if args.sizes else None)
        except ValueError:
            raise CLIError(f"--sizes: integers separated by commas, got {args.sizes!r}")
        if sizes is not None and (len(sizes) < 2 or min(sizes) < 2):
            raise CLIError("--sizes: at least two sizes, each >= 2")
        # --repeat given: the best of that many timing loops per point (default 7)
        repeats = args.repeat if any(a.startswith("--repeat") for a in args.argv) else 7
        bench_scaling(fams, sizes, out=args.out, repeats=repeats)
        return 0
    from workbench.apps.bench import bench_sensitivity
    bench_sensitivity(t_end=args.t_end, dt=args.dt, chain_t_end=args.chain_t_end,
                      formulation=args.formulation, out=args.out, repeat=args.repeat)
    return 0


def _add_warm(sub):
    p = sub.add_parser(
        "warm", help="compile the numerical kernels into the cache, on every core",
        description="Compile the numba kernels of every formulation, the vehicles, rods, "
                    "RK4 and statics into numba's on-disk cache, running groups of short "
                    "workloads in parallel worker processes (run once after installing: "
                    "the first simulation and gradient then start at once).  Writes "
                    "nothing but the cache.")
    p.add_argument("--jobs", type=_positive_int, default=None,
                   help="worker processes (default: the cores)")
    p.set_defaults(func=_cmd_warm)


def _cmd_warm(args) -> int:
    from workbench.apps.warm import warm
    warm(jobs=args.jobs)
    return 0


# ----------------------------------------------------------------------------------------
# workbench study / report
# ----------------------------------------------------------------------------------------


def _add_study(sub):
    p = sub.add_parser(
        "study", help="run an optimisation study (OpenMDAO, exact gradients)",
        description="Run a shipped study with ScipyOptimizeDriver and analytic gradients, "
                    "record every evaluation in DIR/NAME/cases.db as it happens and write "
                    "summary.json, report.md and report.html (with a gradient check and the "
                    "same run with finite-difference gradients).  A design whose analysis "
                    "fails is recorded and the optimiser steps back; an existing recording "
                    "is never replaced unless --overwrite is given; --resume continues an "
                    "interrupted one.  Studies: five-bar-design, buggy-suspension.")
    p.add_argument("name", help="study name")
    p.add_argument("--optimizer", default="SLSQP", choices=("SLSQP", "L-BFGS-B"))
    p.add_argument("--out", default=RUNS_DIR, metavar="DIR",
                   help=f"output folder (default: {RUNS_DIR}; the shipped reports/ are "
                        "regenerated with --out reports --overwrite)")
    p.add_argument("--subdir", default=None, metavar="SUB",
                   help="write into DIR/NAME/SUB instead of DIR/NAME (e.g. one folder per "
                        "optimizer)")
    what = p.add_mutually_exclusive_group()
    what.add_argument("--overwrite", action="store_true",
                      help="replace an existing recording in the output folder")
    what.add_argument("--resume", action="store_true",
                      help="continue the interrupted recording in the output folder (same "
                           "options): recorded evaluations are replayed, not recomputed")
    p.add_argument("--maxiter", type=_positive_int, default=50)
    p.add_argument("--t-end", type=_positive("--t-end"), default=None, metavar="T")
    p.add_argument("--dt", type=_positive("--dt"), default=None, metavar="H")
    p.add_argument("--formulation", default=None, choices=tuple(REGISTRY),
                   help="dynamics formulation (default sr-com)")
    p.add_argument("--no-fd-comparison", action="store_true",
                   help="skip the comparison run with finite-difference gradients")
    p.add_argument("--starts", type=_positive_int, default=1,
                   help="K independent starts (Latin hypercube in the bounds) on Dask")
    p.add_argument("--workers", type=_positive_int, default=2,
                   help="local Dask workers (processes, at least 1)")
    p.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="join an existing Dask cluster instead of a local one")
    p.set_defaults(func=_cmd_study)


def _cmd_study(args) -> int:
    from studies import STUDIES, run_study
    if args.name not in STUDIES:
        raise UnknownNameError("study", args.name, list(STUDIES))
    kw = {k: v for k, v in (("t_end", args.t_end), ("dt", args.dt),
                            ("formulation", args.formulation)) if v is not None}
    existing = "overwrite" if args.overwrite else "resume" if args.resume else "error"
    echo = lambda s: print(s, flush=True)                                   # noqa: E731
    started = time.time()
    if args.starts > 1:
        from studies.multistart import run_multistart
        run_multistart(args.name, args.optimizer, args.starts, workers=args.workers,
                       scheduler=args.scheduler, out=args.out, maxiter=args.maxiter,
                       echo=echo, existing=existing, **kw)
        d = Path(args.out) / args.name
        _publish(args, args.out, [d / "starts.md"] + [d / f"start-{k}" / "report.md"
                                                      for k in range(args.starts)])
        return 0
    spec = STUDIES[args.name](**kw)
    report = Path(args.out) / args.name / (args.subdir or "") / "report.md"
    try:
        run_study(spec, args.optimizer, out=args.out, maxiter=args.maxiter,
                  compare_fd=not args.no_fd_comparison, echo=echo, subdir=args.subdir,
                  existing=existing, source={"builder": args.name, "kwargs": kw})
    except (WorkbenchError, KeyboardInterrupt):
        # a study that stopped has written the report of what it did: publish it too
        if report.exists() and report.stat().st_mtime >= started:
            _publish(args, args.out, [report])
        raise
    _publish(args, args.out, [report])
    return 0


def _add_report(sub):
    p = sub.add_parser("report", help="regenerate a study report from its cases.db",
                       description="Regenerate report.md/report.html and figures of a study "
                                   "from its recording DIR/NAME/cases.db alone (also of an "
                                   "interrupted run: the best design so far).")
    p.add_argument("db", help="path to cases.db")
    p.set_defaults(func=_cmd_report)


def _cmd_report(args) -> int:
    from studies import report_from_db
    from workbench.apps.site import site_root
    out = report_from_db(args.db)
    _publish(args, site_root(args.db), [Path(out) / "report.md"])
    return 0


def _publish(args, root, produced) -> None:
    """Record this command as the producer of the Markdown reports ``produced`` and rebuild
    the report site under ``root`` (index.html and a page per report)."""
    from workbench.apps.site import publish
    pages = publish(root, getattr(args, "argv", None), produced)
    print(f"wrote the report site {pages[0]} ({len(pages)} pages)")


_COMMANDS = (_add_models, _add_simulate, _add_sensitivity, _add_equilibrium, _add_reproduce,
             _add_bench, _add_study, _add_report, _add_warm)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="workbench",
        description="Multibody-dynamics design-optimization workbench (semi-recursive "
                    "Matrix-R dynamics, implicit trapezoidal rule).")
    parser.add_argument("--version", action="version", version=f"workbench {__version__}")
    parser.add_argument("--traceback", action="store_true",
                        help="show the full traceback of errors (debugging)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for add in _COMMANDS:
        add(sub)
    return parser


def _quiet_numba() -> None:
    """Hide numba's performance hints printed while the kernels compile."""
    import warnings
    try:
        from numba.core.errors import NumbaPerformanceWarning
    except ImportError:                                       # pragma: no cover
        return
    warnings.filterwarnings("ignore", category=NumbaPerformanceWarning)


#: exit statuses (docs/cli.md): 0 done, 2 bad input or failed job (one ``error:`` line),
#: 3 internal error (a bug: one ``error:`` line, the traceback with --traceback), 130
#: interrupted (Ctrl-C)
EXIT_OK, EXIT_ERROR, EXIT_INTERNAL, EXIT_INTERRUPTED = 0, 2, 3, 130


def _rod_settings(items) -> dict | None:
    """``--rods KEY=VALUE`` options as a dict (checked by
    :func:`workbench.integrators.simulation.rod_settings`)."""
    if not items:
        return None
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise CLIError(f"--rods {item!r}: expected KEY=VALUE, e.g. mode=partitioned")
        out[key.strip()] = value.strip()
    return out


def _penalty_settings(items) -> dict:
    """``--penalty KEY=VALUE`` options as a dict (numbers where the option is one; the
    values are checked by :func:`workbench.integrators.simulation.penalty_options`)."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise CLIError(f"--penalty {item!r}: expected KEY=VALUE, e.g. alpha=1e9")
        key = key.strip()
        if key == "alpha":
            try:
                out[key] = float(value)
            except ValueError:
                raise CLIError(f"--penalty alpha={value!r}: not a number") from None
        elif key == "reuse":
            try:
                out[key] = int(value)
            except ValueError:
                raise CLIError(f"--penalty reuse={value!r}: not an integer") from None
        else:
            out[key] = value.strip()
    return out


def main(argv=None) -> int:
    """Run the CLI; returns the exit status (:data:`EXIT_OK` ... :data:`EXIT_INTERRUPTED`)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)   # named on the report pages
    _quiet_numba()
    watch_compilation()
    try:
        if getattr(args, "penalty", None):
            from workbench.integrators.simulation import run_settings
            with run_settings(penalty=_penalty_settings(args.penalty)):
                return int(args.func(args) or 0)
        return int(args.func(args) or 0)
    except (WorkbenchError, ValueError, CLIError, OSError) as exc:
        if args.traceback:
            raise
        msg = " ".join(str(exc).split()) or type(exc).__name__
        compile_report()          # before the error: the error is the last line
        print(f"error: {msg}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        compile_report()
        print("error: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:                              # noqa: BLE001 - a bug: no traceback
        if args.traceback:
            raise
        msg = " ".join(str(exc).split()) or type(exc).__name__
        compile_report()
        print(f"error: internal error ({type(exc).__name__}): {msg} (run again with "
              "--traceback for the details, and please report it)", file=sys.stderr)
        return EXIT_INTERNAL
    finally:
        compile_report()


if __name__ == "__main__":
    sys.exit(main())
