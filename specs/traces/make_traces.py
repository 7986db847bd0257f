#!/usr/bin/env python3
"""Writes the sample traces next to this script, deterministically.

Made up, in the shape of the published traces (nothing is copied from
them): a chat service whose requests share one of a few system prompts
(Mooncake's `hash_ids` blocks of 512 tokens), arriving in bursts.

    python3 specs/traces/make_traces.py
"""
import json
import math
import os
import random

HERE = os.path.dirname(os.path.abspath(__file__))
BLOCK = 512


def requests(n, seed):
    rng = random.Random(seed)
    t = 0.0
    # Four system prompts of 1-3 blocks, shared by most requests.
    systems = [list(range(1 + 10 * k, 1 + 10 * k + 1 + k % 3)) for k in range(4)]
    next_id = 1000
    out = []
    for _ in range(n):
        # Bursty arrivals: mostly short gaps, sometimes a lull.
        t += rng.expovariate(8.0) if rng.random() < 0.9 else rng.uniform(0.5, 2.0)
        system = systems[rng.randrange(len(systems))] if rng.random() < 0.8 else []
        own = max(1, int(rng.lognormvariate(math.log(600), 0.8)))
        inp = len(system) * BLOCK + own
        blocks = math.ceil(inp / BLOCK)
        ids = list(system) + list(range(next_id, next_id + blocks - len(system)))
        next_id += blocks - len(system)
        out_len = max(1, min(2048, int(rng.lognormvariate(math.log(120), 0.7))))
        out.append((t, inp, out_len, ids))
    return out


def main():
    reqs = requests(400, 21)
    with open(os.path.join(HERE, "mooncake-sample.jsonl"), "w") as f:
        for t, inp, out, ids in reqs:
            f.write(json.dumps({"timestamp": int(t * 1000), "input_length": inp,
                                "output_length": out, "hash_ids": ids}) + "\n")
    with open(os.path.join(HERE, "sample.jsonl"), "w") as f:
        for t, inp, out, ids in reqs[:200]:
            f.write(json.dumps({"offset_ms": round(t * 1000, 3), "input_tokens": inp,
                                "output_tokens": out, "hash_ids": ids}) + "\n")
    with open(os.path.join(HERE, "azure-sample.csv"), "w") as f:
        f.write("TIMESTAMP,ContextTokens,GeneratedTokens\n")
        base = 18 * 3600 + 15 * 60  # 2023-11-16 18:15:00
        for t, inp, out, _ in reqs[:300]:
            s = base + t
            h, m, sec = int(s // 3600), int(s % 3600 // 60), s % 60
            f.write(f"2023-11-16 {h:02d}:{m:02d}:{sec:010.7f},{inp},{out}\n")


if __name__ == "__main__":
    main()
