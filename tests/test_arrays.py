"""The kernel helpers of :mod:`workbench.kernels.layout`: borrowed views (no reference count) and
stack temporaries.  They change how arrays are passed, never what is computed: a borrowed
view reads and writes the owner's memory, a stack temporary has the requested shape and
C strides, and neither leaks into the values a kernel returns."""

import numpy as np
from numba import njit

from workbench.kernels import layout as AR

_S234 = AR.scratch(2, 3, 4)


@njit(cache=False)
def _write_through(x, tup):
    own = (np.zeros(3), np.arange(4.0))
    y, (a, b) = AR.borrow((x, own))
    y[1] = 7.0                        # writes the caller's array
    s = a.sum() + b.sum()
    z, w = AR.borrow(tup)
    z[0] = -1.0
    AR.keepalive(own)
    return s, w


@njit(cache=False)
def _stack_sum(n):
    B = _S234()
    tot = 0.0
    for k in range(n):                # the same stack memory in every iteration
        for i in range(2):
            for j in range(3):
                for q in range(4):
                    B[i, j, q] = k + 100 * i + 10 * j + q
        tot += B.sum()
    return tot, B.shape[0], B.shape[1], B.shape[2], B.strides[0], B.strides[1], B.strides[2]


def test_borrowed_views_share_the_owners_memory():
    x = np.zeros(3)
    t0 = np.ones(2)
    s, w = _write_through(x, (t0, 5))
    assert x[1] == 7.0 and t0[0] == -1.0       # writes reach the owners
    assert s == 6.0                            # 0 + (0 + 1 + 2 + 3)
    assert w == 5                              # non-array members pass unchanged


def test_scratch_shape_strides_and_values():
    tot, *meta = _stack_sum(5)
    ref = sum(np.fromfunction(lambda i, j, q: k + 100 * i + 10 * j + q, (2, 3, 4)).sum()
              for k in range(5))
    assert tot == ref
    assert tuple(meta) == (2, 3, 4, 96, 32, 8)
    # one helper per shape (module-level constants share it)
    assert AR.scratch(2, 3, 4) is _S234


@njit(cache=False)
def _fields_through_calls(ma, n):
    # the StructRef bound, copied and passed to a kernel n times (each was an atomic
    # increment and decrement of its count before UncountedStructRefModel)
    s = 0
    for k in range(n):
        m2 = ma
        s += _frame_count(m2)
    return s


@njit(cache=False)
def _frame_count(ma):
    return ma.fr_parent.shape[0]


def test_the_model_structref_is_not_counted_in_kernels_and_not_leaked():
    """The model's StructRef keeps the one reference its Python proxy holds through
    Python-level kernel calls (unboxing takes a reference and gives it back), calls
    between kernels, a simulation and a two-thread sensitivity sweep (the replicas):
    nothing counted inside the kernels, nothing leaked; the kernels read the same fields
    as Python."""
    from workbench.integrators.simulation import simulate
    from workbench.model import catalog
    from workbench.sensitivities.driver import sensitivity

    cm = catalog.load("five-bar").compile()
    ma = cm.arrays
    assert ma._meminfo.refcount == 1
    nf = ma.fr_parent.shape[0]
    assert _fields_through_calls(ma, 1000) == 1000 * nf
    for _ in range(100):
        assert _frame_count(ma) == nf
    assert ma._meminfo.refcount == 1
    simulate(cm, 0.02, 1e-3)
    sensitivity(cm, method="adjoint", t_end=0.02, dt=1e-3, threads=2,
                parameters=["Ls1", "mA1", "LA1"])
    assert ma._meminfo.refcount == 1
    for rep in AR.replicas(ma, 2):
        assert rep._meminfo.refcount == 1
