"""``python -m scalesched``: the same command as ``scalesched``."""

from scalesched.cli import app

if __name__ == "__main__":
    app(prog_name="scalesched")
