"""The compiled, immutable array form of a model, as handed to the numba kernels.

:func:`ModelArrays` builds the flat numpy arrays of a model into one numba *StructRef*
(:class:`KernelArrays`).  All numeric data that can be bound to a design parameter live in
the *field vector* ``p`` and are read through index arrays, so a parameter change is a
change of ``p`` only and derivatives with respect to parameters are derivatives with
respect to entries of ``p``.

Why a StructRef and not a named tuple: numba passes a tuple argument by value, flattened
into its arrays, and reference-counts every member array on each call that LLVM does not
inline.  With ~40 arrays that cost ~0.8 us per kernel call (measured: a point-kinematics
call 1.4 us through the tuple, 0.01 us through a StructRef), which dominated the time
step.  A StructRef is passed as one pointer.  Python code reads the fields as attributes
as before (they are served from the named-tuple copy kept on the proxy).

Reference counts.  numba counts the references of every array it passes to a kernel that
LLVM does not inline and of every view it takes (an atomic increment and decrement of the
buffer's memory-info record, a pipeline-serialising ``lock`` instruction each): in the
hot loops they took about half of the time (measured with ``perf`` on the five-bar step
Jacobians).  Hence three helpers for the kernels, and a data model:

* :func:`borrowed` / :func:`borrow`: views without a memory-info pointer, for which
  ``NRT_incref``/``NRT_decref`` return at once.  The StructRef's arrays are borrowed
  from the proxy's named tuple (which owns them for as long as the proxy lives: the
  kernels never keep or return the StructRef); the integrator, the step-Jacobian rows and
  the sweep recursions borrow their inputs (owned by the caller for the call) and their
  work arrays (owned by the kernel, kept alive to its end by :func:`keepalive`);
* :func:`scratch`: constant-shape temporaries on the stack instead of ``np.empty``;
* the StructRef itself is not reference-counted inside the kernels
  (:class:`UncountedStructRefModel`): numba counted it at every kernel call and every
  inlined kernel's argument, the one remaining atomic operation of the hot loops.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import njit, typeof, types
from numba.core import cgutils
from numba.core.datamodel import models
from numba.core.datamodel.registry import default_manager
from numba.experimental import structref
from numba.extending import NativeValue, box, intrinsic, overload, unbox
from numba.np.arrayobj import populate_array

# frame (tree node) types
FIXED, REVOLUTE, PRISMATIC = 0, 1, 2
# primitive constraint equation types (C_CAM: the cam relation ``z_a - s(z_b) = 0`` between
# a radial and a polar coordinate, ``s`` a Fourier series, workbench.kernels.tree.cam_profile)
C_PTCOMP, C_DOTVV, C_DOTVP, C_DIST, C_DRIVE, C_CAM = 0, 1, 2, 3, 4, 5
# degree-of-freedom kinds
DOF_COORD, DOF_POINT = 0, 1
# time-function kinds
TF_CONST, TF_POLY, TF_SINE, TF_SMOOTHSTEP, TF_STEPS = 0, 1, 2, 3, 4
# applied load kinds
AF_FORCE, AF_TORQUE = 0, 1

ModelArraysTuple = namedtuple(
    "ModelArraysTuple",
    [
        "p",            # float[nfield]: numeric fields (geometry, inertia, force data)
        "gravity",      # float[3]
        "planar",       # int: 1 for planar models
        # frames (tree nodes); parents come before children
        "fr_parent", "fr_type", "fr_coord", "fr_off", "fr_axis", "fr_C",
        "fr_body",      # int[nf]: body attached to the frame or -1
        # bodies
        "b_frame", "b_org", "b_mass", "b_com", "b_inr",
        # points (body -1 = ground, coordinates in the body frame) and unit vectors
        "pt_body", "pt_fld", "vc_body", "vc_val",
        # primitive constraint equations: type, up to 4 integers (points, vectors,
        # coordinates; C_CAM: radial coordinate, polar coordinate, the polar coordinate's
        # frame, number of harmonics N), first field (rod length; C_CAM: the 2N + 1
        # Fourier coefficients a0, a1, b1, ..., aN, bN, consecutive)
        "c_type", "c_i", "c_fld",
        # degrees of freedom
        "dof_type", "dof_i",
        # point-to-point spring-dampers; sp_law (ns x 3): stiffness law, damper law, knee
        # count; sp_x (ns x 2): first extra field of each law
        # (workbench/forces/spring_laws.py)
        "sp_pt", "sp_k", "sp_c", "sp_L0", "sp_law", "sp_x",
        # joint spring-dampers
        "js_coord", "js_k", "js_c", "js_z0",
        # applied forces / torques f(t) d: kind, point (force) or body (torque), first of
        # the three fields of the direction d in p, time function f
        "af_type", "af_idx", "af_dfld", "af_tf",
        # time functions: kind, first field of the coefficients in p, number of fields
        # (the coefficients are consecutive fields, see TimeFunction.fields)
        "tf_kind", "tf_fld", "tf_n",
        # tire-ground contacts (workbench/workbench.forces.tire.py): wheel-centre point, spin-axis
        # vector,
        # first of the tire_npar(law) consecutive parameter fields in p, law
        # (workbench.forces.tire_mf.LAW_*)
        "ty_pt", "ty_vc", "ty_par", "ty_law",
        # road: (first field, number of fields) of the road array in p (length 0: flat z=0)
        "rd_fld",
        # speed controllers: measured point, heading vector, set-speed time function, first
        # of the fields (gain, torque_max); driven wheels: controller, wheel body, carrier
        # body (-1: ground), spin-axis vector, share field
        "sc_pt", "sc_vc", "sc_tf", "sc_fld",
        "sw_sc", "sw_body", "sw_carrier", "sw_vc", "sw_fld",
        # path followers (stateless steering servo): preview point, steering coordinate,
        # path y(x) time function, first of the fields (gain, stiffness, damping)
        "pf_pt", "pf_coord", "pf_tf", "pf_fld",
        # rod elements (seed 002; their distance constraints are among the c_* rows): the
        # two end points (point indices) and the field of the rod's mass
        "rd_pt", "rd_m",
    ],
)


class ModelArraysType(types.StructRef):
    """Numba type of :class:`KernelArrays` (one field per entry of ModelArraysTuple)."""

    def preprocess_fields(self, fields):
        return tuple((name, types.unliteral(typ)) for name, typ in fields)


class UncountedStructRefModel(models.StructRefModel):
    """numba's StructRef model without reference counts inside the kernels: it shows no
    memory-info member to numba's reference counting (``traverse`` yields nothing), so
    binding the model's StructRef to a variable, passing it to a kernel or copying it
    into an inlined kernel's argument costs no atomic increment/decrement.  Safe because
    the kernels never keep or return the StructRef: the Python proxy owns it for the
    whole call (:func:`_unbox_kernel_arrays` gives back at once the reference that
    unboxing takes).  Measured on the five-bar's adjoint sweep (``gdb`` on the atomic
    instructions of ``NRT_incref``/``NRT_decref``): 94 % of its atomic reference-count
    operations were this one StructRef's, and the two functions took 11 % of its
    samples (``perf``); 111 -> 11 atomic operations per row with this model
    (docs/performance.md, "Session 22")."""

    def traverse(self, builder):
        return []


default_manager.register(ModelArraysType, UncountedStructRefModel)
structref.define_attributes(ModelArraysType)


class KernelArrays(structref.StructRefProxy):
    """Python handle of the kernel arrays: passed to the numba kernels as one pointer;
    attribute access and iteration read the named-tuple copy ``tuple``."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.tuple, name)

    def __iter__(self):
        return iter(self.tuple)

    def __reduce__(self):
        return (_from_tuple, (tuple(self.tuple),))


