"""Vehicle templates: the expansion of a compact vehicle description into the sections of
an ordinary model document (:func:`expand_vehicle`; the public entry point that also builds
the :class:`Model` is :func:`workbench.model.vehicle.build_vehicle`).

A vehicle is described by subsystem templates (in the spirit of Chrono::Vehicle's JSON
subsystems) in a ``[vehicle]`` section of a model file, or a Python dict given to
:func:`build_vehicle`.  :func:`expand_vehicle` turns it into the ordinary sections of the
model-file format (``[[bodies]]``, ``[[joints]]``, ``[[cuts]]``, ``[[distances]]``,
``[[rods]]``, ``[[drives]]``, ``[[springs]]``, ``[[joint_springs]]``, ``[[anti_roll_bars]]``,
``[[tires]]``, ``[[speed_controls]]`` and ``[model] dof``), which
:func:`workbench.model.files.model_from_dict` then builds like any hand-written file: every
body, joint and element of the expanded vehicle is visible and named, and every number is
the file's own field (a parameter reference with its unit and provenance, or a number).
``expand_vehicle(spec)`` shows the expanded sections; :mod:`workbench.model.files` calls
:func:`expand_document` when a file has a ``[vehicle]`` section.  This module imports
nothing of the model package (it maps dicts onto dicts), so the file loader can use it.

Templates (docs/vehicle-templates.md lists every key, unit, default and generated name):

* chassis: one body on a floating joint at its centre of mass, optionally a second body
  (``rear``) joined by a revolute joint with a torsion spring;
* suspensions (per axle): ``double-wishbone``, ``trailing-arm``, ``solid-axle`` (slide +
  roll hinge idealisation), ``macpherson`` (lower arm, strut as a cylindrical closure to a
  top-mount universal joint), ``multi-link`` (upright on a floating joint held by five
  rods, distance constraints);
* steering: ``rack`` (prismatic, driven by a time function) or ``lever`` (revolute,
  driven), with tie rods as distance constraints to the steered uprights;
* rods (the five multi-link rods, tie rods, toe links): a ``[[distances]]`` entry, or a
  ``[[rods]]`` entry (distance constraint + the mass of a uniform slender bar) when the
  template table gives the rod a ``mass`` (``tie_mass`` for tie rods and toe links);
* wheels (optionally dual), tires (any law of :meth:`Model.tire`: rigid disc or Magic
  Formula with a ``.tir`` and coefficient overrides), spring-dampers (any law of
  :meth:`Model.spring`: linear, air spring, piecewise damper), anti-roll bars
  (:meth:`Model.anti_roll_bar`), speed control (:meth:`Model.speed_control`: the
  driveline torque on the driven wheels with its reaction on their carriers).

Geometry is written for the LEFT side in the vehicle frame (x forward, y left, z up; every
body frame coincides with it at the design configuration, as in the hand-written vehicle
files); the right side is its mirror image in y (a number ``y`` becomes ``-y``, a
parameter reference ``"p"`` becomes ``{param = "p", scale = -1.0}``).  Names: axle ``f``
gives the side prefixes ``fl_`` and ``fr_``.
"""

from __future__ import annotations

import copy
from typing import Callable

from workbench.errors import ModelError, UnknownNameError

__all__ = ["expand_vehicle", "expand_document", "SUSPENSIONS", "STEERINGS"]

SIDES = (("l", 1.0), ("r", -1.0))
#: sections produced by the expansion, in the order the file format processes them
_OUT_SECTIONS = ("bodies", "joints", "anti_roll_bars", "cuts", "distances", "rods", "drives",
                 "springs", "joint_springs", "tires", "speed_controls")


# ----------------------------------------------------------------------------------------
# small helpers
# ----------------------------------------------------------------------------------------


def _is_num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _neg(v, where: str):
    """The mirror of one parametric or load-time scalar field: ``-v``."""
    if _is_num(v):
        return -float(v) if v != 0 else 0.0
    if isinstance(v, str):
        return {"param": v, "scale": -1.0}
    if isinstance(v, (list, tuple)) and len(v) == 2 and isinstance(v[0], str) \
            and _is_num(v[1]):
        return [v[0], -float(v[1])]
    if isinstance(v, dict) and "param" in v:
        out = dict(v)
        out["scale"] = -float(v.get("scale", 1.0))
        return out
    if isinstance(v, dict) and "value" in v and _is_num(v["value"]):
        out = dict(v)
        out["value"] = -float(v["value"]) if v["value"] != 0 else 0.0
        return out
    raise ModelError(f"{where}: cannot mirror the field {v!r} (expected a number, a parameter "
                     "name, [name, scale], {param, scale} or {value, unit})")


def _vec(v, where: str) -> list:
    if not isinstance(v, (list, tuple)) or len(v) != 3:
        raise ModelError(f"{where}: expected three values [x, y, z], got {v!r}")
    return list(v)


def _side(v, sign: float, where: str) -> list:
    """A left-side point/vector on side ``sign`` (+1 left, -1 right: y mirrored)."""
    v = _vec(v, where)
    return v if sign > 0 else [v[0], _neg(v[1], where + "[1]"), v[2]]


def _inertia(v, where: str) -> list:
    """3 or 6 values, or one value for all three principal moments."""
    if _is_num(v) or isinstance(v, (str, dict)):
        return [v, v, v]
    if isinstance(v, (list, tuple)) and len(v) in (3, 6):
        return list(v)
    raise ModelError(f"{where}: inertia must be one value or 3 or 6 values, got {v!r}")


