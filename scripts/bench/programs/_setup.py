"""A set-up that costs what reading and tokenising a corpus costs: Python work over a
generated text (no file, no download), a few seconds at one thread."""

import random


def corpus(words: int, seed: int = 0) -> list[int]:
    """Token ids of a generated text of `words` words, made and tokenised word by word."""
    rng = random.Random(seed)
    vocabulary = ["".join(rng.choice("abcdefghij") for _ in range(rng.randint(2, 7)))
                  for _ in range(2000)]
    text = " ".join(rng.choice(vocabulary) for _ in range(words))
    index: dict[str, int] = {}
    return [index.setdefault(word, len(index)) for word in text.split()]
