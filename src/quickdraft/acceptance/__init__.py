from .greedy import verify_greedy

__all__ = ["verify_greedy"]
