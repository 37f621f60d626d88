#!/usr/bin/env python3
"""Several builds' dw_bench on the same shapes, interleaved round by round,
pinned to one core: for each shape, each build's fastest round (the least
disturbed by a shared machine's other work) and its ratio to the first
build's.

usage: python3 bench/engine/dw_compare.py [--rounds 6] [--secs 0.1]
       NAME=PATH [NAME=PATH ...] [-- SHAPE ...]
PATH is a dw_bench binary (e.g. build/bench/dw_bench and another branch's);
without shapes, dw_bench's built-in list. Prints a Markdown table of
microseconds per call.
"""
import argparse
import json
import os
import subprocess
import sys


def run(path, secs, shapes):
    cmd = [path, str(secs)] + shapes
    if hasattr(os, "sched_getaffinity") and len(os.sched_getaffinity(0)) > 1:
        cmd = ["taskset", "-c", str(max(os.sched_getaffinity(0)))] + cmd
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def main():
    argv = sys.argv[1:]
    shapes = []
    if "--" in argv:
        i = argv.index("--")
        argv, shapes = argv[:i], argv[i + 1:]
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--secs", type=float, default=0.1)
    ap.add_argument("builds", nargs="+", help="NAME=PATH of a dw_bench")
    a = ap.parse_args(argv)
    builds = [b.split("=", 1) for b in a.builds]
    if any(len(b) != 2 for b in builds):
        ap.error("builds are NAME=PATH")
    best, order, isa = {}, [], "?"
    for r in range(a.rounds):
        for name, path in builds:
            for row in run(path, a.secs, shapes):
                key = row["shape"]
                if key not in order:
                    order.append(key)
                isa = row["isa"]
                cur = best.setdefault(name, {})
                cur[key] = min(cur.get(key, float("inf")), row["us"])
        print("round %d/%d done" % (r + 1, a.rounds), file=sys.stderr)
    names = [n for n, _ in builds]
    print("ISA: %s; fastest of %d rounds, microseconds per call" % (isa, a.rounds))
    print("| shape | " + " | ".join(names) + " | " + " | ".join(
        "%s ÷ %s" % (n, names[0]) for n in names[1:]) + " |")
    print("|---" * (2 * len(names)) + "|")
    for key in order:
        us = [best[n][key] for n in names]
        print("| %s | " % key + " | ".join("%.1f" % u for u in us) + " | " + " | ".join(
            "%.2f" % (u / us[0]) for u in us[1:]) + " |")
    tot = [sum(best[n].values()) for n in names]
    print("| all | " + " | ".join("%.1f" % u for u in tot) + " | " + " | ".join(
        "%.2f" % (u / tot[0]) for u in tot[1:]) + " |")


if __name__ == "__main__":
    main()
