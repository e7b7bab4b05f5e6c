from .base import Runner
from .scripted import ScriptedRunner

__all__ = ["Runner", "ScriptedRunner"]