class _Table:
    """A template table with its keys checked (unknown keys and missing keys raise
    :class:`ModelError` naming the element and the key)."""

    def __init__(self, table, where: str, required=(), optional=()):
        if not isinstance(table, dict):
            raise ModelError(f"{where}: expected a table, got {table!r}")
        allowed = set(required) | set(optional)
        for key in table:
            if key not in allowed:
                raise ModelError(f"{where}: unknown key {key!r}; allowed: "
                                 f"{', '.join(sorted(allowed))}")
        for key in required:
            if key not in table:
                raise ModelError(f"{where}: missing key {key!r}")
        self.t = table
        self.where = where

    def __getitem__(self, key):
        return self.t[key]

    def __contains__(self, key):
        return key in self.t

    def get(self, key, default=None):
        return self.t.get(key, default)

    def vec(self, key, default=None):
        if key not in self.t:
            if default is None:
                raise ModelError(f"{self.where}: missing key {key!r}")
            return list(default)
        return _vec(self.t[key], f"{self.where} {key}")

    def text(self, key, default=""):
        v = self.t.get(key, default)
        if not isinstance(v, str):
            raise ModelError(f"{self.where} {key}: expected a string, got {v!r}")
        return v


def _join(*parts) -> str:
    return "; ".join(p for p in parts if p)


# ----------------------------------------------------------------------------------------
# the expansion context
# ----------------------------------------------------------------------------------------


class _Vehicle:
    """The document under construction and what the templates share."""

    def __init__(self):
        self.out: dict[str, list] = {k: [] for k in _OUT_SECTIONS}
        self.bodies: dict[str, dict] = {}          # name -> body entry (points filled later)
        self.chassis = ""                          # the main chassis body
        self.chassis_bodies: list[str] = []
        self.speed = None                          # initial forward speed (load-time)
        self.steering: dict | None = None          # {axle, body, points (l, r)}
        self.dof_chassis: list[str] = []
        self.dof_susp: list[str] = []
        self.dof_spin: list[str] = []
        self.wheels: dict[str, list] = {}          # axle -> [(wheel, carrier), ...]
        self.tire: dict = {}
        self.summary: list[str] = []
        self.values: dict[str, float] = {}        # parameter values (load-time numbers)

    def body(self, name, mass, com, inertia, provenance, points=None, vectors=None):
        if name in self.bodies:
            raise ModelError(f"[vehicle]: body {name!r} is generated twice (axle names must "
                             "differ)")
        entry = {"name": name, "mass": mass, "com": com, "inertia": inertia,
                 "points": dict(points or {}), "provenance": provenance}
        if vectors:
            entry["vectors"] = dict(vectors)
        self.bodies[name] = entry
        self.out["bodies"].append(entry)
        return entry

    def point(self, body, name, coords, where):
        pts = self.bodies[body]["points"]
        if name in pts:
            raise ModelError(f"{where}: point {name!r} of body {body!r} is generated twice "
                             "(a spring's point on the suspension body takes the spring's "
                             "name: rename the spring)")
        pts[name] = coords
        return name

    def joint(self, name, type, parent, child, parent_point, child_point, provenance, **kw):
        entry = {"name": name, "type": type, "parent": parent, "child": child,
                 "parent_point": parent_point, "child_point": child_point,
                 "provenance": provenance}
        entry.update({k: v for k, v in kw.items() if v is not None})
        self.out["joints"].append(entry)
        return name


# ----------------------------------------------------------------------------------------
# chassis
# ----------------------------------------------------------------------------------------

_CHASSIS_KEYS = ("name", "mass", "com", "inertia", "points", "vectors", "q0", "qd0",
                 "provenance", "rear")
_REAR_KEYS = ("name", "mass", "com", "inertia", "points", "vectors", "provenance", "hinge",
              "axis", "joint", "spring", "k", "c")


def _chassis(V: _Vehicle, spec) -> None:
    t = _Table(spec, "[vehicle] chassis", ("mass", "com", "inertia"), _CHASSIS_KEYS)
    name = t.text("name", "chassis")
    com = t.vec("com")
    prov = t.text("provenance", "vehicle chassis (template chassis)")
    points = {"G": list(com)}
    points.update(_points(t, "points"))
    V.body(name, t["mass"], com, _inertia(t["inertia"], t.where + " inertia"), prov, points,
           _points(t, "vectors"))
    V.chassis = name
    V.chassis_bodies = [name]
    q0 = t.get("q0", [0.0] * 6)
    qd0 = t.get("qd0", [V.speed if V.speed is not None else 0.0, 0.0, 0.0, 0.0, 0.0, 0.0])
    for key, v in (("q0", q0), ("qd0", qd0)):
        if not isinstance(v, list) or len(v) != 6:
            raise ModelError(f"{t.where} {key}: expected six values (x, y, z, rz, ry, rx), "
                             f"got {v!r}")
    V.joint(name, "floating", "ground", name, list(com), "G",
            _join("floating joint of the chassis at its centre of mass (template chassis)",
                  t.text("provenance")), q0=q0, qd0=qd0)
    V.dof_chassis = [name + s for s in (".x", ".y", ".z", ".rz", ".ry", ".rx")]
    if "rear" in t:
        r = _Table(t["rear"], "[vehicle] chassis rear", ("mass", "com", "inertia", "hinge"),
                   _REAR_KEYS)
        rname = r.text("name", "rear_body")
        jname = r.text("joint", "torsion")
        hinge = r.vec("hinge")
        rcom = r.vec("com")
        rpoints = {"G": list(rcom), "tor": list(hinge)}
        rpoints.update(_points(r, "points"))
        V.body(rname, r["mass"], rcom, _inertia(r["inertia"], r.where + " inertia"),
               r.text("provenance", "rear half of the chassis (template chassis, rear)"),
               rpoints, _points(r, "vectors"))
        V.point(name, "tor", list(hinge), t.where)
        V.joint(jname, "revolute", name, rname, "tor", "tor",
                _join("torsion joint between the two chassis halves (template chassis, rear)",
                      r.text("provenance")), axis=r.vec("axis", [1.0, 0.0, 0.0]))
        if "k" in r or "c" in r:
            V.out["joint_springs"].append({"name": r.text("spring", jname + "_spring"),
                                           "joint": jname, "k": r.get("k", 0.0),
                                           "c": r.get("c", 0.0)})
        V.chassis_bodies.append(rname)
        V.dof_chassis.append(jname)


