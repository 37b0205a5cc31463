"""Internals of the ``agent-tui`` command line (``tui.cli`` is the entry point).

Nothing in this package imports Textual: headless commands must start fast.
"""
