"""The measure-next loop's kinds of prior, by name (:mod:`hybridperf.search.prior` builds them)."""
# A module of its own so that the command line can offer the names without importing the models.
from __future__ import annotations

__all__ = ["PRIORS"]

PRIORS = ("auto", "transfer", "model", "analytical", "none")
