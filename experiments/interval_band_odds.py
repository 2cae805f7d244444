"""How often an exactly valid conformal interval would land in issue 12's coverage bands, case by case.

Reads experiments/results/intervals.csv (written by intervals.py) and writes interval_band_odds.md / .csv. For each
case (one split and GPU), split-conformal theory with ``n`` exchangeable calibration scores gives the interval's
true coverage C ~ Beta(k, n + 1 - k), k = ceil((n + 1) x level) (Vovk et al. 2005; Angelopoulos & Bates 2021,
Sec. 3.1), and the ``m`` test rows measure it as Binomial(m, C) / m. The probability that the measured coverage falls
inside the target band (85-95 % at 90 %, 75-85 % at 80 %) is then a property of n and m alone: the best any valid
method can expect. ``n`` is the calibration bin that decides most of the case's test rows (intervals.py's `bins`
column); a bin without scores (a grown quantile beyond the scored size bands) has no such number. The leave-GPU-out
bins (``gpu|...``) hold tens of thousands of scores from 4-5 held-out GPUs: their rows are not exchangeable with a
new GPU's, so the chance given for them is an upper bound, not the odds. Every chance treats the test rows as
independent given the calibration; rows clustered by kernel and size measure coverage more noisily, so each is an
upper bound in that sense too.
"""
from __future__ import annotations

import math
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import beta, binom

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, header, md_table  # noqa: E402

BANDS = {0.9: (0.85, 0.95), 0.8: (0.75, 0.85)}
_BIN = re.compile(r"(?P<bin>[^;:]+): (?P<share>\d+)% of rows, (?P<n>\d+) scores")


def chance_in_band(n: int, m: int, level: float) -> float:
    """P(measured coverage of m test rows in the band) for a valid split-conformal interval from n scores."""
    k = math.ceil((n + 1) * level)
    if n < 1 or m < 1 or k > n:
        return float("nan")  # too few scores: a valid interval is infinite
    lo, hi = BANDS[level]
    c = np.linspace(0.0, 1.0, 4001)[1:-1]
    w = beta(k, n + 1 - k).pdf(c)
    w /= w.sum()
    j = np.arange(m + 1)
    inside = j[(j >= lo * m - 1e-9) & (j <= hi * m + 1e-9)]
    return float(w @ binom.pmf(inside[None, :], m, c[:, None]).sum(axis=1))


def main_bin(bins: str) -> tuple[str, int]:
    """(name, scores) of the bin holding the largest share of a case's test rows."""
    found = [(int(g["share"]), g["bin"].strip(), int(g["n"])) for g in _BIN.finditer(str(bins))]
    if not found:
        return "", 0
    _, name, n = max(found)
    return name, n


def main() -> None:
    cases = pd.read_csv(RESULTS / "intervals.csv")
    rows = []
    for c in cases.itertuples(index=False):
        name, n = main_bin(c.bins)
        rec = {"case": c.case, "split": c.split, "subset": c.subset, "main_bin": name, "n_scores": n,
               "m_test_rows": int(c.n)}
        for level in BANDS:
            pct = round(level * 100)
            lo, hi = BANDS[level]
            measured = getattr(c, f"cover{pct}")
            rec[f"cover{pct}"] = measured
            rec[f"in_band{pct}"] = bool(lo * 100 <= measured <= hi * 100)
            rec[f"valid_chance{pct}"] = chance_in_band(n, int(c.n), level)
        rows.append(rec)
    table = pd.DataFrame(rows)
    table.to_csv(RESULTS / "interval_band_odds.csv", index=False)
    summary = []
    large = (table["n_scores"] >= 1000) & (table["m_test_rows"] >= 1000)
    for level in BANDS:
        pct = round(level * 100)
        chance, hit = table[f"valid_chance{pct}"], table[f"in_band{pct}"]
        small = ~large & chance.notna()
        summary.append(
            f"- {pct} %: in band on {int(hit.sum())} of {len(table)}. Cases with 1,000+ calibration scores and test "
            f"rows (a valid method lands in band almost surely: a miss there is a case not exchangeable with its "
            f"calibration): "
            f"{int(hit[large].sum())} of {int(large.sum())}. Cases with fewer: {int(hit[small].sum())} of "
            f"{int(small.sum())}, where an exactly valid method expects {chance[small].sum():.1f}. No finite valid "
            f"interval (too few scores): {int(chance.isna().sum())}.")
    text = [header("Interval band odds", ".venv/bin/python experiments/interval_band_odds.py"),
            __doc__.split("\n", 2)[2].strip() + "\n",
            "From intervals.csv as last written by intervals.py.\n", *summary, "",
            md_table(table, floatfmt=".3g")]
    (RESULTS / "interval_band_odds.md").write_text("\n".join(text) + "\n")
    print("\n".join(text))


if __name__ == "__main__":
    main()
