"""Compiled models: the immutable array form of a :class:`~workbench.model.Model`
(:class:`CompiledModel`, :func:`compile_model`), the choice of degrees of freedom
(:mod:`~workbench.compiled.dof`) and the named design parameters as columns of the field x
parameter map (:mod:`~workbench.compiled.parameters`)."""

from workbench.compiled.build import CompiledModel, compile_model

__all__ = ["CompiledModel", "compile_model"]
