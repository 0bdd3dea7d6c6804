"""Writing a model back as a document of the file format (:func:`model_to_dict`,
:func:`save_json`); ``load_model(save_json(m, p))`` compiles to the same arrays as ``m``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from workbench.model.elements import GROUND


def _out(v):
    """JSON/TOML-ready copy of a field: (name, scale) -> {param, scale}; numpy -> float."""
    if isinstance(v, tuple) and len(v) == 2 and isinstance(v[0], str):
        return {"param": v[0], "scale": float(v[1])}
    if isinstance(v, dict):
        return {str(k): _out(x) for k, x in v.items() if x is not None}
    if isinstance(v, (list, tuple, np.ndarray)):
        return [_out(x) for x in v]
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return float(v)
    return v


def _drop_empty(d: dict) -> dict:
    return {k: v for k, v in d.items() if v not in (None, "", {}, [])}


def model_to_dict(model: "Model") -> dict:
    """The model as a document of the file format (plain dicts, lists, strings, numbers)."""
    head = {"name": model.name, "description": model.description,
            "provenance": model.provenance, "gravity": _out(model.gravity),
            "planar": bool(model.planar)}
    if model.dof_spec is not None:
        head["dof"] = _out(list(model.dof_spec))
    if (model.rod_mode, model.rod_extrapolation) != ("exact", "quadratic"):
        head["rod_mode"] = model.rod_mode
        head["rod_extrapolation"] = model.rod_extrapolation
    meta = {k: v for k, v in model.meta.items() if k != "generator"}
    if meta:
        head["meta"] = _out(meta)
    doc: dict[str, Any] = {"model": _drop_empty(head)}
    if model.parameters:
        doc["parameters"] = {
            p.name: _drop_empty({"value": float(p.value), "unit": p.unit,
                                 "provenance": p.provenance, "lower": p.lower,
                                 "upper": p.upper})
            for p in model.parameters.values()}
    ground = model.bodies[GROUND]
    if ground.points or ground.vectors or ground.provenance:
        doc["ground"] = _drop_empty({"points": _out(ground.points),
                                     "vectors": _out(ground.vectors),
                                     "provenance": ground.provenance})
    doc["bodies"] = [
        _drop_empty({"name": b.name, "mass": _out(b.mass), "com": _out(b.com),
                     "inertia": _out(b.inertia), "points": _out(b.points),
                     "vectors": _out(b.vectors), "provenance": b.provenance})
        for b in model.bodies.values() if b.name != GROUND]
    doc["joints"] = [
        _drop_empty({"name": j.name, "type": j.type, "parent": j.parent, "child": j.child,
                     "parent_point": _out(j.parent_point), "child_point": _out(j.child_point),
                     "axis": _out(j.axis), "axis2": _out(j.axis2),
                     "orientation": _out(j.orientation), "q0": _out(j.q0),
                     "qd0": _out(j.qd0), "provenance": j.provenance})
        for j in model.joints.values()]
    doc["cuts"] = [
        _drop_empty({"name": c.name, "type": c.type, "body1": c.body1, "body2": c.body2,
                     "point1": _out(c.point1), "point2": _out(c.point2),
                     "axis1": _out(c.axis1), "axis2": _out(c.axis2),
                     "normal": _out(c.normal), "normal2": _out(c.normal2),
                     "provenance": c.provenance})
        for c in model.cuts.values()]
    # cam followers and point-to-line joints are written expanded (their massless bodies
    # and joints above, the relation here)
    doc["cam_relations"] = [
        _drop_empty({"name": c.name, "radial": c.radial, "polar": c.polar, "a0": _out(c.a0),
                     "cos": _out(c.cos), "sin": _out(c.sin), "provenance": c.provenance})
        for c in model.cams.values()]
    doc["distances"] = [
        {"name": d.name, "body1": d.body1, "point1": _out(d.point1), "body2": d.body2,
         "point2": _out(d.point2), "length": _out(d.length)}
        for d in model.distances.values() if d.mass is None]
    doc["rods"] = [
        {"name": d.name, "body1": d.body1, "point1": _out(d.point1), "body2": d.body2,
         "point2": _out(d.point2), "length": _out(d.length), "mass": _out(d.mass)}
        for d in model.distances.values() if d.mass is not None]
    doc["drives"] = [
        {"name": d.name, "joint": d.joint, "function": _out(d.function.to_spec()),
         "index": int(d.index)} for d in model.drives.values()]
    doc["springs"] = [
        {"name": s.name, "body1": s.body1, "point1": _out(s.point1), "body2": s.body2,
         "point2": _out(s.point2), "k": _out(s.k), "c": _out(s.c), "length": _out(s.length),
         **({"air": _out(s.air)} if s.air is not None else {}),
         **({"damper": _out(s.damper)} if s.damper is not None else {})}
        for s in model.springs.values()]
    doc["joint_springs"] = [
        {"name": s.name, "joint": s.joint, "k": _out(s.k), "c": _out(s.c), "q0": _out(s.q0),
         "index": int(s.index)} for s in model.joint_springs.values()]
    doc["forces"] = [
        {"name": f.name, "body": f.body, "point": _out(f.point),
         "direction": _out(f.direction), "function": _out(f.function.to_spec())}
        for f in model.loads.values() if f.kind == "force"]
    doc["torques"] = [
        {"name": t.name, "body": t.body, "direction": _out(t.direction),
         "function": _out(t.function.to_spec())}
        for t in model.loads.values() if t.kind == "torque"]
    doc["tires"] = [
        _drop_empty({"name": t.name, "body": t.body, "center": _out(t.center),
                     "axis": _out(t.axis), "radius": _out(t.radius), "k": _out(t.k),
                     "c": _out(t.c), "mu": _out(t.mu), "v_eps": _out(t.v_eps),
                     "depth_ramp": _out(t.depth_ramp), "force_ramp": _out(t.force_ramp),
                     "provenance": t.provenance,
                     "law": None if t.law == "disc" else t.law, "tir": t.tir,
                     "coefficients": _out(t.coefficients)})
        for t in model.tires.values()]
    if model.speed_controls:
        doc["speed_controls"] = [
            {"name": s.name, "body": s.body, "point": _out(s.point), "heading": _out(s.heading),
             "speed": _out(s.speed.to_spec()), "wheels": [_out(list(w)) for w in s.wheels],
             "gain": _out(s.gain), "torque_max": _out(s.torque_max)}
            for s in model.speed_controls.values()]
    if model.path_followers:
        doc["path_followers"] = [
            {"name": s.name, "body": s.body, "point": _out(s.point), "joint": s.joint,
             "path": _out(s.path.to_spec()), "gain": _out(s.gain),
             "stiffness": _out(s.stiffness), "damping": _out(s.damping),
             "index": int(s.index)}
            for s in model.path_followers.values()]
    if model.road_spec is not None:
        doc["road"] = {"z0": _out(model.road_spec.z0), "steps": _out(model.road_spec.steps)}
        if model.road_spec.provenance:
            doc["road"]["provenance"] = model.road_spec.provenance
    if model.objectives:
        doc["objectives"] = _out(model.objectives)
    return {k: v for k, v in doc.items() if v != []}


def save_json(model: Model, path) -> Path:
    """Write ``model_to_dict(model)`` as JSON to ``path``; returns the path."""
    path = Path(path)
    path.write_text(json.dumps(model_to_dict(model), indent=2) + "\n", encoding="utf-8")
    return path

