"""The task registry: :data:`TASKS` (name -> :class:`~.base.Task`), filled by one module per
family. Adding a family: a module here calling :func:`~.base.register_task`, and its name in
:data:`FAMILIES` below."""

from importlib import import_module

from .base import (CAPABILITIES, NEEDS, TASKS, Draft, Rendered, Task, capabilities, feeders,
                   prompt_slots, register_capability, register_task)

#: the modules of task families, imported in this order (the registry's order)
FAMILIES = ("reports", "labels", "measures", "views", "vqa", "matching", "grounding",
            "temporal", "captions", "volumes", "exams", "grounded3d")

for _name in FAMILIES:
    import_module(f"{__name__}.{_name}")

__all__ = ["CAPABILITIES", "Draft", "FAMILIES", "NEEDS", "Rendered", "TASKS", "Task",
           "capabilities", "feeders", "prompt_slots", "register_capability", "register_task"]
