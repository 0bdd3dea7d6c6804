"""Vehicle maneuvers as data (issue 24, item 5): a maneuver replaces the time function of a
vehicle model's driven steering coordinate, sets the initial speed and the default
``t_end``/``dt``, and adds its own parameters (units, provenance).

>>> from workbench.apps.vehicle import maneuver, prepare     # or workbench.maneuver
>>> m = maneuver(catalog.load("buggy-step"), "slalom", speed=8.0, spacing=18.0)
>>> sim = workbench.simulate(prepare(m), m.meta["t_end"], m.meta["dt"])

The same in a model file (expanded at load by :func:`workbench.model.files.model_from_dict`,
which calls :func:`maneuver` through the hook this module registers with
:func:`workbench.model.files.register_maneuvers`: the model layer cannot import this one,
which solves position problems)::

    base = "buggy-step.toml"
    [maneuver]
    kind = "slalom"
    speed = 8.0
    spacing = {value = 18, unit = "m"}

Kinds (:data:`MANEUVERS`; docs/maneuvers.md): ``iso3888-1`` (double lane change),
``iso3888-2`` (obstacle avoidance), ``slalom``, ``sine-steer``, ``step-steer``,
``constant-radius``.  By default every steering input is OPEN LOOP: a prescribed C2
function of time (sums of quintic steps, or one quintic ramp) on the steering coordinate.
``driver="path"`` (``iso3888-1``, ``iso3888-2``, ``slalom``) steers CLOSED LOOP instead: the
steering drive is removed and a path follower (:meth:`Model.path_follower`, a stateless
pure-pursuit servo on the steering coordinate, :func:`_install_path_driver`) follows the
maneuver's centre line, given as quintic steps in x.  Wheel-steer angles
are mapped to the steering coordinate through the linkage ratio ``G = d(wheel steer) /
d(steering coordinate)`` measured on the model by :func:`steering_geometry` (position
problem solved at +- a small travel), unless the option ``ratio`` states it.

Amplitudes come from the linear kinematic bicycle model (no slip): yaw rate ``v delta /
L``, heading ``psi = (v/L) int delta``, lateral position ``y = v int psi``, with ``L`` the
wheelbase measured between the steered and the other tire centres.  For a quintic step of
``dy`` over ``[a, a + h]`` the integrals are exact polynomials (:func:`_int1`,
:func:`_int2`), so the design values are exact for the prescribed input.

Options given to :func:`maneuver` override; otherwise a parameter named in ``keep`` and
present in the model is kept (a model file keeps the parameters it declares itself: that
is how ``buggy-dlc.toml`` pins its documented, rounded values); otherwise the maneuver's
default.  Derived parameters (times, steering amplitudes) are computed unless kept; the
computed values are always recorded in ``meta["maneuver"]["derived"]`` so a pinned value
can be compared with its derivation.  Times of the inputs are numbers fixed when the
maneuver is applied (like the ``x0``/``v0`` load-time fields of the vehicle files); the
steering amplitudes are parameters bound into the drive's time function, hence
differentiable design parameters.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import numpy as np

from workbench.errors import ModelError
from workbench.model import files
from workbench.model.builder import Model
from workbench.model.elements import COORD_SUFFIX, GROUND, Drive, Road, TimeFunction, numeric_value
from workbench.model.units import UNITS, dimension_of

__all__ = ["maneuver", "steering_geometry", "steering_inertia", "path_radius", "MANEUVERS",
           "PATH_KINDS", "quintic_steps"]

#: wheel-steer travel used to measure the linkage ratio (rad of wheel steer, mapped to the
#: coordinate through a first estimate; about the buggy's 0.1 mm of rack travel)
_PROBE_STEER = 1e-3


# ----------------------------------------------------------------------------------------
# quintic steps and the kinematic bicycle model (exact integrals)
# ----------------------------------------------------------------------------------------


def _s(u):
    u = np.clip(u, 0.0, 1.0)
    return u ** 3 * (10.0 - 15.0 * u + 6.0 * u * u)


def _int1(t, a, b):
    """``int_0^t s((x - a)/(b - a)) dx`` of the unit quintic step (C2) on ``[a, b]``."""
    t = np.asarray(t, float)
    h = b - a
    u = np.clip((t - a) / h, 0.0, 1.0)
    inside = h * (2.5 * u ** 4 - 3.0 * u ** 5 + u ** 6)
    return np.where(t >= b, h / 2 + (t - b), inside)


def _int2(t, a, b):
    """``int_0^t int_0^x s`` = ``int_0^t (t - x) s((x - a)/(b - a)) dx``."""
    t = np.asarray(t, float)
    h = b - a
    u = np.clip((t - a) / h, 0.0, 1.0)
    inside = h * h * (0.5 * u ** 5 - 0.5 * u ** 6 + u ** 7 / 7.0)
    after = h * ((t - a) / 2 - h * 5.0 / 14.0) + (t - b) ** 2 / 2
    return np.where(t >= b, after, inside)


def quintic_steps(steps, t):
    """Value, first and second time integral at ``t`` of ``sum dy s((t - a)/(b - a))``
    for ``steps = [(a, b, dy), ...]`` (numbers): the wheel-steer input, and (times v/L,
    v^2/L) the heading and lateral position of the kinematic bicycle model."""
    t = np.asarray(t, float)
    f = np.zeros_like(t)
    i1 = np.zeros_like(t)
    i2 = np.zeros_like(t)
    for a, b, dy in steps:
        f = f + dy * _s((t - a) / (b - a))
        i1 = i1 + dy * _int1(t, a, b)
        i2 = i2 + dy * _int2(t, a, b)
    return f, i1, i2


def _peaks_to_steps(t_first, t_peaks, values, t_last):
    """Quintic transitions 0 -> values[0] over [t_first, t_peaks[0]], values[i] ->
    values[i+1] between successive peak times, values[-1] -> 0 over [t_peaks[-1],
    t_last]: ``[(a, b, dy), ...]`` (a C2 stand-in for a sine whose peaks and zero crossings
    fall at the same instants)."""
    out = [(t_first, t_peaks[0], values[0])]
    for k in range(len(values) - 1):
        out.append((t_peaks[k], t_peaks[k + 1], values[k + 1] - values[k]))
    out.append((t_peaks[-1], t_last, -values[-1]))
    return out


# ----------------------------------------------------------------------------------------
# the vehicle: steering drive, linkage ratio, wheelbase
# ----------------------------------------------------------------------------------------


def _err(kind, msg):
    return ModelError(f"maneuver {kind!r}: {msg}")


def _steering_drive(model: Model, name: str | None, kind: str = "?"):
    if name is None:
        name = "steering"
    if name not in model.drives:
        raise _err(kind, f"option 'drive': the model {model.name!r} has no drive {name!r} "
                         f"(drives: {', '.join(model.drives) or 'none'}); a maneuver needs a "
                         f"driven steering coordinate")
    dr = model.drives[name]
    jt = model.joints[dr.joint].type
    if jt not in ("prismatic", "revolute"):
        raise _err(kind, f"option 'drive': drive {name!r} drives a {jt} joint; the steering "
                         f"coordinate must be a prismatic (rack) or revolute (lever) joint")
    return dr, ("m" if jt == "prismatic" else "rad")


def _tire_points(model: Model):
    """``[(tire, body, local centre, local axis)]`` with local coordinates resolved to
    numbers (SI values of the parameters)."""
    vals = {n: p.si_value for n, p in model.parameters.items()}
    out = []
    for t in model.tires.values():
        b = model.bodies[t.body]
        c = b.points[t.center] if isinstance(t.center, str) else t.center
        a = b.vectors[t.axis] if isinstance(t.axis, str) else t.axis
        c = [numeric_value(x, vals, f"tire {t.name} centre") for x in c]
        a = [numeric_value(x, vals, f"tire {t.name} axis") for x in a]
        out.append((t.name, t.body, c, a))
    return out


def steering_geometry(model: Model, drive: str | None = None, kind: str = "?") -> dict:
    """Measure on ``model`` (its initial configuration, degrees of freedom held) the
    linkage ratio ``ratio = d(wheel steer)/d(steering coordinate)`` (rad per m of rack or
    per rad of lever: central difference of the position problem solved at +- a small
    steering travel, averaged over the steered wheels), the steered tires, the wheelbase
    (mean x of the steered tire centres minus that of the others), the initial x of the
    front axle and the track (largest y distance of two tire centres).

    Wheel steer is the heading of the spin axis in the ground x-y plane (positive: to the
    left, about +z); the vehicle is assumed to point along +x at the start."""
    from workbench.formulations.semirecursive.state import state_terms
    from workbench.integrators.result_kinematics import point_history

    dr, unit = _steering_drive(model, drive, kind)
    tires = _tire_points(model)
    if not tires:
        raise _err(kind, f"the model {model.name!r} has no tires")

    def config(travel):
        m = copy.deepcopy(model)
        m.drives[dr.name] = Drive(dr.name, dr.joint, TimeFunction.constant(float(travel)),
                                  dr.index)
        cm = m.compile()
        st = state_terms(cm, 0.0)
        z = st.z[None, :]
        zero = np.zeros_like(z)
        rows = []
        for _, body, c, a in tires:
            pc = point_history(cm, z, zero, zero, body, c)[0][0]
            pa = point_history(cm, z, zero, zero, body, np.asarray(c) + np.asarray(a))[0][0]
            rows.append((pc, pa - pc))
        return rows

    def headings(rows):
        return np.array([math.atan2(-ax[0], ax[1]) if ax[1] >= 0 else
                         math.atan2(ax[0], -ax[1]) for _, ax in rows])

    eps = _PROBE_STEER / 8.0 if unit == "m" else _PROBE_STEER      # ~ 0.1 mm / 1 mrad
    plus, minus, mid = config(eps), config(-eps), config(0.0)
    dpsi = (headings(plus) - headings(minus)) / (2 * eps)
    big = np.max(np.abs(dpsi))
    if not big > 0:
        raise _err(kind, f"the drive {dr.name!r} does not steer any tire of {model.name!r}")
    steered = np.abs(dpsi) > 1e-3 * big
    ratio = float(np.mean(dpsi[steered]))
    xs = np.array([pc[0] for pc, _ in mid])
    ys = np.array([pc[1] for pc, _ in mid])
    if steered.all():
        raise _err(kind, "every tire is steered: no wheelbase (all-wheel steering is not "
                         "supported)")
    wheelbase = float(np.mean(xs[steered]) - np.mean(xs[~steered]))
    if not wheelbase > 0:
        raise _err(kind, "the steered wheels are not ahead of the others (+x forward)")
    return {"drive": dr.name, "joint": dr.joint, "unit": unit, "ratio": ratio,
            "ratio_unit": f"rad/{unit}",
            "steered": [t[0] for t, s in zip(tires, steered) if s],
            "wheelbase": wheelbase, "x_front": float(np.mean(xs[steered])),
            "track": float(ys.max() - ys.min()), "y_mid": float(0.5 * (ys.max() + ys.min())),
            "probe": eps}


# ----------------------------------------------------------------------------------------
# options and parameters
# ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Option:
    """A maneuver option: key, dimension, default (a number, None = computed from the
    vehicle, see the maneuver), the parameter it becomes (or None: meta only), unit and
    description (the provenance's text)."""

    key: str
    dimension: str
    default: float | None
    param: str | None
    unit: str | None
    text: str
    positive: bool = True
    integer: bool = False


_COMMON = (
    Option("speed", "velocity", None, "v0", "m/s",
           "initial forward speed (the wheels start rolling without slip at it; a speed "
           "controller bound to v0 holds it); default: the model's v0"),
    Option("t_end", "time", None, None, "s", "end of the simulation (meta t_end)"),
    Option("dt", "time", None, None, "s", "time step (meta dt); default: the model's"),
    Option("ratio", "dimensionless", None, None, None,
           "linkage ratio d(wheel steer)/d(steering coordinate); default: measured",
           positive=False),
    Option("wheelbase", "length", None, None, "m", "wheelbase; default: measured"),
)


def _to_si(kind, opt: Option, v):
    if isinstance(v, dict) and "value" in v and set(v) <= {"value", "unit"}:
        unit, val = v.get("unit"), v["value"]
        if unit is not None:
            try:
                dim = dimension_of(unit)
            except ModelError as exc:
                raise _err(kind, f"option {opt.key!r}: {exc}") from None
            if dim != opt.dimension:
                raise _err(kind, f"option {opt.key!r}: unit {unit!r} is a {dim}, expected "
                                 f"a {opt.dimension}")
            v = val * UNITS[unit.strip()][1] if _num(val) else val
        else:
            v = val
    if not _num(v) or not math.isfinite(float(v)):
        raise _err(kind, f"option {opt.key!r} must be a finite number (SI units, or "
                         f"{{value, unit}}), got {v!r}")
    v = float(v)
    if opt.integer and (v != int(v) or v < 1):
        raise _err(kind, f"option {opt.key!r} must be a whole number >= 1, got {v!r}")
    if opt.positive and not v > 0:
        raise _err(kind, f"option {opt.key!r} must be positive, got {v!r}")
    return v


def _num(v) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)


