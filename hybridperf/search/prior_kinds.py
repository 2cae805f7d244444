"""The measure-next loop's kinds of prior, by name: a module of its own, so that the command line can offer
them without importing the models (:mod:`hybridperf.search.prior` builds them)."""
from __future__ import annotations

__all__ = ["PRIORS"]

PRIORS = ("auto", "transfer", "model", "analytical", "none")
