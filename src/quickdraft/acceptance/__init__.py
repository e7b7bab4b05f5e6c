from .greedy import verify_greedy
from .rejection import verify_sampling

__all__ = ["verify_greedy", "verify_sampling"]