def _set_param(m: Model, name, si_value, unit, provenance, keep):
    """Set (or keep, when named in ``keep`` and present) parameter ``name``; returns its SI
    value and whether it was kept."""
    if name in keep and name in m.parameters:
        return m.parameters[name].si_value, True
    p = m.parameters.get(name)
    if p is None:
        factor = UNITS[unit.strip()][1] if unit else 1.0
        m.parameter(name, si_value / factor, unit, provenance)
        return si_value, False
    # an existing parameter: new value and provenance, its own unit (when of the same
    # dimension), bounds and place kept
    if not (p.unit is not None and unit is not None
            and dimension_of(p.unit) == dimension_of(unit)):
        p.unit = unit
    p.value = si_value / (UNITS[p.unit.strip()][1] if p.unit else 1.0)
    p.provenance = provenance
    return si_value, False


class _Ctx:
    """Options resolved for one application of a maneuver."""

    def __init__(self, kind, m: Model, options: dict, keep: set, spec, extra=()):
        self.kind, self.m, self.keep = kind, m, keep
        self.options = {}
        known = {o.key: o for o in _COMMON + spec.options + tuple(extra)}
        for key, val in options.items():
            if key not in known:
                raise _err(kind, f"unknown option {key!r}; known: "
                                 f"{', '.join(sorted(set(known) | {'drive', 'road'}))}")
            self.options[key] = _to_si(kind, known[key], val)
        self.known = known
        self.derived = {}
        self.pinned = []
        self.driver = "open-loop"
        self.path_steps = []

    def value(self, key, default=None, text_default=""):
        """An option's SI value: given > kept parameter > default; its parameter (if
        any) is set with the option's provenance."""
        opt = self.known[key]
        given = key in self.options
        if given:
            v = self.options[key]
            src = f"maneuver {self.kind!r} option {key!r}"
        else:
            v = opt.default if default is None else default
            src = f"maneuver {self.kind!r} default{text_default}"
            if opt.param and opt.param in self.keep and opt.param in self.m.parameters:
                v = self.m.parameters[opt.param].si_value
        if v is None:
            raise _err(self.kind, f"option {key!r} is required")
        if opt.param is not None:
            prov = f"{opt.text}; {src} (workbench.maneuvers)"
            v, kept = _set_param(self.m, opt.param, v, opt.unit, prov,
                                 self.keep if not given else set())
            if kept:
                self.pinned.append(opt.param)
        return v

    def derive(self, name, value, unit, provenance):
        """A derived parameter (kept if pinned); the computed value is recorded."""
        self.derived[name] = float(value)
        v, kept = _set_param(self.m, name, float(value), unit,
                             f"{provenance}; derived by maneuver {self.kind!r} "
                             f"(workbench.maneuvers)", self.keep)
        if kept:
            self.pinned.append(name)
        return v


