"""Error and warning types raised where bad GPA input enters hybridperf."""
from __future__ import annotations

from hybridperf.errors import HybridperfError

__all__ = ["GPAError", "GPAInputError", "GPAInputWarning", "GPAParameterError", "SASSSyntaxError"]


class GPAError(HybridperfError):
    """Base class of GPA errors: a ValueError with a one-line message."""


class GPAInputError(GPAError):
    """A sample table (plain CSV or Nsight Compute export) is malformed."""


class SASSSyntaxError(GPAInputError):
    """One SASS instruction cannot be parsed; readers re-raise it with the file and row."""


class GPAParameterError(GPAError):
    """An estimator or advisor argument is out of its domain (e.g. matched > total samples)."""


class GPAInputWarning(UserWarning):
    """Input was accepted but changed or partly ignored; the message gives the count."""
