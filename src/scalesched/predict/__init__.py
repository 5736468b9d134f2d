"""Distributional predictors of task duration and output tokens (issue 13).

Quantile regression from what a scheduler sees (``scalesched.predict.features``), trained
with torch on simulator traces (``scalesched.predict.train``, imported only to fit) and
evaluated in numpy (``scalesched.predict.model``), so that policies and the simulator use a
predictor without importing torch. ``scalesched predict fit|eval`` is the CLI
(docs/tail.md).
"""

from scalesched.predict.model import QUANTILES, QuantilePredictor, default_predictor, load

__all__ = ["QUANTILES", "QuantilePredictor", "default_predictor", "load"]
