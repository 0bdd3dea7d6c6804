"""OpenMDAO components exposing multibody responses with exact analytic derivatives.

:class:`MultibodyResponse` is an ``ExplicitComponent``: its inputs are named design
parameters of a workbench model (with their units), its outputs integral objectives
``psi = int g dt`` of a simulation.  ``compute`` simulates once per design (cached on the
input values); ``compute_partials`` computes the analytic Jacobian from that stored
simulation (direct or adjoint method of :func:`workbench.sensitivities.driver.sensitivity`, never
finite differences), also cached.  A driver that differences the totals therefore pays
for simulations only, which keeps the analytic-versus-differences comparison of the
studies fair.

:class:`MultibodyResponseMatrixFree` is the matrix-free form: ``compute_jacvec_product``
maps forward mode to the direct method (tangent linear model) and reverse mode to the
adjoint method.  Each method's Jacobian is computed once per design (a direct sweep
carries all parameter directions at once, an adjoint sweep all objectives at once) and
then contracted with OpenMDAO's seeds.

Analysis failures of a trial design (Newton divergence, a singular configuration, an
unassemblable configuration, non-finite values, a non-physical design such as a negative
inertia) are raised as ``openmdao.api.AnalysisError`` carrying the original message, so
that a driver can back off (:mod:`studies.recording` does).
"""

from __future__ import annotations

import openmdao.api as om
from openmdao.utils.units import valid_units

from workbench.compiled.build import CompiledModel
from workbench.compiled.parameters import parameter_columns
from workbench.errors import ModelError, UnknownNameError, WorkbenchError
from workbench.formulations import REGISTRY
from workbench.formulations import get as get_formulation
from workbench.formulations.semirecursive import matrixr as MR
from workbench.integrators.simulation import nsteps_of, simulate
from workbench.model.builder import Model
from workbench.model.catalog import as_compiled
from workbench.objectives import compile_objectives, resolve_objectives
from workbench.sensitivities.driver import objective_values, sensitivity
from workbench.statics import static_responses

METHODS = ("auto", "direct", "adjoint")


#: a cached simulation keeps its converged states (the partials' sweeps then skip
#: re-evaluating them) when they take at most this many MB
KEEP_STATES_MB = 32.0


def _keep_states(cm, t_end, dt, formulation) -> bool:
    if not get_formulation(formulation).keeps_states:
        return False
    rows = nsteps_of(0.0, t_end, dt) + 1
    return 8 * rows * MR.state_record_size(cm.arrays, cm.n) <= KEEP_STATES_MB * 2 ** 20


def om_units(unit: str | None) -> str | None:
    """OpenMDAO spelling of a workbench unit (``kg*m^2`` -> ``kg*m**2``), or None when
    OpenMDAO does not know it (the value is then passed through unconverted)."""
    if not unit:
        return None
    u = unit.replace("^", "**")
    return u if valid_units(u) else None