@dataclass(frozen=True)
class Spec:
    build: object
    options: tuple
    title: str


# ----------------------------------------------------------------------------------------
# the maneuvers
# ----------------------------------------------------------------------------------------

#: c = int_0^1 int_0^s P of the unit lane-change profile P (0 -> 1 over 1/4, 1 -> -1 over
#: 1/2, -1 -> 0 over 1/4; quintic steps): 15/112 = 0.133929
_LC_UNIT = [(0.0, 0.25, 1.0), (0.25, 0.75, -2.0), (0.75, 1.0, 1.0)]
LANE_CHANGE_C = float(quintic_steps(_LC_UNIT, np.array([1.0]))[2][0])


def _lane_changes(c: _Ctx, g: dict, v: float, prefix_t: tuple, prefix_a: tuple, changes):
    """Two (or more) open-loop lane changes: each a sum of three quintic steps 0 -> +A over
    T/4, +A -> -A over T/2, -A -> 0 over T/4 (zero net heading) started when the front
    axle reaches ``x_start`` and lasting the transition ``length / v``; the amplitude from
    the kinematic bicycle model for the lateral offset ``Y``: wheel steer ``Y L / (v^2 c
    T^2)``, coordinate ``/ ratio``.  ``changes = [(x_start, length, Y, why), ...]``."""
    L, G, unit = g["wheelbase"], g["ratio"], g["unit"]
    steps = []
    for k, ((x_start, length, Y, why), tn, an) in enumerate(zip(changes, prefix_t, prefix_a)):
        T = length / v
        t0 = (x_start - g["x_front"]) / v
        if t0 <= 0:
            raise _err(c.kind, f"option 'x0': the front axle (x = {g['x_front']:.3f} m) "
                               f"starts past the end of section {2 * k + 1} of the course")
        names = [f"{tn}_t{i}" for i in range(4)]
        times = [t0, t0 + T / 4, t0 + 3 * T / 4, t0 + T]
        why_t = ["start of lane change %d: the front axle (x = %.4g m at t = 0) reaches "
                 "x = %.4g m at the speed v0" % (k + 1, g["x_front"], x_start),
                 "end of the steer-in ramp (T/4, T = %.4g m / v0)" % length,
                 "end of the counter-steer ramp (3 T/4)",
                 "end of lane change %d (T)" % (k + 1)]
        for nm, tt, w in zip(names, times, why_t):
            c.derive(nm, tt, "s", w)
        delta = Y * L / (v * v * LANE_CHANGE_C * T * T)
        c.derive(an, delta / G, unit,
                 "steering-coordinate amplitude of lane change %d from the kinematic "
                 "bicycle model for the lateral offset Y = %.6g m (%s): wheel steer "
                 "delta_A = Y L / (v0^2 c T^2) = %.6g rad (L = %.6g m measured wheelbase, "
                 "c = %.6f, T = %.6g s), coordinate = delta_A / G with G = %.6g %s "
                 "measured on the linkage (workbench.maneuvers.steering_geometry); "
                 "open loop" % (k + 1, Y, why, delta, L, LANE_CHANGE_C, T, G,
                                g["ratio_unit"]))
        steps += [[names[0], names[1], an], [names[1], names[2], [an, -2.0]],
                  [names[2], names[3], an]]
        if c.driver == "path":
            yn = f"{tn}_Y"
            c.derive(yn, Y, "m", "lateral offset of lane change %d of the driver's path "
                     "(%s), a quintic step over x = %.4g .. %.4g m (the transition)"
                     % (k + 1, why, x_start, x_start + length))
            c.path_steps.append([float(x_start), float(x_start + length), yn])
    return TimeFunction.from_spec({"type": "steps", "initial": 0.0, "steps": steps})