def _points(t: _Table, key) -> dict:
    v = t.get(key, {})
    if not isinstance(v, dict):
        raise ModelError(f"{t.where} {key}: expected a table NAME = [x, y, z], got {v!r}")
    return dict(v)


# ----------------------------------------------------------------------------------------
# steering
# ----------------------------------------------------------------------------------------

_STEER_KEYS = ("type", "name", "joint", "drive", "axle", "mount", "axis", "mass", "com",
               "inertia", "inner", "tie_length", "tie_mass", "input", "provenance")


def _steering_common(V: _Vehicle, t: _Table, kind: str, body: str, joint: str, jtype: str,
                     axis: list) -> None:
    mount = t.vec("mount")
    prov = t.text("provenance")
    inner = t.vec("inner")
    V.body(body, t["mass"], t.vec("com", mount), _inertia(t["inertia"], t.where + " inertia"),
           _join(f"steering {kind} (template steering {kind!r})", prov),
           {"pivot": list(mount), "tl": inner, "tr": _side(inner, -1.0, t.where + " inner")})
    V.point(V.chassis, body + "_mount", list(mount), t.where)
    inp = t["input"]
    q0 = inp if (_is_num(inp) or isinstance(inp, str)) else None
    V.joint(joint, jtype, V.chassis, body, body + "_mount", "pivot",
            _join(f"steering {kind}: its coordinate is the driven steering input", prov),
            axis=axis, q0=q0)
    V.out["drives"].append({"name": t.text("drive", "steering"), "joint": joint,
                            "function": inp})
    V.steering = {"axle": t.get("axle"), "body": body, "points": ("tl", "tr"),
                  "length": t["tie_length"], "mass": t.get("tie_mass"), "used": False,
                  "where": t.where}


def _steer_rack(V: _Vehicle, spec) -> None:
    t = _Table(spec, "[vehicle] steering (rack)",
               ("type", "mount", "mass", "inertia", "inner", "tie_length", "input"),
               _STEER_KEYS)
    _steering_common(V, t, "rack", t.text("name", "rack"), t.text("joint", "rack"),
                     "prismatic", t.vec("axis", [0.0, 1.0, 0.0]))


def _steer_lever(V: _Vehicle, spec) -> None:
    t = _Table(spec, "[vehicle] steering (lever)",
               ("type", "mount", "mass", "inertia", "inner", "tie_length", "input"),
               _STEER_KEYS)
    _steering_common(V, t, "lever", t.text("name", "steer_lever"), t.text("joint", "steer"),
                     "revolute", t.vec("axis", [0.0, 0.0, 1.0]))


#: steering templates: type -> expansion
STEERINGS: dict[str, Callable] = {"rack": _steer_rack, "lever": _steer_lever}


# ----------------------------------------------------------------------------------------
# axles: wheels, tires, springs, anti-roll bars shared by the suspension templates
# ----------------------------------------------------------------------------------------

_AXLE_COMMON = ("name", "suspension", "body", "wheel", "tire", "springs", "anti_roll_bar",
                "provenance")
_WHEEL_KEYS = ("mass", "inertia", "center", "dual", "radius", "provenance")
_SPRING_KEYS = ("name", "on", "chassis", "arm", "k", "c", "length", "air", "damper")
_ARB_KEYS = ("name", "pivot", "arm", "on", "point", "link_length", "k", "provenance")
_TIRE_KEYS = ("radius", "k", "c", "mu", "v_eps", "depth_ramp", "force_ramp", "law", "tir",
              "coefficients", "provenance")


