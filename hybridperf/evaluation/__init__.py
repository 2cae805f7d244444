"""Judging the product: splits, metrics and baselines side by side; the papers' numbers reproduced."""