def _course_common(c: _Ctx, g: dict):
    b = c.value("width", g["track"] + 0.25,
                ": measured track %.4g m + 0.25 m tire width (estimate)" % g["track"])
    x0 = c.value("x0", g["x_front"] + 5.5, ": 5.5 m ahead of the front axle's start")
    return b, x0


def _iso3888_1(c: _Ctx, g: dict, v: float):
    b, x0 = _course_common(c, g)
    ofs = c.value("offset")
    wa, wb, wc = 1.1 * b + 0.25, 1.2 * b + 0.25, 1.3 * b + 0.25
    Y1 = ofs + wb / 2
    Y2 = (wc - wa) / 2 - Y1
    fn = _lane_changes(c, g, v, ("lc1", "lc2"), ("steer_A1", "steer_A2"),
                       [(x0 + 15.0, 30.0, Y1, "centre of section 3: offset + (1.2 b + 0.25)/2"),
                        (x0 + 65.0, 25.0, Y2, "to the centre of section 5: "
                                              "(1.3 b + 0.25 - 1.1 b - 0.25)/2 - Y1")])
    course = [{"x0": x0, "x1": x0 + 15.0, "y_left": wa / 2, "y_right": -wa / 2},
              {"x0": x0 + 45.0, "x1": x0 + 70.0, "y_left": ofs + wb, "y_right": ofs},
              {"x0": x0 + 95.0, "x1": x0 + 110.0, "y_left": -wa / 2 + wc,
               "y_right": -wa / 2}]
    t_end = (x0 + 110.0 - g["x_front"]) / v + 2.0
    return fn, t_end, {"course": course, "offsets": [Y1, Y2]}


def _iso3888_2(c: _Ctx, g: dict, v: float):
    b, x0 = _course_common(c, g)
    gap = c.value("gap")
    wc = c.value("exit_width")
    wa, wb = 1.1 * b + 0.25, b + 1.0
    Y1 = wa / 2 + gap + wb / 2
    Y2 = (wc - wa) / 2 - Y1
    fn = _lane_changes(c, g, v, ("oa1", "oa2"), ("oa_A1", "oa_A2"),
                       [(x0 + 12.0, 13.5, Y1, "centre of section 3: (1.1 b + 0.25)/2 + gap "
                                              "+ (b + 1)/2"),
                        (x0 + 36.5, 12.5, Y2, "to the centre of section 5: (exit_width - "
                                              "1.1 b - 0.25)/2 - Y1")])
    course = [{"x0": x0, "x1": x0 + 12.0, "y_left": wa / 2, "y_right": -wa / 2},
              {"x0": x0 + 25.5, "x1": x0 + 36.5, "y_left": wa / 2 + gap + wb,
               "y_right": wa / 2 + gap},
              {"x0": x0 + 49.0, "x1": x0 + 61.0, "y_left": -wa / 2 + wc,
               "y_right": -wa / 2}]
    t_end = (x0 + 61.0 - g["x_front"]) / v + 2.0
    return fn, t_end, {"course": course, "offsets": [Y1, Y2]}


def _bound_steps(steps, amp_name, amp):
    """``steps`` with each ``dy`` bound to ``amp_name`` as ``(amp_name, dy / amp)``."""
    return [[a, b, [amp_name, dy / amp]] for a, b, dy in steps]


def _slalom(c: _Ctx, g: dict, v: float):
    s = c.value("spacing")
    Y = c.value("amplitude")
    n = int(c.value("cones"))
    t0 = c.value("t0")
    H = s / v                                  # half period: one cone spacing
    # peaks of the (quintic) sine at t0 + (j + 1/2) H; entry and exit peaks at 2/3 of the
    # amplitude make the heading vanish at every peak (no drift of the slalom axis)
    vals = [2.0 / 3.0] + [(-1.0) ** j for j in range(1, n + 1)] + [(-1.0) ** (n + 1) * 2 / 3]
    peaks = [t0 + (j + 0.5) * H for j in range(n + 2)]
    unit_steps = _peaks_to_steps(t0, peaks, vals, t0 + (n + 2) * H)
    # kinematic bicycle: lateral swing between successive full peaks per unit wheel steer
    L = g["wheelbase"]
    y_unit = (v * v / L) * quintic_steps(unit_steps, np.array(peaks))[2]
    # lateral change between successive full peaks (a full-amplitude half-wave from zero to
    # zero heading): (v^2/L) H^2 (3/14) per unit wheel steer, twice the amplitude
    swing = v * v / L * H * H * 3.0 / 28.0
    delta = Y / swing
    A = c.derive("slalom_steer", delta / g["ratio"], g["unit"],
                 "steering-coordinate amplitude of the slalom: wheel steer %.6g rad (kinematic "
                 "bicycle model: lateral amplitude %.4g m at cone spacing %.4g m, L = %.4g m; "
                 "= (28/3) Y L / s^2 for the quintic half-waves), / G = %.6g %s measured on "
                 "the linkage; open loop" % (delta, Y, s, L, g["ratio"], g["ratio_unit"]))
    steps = [(a, b, dy * delta / g["ratio"]) for a, b, dy in unit_steps]
    fn = TimeFunction.from_spec({"type": "steps", "initial": 0.0,
                                 "steps": _bound_steps(steps, "slalom_steer", A)})
    if c.driver == "path":
        # the path through the peaks of the kinematic path, at the front axle's x when
        # each is reached at v0, about the line y = 0: quintic steps in x, amplitude
        # bound to slalom_amplitude
        xs = [g["x_front"] + v * tp for tp in peaks]
        xsteps = _peaks_to_steps(g["x_front"] + v * t0, xs, vals,
                                 g["x_front"] + v * (t0 + (n + 2) * H))
        c.path_steps.extend([float(a), float(b), ["slalom_amplitude", float(dy)]]
                            for a, b, dy in xsteps)
    y = delta * y_unit
    axis = float(np.mean(y[1:-1]))
    cones = [[g["x_front"] + v * (tp - 0.0), axis] for tp in peaks[1:-1]]
    return fn, t0 + (n + 2) * H + 1.0, {
        "half_period": H, "period": 2 * H, "wheel_steer": delta,
        "kinematic_axis_y": axis, "cones_x_front_axle": [cx for cx, _ in cones],
        "peak_times": peaks[1:-1]}