class _Axle:
    """One axle being expanded: its table, names and the template's attachment bodies."""

    def __init__(self, V: _Vehicle, spec, index: int, template: str, required, optional):
        name = spec.get("name") if isinstance(spec, dict) else None
        self.where = f"[vehicle] axles[{index}]" + (f" ({name!r})" if isinstance(name, str)
                                                     else "")
        self.t = _Table(spec, f"{self.where} suspension {template!r}",
                        ("name", "suspension", "wheel") + tuple(required),
                        _AXLE_COMMON + tuple(optional))
        self.name = self.t.text("name")
        if not self.name:
            raise ModelError(f"{self.where}: name must be a non-empty string")
        self.template = template
        self.V = V
        self.chassis = self.t.text("body", V.chassis)
        if self.chassis not in V.chassis_bodies:
            exc = UnknownNameError("chassis body", self.chassis, V.chassis_bodies)
            exc.args = (f"{self.t.where} body: {exc.args[0]}",)
            raise exc
        self.prov = self.t.text("provenance")
        self.wheel = _Table(self.t["wheel"], self.t.where + " wheel",
                            ("mass", "inertia", "center"), _WHEEL_KEYS)
        tire = dict(V.tire)
        if "tire" in self.t:
            if not isinstance(self.t["tire"], dict):
                raise ModelError(f"{self.t.where} tire: expected a table, got "
                                 f"{self.t['tire']!r}")
            tire.update(self.t["tire"])
        self.tire = _Table(tire, self.t.where + " tire", (), _TIRE_KEYS)
        springs = self.t.get("springs", [])
        if not isinstance(springs, list):
            raise ModelError(f"{self.t.where} springs: expected a list of tables")
        self.springs = [_Table(s, f"{self.t.where} springs[{i}]"
                               + (f" ({s.get('name')!r})" if isinstance(s, dict) else ""),
                               ("name", "chassis", "arm"), _SPRING_KEYS)
                        for i, s in enumerate(springs)]
        self.arb = (_Table(self.t["anti_roll_bar"], self.t.where + " anti_roll_bar",
                           ("pivot", "arm", "point", "link_length", "k"), _ARB_KEYS)
                    if "anti_roll_bar" in self.t else None)

    def prefix(self, side: str) -> str:
        return f"{self.name}{side}_"

    def describe(self, what: str) -> str:
        return _join(f"{what} (template {self.template!r}, axle {self.name!r})", self.prov)

    def check_on(self, allowed: tuple) -> None:
        for s in self.springs:
            if s.get("on", allowed[0]) not in allowed:
                raise ModelError(f"{s.where} on: unknown body {s['on']!r} of template "
                                 f"{self.template!r}; known: {', '.join(allowed)}")
        if self.arb is not None and self.arb.get("on", allowed[0]) not in allowed:
            raise ModelError(f"{self.arb.where} on: unknown body {self.arb['on']!r} of "
                             f"template {self.template!r}; known: {', '.join(allowed)}")

    # -- the wheel of one side: body, spin joint, tires -----------------------------------
    def wheel_side(self, side: str, sign: float, carrier: str, hub: str) -> None:
        V, w, p = self.V, self.wheel, self.prefix(side)
        center = _side(w.vec("center"), sign, w.where + " center")
        points = {"c": center}
        dual = w.get("dual")
        if dual is not None:
            if not isinstance(dual, list) or len(dual) != 2:
                raise ModelError(f"{w.where} dual: expected two tire centres [inner, outer], "
                                 f"got {dual!r}")
            points["c_in"] = _side(dual[0], sign, w.where + " dual[0]")
            points["c_out"] = _side(dual[1], sign, w.where + " dual[1]")
        wheel = p + "wheel"
        V.body(wheel, w["mass"], list(center), _inertia(w["inertia"], w.where + " inertia"),
               _join(self.describe("wheel (rim + tire), centre of mass at the wheel centre"),
                     w.text("provenance")),
               points, {"spin": [0.0, 1.0, 0.0]})
        V.joint(p + "spin", "revolute", carrier, wheel, hub, "c",
                self.describe("wheel bearing (free spin about y)"), axis=[0.0, 1.0, 0.0],
                qd0=self.spin_rate())
        V.dof_spin.append(p + "spin")
        V.wheels.setdefault(self.name, []).append((wheel, carrier))
        tire = {k: v for k, v in self.tire.t.items()}
        if "radius" not in tire and "radius" in w:
            tire["radius"] = w["radius"]
        if "k" not in tire:
            raise ModelError(f"{self.tire.where}: missing key 'k' (give [vehicle] tire or the "
                             "axle's tire table)")
        centres = [("tire", "c")] if dual is None else [("tire_in", "c_in"),
                                                        ("tire_out", "c_out")]
        for tname, c in centres:
            entry = {"name": p + tname, "body": wheel, "center": c, "axis": "spin"}
            entry.update(tire)
            V.out["tires"].append(entry)

    def spin_rate(self):
        V = self.V
        if V.speed is None or (_is_num(V.speed) and V.speed == 0):
            return None
        radius = self.tire.get("radius", self.wheel.get("radius"))
        if isinstance(V.speed, str) and isinstance(radius, str):
            return {"param": V.speed, "divide_by": radius}
        if _is_num(V.speed) and _is_num(radius):
            return float(V.speed) / float(radius)
        if isinstance(V.speed, str) and _is_num(radius):
            return {"param": V.speed, "scale": 1.0 / float(radius)}
        raise ModelError(f"{self.wheel.where}: the initial wheel spin speed / radius needs the "
                         f"tire radius (a parameter name or a number), got {radius!r}")

    # -- springs, anti-roll bar ------------------------------------------------------------
    def spring_side(self, side: str, sign: float, bodies: dict, default_on: str,
                    point_name: Callable[[str, str], str]) -> None:
        """The springs of one side: chassis point ``<prefix><spring>_top``, the point on the
        suspension body ``point_name(side, spring)``."""
        V, p = self.V, self.prefix(side)
        for s in self.springs:
            on = s.get("on", default_on)
            body = bodies[on]
            pt = V.point(body, point_name(side, s["name"]),
                         _side(s["arm"], sign, s.where + " arm"), s.where)
            top = V.point(self.chassis, f"{p}{s['name']}_top",
                          _side(s["chassis"], sign, s.where + " chassis"), s.where)
            entry = {"name": p + s["name"], "body1": self.chassis, "point1": top,
                     "body2": body, "point2": pt}
            entry["k"] = s.get("k", 0.0)
            for key in ("c", "length", "air", "damper"):
                if key in s:
                    entry[key] = s[key]
            V.out["springs"].append(entry)

    def arb_points(self, bodies_by_side: dict, default_on: str, point_name) -> list:
        """Add the droplink points of the anti-roll bar; returns the two links."""
        a = self.arb
        links = []
        for side, sign in SIDES:
            body = bodies_by_side[side][a.get("on", default_on)]
            pt = self.V.point(body, point_name(side), _side(a["point"], sign,
                                                            a.where + " point"), a.where)
            links.append([body, pt])
        return links

    def arb_emit(self, links: list) -> None:
        a = self.arb
        pivot, arm = a.vec("pivot"), a.vec("arm")
        self.V.out["anti_roll_bars"].append({
            "name": a.text("name", f"{self.name}_arb"), "body": self.chassis,
            "pivots": [pivot, _side(pivot, -1.0, a.where + " pivot")],
            "arms": [arm, _side(arm, -1.0, a.where + " arm")], "links": links,
            "link_length": a["link_length"], "k": a["k"],
            "provenance": self.describe(_join("anti-roll bar", a.text("provenance")))})

    def steered(self) -> bool:
        st = self.V.steering
        if st is None:
            return False
        if st["axle"] is None:               # default: the first axle with tie rods
            st["axle"] = self.name
        return st["axle"] == self.name

    def tie_rod(self, side: str, sign: float, upright: str, tie_out_key="tie_out") -> None:
        """Tie rod from the steering body (steered axle) or a chassis toe link to the
        upright's point ``tie``."""
        V, t, p = self.V, self.t, self.prefix(side)
        if self.steered():
            st = V.steering
            st["used"] = True
            _rod(V, {"name": p + "tie", "body1": st["body"],
                     "point1": st["points"][0 if side == "l" else 1], "body2": upright,
                     "point2": "tie", "length": st["length"]}, st["mass"])
            return
        if "tie_in" not in t or "tie_length" not in t:
            raise ModelError(f"{t.where}: an axle that is not steered needs 'tie_in' and "
                             "'tie_length' (a toe link from the chassis to the upright's "
                             f"{tie_out_key!r} point)")
        inner = V.point(self.chassis, p + "tie_in", _side(t["tie_in"], sign,
                                                          t.where + " tie_in"), t.where)
        _rod(V, {"name": p + "tie", "body1": self.chassis, "point1": inner,
                 "body2": upright, "point2": "tie", "length": t["tie_length"]},
             t.get("tie_mass"))


