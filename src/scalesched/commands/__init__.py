"""The bodies of the CLI's commands that have grown past a few options: the steps of
``simulate`` and ``run``, what several commands share (``common``), and command groups
(``scalesched predict ...``); ``scalesched.cli`` declares the options and registers them.
The top layer: they may use every library layer, and nothing imports them but the CLI."""
