"""What the bridge reports as the module's own fault (Unmappable) and an exception's first sentence."""


class Unmappable(Exception):
    pass


def first_line(e):
    """An exception's first sentence."""
    text = str(e).strip().splitlines()[0] if str(e).strip() else ""
    text = text.split(". ")[0]
    return f"{type(e).__name__}: {text}"[:300] if text else type(e).__name__