def _rod(V: _Vehicle, entry: dict, mass) -> None:
    """A distance constraint between two body points: a ``[[distances]]`` entry, or, when
    the template gives the bar a ``mass`` (kg, parametric), a ``[[rods]]`` entry (the
    distance constraint plus the mass of a uniform slender bar between the two points)."""
    if mass is None:
        V.out["distances"].append(entry)
    else:
        V.out["rods"].append(dict(entry, mass=mass))


def _part(ax: _Axle, key: str) -> _Table:
    return _Table(ax.t[key], f"{ax.t.where} {key}", ("mass", "com", "inertia"),
                  ("provenance",))


def _part_body(ax: _Axle, part: _Table, name: str, sign: float, what: str, points: dict):
    return ax.V.body(name, part["mass"], _side(part["com"], sign, part.where + " com"),
                     _inertia(part["inertia"], part.where + " inertia"),
                     _join(ax.describe(what), part.text("provenance")), points)


# ----------------------------------------------------------------------------------------
# suspension templates
# ----------------------------------------------------------------------------------------


def _double_wishbone(V: _Vehicle, spec, index: int) -> None:
    """Short-long arm double wishbone per side: lower arm ``<p>lca`` (revolute ``<p>lower``
    to the chassis), upper arm ``<p>uca`` (revolute ``<p>upper``), upright ``<p>upright``
    (spherical ``<p>lbj`` on the lower arm, cut spherical ``<p>ubj`` to the upper arm), tie
    rod ``<p>tie`` (distance), wheel ``<p>wheel`` (revolute ``<p>spin``)."""
    ax = _Axle(V, spec, index, "double-wishbone",
               ("lower_in", "lower_out", "upper_in", "upper_out", "tie_out", "lower_arm",
                "upper_arm", "upright"),
               ("lower_axis", "upper_axis", "tie_in", "tie_length", "tie_mass"))
    t = ax.t
    ax.check_on(("lower", "upper", "upright"))
    lo, uo, up = _part(ax, "lower_arm"), _part(ax, "upper_arm"), _part(ax, "upright")
    hardpoints = {k: t.vec(k) for k in ("lower_in", "lower_out", "upper_in", "upper_out",
                                        "tie_out")}
    center = ax.wheel.vec("center")
    per_side = {}
    for side, sign in SIDES:
        p = ax.prefix(side)
        h = {k: _side(v, sign, f"{t.where} {k}") for k, v in hardpoints.items()}
        lca, uca, upr = p + "lca", p + "uca", p + "upright"
        _part_body(ax, lo, lca, sign, "lower control arm (wishbone)",
                   {"in": h["lower_in"], "lbj": h["lower_out"]})
        _part_body(ax, uo, uca, sign, "upper control arm (wishbone)",
                   {"in": h["upper_in"], "ubj": h["upper_out"]})
        _part_body(ax, up, upr, sign, "upright (knuckle, hub)",
                   {"lbj": h["lower_out"], "ubj": h["upper_out"], "tie": h["tie_out"],
                    "hub": _side(center, sign, ax.wheel.where + " center")})
        per_side[side] = {"lower": lca, "upper": uca, "upright": upr}
        ax.wheel_side(side, sign, upr, "hub")
        # joints after the wheel body, in the order lower, upper, lbj, spin
        spin = V.out["joints"].pop()
        V.point(ax.chassis, p + "lca_in", h["lower_in"], t.where)
        V.point(ax.chassis, p + "uca_in", h["upper_in"], t.where)
        V.joint(p + "lower", "revolute", ax.chassis, lca, p + "lca_in", "in",
                ax.describe("lower-arm inner pivot axis; degree of freedom (wheel travel)"),
                axis=t.vec("lower_axis", [1.0, 0.0, 0.0]))
        V.joint(p + "upper", "revolute", ax.chassis, uca, p + "uca_in", "in",
                ax.describe("upper-arm inner pivot axis"),
                axis=t.vec("upper_axis", [1.0, 0.0, 0.0]))
        V.joint(p + "lbj", "spherical", lca, upr, "lbj", "lbj", ax.describe("lower ball joint"))
        V.out["joints"].append(spin)
        V.out["cuts"].append({"name": p + "ubj", "type": "spherical", "body1": uca,
                              "body2": upr, "point1": "ubj", "point2": "ubj",
                              "provenance": ax.describe("upper ball joint (loop closure)")})
        ax.tie_rod(side, sign, upr)
        V.dof_susp.append(p + "lower")
    for side, sign in SIDES:
        ax.spring_side(side, sign, per_side[side], "lower", lambda s, n: n)
    if ax.arb is not None:
        ax.arb_emit(ax.arb_points(per_side, "lower", lambda s: "arb"))


def _trailing_arm(V: _Vehicle, spec, index: int) -> None:
    """Trailing arm per side: arm ``<p>arm`` on the revolute ``<p>pivot`` (chassis point
    ``<p>pivot``), wheel ``<p>wheel`` on ``<p>spin`` at the arm's ``hub``."""
    ax = _Axle(V, spec, index, "trailing-arm", ("pivot", "arm"), ("axis",))
    t = ax.t
    ax.check_on(("arm",))
    arm = _part(ax, "arm")
    center = ax.wheel.vec("center")
    per_side = {}
    for side, sign in SIDES:
        p = ax.prefix(side)
        piv = _side(t.vec("pivot"), sign, t.where + " pivot")
        body = p + "arm"
        _part_body(ax, arm, body, sign, "trailing arm with hub",
                   {"pivot": piv, "hub": _side(center, sign, ax.wheel.where + " center")})
        per_side[side] = {"arm": body}
        V.point(ax.chassis, p + "pivot", list(piv), t.where)
        V.joint(p + "pivot", "revolute", ax.chassis, body, p + "pivot", "pivot",
                ax.describe("trailing-arm pivot axis; degree of freedom (wheel travel)"),
                axis=t.vec("axis", [0.0, 1.0, 0.0]))
        ax.wheel_side(side, sign, body, "hub")
        V.dof_susp.append(p + "pivot")
    # the buggy's order: every arm body and its wheel, then the springs of both sides
    for side, sign in SIDES:
        ax.spring_side(side, sign, per_side[side], "arm", lambda s, n: n)
    if ax.arb is not None:
        ax.arb_emit(ax.arb_points(per_side, "arm", lambda s: "arb"))


