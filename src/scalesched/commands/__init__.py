"""The bodies of the CLI's command groups that have grown past a few options
(``scalesched predict ...``); ``scalesched.cli`` registers them. The top layer: they may use
every library layer, and nothing imports them but the CLI."""
