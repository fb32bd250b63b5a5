#!/usr/bin/env python3
"""The mixed dataset of issue 6: SMALL files of 100 KB-1 MB and LARGE files of 100 MB-1 GB,
sizes from a seeded generator (so every run and every tool sees the same tree), contents
random bytes. Prints the total size in bytes.

usage: mixed.py DIR [SMALL=5000] [LARGE=20] [SEED=6]
"""
import os
import random
import sys

def main():
    root = sys.argv[1]
    small = int(sys.argv[2]) if len(sys.argv) > 2 else 5000
    large = int(sys.argv[3]) if len(sys.argv) > 3 else 20
    seed = int(sys.argv[4]) if len(sys.argv) > 4 else 6
    r = random.Random(seed)
    sizes = [("s%05d" % i, r.randint(100_000, 1_000_000)) for i in range(small)]
    sizes += [("L%03d" % i, r.randint(100_000_000, 1_000_000_000)) for i in range(large)]
    os.makedirs(root, exist_ok=True)
    chunk = 64 << 20
    for name, size in sizes:
        with open(os.path.join(root, name), "wb") as f:
            left = size
            while left:
                n = min(left, chunk)
                f.write(os.urandom(n))
                left -= n
    print(sum(s for _, s in sizes))

if __name__ == "__main__":
    main()
