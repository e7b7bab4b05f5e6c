"""Errors a caller can act on. Every message says what was wrong and what to do."""


class QuickdraftError(ValueError):
    """Base class: bad input or a state quickdraft refuses to work in."""


class ModelError(QuickdraftError):
    """A model could not be found, fetched, verified or loaded."""


class UnknownModelError(ModelError):
    """A name that is neither a path nor a known alias."""


class HashMismatchError(ModelError):
    """A fetched file's SHA-256 differs from the pinned one (the bad file is removed)."""


class UnsupportedModelError(ModelError):
    """A model the engine cannot run exactly (e.g. a cache that cannot be rolled back)."""