@box(ModelArraysType)
def _box_kernel_arrays(typ, val, c):
    """numba's StructRef boxing, as ``structref.define_boxing`` writes it (which cannot
    be called here: it also registers numba's unboxing, and numba refuses a second
    unboxing for the type): the proxy takes the StructRef's reference (a constructor's
    new StructRef, :func:`_constructor`)."""
    struct_ref = cgutils.create_struct_proxy(typ)(c.context, c.builder, value=val)
    boxed_meminfo = c.box(types.MemInfoPointer(types.voidptr), struct_ref.meminfo)
    ctor_pyfunc = c.pyapi.unserialize(c.pyapi.serialize_object(KernelArrays._numba_box_))
    ty_pyobj = c.pyapi.unserialize(c.pyapi.serialize_object(typ))
    res = c.pyapi.call_function_objargs(ctor_pyfunc, [ty_pyobj, boxed_meminfo])
    c.pyapi.decref(ctor_pyfunc)
    c.pyapi.decref(ty_pyobj)
    c.pyapi.decref(boxed_meminfo)
    return res


@unbox(ModelArraysType)
def _unbox_kernel_arrays(typ, obj, c):
    """numba's StructRef unboxing, and the reference it took released at once: the
    argument's cleanup after the call does not see the uncounted model's memory-info
    (:class:`UncountedStructRefModel`), and the proxy ``obj`` keeps the StructRef alive
    for the call."""
    mi_obj = c.pyapi.object_getattr_string(obj, "_meminfo")
    mip_type = types.MemInfoPointer(types.voidptr)
    mi = c.unbox(mip_type, mi_obj).value
    c.context.nrt.decref(c.builder, mip_type, mi)
    struct_ref = cgutils.create_struct_proxy(typ)(c.context, c.builder)
    struct_ref.meminfo = mi
    c.pyapi.decref(mi_obj)
    return NativeValue(struct_ref._getvalue())


