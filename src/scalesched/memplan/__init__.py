"""LazyTrain-style memory planning for training one model on one GPU (docs/memplan.md)."""
