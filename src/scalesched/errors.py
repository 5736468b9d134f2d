"""One error type for bad user input, so the CLI can print one line and exit 2.

Every message names where the bad value came from (a file, a preset, an option) and the
field, because a user fixing a config needs both.
"""


class InputError(ValueError):
    """Bad user input: a file, preset name, option or field that cannot be used as given."""

    def __init__(self, source: str, field: str, message: str) -> None:
        self.source = source
        self.field = field
        self.message = message
        where = source if source.lstrip("-") == field else f"{source}: {field}"
        super().__init__(f"{where}: {message}")
