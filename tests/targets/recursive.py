"""Recursion, where cProfile's cumulative times overcount: a function calling itself, two
calling each other with work under each, a function decorated with a region that recurses
through it, and pa.step() and a region inside; argv[1] repeats (default 3)."""

import sys

import profile_all as pa


def work(n):
    return sum(range(n))


def countdown(n):  # calls itself
    if n:
        work(20_000)
        countdown(n - 1)


def even(n):  # even -> odd -> even ...: an edge from even to leaf_even is counted in full
    if n == 0:
        return work(400_000)
    work(5_000)
    return odd(n - 1)


def odd(n):
    if n == 0:
        return work(400_000)
    work(50_000)
    return even(n - 1)


@pa.region("tower")
def tower(n):  # recurses through profile-all's decorator
    if n:
        work(10_000)
        tower(n - 1)


for _ in range(int(sys.argv[1]) if len(sys.argv) > 1 else 3):
    with pa.region("recursion"):
        countdown(30)
        even(41)
        tower(10)
    pa.step()
