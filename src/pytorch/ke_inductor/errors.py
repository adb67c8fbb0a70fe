"""What the translation refuses, naming the part of the output code (Untranslatable)."""


class Untranslatable(Exception):
    """A part of the output code that has no counterpart in a program; `part` names it, `why` says why."""

    def __init__(self, part, why):
        super().__init__(f"{part}: {why}")
        self.part = part
        self.why = why
