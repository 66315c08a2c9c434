"""How deep ranges may nest and still be rows: MAX_DEPTH, for `pa.region`s as a run records
them (regions.py, region_log.py) and for the ranges of files read (readers/nesting.py).

A range's row is named by the path of the ranges around it, so n ranges nested in one
another derive n paths of up to n names: 1,500 nested `pa.region`s wrote a 160 MB run
folder, 5,000 took 7.8 GB and 36 s; 5,000 nested annotations of a 0.5 MB trace 2.65 GB.
A range inside MAX_DEPTH others is left out of the rows, counted and said; its time is
still in the ranges around it (it ran inside them).
"""

#: the most ranges a range may sit inside and still be a row of its own (a Python call
#: stack under a model's modules rarely passes 30; TensorBoard's own views show fewer)
MAX_DEPTH = 64


def said_of_regions(count: int) -> str:
    """The note on the region calls a run left out for their depth."""
    return (f"{count:,} pa.region call{'s' if count > 1 else ''} nested deeper than "
            f"{MAX_DEPTH} levels left out of the rows (their time is in the regions "
            "around them)")
