"""OpenMDAO components wrapping workbench responses with exact analytic derivatives."""

from .multibody import (MultibodyResponse, MultibodyResponseMatrixFree, StaticResponse,
                        fd_partials_declared, om_units)

__all__ = ["MultibodyResponse", "MultibodyResponseMatrixFree", "StaticResponse",
           "fd_partials_declared", "om_units"]
