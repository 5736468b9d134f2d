"""Evaluation: measured capacity, the study over policies x sizes x seeds, reports."""