def _sine_steer(c: _Ctx, g: dict, v: float):
    A = c.value("amplitude")
    f = c.value("frequency")
    n = int(c.value("periods"))
    t0 = c.value("t0")
    T = 1.0 / f
    c.derive("sine_omega", 2 * math.pi * f, "rad/s", "angular frequency 2 pi f of the "
             "sine steer input (f = %.4g Hz)" % f)
    vals = [(-1.0) ** j for j in range(2 * n)]
    peaks = [t0 + T / 4 + j * T / 2 for j in range(2 * n)]
    unit_steps = _peaks_to_steps(t0, peaks, vals, t0 + n * T)
    amp = c.derive("sine_steer", A / g["ratio"], g["unit"],
                   "steering-coordinate amplitude of the sine steer: wheel steer %.6g rad / G = "
                   "%.6g %s measured on the linkage; open loop" % (A, g["ratio"],
                                                                   g["ratio_unit"]))
    steps = [(a, b, dy * amp) for a, b, dy in unit_steps]
    fn = TimeFunction.from_spec({"type": "steps", "initial": 0.0,
                                 "steps": _bound_steps(steps, "sine_steer", amp)})
    return fn, t0 + n * T + 2.0, {"period": T, "frequency": f}


def _step_steer(c: _Ctx, g: dict, v: float):
    A = c.value("amplitude")
    rise = c.value("rise")
    t0 = c.value("t0")
    c.derive("step_steer", A / g["ratio"], g["unit"],
                   "steering-coordinate amplitude of the step steer: wheel steer %.6g rad / G = "
                   "%.6g %s measured on the linkage; open loop" % (A, g["ratio"],
                                                                   g["ratio_unit"]))
    fn = TimeFunction.from_spec({"type": "smoothstep", "t0": t0, "t1": t0 + rise, "y0": 0.0,
                                 "y1": "step_steer"})
    L = g["wheelbase"]
    return fn, t0 + rise + 4.0, {"kinematic_yaw_rate": v * A / L}


def _constant_radius(c: _Ctx, g: dict, v: float):
    R = c.value("radius")
    ramp = c.value("ramp")
    t0 = c.value("t0")
    L = g["wheelbase"]
    delta = math.atan(L / R)
    c.derive("radius_steer", delta / g["ratio"], g["unit"],
                   "steering-coordinate input held after the ramp: wheel steer atan(L/R) = "
                   "%.6g rad (kinematic radius R = %.4g m, L = %.4g m measured), / G = %.6g "
                   "%s measured on the linkage; open loop (ISO 4138 constant steering-wheel "
                   "angle method)" % (delta, R, L, g["ratio"], g["ratio_unit"]))
    fn = TimeFunction.from_spec({"type": "smoothstep", "t0": t0, "t1": t0 + ramp, "y0": 0.0,
                                 "y1": "radius_steer"})
    return fn, t0 + ramp + math.pi * R / v, {"wheel_steer": delta,
                                              "kinematic_radius": L / math.tan(delta)}


def _o(key, dim, default, param, unit, text, **kw):
    return Option(key, dim, default, param, unit, text, **kw)


_COURSE1 = (
    _o("width", "length", None, "dlc_width", "m",
       "vehicle width b for the ISO 3888-1 lane widths 1.1 b + 0.25, 1.2 b + 0.25, 1.3 b + "
       "0.25"),
    _o("x0", "length", None, "dlc_x0", "m", "x of the start of section 1 of the ISO 3888-1 "
       "course", positive=False),
    _o("offset", "length", 3.5, "dlc_offset", "m",
       "lateral offset of section 3 (ISO 3888-1: its right boundary 3.5 m left of the centre "
       "line of section 1; Project Chrono's ISO3888_Helper, demo_VEH_HMMWV_DoubleLaneChange)"),
)
_COURSE2 = (
    _o("width", "length", None, "oa_width", "m",
       "vehicle width b for the ISO 3888-2 lane widths 1.1 b + 0.25 and b + 1"),
    _o("x0", "length", None, "oa_x0", "m", "x of the start of section 1 of the ISO 3888-2 "
       "course", positive=False),
    _o("gap", "length", 1.0, "oa_gap", "m",
       "lateral gap between the left boundary of section 1 and the right boundary of "
       "section 3 (1 m; ISO 3888-2 as in Project Chrono's ISO3888_Helper)"),
    _o("exit_width", "length", 3.0, "oa_exit_width", "m",
       "width of section 5 (3 m in Project Chrono's ISO3888_Helper; its right boundary on "
       "that of section 1)"),
)

