"""Align the reference's near-tie choices with another run's, to compare tightly.

With emulated int8 activations and a float16 KV cache, the reference and the engine make
thousands of rounding choices per token. A few land within float noise of a midpoint
(see blocks.Choices), and there the engine's float32 arithmetic can round the other way.
A single such ±1 step can move later logits by 0.1 or more, because every later rounding
and routing decision sees a slightly different input: the two runs then stop being
comparable with a tight tolerance, though both are right.

follow_ties() walks the positions in order. At the first position whose logits differ by
more than `tol`, it looks for a near-tie at or before that position which, taken the
other way, makes the reference match there again (or, failing that, at least halves the
difference there, so that two flips can be found one after the other; or, failing that,
a few of the closest near-ties that together make it match); it keeps the flips and goes
on. The result is a reference that matches the other run within `tol` at every position,
with a short list of flips, each of them a choice float noise could tip. A wrong formula cannot
hide this way: it would need a flip at nearly every position, and no ±1 step at a
near-tie turns a wrong value into a right one within a tight tolerance.
"""
import itertools

import numpy as np

# How many of the closest near-ties the last-resort subset search combines (2^8 trials).
SUBSET_CANDIDATES = 8


def _position(key):
    return key[2] if key[0] == "route" else key[3]


def _layer(key, n_layer):
    if key[0] == "q8" or key[2] == "input":   # the site: "blk.N.<name>" or "output_in"
        return int(key[1].split(".")[1]) if key[1].startswith("blk.") else n_layer
    return key[1] if key[0] == "route" else key[2]


def follow_ties(model, tokens, target, tol, max_flips=12, max_trials=600):
    """model: a reference model (qwen3moe.Qwen3MoE, qwen35moe.Qwen35MoE, laguna.Laguna);
    target: logits (n_positions, n_vocab) of the other run for positions
    0..n_positions-1 of `tokens`.

    Returns (logits, flips, problem): the reference's logits with the flips taken, the
    flips as (key, value, margin) in the order found, and None when every position
    matches within tol, else a sentence saying where and why alignment stopped."""
    target = np.asarray(target, dtype=np.float64)
    n = target.shape[0]
    flips = []
    trials = 0
    while True:
        take = {key: value for key, value, _ in flips}
        logits = model.forward(tokens, take)
        trace = model.trace
        diff = np.max(np.abs(logits[:n] - target), axis=1)
        bad = np.nonzero(diff > tol)[0]
        if len(bad) == 0:
            return logits, flips, None
        p = int(bad[0])
        if len(flips) >= max_flips:
            return logits, flips, (f"position {p} differs by {diff[p]:.3g} after {max_flips} "
                                   f"near-tie flips")
        candidates = sorted((margin, key, other)
                            for key, (margin, other) in model.choices.found.items()
                            if key not in take and _position(key) <= p)
        # The first candidate that makes position p match; failing that, the one that
        # brings it closest, if it at least halves the difference (two flips may be
        # needed together, each of them a near-tie); failing that, the first subset of
        # the few closest near-ties that makes it match (several float16 V elements of
        # one token can flip at once, each tipping int8 roundings only with the others).
        found, best, best_diff = None, None, diff[p] / 2
        for margin, key, other in candidates:
            if trials == max_trials:
                break
            trials += 1
            trial_diff = _try(model, tokens, p, target, trace, take, [(key, other)])
            if np.max(trial_diff) <= tol:
                found = [(key, other, margin)]
                break
            if np.max(trial_diff[:-1], initial=0) <= tol and trial_diff[-1] < best_diff:
                best, best_diff = [(key, other, margin)], trial_diff[-1]
        if found is None and best is None:
            closest = candidates[:SUBSET_CANDIDATES]
            for size in range(2, len(closest) + 1):
                for subset in itertools.combinations(closest, size):
                    if found or trials == max_trials:
                        break
                    trials += 1
                    trial_diff = _try(model, tokens, p, target, trace, take,
                                      [(key, other) for _, key, other in subset])
                    if np.max(trial_diff) <= tol:
                        found = [(key, other, margin) for margin, key, other in subset]
        if found is None and best is None:
            return logits, flips, (f"position {p} differs by {diff[p]:.3g} and no near-tie at "
                                   f"or before it explains that ({trials} trials)")
        flips.extend(found or best)


def _try(model, tokens, p, target, trace, take, changes):
    """Per-position max |difference| from the first changed position to p, with the
    changes [(key, value)] taken on top of `take`. Only what they can change is
    recomputed: from their first position (up to p), from their first layer."""
    start = min(_position(key) for key, _ in changes)
    layer = min(_layer(key, model.n_layer) for key, _ in changes)
    trial = model.forward(tokens[:p + 1], {**take, **dict(changes)},
                          resume=(trace, layer, start))
    return np.max(np.abs(trial - target[start:p + 1]), axis=1)
