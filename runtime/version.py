"""The version of agent-tui: the one place it is written (pyproject.toml reads it from here).

A module of its own, importing nothing, so that ``agent-tui --version`` costs no more than
argparse (DESIGN §13); ``importlib.metadata`` alone would double it."""

VERSION = "0.1.0"
