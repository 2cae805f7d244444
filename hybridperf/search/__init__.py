"""Searching configuration spaces: Pareto pruning, model ranking, the measure-next loop, plots."""
