"""Screens of the agent-tui app; each ``<name>.py`` has its stylesheet ``<name>.tcss`` beside it."""
