"""Workloads: agentic workflow templates, preset patterns, WfFormat files, arrivals.

Public entry points live in :mod:`scalesched.workload.source` (``get_workload``,
``list_workloads``, ``sample_jobs``) and :mod:`scalesched.workload.arrivals`; the
simulator consumes :mod:`scalesched.workload.instance`.  Nothing is imported here so
that importing the instance records stays cheap.
"""
