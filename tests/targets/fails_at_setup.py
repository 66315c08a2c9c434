"""Fails in its set-up, before any step, as a training script whose data is missing does."""
import time

time.sleep(0.05)  # some set-up first
raise FileNotFoundError("no such file: data/train.bin")
