"""quickdraft: exact draft-and-verify generation (predicted outputs, prompt lookup, ...)."""

from .api import Chunk, Generator, Result, Stream
from .loading import load, load_with
from .core import Draft, Stats, Step, Verdict
from .drafters.draft_model import DraftModelConfig
from .drafters.lookup import LookupConfig, PromptLookupDrafter
from .drafters.ouroboros import OuroborosConfig
from .drafters.prediction import PredictionConfig, PredictionDrafter
from .errors import QuickdraftError
from .options import DecodeOptions, LoadOptions
from .sampling import SamplingParams

__all__ = [
    "Chunk", "DecodeOptions", "Draft", "DraftModelConfig", "Generator", "LoadOptions", "LookupConfig", "OuroborosConfig", "PredictionConfig", "PredictionDrafter",
    "PromptLookupDrafter", "QuickdraftError", "Result", "SamplingParams", "Stats", "Step", "Stream", "Verdict", "load", "load_with",
]
__version__ = "0.1.0"