#: the registered maneuvers: kind -> Spec(build, options, title)
MANEUVERS: dict[str, Spec] = {
    "iso3888-1": Spec(_iso3888_1, _COURSE1, "ISO 3888-1 double lane change"),
    "iso3888-2": Spec(_iso3888_2, _COURSE2, "ISO 3888-2 obstacle avoidance"),
    "slalom": Spec(_slalom, (
        _o("spacing", "length", 18.0, "slalom_spacing", "m", "cone spacing (18 m: the "
           "common 18-m slalom; our default)"),
        _o("amplitude", "length", 1.0, "slalom_amplitude", "m", "lateral amplitude of the "
           "kinematic path about the slalom axis"),
        _o("cones", "dimensionless", 5.0, None, None, "number of cones passed at full "
           "amplitude", integer=True),
        _o("t0", "time", 1.0, "slalom_t0", "s", "start of the steering input"),
    ), "slalom"),
    "sine-steer": Spec(_sine_steer, (
        _o("amplitude", "angle", 0.02, "sine_amplitude", "rad", "wheel-steer amplitude"),
        _o("frequency", "dimensionless", 0.5, None, None, "input frequency, Hz (ISO 7401 "
           "sinusoidal input)"),
        _o("periods", "dimensionless", 3.0, None, None, "number of periods", integer=True),
        _o("t0", "time", 1.0, "sine_t0", "s", "start of the steering input"),
    ), "sine steer (ISO 7401 style)"),
    "step-steer": Spec(_step_steer, (
        _o("amplitude", "angle", 0.02, "step_amplitude", "rad", "wheel-steer step",
           positive=False),
        _o("rise", "time", 0.2, "step_rise", "s", "duration of the quintic ramp (ISO 7401 "
           "asks for a fast ramp; our default)"),
        _o("t0", "time", 1.0, "step_t0", "s", "start of the ramp"),
    ), "step steer (ISO 7401 style)"),
    "constant-radius": Spec(_constant_radius, (
        _o("radius", "length", 20.0, "radius_target", "m", "kinematic radius L / tan(delta) "
           "that sets the held wheel steer"),
        _o("ramp", "time", 1.0, "radius_ramp", "s", "duration of the quintic steer ramp"),
        _o("t0", "time", 0.5, "radius_t0", "s", "start of the ramp"),
    ), "constant radius (ISO 4138 constant steering-wheel angle)"),
}


# ----------------------------------------------------------------------------------------
# the closed-loop driver (driver="path"): a path follower on the chassis
# ----------------------------------------------------------------------------------------

#: the maneuvers that can be driven by the path follower
PATH_KINDS = ("iso3888-1", "iso3888-2", "slalom")
DRIVERS = ("open-loop", "path")

_DRIVER_OPTS = (
    Option("preview", "length", None, "driver_preview", "m",
           "distance of the driver's preview point ahead of the front axle (on the "
           "vehicle's centre line, at ground level); default max(L, 0.6 s x v0): a "
           "look-ahead time of about 0.6 s, our choice, tuned on the buggy"),
    Option("servo_frequency", "dimensionless", 20.0, None, None,
           "natural frequency (Hz) of the steering servo on the steering coordinate's "
           "own inertia (20 Hz: fast compared with the vehicle's yaw and lateral modes, "
           "~1 Hz; our choice)"),
    Option("servo_damping", "dimensionless", 1.0, None, None,
           "damping ratio of the steering servo (1: critically damped)"),
)


def _model_pose(model: Model, dr, travel: float, bodies):
    """Per body of ``bodies``: (centre of mass, rotation matrix) in the configuration
    of ``model`` with the steering drive held at ``travel`` (positions solved)."""
    from workbench.formulations.semirecursive.state import state_terms
    from workbench.integrators.result_kinematics import point_history

    m = copy.deepcopy(model)
    m.drives[dr.name] = Drive(dr.name, dr.joint, TimeFunction.constant(float(travel)),
                              dr.index)
    cm = m.compile()
    z = state_terms(cm, 0.0).z[None, :]
    zero = np.zeros_like(z)
    vals = {n: p.si_value for n, p in model.parameters.items()}
    out = {}
    for b in bodies:
        com = np.array([numeric_value(x, vals, f"body {b} com")
                        for x in model.bodies[b].com], float)
        pts = [com] + [com + e for e in np.eye(3)]
        xs = [point_history(cm, z, zero, zero, b, q)[0][0] for q in pts]
        R = np.column_stack([xs[i + 1] - xs[0] for i in range(3)])
        out[b] = (np.asarray(xs[0], float), R)
    return out


def _body_inertia(model: Model, b: str) -> tuple:
    vals = {n: p.si_value for n, p in model.parameters.items()}
    body = model.bodies[b]
    mass = numeric_value(body.mass, vals, f"body {b} mass")
    J = [numeric_value(x, vals, f"body {b} inertia") for x in body.inertia]
    if len(J) == 3:
        Jm = np.diag(J)
    else:
        J00, J11, J22, J01, J02, J12 = J
        Jm = np.array([[J00, J01, J02], [J01, J11, J12], [J02, J12, J22]])
    return float(mass), Jm


def steering_inertia(model: Model, drive: str | None = None, kind: str = "?") -> float:
    """The steering coordinate's own inertia (kg for a rack, kg*m^2 for a lever): twice
    the kinetic energy of the vehicle per squared unit rate of the steering coordinate,
    the other degrees of freedom held (the velocities of every body from central
    differences of the position problem at +- a small travel, as
    :func:`steering_geometry`)."""
    dr, unit = _steering_drive(model, drive, kind)
    eps = _PROBE_STEER / 8.0 if unit == "m" else _PROBE_STEER
    bodies = [b for b in model.bodies if b != GROUND]
    plus = _model_pose(model, dr, eps, bodies)
    minus = _model_pose(model, dr, -eps, bodies)
    total = 0.0
    for b in bodies:
        mass, J = _body_inertia(model, b)
        v = (plus[b][0] - minus[b][0]) / (2 * eps)
        Rp, Rm = plus[b][1], minus[b][1]
        Rd = (Rp - Rm) / (2 * eps)
        R = 0.5 * (Rp + Rm)
        W = Rd @ R.T                        # [omega]x per unit rate (global)
        w = np.array([W[2, 1] - W[1, 2], W[0, 2] - W[2, 0], W[1, 0] - W[0, 1]]) / 2
        Jg = R @ J @ R.T
        total += mass * float(v @ v) + float(w @ Jg @ w)
    return total