class _Base(om.ExplicitComponent):
    """Options, set-up and the cached evaluation shared by both forms."""

    def initialize(self):
        # not recordable: a recording must not pickle workbench objects, whose classes may
        # move between versions (the recording would then no longer open)
        self.options.declare("model", recordable=False,
                             desc="shipped model name, Model or CompiledModel")
        self.options.declare("objectives", default=None, allow_none=True, recordable=False,
                             desc="list of workbench Objective; default: the model's own")
        self.options.declare("parameters", default=None, allow_none=True,
                             desc="parameter names; default: the model's design_parameters")
        self.options.declare("method", default="auto", values=METHODS,
                             desc="gradient method; auto = direct when fewer parameters "
                                  "than responses, else adjoint")
        self.options.declare("formulation", default="sr-com",
                             values=tuple(REGISTRY))
        self.options.declare("variant", default="discrete", values=("discrete", "continuous"))
        self.options.declare("t_end", default=None, allow_none=True)
        self.options.declare("dt", default=None, allow_none=True)

    def setup(self):
        model = self.options["model"]
        self._wb_cm = as_compiled(model) if not isinstance(model, CompiledModel) else model
        # a probe evaluation of the names (no simulation: sensitivity validates them later)
        meta = getattr(self._wb_cm.model, "meta", {}) or {}
        names = self.options["parameters"] or meta.get("design_parameters")
        if not names:
            raise ModelError(f"model {self._wb_cm.name!r}: no parameters given and no "
                             "design_parameters declared")
        self._wb_names = tuple(names)
        for nm in self._wb_names:
            if nm not in self._wb_cm.param_names:
                raise UnknownNameError("parameter", nm, self._wb_cm.param_names)
        self._wb_co = resolve_objectives(self._wb_cm, self.options["objectives"])
        self._wb_resp = tuple(self._wb_co.names)
        values = dict(zip(self._wb_cm.param_names, self._wb_cm.param_values))
        for nm in self._wb_names:
            j = self._wb_cm.param_names.index(nm)
            self.add_input(nm, val=values[nm], units=om_units(self._wb_cm.param_units[j]),
                           desc=f"workbench parameter {nm!r}")
        for r in self._wb_resp:
            self.add_output(r, val=0.0, desc=f"integral objective {r!r}")
        self._wb_cache = {}
        self._wb_sims = {}
        self.n_simulations = 0

    # -- evaluation ---------------------------------------------------------------------
    def _method(self, mode=None) -> str:
        if mode == "fwd":
            return "direct"
        if mode == "rev":
            return "adjoint"
        m = self.options["method"]
        if m == "auto":
            return "direct" if len(self._wb_names) < len(self._wb_resp) else "adjoint"
        return m

    def _key(self, inputs):
        return tuple(float(inputs[nm][0]) for nm in self._wb_names)

    def _simulate(self, inputs):
        """The simulation and ``psi`` of the design (cached): what ``compute`` needs, so
        that a driver differencing the totals pays for simulations only."""
        x = self._key(inputs)
        if x not in self._wb_sims:
            if len(self._wb_sims) > 8:
                self._wb_sims.clear()
            try:
                cm = self._wb_cm.with_parameters(dict(zip(self._wb_names, x)))
                meta = getattr(cm.model, "meta", {}) or {}
                t_end = (self.options["t_end"] if self.options["t_end"] is not None
                         else meta.get("t_end", 1.0))
                dt = self.options["dt"] if self.options["dt"] is not None else meta.get("dt", 1e-3)
                sim = simulate(cm, t_end, dt, self.options["formulation"],
                               keep_states=_keep_states(cm, t_end, dt,
                                                        self.options["formulation"]))
                psi = objective_values(sim, self._wb_co)
            except WorkbenchError as exc:
                raise om.AnalysisError(f"{self.pathname}: {exc}") from exc
            self.n_simulations += 1
            self._wb_sims[x] = (cm, sim, psi)
        return self._wb_sims[x]

    def _evaluate(self, inputs, method):
        """The sensitivity result (gradient) of the design by ``method``, reusing the
        design's stored simulation (cached)."""
        x = self._key(inputs)
        key = (x, method)
        if key not in self._wb_cache:
            if len(self._wb_cache) > 8:
                self._wb_cache.clear()
            cm, sim, _ = self._simulate(inputs)
            try:
                res = sensitivity(cm, self._co_objectives(), list(self._wb_names), method=method,
                                  variant=self.options["variant"],
                                  formulation=self.options["formulation"],
                                  t_end=float(sim.t[-1]), dt=sim.dt, simulation=sim)
            except WorkbenchError as exc:
                raise om.AnalysisError(f"{self.pathname}: {exc}") from exc
            self._wb_cache[key] = res
        return self._wb_cache[key]

    def _co_objectives(self):
        return self.options["objectives"]

    def compute(self, inputs, outputs):
        psi = self._simulate(inputs)[2]
        for k, r in enumerate(self._wb_resp):
            outputs[r] = psi[k]


class MultibodyResponse(_Base):
    """Integral responses of a multibody simulation with the cached analytic Jacobian."""

    def setup(self):
        super().setup()
        for r in self._wb_resp:
            self.declare_partials(r, list(self._wb_names))     # analytic, exact

    def compute_partials(self, inputs, J):
        res = self._evaluate(inputs, self._method())
        for k, r in enumerate(self._wb_resp):
            for j, nm in enumerate(self._wb_names):
                J[r, nm] = res.gradient[k, j]