_CTORS: dict = {}


@intrinsic
def borrowed(typingctx, arr):
    """A view of the array ``arr`` without a memory-info pointer (numba's reference count
    of the buffer): reading it from a StructRef or passing it to a kernel then costs no
    atomic increment/decrement (``NRT_incref`` returns at once for a null pointer).  The
    owner of the buffer must outlive every use of the view."""
    if not isinstance(arr, types.Array):
        return None
    sig = arr(arr)

    def codegen(context, builder, signature, args):
        aryty = signature.args[0]
        src = context.make_array(aryty)(context, builder, value=args[0])
        dst = context.make_array(aryty)(context, builder)
        populate_array(dst, data=src.data, shape=src.shape, strides=src.strides,
                       itemsize=src.itemsize, meminfo=None, parent=None)
        return dst._getvalue()

    return sig, codegen


_SCRATCH: dict = {}


def scratch(*shape, dtype=types.float64):
    """A kernel helper that returns a C-contiguous array (float64, or the numba ``dtype``)
    of the constant ``shape`` on the stack of the kernel that calls it (uninitialised; no
    allocation, no reference count: ``_B = scratch(3, 6, 3)`` at module level, ``B =
    _B()`` in the kernel).  For the small fixed-size temporaries of the hot kernels; the
    array must not leave the kernel that created it (not returned, not stored).  For
    temporaries whose size is the model's, :func:`take1` / :func:`take2` cut them from a
    scratch buffer of a bound."""
    shape = tuple(int(k) for k in shape)
    fn = _SCRATCH.get((shape, dtype))
    if fn is not None:
        return fn
    size = 1
    for k in shape:
        size *= k
    aryty = types.Array(dtype, len(shape), "C")
    if dtype not in (types.float64, types.int64):
        raise TypeError(f"scratch: float64 or int64 only, not {dtype}")
    item = 8
    strides = []
    acc = item
    for k in reversed(shape):
        strides.insert(0, acc)
        acc *= k

    def codegen(context, builder, signature, args):
        intp = context.get_value_type(types.intp)
        ptr = cgutils.alloca_once(builder, context.get_value_type(dtype), size=size)
        ary = context.make_array(aryty)(context, builder)
        populate_array(ary, data=ptr,
                       shape=cgutils.pack_array(builder, [intp(k) for k in shape]),
                       strides=cgutils.pack_array(builder, [intp(k) for k in strides]),
                       itemsize=intp(item), meminfo=None, parent=None)
        return ary._getvalue()

    def typer(typingctx):
        return aryty(), codegen

    typer.__name__ = "scratch_" + "x".join(str(k) for k in shape) + "_" + str(dtype)
    fn = _SCRATCH[(shape, dtype)] = intrinsic(typer)
    return fn


@njit(cache=True, inline="always")
def take1(buf, k):
    """The first ``k`` entries of the 1-d :func:`scratch` buffer ``buf`` (a view without
    reference count, uninitialised), or a new heap array when ``buf`` is shorter: a
    temporary of a model-dependent size on the stack up to the buffer's bound.  The view
    lives as long as the kernel that made ``buf``."""
    if k <= buf.shape[0]:
        return buf[:k]
    return np.empty(k, dtype=buf.dtype)


@njit(cache=True, inline="always")
def take2(buf, r, c):
    """:func:`take1` of an ``r x c`` C-contiguous array."""
    if r * c <= buf.shape[0]:
        return buf[:r * c].reshape((r, c))
    return np.empty((r, c), dtype=buf.dtype)


