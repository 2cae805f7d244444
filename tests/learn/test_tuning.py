"""optuna tuning: seeded (reproducible), resumable from a SQLite study, used by train_model."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hybridperf.errors import HybridperfError
from hybridperf.learn.tuning import tune_booster


def _data(n: int = 120):
    rng = np.random.default_rng(0)
    X = pd.DataFrame({"base": rng.uniform(0, 3, n), "cfg": rng.integers(1, 4, n).astype(float)})
    y = np.exp(X["base"] + 0.2 * X["cfg"] + rng.normal(0, 0.02, n))
    return X, y


def test_seeded_and_resumable(tmp_path: Path) -> None:
    X, y = _data()
    db = tmp_path / "study.db"
    best1, score1 = tune_booster(X, y, baseline_column="base", n_trials=2, storage=db, seed=3)
    best2, _ = tune_booster(X, y, baseline_column="base", n_trials=2, storage=tmp_path / "other.db", seed=3)
    assert best1 == best2  # same seed, fresh study: the same trials
    import optuna

    tune_booster(X, y, baseline_column="base", n_trials=1, storage=db, seed=3)
    study = optuna.load_study(study_name="hybridperf", storage=f"sqlite:///{db}")
    assert len(study.trials) == 3  # resumed, not restarted
    assert np.isfinite(score1) and score1 > 0


def test_bad_trial_count() -> None:
    X, y = _data()
    with pytest.raises(HybridperfError, match="positive number of trials"):
        tune_booster(X, y, baseline_column=None, n_trials=0)


def test_a_study_file_that_is_no_sqlite_is_refused(tmp_path: Path) -> None:
    """optuna raised sqlite3.DatabaseError (exit 70) on a text file; the file is left as it was."""
    X, y = _data()
    text = tmp_path / "notes.db"
    text.write_text("my notes\n")
    with pytest.raises(HybridperfError, match="not an SQLite file"):
        tune_booster(X, y, baseline_column=None, n_trials=1, storage=text)
    assert text.read_text() == "my notes\n"
    with pytest.raises(HybridperfError, match="not a file"):
        tune_booster(X, y, baseline_column=None, n_trials=1, storage=tmp_path)