def _solid_axle(V: _Vehicle, spec, index: int) -> None:
    """Rigid axle idealised by a slide and a roll hinge: a massless carrier ``<body>_carrier``
    on the prismatic ``<body>_bounce`` (along ``bounce_axis``, default z) at the chassis
    point ``center``, the axle ``<body>`` on the revolute ``<body>_roll`` (``roll_axis``,
    default x) at the same point, the wheels ``<p>wheel`` on ``<p>spin`` at the axle's
    ``hub_l`` / ``hub_r``."""
    ax = _Axle(V, spec, index, "solid-axle", ("center", "mass", "com", "inertia"),
               ("axle", "bounce_axis", "roll_axis"))
    t = ax.t
    ax.check_on(("axle",))
    body = t.text("axle", f"{ax.name}_axle")
    carrier = body + "_carrier"
    rc = t.vec("center")
    if not (_is_num(rc[1]) and rc[1] == 0):
        raise ModelError(f"{t.where} center: the roll centre must lie on the vehicle's "
                         f"centre plane (y = 0), got {rc!r}")
    V.body(carrier, 0.0, list(rc), [0.0, 0.0, 0.0],
           ax.describe("massless carrier of the axle (slide of the bounce motion)"),
           {"rc": list(rc)})
    center = ax.wheel.vec("center")
    V.body(body, t["mass"], t.vec("com"), _inertia(t["inertia"], t.where + " inertia"),
           ax.describe("rigid axle (housing, differential, hubs)"),
           {"rc": list(rc), "hub_l": list(center),
            "hub_r": _side(center, -1.0, ax.wheel.where + " center")})
    V.point(ax.chassis, body + "_rc", list(rc), t.where)
    V.joint(body + "_bounce", "prismatic", ax.chassis, carrier, body + "_rc", "rc",
            ax.describe("axle bounce (slide idealisation of the axle guidance)"),
            axis=t.vec("bounce_axis", [0.0, 0.0, 1.0]))
    V.joint(body + "_roll", "revolute", carrier, body, "rc", "rc",
            ax.describe("axle roll hinge (roll centre)"),
            axis=t.vec("roll_axis", [1.0, 0.0, 0.0]))
    V.dof_susp += [body + "_bounce", body + "_roll"]
    for side, sign in SIDES:
        ax.wheel_side(side, sign, body, "hub_" + side)
    both = {"l": {"axle": body}, "r": {"axle": body}}
    for side, sign in SIDES:
        ax.spring_side(side, sign, both[side], "axle", lambda s, n: f"{s}_{n}")
    if ax.arb is not None:
        ax.arb_emit(ax.arb_points(both, "axle", lambda s: f"arb_{s}"))


def _macpherson(V: _Vehicle, spec, index: int) -> None:
    """MacPherson strut per side: lower arm ``<p>lca`` (revolute ``<p>lower``), upright
    ``<p>upright`` (spherical ``<p>lbj``), a massless strut top ``<p>strut_top`` on the
    universal joint ``<p>strut_mount`` at the chassis point ``strut_top`` (axes x and y),
    the strut a cut cylindrical joint ``<p>strut`` (top body and upright slide and turn
    along the strut axis ``strut_top - strut_low``), tie rod ``<p>tie``, wheel."""
    ax = _Axle(V, spec, index, "macpherson",
               ("lower_in", "lower_out", "strut_top", "strut_low", "tie_out", "lower_arm",
                "upright"),
               ("lower_axis", "tie_in", "tie_length", "tie_mass"))
    t = ax.t
    ax.check_on(("lower", "upright"))
    lo, up = _part(ax, "lower_arm"), _part(ax, "upright")
    hp = {k: t.vec(k) for k in ("lower_in", "lower_out", "strut_top", "strut_low", "tie_out")}
    center = ax.wheel.vec("center")
    per_side = {}
    for side, sign in SIDES:
        p = ax.prefix(side)
        h = {k: _side(v, sign, f"{t.where} {k}") for k, v in hp.items()}
        try:
            axis = [float(a) - float(b) for a, b in zip(_numeric(V, h["strut_top"]),
                                                         _numeric(V, h["strut_low"]))]
        except (TypeError, ValueError):
            raise ModelError(f"{t.where}: strut_top and strut_low fix the strut axis (a "
                             "load-time direction): give numbers or parameter names") from None
        lca, upr, top = p + "lca", p + "upright", p + "strut_top"
        _part_body(ax, lo, lca, sign, "lower control arm", {"in": h["lower_in"],
                                                             "lbj": h["lower_out"]})
        _part_body(ax, up, upr, sign, "upright with the strut tube",
                   {"lbj": h["lower_out"], "strut": h["strut_low"], "tie": h["tie_out"],
                    "hub": _side(center, sign, ax.wheel.where + " center")})
        V.body(top, 0.0, list(h["strut_top"]), [0.0, 0.0, 0.0],
               ax.describe("massless strut top (the rod of the strut)"),
               {"mount": list(h["strut_top"])})
        per_side[side] = {"lower": lca, "upright": upr}
        ax.wheel_side(side, sign, upr, "hub")
        spin = V.out["joints"].pop()
        V.point(ax.chassis, p + "lca_in", h["lower_in"], t.where)
        V.point(ax.chassis, p + "strut_mount", h["strut_top"], t.where)
        V.joint(p + "lower", "revolute", ax.chassis, lca, p + "lca_in", "in",
                ax.describe("lower-arm inner pivot axis; degree of freedom (wheel travel)"),
                axis=t.vec("lower_axis", [1.0, 0.0, 0.0]))
        V.joint(p + "lbj", "spherical", lca, upr, "lbj", "lbj", ax.describe("lower ball joint"))
        V.joint(p + "strut_mount", "universal", ax.chassis, top, p + "strut_mount", "mount",
                ax.describe("strut top mount (universal: the strut cannot spin on itself)"),
                axis=[1.0, 0.0, 0.0], axis2=[0.0, 1.0, 0.0])
        V.out["joints"].append(spin)
        V.out["cuts"].append({"name": p + "strut", "type": "cylindrical", "body1": top,
                              "body2": upr, "point1": "mount", "point2": "strut",
                              "axis1": axis, "axis2": axis,
                              "provenance": ax.describe("strut (cylindrical closure)")})
        ax.tie_rod(side, sign, upr)
        V.dof_susp.append(p + "lower")
    for side, sign in SIDES:
        ax.spring_side(side, sign, per_side[side], "lower", lambda s, n: n)
    if ax.arb is not None:
        ax.arb_emit(ax.arb_points(per_side, "lower", lambda s: "arb"))


