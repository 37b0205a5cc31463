"""The engine behind the ``Runtime`` facade (DESIGN §7–§8), one module per concern.

Every piece is given its collaborators (the store, the catalog of agents/providers/tools, the
event pump, a clock, a ``Launcher`` for child runs and cancels); none imports the facade or the
composition root, and the pieces import each other only downwards::

    execution                      shared records, constants, the Launcher callbacks
    stream_fold, tool_decision     pure: the stream reducer; what to do with each tool call
    catalog, pump                  agents/providers/tools/policy; publishing events
    delegation                     child runs and descendants
    model_call, tool_calls, leases one model call; settling tool calls; the owner lease
    executor                       one run's step loop
    assembly                       the pieces wired together (used by ``runtime.runtime``)
"""
