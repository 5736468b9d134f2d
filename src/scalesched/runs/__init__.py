"""Runs: what it takes to run a policy on a scenario and read the result at steady state.

``setup`` (cluster -> tables -> jobs -> policy -> simulate, ``--load`` resolved to a rate),
``windows`` (the warm-up and cool-down left out of every measurement), ``capacity`` (the
measured capacity a load is a fraction of) and ``registry`` (policies by name). It sits
above the executors, policies and learning, and below the studies (``eval``, ``plan``,
``memplan``) and the CLI, which all use it.
"""