class MultibodyResponseMatrixFree(_Base):
    """Matrix-free form: forward mode = direct method, reverse mode = adjoint method."""

    def compute_jacvec_product(self, inputs, d_inputs, d_outputs, mode):
        res = self._evaluate(inputs, self._method(mode))
        G = res.gradient
        if mode == "fwd":
            for k, r in enumerate(self._wb_resp):
                if r in d_outputs:
                    d_outputs[r] += sum(G[k, j] * d_inputs[nm]
                                        for j, nm in enumerate(self._wb_names) if nm in d_inputs)
        else:
            for j, nm in enumerate(self._wb_names):
                if nm in d_inputs:
                    d_inputs[nm] += sum(G[k, j] * d_outputs[r]
                                        for k, r in enumerate(self._wb_resp)
                                        if r in d_outputs)


class StaticResponse(om.ExplicitComponent):
    """Static responses at the equilibrium of the design (ride height, suspension travel:
    linear combinations of point coordinates, :func:`workbench.statics.static_responses`)
    with their exact gradient (implicit-function derivative of the equilibrium, no finite
    differences), cached on the input values.  A failed equilibrium raises
    ``AnalysisError``."""

    def initialize(self):
        # not recordable: a recording must not pickle workbench objects, whose classes may
        # move between versions (the recording would then no longer open)
        self.options.declare("model", recordable=False,
                             desc="shipped model name, Model or CompiledModel")
        self.options.declare("responses", recordable=False,
                             desc="list of workbench Objective with power-1 "
                                               "position terms (see static_responses)")
        self.options.declare("parameters", default=None, allow_none=True,
                             desc="parameter names; default: the model's design_parameters")
        self.options.declare("units", default=None, allow_none=True,
                             desc="unit of each response (OpenMDAO spelling), default m")

    def setup(self):
        model = self.options["model"]
        self._wb_cm = as_compiled(model) if not isinstance(model, CompiledModel) else model
        names, _, units = parameter_columns(self._wb_cm, self.options["parameters"])
        self._wb_names = names
        self._wb_resp = compile_objectives(self._wb_cm, self.options["responses"]).names
        values = dict(zip(self._wb_cm.param_names, self._wb_cm.param_values))
        for nm, u in zip(names, units):
            self.add_input(nm, val=values[nm], units=om_units(u),
                           desc=f"workbench parameter {nm!r}")
        runits = self.options["units"] or {}
        for r in self._wb_resp:
            self.add_output(r, val=0.0, units=runits.get(r, "m"),
                            desc=f"static response {r!r} at equilibrium")
            self.declare_partials(r, list(names))                  # analytic, exact
        self._wb_cache = {}
        self.n_equilibria = 0

    def _evaluate(self, inputs):
        x = tuple(float(inputs[nm][0]) for nm in self._wb_names)
        if x not in self._wb_cache:
            if len(self._wb_cache) > 8:
                self._wb_cache.clear()
            try:
                cm = self._wb_cm.with_parameters(dict(zip(self._wb_names, x)))
                res = static_responses(cm, self.options["responses"], list(self._wb_names))
            except WorkbenchError as exc:
                raise om.AnalysisError(f"{self.pathname}: {exc}") from exc
            self.n_equilibria += 1
            self._wb_cache[x] = res
        return self._wb_cache[x]

    def compute(self, inputs, outputs):
        res = self._evaluate(inputs)
        for k, r in enumerate(self._wb_resp):
            outputs[r] = res.values[k]

    def compute_partials(self, inputs, J):
        res = self._evaluate(inputs)
        for k, r in enumerate(self._wb_resp):
            for j, nm in enumerate(self._wb_names):
                J[r, nm] = res.gradient[k, j]


def fd_partials_declared(problem) -> list:
    """Names of the components of ``problem`` (after setup) that approximate partials by
    finite or complex differences; the workbench's own must never appear here."""
    bad = []
    for comp in problem.model.system_iter(recurse=True, typ=om.ExplicitComponent):
        if getattr(comp, "_approx_schemes", None):
            bad.append(comp.pathname)
    return bad


__all__ = ["MultibodyResponse", "MultibodyResponseMatrixFree", "StaticResponse", "om_units",
           "fd_partials_declared", "Model"]