def _install_path_driver(c: "_Ctx", m: Model, dr, g: dict, v: float, body: str):
    """Remove the steering drive (the coordinate becomes a degree of freedom) and add the
    path follower ``driver`` on ``body`` for the path ``c.path_steps`` (quintic steps in
    x): preview point, pure-pursuit gain and servo parameters as derived parameters."""
    kind = c.kind
    if body not in m.bodies or body == GROUND:
        raise _err(kind, f"option 'driver_body': the model {m.name!r} has no body {body!r}")
    if "driver" in m.path_followers:
        raise _err(kind, "the model already has a path follower named 'driver'")
    L, G, unit = g["wheelbase"], g["ratio"], g["unit"]
    d = c.value("preview", max(L, 0.6 * v),
                ": max(L, 0.6 s x v0) = max(%.4g m, %.4g m)" % (L, 0.6 * v))
    ld = L + d
    gain = 2.0 * L / (ld * ld) / G
    c.derive("driver_gain", gain, "1" if unit == "m" else None,
             "steering-coordinate command per metre of lateral error of the preview point "
             "(%s/m): pure pursuit on the kinematic bicycle model, wheel steer = L kappa "
             "with the curvature kappa = 2 e / l_d^2 of the arc to the goal point at the "
             "look-ahead distance l_d = L + preview = %.6g m from the rear axle (L = %.6g m "
             "measured wheelbase), divided by the linkage ratio G = %.6g %s "
             "(workbench.maneuvers.steering_geometry): 2 L / (l_d^2 G)"
             % (unit, ld, L, G, g["ratio_unit"]))
    I_eff = steering_inertia(m, dr.name, kind)
    f = c.value("servo_frequency")
    zeta = c.value("servo_damping")
    w = 2.0 * math.pi * f
    ks, cs = (("N/m", "N*s/m") if unit == "m" else ("N*m/rad", "N*m*s/rad"))
    iu = "kg" if unit == "m" else "kg*m^2"
    c.derive("driver_k", I_eff * w * w, ks,
             "steering servo stiffness I w^2: the steering coordinate's own inertia I = "
             "%.6g %s (kinetic energy of the vehicle per squared unit rate of the steering "
             "coordinate, the other coordinates held: workbench.maneuvers.steering_inertia) "
             "and w = 2 pi %.4g Hz" % (I_eff, iu, f))
    c.derive("driver_c", 2.0 * zeta * I_eff * w, cs,
             "steering servo damping 2 zeta I w (zeta = %.4g, I = %.6g %s, w = 2 pi %.4g "
             "Hz)" % (zeta, I_eff, iu, f))
    # the preview point: `preview` ahead of the front axle on the centre line of the
    # tires, on the ground, in the body frame of `body` (its start pose)
    pose = _model_pose(m, dr, 0.0, [body])[body]
    vals = {n: p.si_value for n, p in m.parameters.items()}
    com_local = np.array([numeric_value(x, vals, f"body {body} com")
                          for x in m.bodies[body].com], float)
    target = np.array([g["x_front"] + d, g["y_mid"], 0.0])
    local = com_local + pose[1].T @ (target - pose[0])
    del m.drives[dr.name]
    if m.dof_spec:
        name = dr.joint + COORD_SUFFIX[m.joints[dr.joint].type][dr.index]
        if name not in m.dof_spec:
            m.dof_spec = list(m.dof_spec) + [name]
    path = TimeFunction.from_spec({"type": "steps", "initial": 0.0,
                                   "steps": c.path_steps})
    m.path_follower("driver", body, [float(x) for x in local], dr.joint, path,
                    gain="driver_gain", stiffness="driver_k", damping="driver_c",
                    index=dr.index)
    return {"body": body, "preview": d, "lookahead": ld, "preview_point": list(local),
            "gain": gain, "inertia": I_eff, "servo_frequency": f, "servo_damping": zeta,
            "path_steps": [list(row) for row in c.path_steps]}


# ----------------------------------------------------------------------------------------
# applying a maneuver
# ----------------------------------------------------------------------------------------