_ROD_KEYS = ("name", "chassis", "upright", "length", "mass")


def _multi_link(V: _Vehicle, spec, index: int) -> None:
    """Five-rod (multi-link) suspension per side: the upright ``<p>upright`` on a floating
    joint ``<p>upright`` (at its centre of mass) from the chassis, held by five distance
    constraints ``<p><rod>`` between chassis points ``<p><rod>_in`` and upright points
    ``<rod>``; the remaining degree of freedom (wheel travel) is ``<p>upright.z``."""
    ax = _Axle(V, spec, index, "multi-link", ("rods", "upright"), ())
    t = ax.t
    ax.check_on(("upright",))
    up = _part(ax, "upright")
    rods = t["rods"]
    if not isinstance(rods, list) or len(rods) != 5:
        raise ModelError(f"{t.where} rods: expected five rod tables {{name, chassis, upright"
                         f"[, length, mass]}}, got {rods!r}")
    rods = [_Table(r, f"{t.where} rods[{i}]", ("name", "chassis", "upright"), _ROD_KEYS)
            for i, r in enumerate(rods)]
    center = ax.wheel.vec("center")
    per_side = {}
    for side, sign in SIDES:
        p = ax.prefix(side)
        upr = p + "upright"
        com = _side(up["com"], sign, up.where + " com")
        points = {"G": com, "hub": _side(center, sign, ax.wheel.where + " center")}
        for r in rods:
            points[r.text("name")] = _side(r.vec("upright"), sign, r.where + " upright")
        _part_body(ax, up, upr, sign, "upright (wheel carrier) of the five-rod suspension",
                   points)
        V.point(ax.chassis, p + "upright_G", list(com), t.where)
        V.joint(upr, "floating", ax.chassis, upr, p + "upright_G", "G",
                ax.describe("upright on a floating joint, guided by five rods"))
        per_side[side] = {"upright": upr}
        for r in rods:
            inner = V.point(ax.chassis, f"{p}{r['name']}_in",
                            _side(r.vec("chassis"), sign, r.where + " chassis"), r.where)
            if "length" in r:
                length = r["length"]
            else:                                # the design distance of the hardpoints
                a = _numeric(V, V.bodies[ax.chassis]["points"][inner])
                b = _numeric(V, points[r["name"]])
                length = float(sum((x - y) ** 2 for x, y in zip(a, b)) ** 0.5)
            _rod(V, {"name": f"{p}{r['name']}", "body1": ax.chassis, "point1": inner,
                     "body2": upr, "point2": r["name"], "length": length}, r.get("mass"))
        ax.wheel_side(side, sign, upr, "hub")
        V.dof_susp.append(upr + ".z")
    for side, sign in SIDES:
        ax.spring_side(side, sign, per_side[side], "upright", lambda s, n: n)
    if ax.arb is not None:
        ax.arb_emit(ax.arb_points(per_side, "upright", lambda s: "arb"))


def _numeric(V: _Vehicle, v: list) -> list:
    """Load-time numbers of three fields (parameters by their current values)."""
    out = []
    for x in v:
        if _is_num(x):
            out.append(float(x))
            continue
        name, scale = None, 1.0
        if isinstance(x, str):
            name = x
        elif isinstance(x, dict) and "param" in x:
            name, scale = x["param"], float(x.get("scale", 1.0))
        elif isinstance(x, (list, tuple)) and len(x) == 2:
            name, scale = x[0], float(x[1])
        if name not in V.values:
            raise UnknownNameError("parameter", str(name), V.values)
        out.append(scale * V.values[name])
    return out


#: suspension templates: name -> expansion
SUSPENSIONS: dict[str, Callable] = {
    "double-wishbone": _double_wishbone,
    "trailing-arm": _trailing_arm,
    "solid-axle": _solid_axle,
    "macpherson": _macpherson,
    "multi-link": _multi_link,
}

_VEHICLE_KEYS = ("speed", "chassis", "steering", "axles", "tire", "speed_control")
_SC_KEYS = ("name", "speed", "axles", "gain", "torque_max", "point", "heading", "shares")


