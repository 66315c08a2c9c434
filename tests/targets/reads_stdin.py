import sys

print("got:", sys.stdin.readline().strip())
