"""A module-level function for the submitit sweep test (submitit pickles it by reference)."""


def scaled(x: int, model_depth: int) -> int:
    """x × depth; fails for x == 3 so the sweep has a failed point."""
    if x == 3:
        raise ValueError("x=3 fails on purpose")
    return x * model_depth
