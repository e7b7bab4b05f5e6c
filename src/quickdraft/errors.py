"""Errors a caller can act on. Every message says what was wrong and what to do."""


class QuickdraftError(ValueError):
    """Base class: bad input or a state quickdraft refuses to work in."""


class ContextLengthError(QuickdraftError):
    """A prompt that leaves no room in the model's context for a new token."""

    def __init__(self, prompt_tokens: int, context: int):
        super().__init__(f"the prompt has {prompt_tokens} tokens but the model's context holds {context}; shorten the "
                         "prompt so that at least one new token fits")
        self.prompt_tokens, self.context = prompt_tokens, context


class ModelError(QuickdraftError):
    """A model could not be found, fetched, verified or loaded."""


class UnknownModelError(ModelError):
    """A name that is neither a path nor a known alias."""


class HashMismatchError(ModelError):
    """A fetched file's SHA-256 differs from the pinned one (the bad file is removed)."""


class UnsupportedModelError(ModelError):
    """A model the engine cannot run exactly (e.g. a cache that cannot be rolled back)."""
