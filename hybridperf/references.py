"""The papers hybridperf implements, and the short internal names ("seed 002") some data files still use."""
from __future__ import annotations

import re

__all__ = ["REFERENCES", "cite"]

# Internal name -> (short citation, full reference). The internal names survive in shipped data files
# (spec and descriptor sources), whose bytes are hashed into trained models; people see the citation.
REFERENCES: dict[str, tuple[str, str]] = {
    "seed 000": ("Sim et al. (PPoPP 2012)", 'J. Sim, A. Dasgupta, H. Kim, R. Vuduc, "A Performance Analysis Framework '
                 'for Identifying Potential Benefits in GPGPU Applications", PPoPP 2012'),
    "seed 001": ("Zhou et al. (CGO 2021)", 'K. Zhou et al., "GPA: A GPU Performance Advisor Based on Instruction '
                 'Sampling", CGO 2021'),
    "seed 002": ("Hong & Kim (ISCA 2009)", 'S. Hong, H. Kim, "An Analytical Model for a GPU Architecture with '
                 'Memory-level and Thread-level Parallelism Awareness", ISCA 2009'),
    "seed 003": ("Ryoo et al. (CGO 2008)", 'S. Ryoo et al., "Program Optimization Space Pruning for a Multithreaded '
                 'GPU", CGO 2008'),
    "seed 004": ("Karan Kumar G (NYU report)", 'Karan Kumar G, "Analytical Model for Kernel Performance Prediction", '
                 "NYU course report CSCI-GA.3033-025 (undated)"),
}
_PATTERN = re.compile(r"\bseed (00[0-4])\b", re.IGNORECASE)


def cite(text: str) -> str:
    """``text`` with each internal name replaced by its short citation ("seed 002 Table 3" ->
    "Hong & Kim (ISCA 2009) Table 3")."""
    return _PATTERN.sub(lambda m: REFERENCES[f"seed {m.group(1)}"][0], text)
