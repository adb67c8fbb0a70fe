"""Naming each dimension (Namer): which globals are sizes, and what each dimension follows, from samples of the
module with the globals changed."""

import time

from .errors import first_line
from .sampling import signature_change
from .solver import linear, solve


def perturbed_values(value, meta):
    # On meta, sizes cost nothing; on a real call they stay near the module's own (its memory is the limit).
    candidates = [value + 1, value + 3, 2 * value, value + 2, value + 5] if meta else \
        [value - 1, value + 1, value - 2, value + 2, value - 3]
    return [c for c in dict.fromkeys(candidates) if c >= 1 and c != value]


class Namer:
    """Finds what each dimension follows. Samples: the base call, each int global changed in turn (a global
    whose change fails, or changes the signature beyond its sizes, is no size; one that changes no dimension
    neither), and a few with every size changed at once, so that products and sums are told apart. A global
    that some dimension equals in all its samples is a size; every dimension is then the size it equals, an
    expression over the sizes it follows (found bottom-up, using the forward's intermediate shapes as steps),
    or, following nothing, a number."""

    def __init__(self, derive, base, globals_order, log):
        self.derive, self.base, self.log = derive, base, log
        base_dims = base.dims()
        self.sizes = []          # the globals that are sizes, in definition order
        self.singles = {}        # global -> its perturbed samples
        self.not_sizes = {}      # global -> why not
        # Real calls run at the module's own size, and a module whose forward is thousands of small ops (a
        # recurrent network, step by step) is slow even on meta: past a minute, the globals left are not
        # examined (their dimensions stay numbers) rather than an import that takes an hour. (On the lent
        # H100, torch 2.11, the eight LSTM and GRU models of KernelBench's level 3 took over 240 s each.)
        deadline = time.monotonic() + 60
        for g in globals_order:
            value = base.sizes.get(g)
            if value is None or value <= 0:
                continue
            if deadline is not None and time.monotonic() > deadline:
                self.not_sizes[g] = "not examined: the derivation took its minute"
                continue
            # Three values each on meta (cheap), two for real: enough points that an expression which
            # matches them all is the rule and not a coincidence.
            got, tries, wanted = [], 0, 3 if derive.meta else 2
            for v in perturbed_values(value, derive.meta):
                if len(got) == wanted or tries == wanted + 2:
                    break
                tries += 1
                try:
                    s = derive({g: v})
                except Exception as e:
                    self.not_sizes.setdefault(g, f"{g} = {v} fails ({first_line(e)})")
                    continue
                change = signature_change(base.params, s.params)
                if change:
                    got = []
                    self.not_sizes[g] = f"{g} = {v} changes the signature: {change}"
                    break
                if [d for _, d in s.dims()] == [d for _, d in base_dims]:
                    self.not_sizes[g] = f"no dimension follows {g}"
                    got = []
                    break
                got.append(s)
            if not got:
                continue
            samples = [base] + got
            if any(all(s.dims()[k][1] == s.sizes[g] for s in samples) for k in range(len(base_dims))):
                self.sizes.append(g)
                self.singles[g] = got
                self.not_sizes.pop(g, None)
            else:
                self.not_sizes[g] = f"no dimension equals {g}"
        # Every size changed at once, with the values each took alone (mixed), then with their changes
        # doubled and tripled (a size that must stay even stays even): products are told from sums.
        self.joints = []
        if len(self.sizes) >= 1:
            for j in range(4 if derive.meta else 2):
                if time.monotonic() > deadline:
                    break
                over = {}
                for i, g in enumerate(self.sizes):
                    choices = [s.sizes[g] for s in self.singles[g]]
                    pick = choices[(i + j) % len(choices)]
                    over[g] = pick if j < 2 else base.sizes[g] + j * (pick - base.sizes[g])
                try:
                    s = derive(over)
                except Exception:
                    continue
                if not signature_change(base.params, s.params):
                    self.joints.append(s)
        self.samples = [base] + [s for g in self.sizes for s in self.singles[g]] + self.joints
        self.vectors = {g: tuple(s.sizes[g] for s in self.samples) for g in self.sizes}
        self.library = None

    def deps(self, values):
        """The sizes whose own samples change `values` (a tuple over the samples)."""
        out, index = [], 1
        for g in self.sizes:
            n = len(self.singles[g])
            if any(values[index + k] != values[0] for k in range(n)):
                out.append(g)
            index += n
        return out

    def name(self, values, use_library=True):
        """A dimension's values over the samples as a size's name, an expression, or a number (an int)."""
        values = tuple(values)
        if len(set(values)) == 1:
            return values[0]
        for g in self.sizes:
            if self.vectors[g] == values:
                return g
        deps = self.deps(values)
        leaves = [(g, self.vectors[g], None) for g in deps]
        found = linear(values, leaves)
        if found is None:
            found = solve(values, leaves, 7 if len(leaves) <= 3 else 5)
        if found is None and use_library:
            steps = [e for e in self.steps() if set(e[3]) <= set(deps)][-6:]
            found = solve(values, leaves + [(t, v, p) for t, v, p, _ in steps], 5)
        return strip_parentheses(found) if found is not None else values[0]

    def steps(self):
        """The forward's intermediate dimensions as expressions over the sizes, in the order the forward made
        them: each found from the sizes and the steps before it (a pool of a convolution of the input)."""
        if self.library is not None:
            return self.library
        self.library = []
        if any(len(s.intermediates) != len(self.base.intermediates) for s in self.samples):
            return self.library
        known = {v: g for g, v in self.vectors.items()}
        for k, shape in enumerate(self.base.intermediates):
            if len(self.library) >= 64:
                break
            if any(len(s.intermediates[k]) != len(shape) for s in self.samples):
                return self.library
            for d in range(len(shape)):
                values = tuple(s.intermediates[k][d] for s in self.samples)
                if len(set(values)) == 1 or values in known:
                    continue
                deps = self.deps(values)
                leaves = [(g, self.vectors[g], None) for g in deps] + \
                         [(t, v, p) for t, v, p, dp in self.library if set(dp) <= set(deps)][-6:]
                text = solve(values, leaves, 5 if len(leaves) <= 6 else 3)
                known[values] = text
                if text is not None:
                    self.library.append((text if text.isidentifier() else f"({text})", values, None, deps))
        return self.library


def strip_parentheses(text):
    while text.startswith("(") and text.endswith(")"):
        depth = 0
        for i, c in enumerate(text):
            depth += c == "("
            depth -= c == ")"
            if depth == 0 and i < len(text) - 1:
                return text
        text = text[1:-1]
    return text
