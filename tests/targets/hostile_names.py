"""Regions named to attack a terminal and a markdown preview: escape sequences that clear
and recolour the screen, Rich markup, a right-to-left override, a bell, a newline, a
carriage return (which split a CSV row)."""

import time

import profile_all as pa

NAMES = ["\x1b[2J\x1b[31mcleared", "[bold red]markup[/bold red]", "right\u202eleft",
         "bell\x07", "two\nlines", "c1\x9bcsi", "carriage\rreturn"]
for _ in range(3):
    for name in NAMES:
        with pa.region(name):
            time.sleep(0.001)
    pa.step()
