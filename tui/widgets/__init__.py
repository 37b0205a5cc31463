"""Widgets of the agent-tui app, one per module."""