def borrow(x):
    """``x`` with every array in it (nested tuples too) replaced by its :func:`borrowed`
    view; other values unchanged.  For numba kernels only."""
    raise NotImplementedError("borrow is a numba kernel helper")


@overload(borrow)
def _borrow_impl(x):
    if isinstance(x, types.Array):
        return lambda x: borrowed(x)
    if isinstance(x, types.BaseNamedTuple):
        # a named workspace stays named (its fields are read by name in the kernels)
        src = ("def impl(x):\n    return cls("
               + "".join(f"borrow(x[{i}]), " for i in range(len(x))) + ")\n")
        ns = {"borrow": borrow, "cls": x.instance_class}
        exec(src, ns)
        return ns["impl"]
    if isinstance(x, types.BaseTuple):
        src = ("def impl(x):\n    return ("
               + "".join(f"borrow(x[{i}]), " for i in range(len(x))) + ")\n")
        ns = {"borrow": borrow}
        exec(src, ns)
        return ns["impl"]
    return lambda x: x


@intrinsic
def keepalive(typingctx, x):
    """A use of ``x`` that emits no code: the owner of :func:`borrowed` views lives (is
    not released by numba) until this point of the kernel."""
    sig = types.none(x)

    def codegen(context, builder, signature, args):
        return context.get_dummy_value()

    return sig, codegen


def _constructor(kinds, tuple_cls=None, st_cls=None):
    """A jitted constructor for one combination of field types (compiled once per
    process; the kernels themselves are cached on disk)."""
    tuple_cls = ModelArraysTuple if tuple_cls is None else tuple_cls
    st_cls = ModelArraysType if st_cls is None else st_cls
    key = (st_cls, kinds)
    ctor = _CTORS.get(key)
    if ctor is None:
        st_type = st_cls(list(zip(tuple_cls._fields, kinds)))
        names = tuple_cls._fields
        src = (f"def ctor({', '.join(names)}):\n    st = new(T)\n"
               + "".join(f"    st.{n} = {'b(' + n + ')' if isinstance(k, types.Array) else n}\n"
                         for n, k in zip(names, kinds)) + "    return st\n")
        ns = {"new": structref.new, "T": st_type, "b": borrowed}
        exec(src, ns)
        ctor = _CTORS[key] = njit(ns["ctor"])
    return ctor


def struct_from_tuple(tup, st_cls):
    """One StructRef (numba type ``st_cls``, boxed to its registered proxy) holding the
    fields of the named tuple ``tup`` (arrays made read-only); the proxy serves Python
    attribute reads from ``tup``."""
    for v in tup:
        if hasattr(v, "flags"):
            v.flags.writeable = False      # immutable: the kernels see read-only arrays
    kinds = tuple(typeof(v) for v in tup)
    obj = _constructor(kinds, type(tup), st_cls)(*tup)
    obj.__dict__["tuple"] = tup
    return obj


def replicas(obj, k):
    """``k`` StructRefs holding the same arrays as ``obj`` (a proxy of
    :func:`struct_from_tuple`), ``obj`` first; the others are made once and kept on
    ``obj``.  For kernels that run at the same time on different threads: numba
    incremented and decremented the StructRef's reference count (an atomic operation on
    its memory-info record) around kernel calls, and two cores doing so on one record
    bounced its cache line between them (two simulations of one model on two threads ran
    8-19 % slower with one StructRef than with two).  The kernels no longer count it
    (:class:`UncountedStructRefModel`); each thread still reads its own StructRef."""
    reps = obj.__dict__.setdefault("_replicas", [obj])
    while len(reps) < k:
        reps.append(struct_from_tuple(obj.tuple, type(typeof(obj))))
    return tuple(reps[:k])


def _from_tuple(values) -> KernelArrays:
    return struct_from_tuple(ModelArraysTuple(*values), ModelArraysType)


def with_fields(ma, **changed) -> KernelArrays:
    """Kernel arrays equal to ``ma`` except the ``changed`` fields (same numba type when
    the changed arrays keep their dtypes and dimensions, so no kernel is compiled again),
    e.g. ``with_fields(ma, p=p2)`` for other values of the fields."""
    fields = {f: getattr(ma, f) for f in ModelArraysTuple._fields}
    fields.update(changed)
    return ModelArrays(**fields)


def ModelArrays(**fields) -> KernelArrays:
    """Kernel arrays from keyword fields (the names of :data:`ModelArraysTuple`)."""
    tup = ModelArraysTuple(**fields)
    return _from_tuple(tuple(tup))