def _speed_control(V: _Vehicle, spec) -> None:
    t = _Table(spec, "[vehicle] speed_control", ("axles", "gain", "torque_max"), _SC_KEYS)
    axles = t["axles"]
    if not isinstance(axles, list) or not axles:
        raise ModelError(f"{t.where} axles: expected a non-empty list of axle names")
    wheels = []
    for a in axles:
        if a not in V.wheels:
            exc = UnknownNameError("axle", str(a), V.wheels)
            exc.args = (f"{t.where} axles: {exc.args[0]}",)
            raise exc
        wheels += V.wheels[a]
    shares = t.get("shares", [1.0 / len(wheels)] * len(wheels))
    if not isinstance(shares, list) or len(shares) != len(wheels):
        raise ModelError(f"{t.where} shares: expected {len(wheels)} values (one per driven "
                         f"wheel), got {shares!r}")
    speed = t.get("speed", V.speed)
    if speed is None:
        raise ModelError(f"{t.where}: missing key 'speed' (no [vehicle] speed either)")
    heading = t.get("heading", "fwd")
    if heading == "fwd" and "fwd" not in V.bodies[V.chassis].get("vectors", {}):
        V.bodies[V.chassis].setdefault("vectors", {})["fwd"] = [1.0, 0.0, 0.0]
    V.out["speed_controls"].append({
        "name": t.text("name", "cruise"), "body": V.chassis, "point": t.get("point", "G"),
        "heading": heading, "speed": speed,
        "wheels": [[w, c, "spin", s] for (w, c), s in zip(wheels, shares)],
        "gain": t["gain"], "torque_max": t["torque_max"]})


# ----------------------------------------------------------------------------------------
# public functions
# ----------------------------------------------------------------------------------------


def expand_vehicle(spec: dict, parameters: dict | None = None) -> dict:
    """The model-document sections of the vehicle ``spec`` (the ``[vehicle]`` table):
    ``{"bodies": [...], "joints": [...], ..., "dof": [...], "summary": [...]}``.
    ``parameters`` (name -> table or value) is needed only by templates that fix a
    load-time direction from hardpoints (MacPherson's strut axis)."""
    t = _Table(spec, "[vehicle]", ("chassis", "axles"), _VEHICLE_KEYS)
    V = _Vehicle()
    V.values = {k: float(v["value"] if isinstance(v, dict) else v)
                for k, v in (parameters or {}).items()
                if _is_num(v) or (isinstance(v, dict) and _is_num(v.get("value")))}
    V.speed = t.get("speed")
    if V.speed is not None and not (_is_num(V.speed) or isinstance(V.speed, str)):
        raise ModelError(f"[vehicle] speed: expected a number or a parameter name, got "
                         f"{V.speed!r}")
    if "tire" in t:
        if not isinstance(t["tire"], dict):
            raise ModelError(f"[vehicle] tire: expected a table, got {t['tire']!r}")
        V.tire = dict(t["tire"])
    _chassis(V, t["chassis"])
    if "steering" in t:
        st = t["steering"]
        kind = st.get("type") if isinstance(st, dict) else None
        if kind not in STEERINGS:
            if not isinstance(st, dict) or "type" not in st:
                raise ModelError("[vehicle] steering: missing key 'type'")
            exc = UnknownNameError("steering template", str(kind), STEERINGS)
            exc.args = (f"[vehicle] steering type: {exc.args[0]}",)
            raise exc
        STEERINGS[kind](V, st)
    axles = t["axles"]
    if not isinstance(axles, list) or not axles:
        raise ModelError("[vehicle] axles: expected a non-empty list of axle tables")
    for i, ax in enumerate(axles):
        where = f"[vehicle] axles[{i}]"
        if not isinstance(ax, dict):
            raise ModelError(f"{where}: expected a table, got {ax!r}")
        if "name" in ax:
            where += f" ({ax['name']!r})"
        if "suspension" not in ax:
            raise ModelError(f"{where}: missing key 'suspension'")
        kind = ax["suspension"]
        if kind not in SUSPENSIONS:
            exc = UnknownNameError("suspension template", str(kind), SUSPENSIONS)
            exc.args = (f"{where} suspension: {exc.args[0]}",)
            raise exc
        SUSPENSIONS[kind](V, ax, i)
        V.summary.append(f"axle {ax.get('name')!r}: {kind}")
    if V.steering is not None and not V.steering["used"]:
        raise ModelError(f"{V.steering['where']}: axle {V.steering['axle']!r} is not an axle "
                         "with tie rods (double-wishbone or macpherson)")
    if "speed_control" in t:
        _speed_control(V, t["speed_control"])
    out = {k: v for k, v in V.out.items() if v}
    out["dof"] = V.dof_chassis + V.dof_susp + V.dof_spin
    out["summary"] = V.summary
    return out


def expand_document(data: dict, source: str = "<vehicle>", overrides: dict | None = None
                    ) -> dict:
    """A model document with its ``[vehicle]`` section replaced by the expanded sections:
    the generated entries first, then the document's own ``[[bodies]]``, ``[[springs]]``,
    ... (an own entry with the NAME of a generated one replaces it in place, e.g. a
    maneuver's ``[[drives]] name = "steering"``); ``[model] dof`` generated unless given.
    ``overrides`` (parameter values, e.g. the options of :func:`load_model`) are used by
    the few load-time numbers the templates compute from parameters (MacPherson strut
    axis, default multi-link rod lengths)."""
    params = dict(data.get("parameters") or {})
    for k, v in (overrides or {}).items():
        if k in params and _is_num(v):
            params[k] = float(v)
    try:
        gen = expand_vehicle(data["vehicle"], params)
    except ModelError as exc:
        exc.args = (f"{source}: {exc.args[0]}",) + tuple(exc.args[1:])
        raise
    out = {k: copy.deepcopy(v) for k, v in data.items() if k != "vehicle"}
    for key in _OUT_SECTIONS:
        if key in gen:
            own = out.get(key, [])
            if not isinstance(own, list):
                raise ModelError(f"{source}: [[{key}]]: expected an array of tables")
            entries = list(gen[key])
            index = {e["name"]: i for i, e in enumerate(entries)}
            for e in own:
                name = e.get("name") if isinstance(e, dict) else None
                if name in index:
                    entries[index[name]] = e
                else:
                    entries.append(e)
            out[key] = entries
    head = dict(out.get("model", {}))
    head.setdefault("dof", gen["dof"])
    meta = dict(head.get("meta", {}))
    meta.setdefault("vehicle", gen["summary"])
    head["meta"] = meta
    out["model"] = head
    return out