def maneuver(model, kind: str, keep=(), keep_meta=(), drive: str | None = None,
             road: str = "flat", driver: str = "open-loop", driver_body: str = "chassis",
             **options) -> Model:
    """A copy of ``model`` (a Model or a shipped model name) driven through the maneuver
    ``kind`` (:data:`MANEUVERS`): the steering drive (``drive``, default ``"steering"``)
    gets the maneuver's open-loop time function, the initial speed is set (every initial
    joint rate scaled by ``speed / v0``: the vehicle starts rolling straight), ``meta``
    gets ``t_end``, ``dt`` and ``maneuver`` (options, measured ratio and wheelbase,
    derived values, course), and the maneuver's parameters are added (units, provenance).
    The maneuvers are driven on a flat road: ``road="flat"`` (default) removes the steps
    of the model's road (its base height ``z0`` stays), ``road="keep"`` keeps them.

    ``options``: the common ones (``speed``, ``t_end``, ``dt``, ``ratio``, ``wheelbase``)
    and those of the kind (docs/maneuvers.md); numbers in SI units or ``{"value": ..,
    "unit": ..}``.  ``keep``: parameter names whose values in ``model`` win over defaults
    and derived values; ``keep_meta``: meta keys (``t_end``, ``dt``) likewise.  Bad
    options raise :class:`~workbench.errors.ModelError` naming the maneuver and option.

    ``driver="path"`` (``iso3888-1``, ``iso3888-2``, ``slalom``; default ``"open-loop"``)
    steers CLOSED LOOP instead: the steering drive is removed (the steering coordinate
    becomes a degree of freedom) and a path follower ``driver``
    (:meth:`Model.path_follower`) on ``driver_body`` follows the maneuver's centre line
    (quintic steps in x); options ``preview``, ``servo_frequency``, ``servo_damping``
    (docs/maneuvers.md)."""
    if isinstance(model, str):
        from workbench.model.catalog import load
        model = load(model)
    if not isinstance(model, Model):
        raise ModelError(f"maneuver {kind!r}: expected a Model or a model name, got "
                         f"{type(model).__name__}")
    if kind not in MANEUVERS:
        raise ModelError(f"unknown maneuver {kind!r}; known: {', '.join(MANEUVERS)}")
    if drive is not None and not isinstance(drive, str):
        raise _err(kind, f"option 'drive' must be a drive name, got {drive!r}")
    if road not in ("flat", "keep"):
        raise _err(kind, f"option 'road' must be 'flat' or 'keep', got {road!r}")
    if driver not in DRIVERS:
        raise _err(kind, f"option 'driver' must be one of {', '.join(DRIVERS)}, got "
                         f"{driver!r}")
    if driver == "path" and kind not in PATH_KINDS:
        raise _err(kind, f"option 'driver': the path follower drives "
                         f"{', '.join(PATH_KINDS)}; {kind!r} is an open-loop input")
    spec = MANEUVERS[kind]
    m = copy.deepcopy(model)
    c = _Ctx(kind, m, options, set(keep), spec,
             _DRIVER_OPTS if driver == "path" else ())
    c.driver = driver
    if "speed" not in c.options:
        c.keep.add("v0")                   # the model's own v0 (value and provenance)
    dr, _unit = _steering_drive(m, drive, kind)

    # initial speed
    v_old = m.parameters["v0"].si_value if "v0" in m.parameters else None
    if v_old is None:
        raise _err(kind, f"option 'speed': the model {m.name!r} has no parameter 'v0' (its "
                         f"initial forward speed, to which its initial rates belong)")
    v = c.value("speed", v_old, " (the model's v0)")
    if v != v_old:
        if v_old == 0.0:
            raise _err(kind, "option 'speed': the model starts at rest (v0 = 0); its "
                             "rolling rates cannot be scaled")
        r = v / v_old
        for j in m.joints.values():
            j.qd0 = [float(q) * r for q in j.qd0]
        if m.dof_spec:
            m.dof_spec = [dict(s, velocity=s["velocity"] * r)
                          if isinstance(s, dict) and _num(s.get("velocity")) else s
                          for s in m.dof_spec]

    g = steering_geometry(m, dr.name, kind)
    if "ratio" in c.options:
        if c.options["ratio"] == 0.0:
            raise _err(kind, "option 'ratio' must be nonzero")
        g["ratio_measured"], g["ratio"] = g["ratio"], c.options["ratio"]
    if "wheelbase" in c.options:
        g["wheelbase_measured"], g["wheelbase"] = g["wheelbase"], c.options["wheelbase"]

    fn, t_end, extra = spec.build(c, g, v)
    m.drives[dr.name] = Drive(dr.name, dr.joint, fn, dr.index)
    driver_meta = None
    if driver == "path":
        driver_meta = _install_path_driver(c, m, dr, g, v, driver_body)
    if road == "flat" and m.road_spec is not None and m.road_spec.steps:
        m.road_spec = Road(m.road_spec.z0, [], f"flat at the base height of the vehicle "
                           f"file's road (its {len(m.road_spec.steps)} step(s) removed by "
                           f"maneuver {kind!r}: maneuvers are driven on a flat road)")

    if not ("dt" in keep_meta and "dt" in m.meta):
        m.meta["dt"] = float(c.options.get("dt", m.meta.get("dt", 0.01)))
    if not ("t_end" in keep_meta and "t_end" in m.meta):
        dt = float(m.meta["dt"])
        # the computed end rounded up to a whole number of steps
        m.meta["t_end"] = float(c.options.get(
            "t_end", round(math.ceil(t_end / dt - 1e-9) * dt, 12)))
    extra = _plain(extra)
    speed_held = [sc.name for sc in m.speed_controls.values()
                  if "v0" in sc.speed.parameter_names()]
    m.meta["maneuver"] = {
        "kind": kind, "title": spec.title, "options": dict(c.options),
        "drive": dr.name, "joint": dr.joint, "speed": v,
        "ratio": g["ratio"], "ratio_unit": g["ratio_unit"], "wheelbase": g["wheelbase"],
        "steered": g["steered"], "x_front": g["x_front"], "track": g["track"],
        "derived": dict(c.derived), "pinned": sorted(set(c.pinned)),
        "speed_controls": speed_held, "road": road, "open_loop": driver == "open-loop",
        "driver": driver, **extra}
    if driver_meta is not None:
        m.meta["maneuver"]["path_driver"] = _plain(driver_meta)
    return m


def _plain(x):
    """Numbers of numpy type as Python floats (meta is written to JSON)."""
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, (np.floating, np.integer)):
        return float(x)
    return x


# ----------------------------------------------------------------------------------------
# results
# ----------------------------------------------------------------------------------------


def path_radius(x, y) -> dict:
    """Least-squares circle through the points ``(x, y)`` (algebraic fit, then Gauss-Newton
    on the geometric distances): ``{"radius", "center", "rms"}`` (rms of the radial
    residuals, m)."""
    x = np.asarray(x, float)
    y = np.asarray(y, float)
    A = np.column_stack([x, y, np.ones_like(x)])
    sol = np.linalg.lstsq(A, x * x + y * y, rcond=None)[0]
    xc, yc = sol[0] / 2, sol[1] / 2
    R = math.sqrt(sol[2] + xc * xc + yc * yc)
    p = np.array([xc, yc, R])
    for _ in range(20):
        dx, dy = x - p[0], y - p[1]
        d = np.hypot(dx, dy)
        r = d - p[2]
        J = np.column_stack([-dx / d, -dy / d, -np.ones_like(d)])
        step = np.linalg.lstsq(J, -r, rcond=None)[0]
        p = p + step
        if np.max(np.abs(step)) < 1e-12 * max(1.0, abs(p[2])):
            break
    d = np.hypot(x - p[0], y - p[1])
    return {"radius": float(p[2]), "center": (float(p[0]), float(p[1])),
            "rms": float(np.sqrt(np.mean((d - p[2]) ** 2)))}


# the model files' [maneuver] tables (workbench.model.files) are expanded by `maneuver`
files.register_maneuvers(maneuver, tuple(MANEUVERS))
