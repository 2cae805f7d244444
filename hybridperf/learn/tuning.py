"""Hyperparameter tuning of the residual booster with optuna (seeded, resumable from SQLite)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import clone
from sklearn.model_selection import GroupKFold, KFold

from hybridperf.errors import HybridperfError
from hybridperf.learn.estimator import HybridRegressor, default_booster
from hybridperf.progress import task

__all__ = ["suggest_booster_params", "tune_booster"]


def suggest_booster_params(trial: Any) -> dict[str, Any]:
    """The search space: tree shape, learning rate/rounds, sampling and regularisation."""
    return {
        "n_estimators": trial.suggest_int("n_estimators", 100, 800, step=50),
        "max_depth": trial.suggest_int("max_depth", 3, 10),
        "learning_rate": trial.suggest_float("learning_rate", 0.01, 0.3, log=True),
        "subsample": trial.suggest_float("subsample", 0.5, 1.0),
        "colsample_bytree": trial.suggest_float("colsample_bytree", 0.4, 1.0),
        "min_child_weight": trial.suggest_float("min_child_weight", 0.5, 20.0, log=True),
        "reg_lambda": trial.suggest_float("reg_lambda", 1e-3, 10.0, log=True),
    }


def _check_study_file(path: Path) -> None:
    """A HybridperfError unless ``path`` is absent, empty or an SQLite file (optuna's study storage)."""
    if not path.exists():
        return
    if not path.is_file():
        raise HybridperfError(f"--study {path}: not a file; name the SQLite file an earlier --study wrote, or a new "
                              "one")
    with path.open("rb") as f:
        head = f.read(16)
    if head and head != b"SQLite format 3\x00":
        raise HybridperfError(f"--study {path}: not an SQLite file (the optuna study an earlier --study wrote); name "
                              "that file or a new one")


def tune_booster(X: pd.DataFrame, y: np.ndarray, *, baseline_column: str | None, n_trials: int,
                 template: HybridRegressor | None = None,
                 storage: str | Path | None = None, study_name: str = "hybridperf", groups: np.ndarray | None = None,
                 n_splits: int = 3, seed: int = 0, progress: bool = False) -> tuple[dict[str, Any], float]:
    """Minimise the cross-validated RMSE of log(predicted / measured) over booster parameters.

    Parameters
    ----------
    X, y : features and measured times (> 0).
    baseline_column : feature holding the log analytical baseline (``None``: boosting only).
    template : the estimator to tune (cloned per fold with each trial's booster); by default a
        plain HybridRegressor on ``baseline_column``. ``train_model`` passes the one it will fit.
    n_trials : trials to run in this call (a resumed study adds them to those already stored).
    storage : SQLite file; the study is created or resumed there (``None``: in memory).
    groups : optional CV groups (e.g. sizes) so the score reflects extrapolation.
    seed : seeds the TPE sampler and the folds, so a rerun proposes the same trials.

    Returns
    -------
    (best_params, best_value)
    """
    import optuna

    if n_trials < 1:
        raise HybridperfError(f"--tune needs a positive number of trials, got {n_trials}")
    if storage is not None:
        _check_study_file(Path(storage))
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    url = None if storage is None else f"sqlite:///{Path(storage).resolve()}"
    study = optuna.create_study(direction="minimize", study_name=study_name, storage=url, load_if_exists=True,
                                sampler=optuna.samplers.TPESampler(seed=seed))
    Xv = X.to_numpy(dtype=np.float64)
    if groups is not None and len(np.unique(groups)) >= 2:
        folds = list(GroupKFold(n_splits=min(n_splits, len(np.unique(groups)))).split(Xv, y, groups))
    else:
        folds = list(KFold(n_splits=min(n_splits, len(y)), shuffle=True, random_state=seed).split(Xv))
    logy = np.log(y)
    base = template if template is not None else HybridRegressor(
        baseline_column=baseline_column, mode="hybrid" if baseline_column else "boosting")

    def objective(trial: Any) -> float:
        params = suggest_booster_params(trial)
        errs = []
        for tr, te in folds:
            reg = default_booster(seed)
            reg.set_params(**params)
            est = clone(base).set_params(regressor=reg, coverage=None)
            est.fit(X.iloc[tr], y[tr])
            errs.append(np.log(est.predict(X.iloc[te])) - logy[te])
        return float(np.sqrt(np.mean(np.concatenate(errs) ** 2)))

    with task(f"tune: optuna trials ({len(folds)} folds each)", n_trials) as t:
        study.optimize(objective, n_trials=n_trials, callbacks=[lambda study, trial: t.advance()])
    return dict(study.best_params), float(study.best_value)
