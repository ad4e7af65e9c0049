"""Nemeses: a seed -> a fault schedule (schedule.py), one module per fault kind, and a runner that applies it,
records each fault's start/end in the history and always undoes it (runner.py)."""

from __future__ import annotations

from .base import Context, Fault, PlanInput
from .runner import NemesisRunner, Terminated
from .schedule import NEMESES, ScheduleSpec, Step, generate

__all__ = ["NEMESES", "Context", "Fault", "NemesisRunner", "PlanInput", "ScheduleSpec", "Step", "Terminated",
           "generate"]
