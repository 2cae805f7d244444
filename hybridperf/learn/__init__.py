"""Learning from recorded runs: features, the hybrid estimator, intervals, the model file, tuning, calibration."""
