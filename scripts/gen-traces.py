#!/usr/bin/env python3
"""Generates tests/fixtures/traces/: small traces in each format tokbench
reads (lib/spec/tb_trace.h, docs/traces.md), made from a seeded model of
arrivals, lengths and block reuse.  No production data: every figure comes
from random.Random(seed) here.

The model:
  - arrivals: Poisson at a given rate, with a burst (the rate times four)
    in the middle third, so a replay has a shape to follow;
  - lengths: log-normal input and output token counts, clipped;
  - block reuse: a few shared prefixes ("system prompts") of whole blocks
    drawn by a Zipf-like weight, then blocks of the request's own; a
    session's turn holds its whole context, so it repeats its parent's
    blocks and adds its own.

Beside each trace, <file>.expect.json holds its figures computed here, in
Python, on their own: requests, sessions, distinct blocks, block size, span,
mean input and the hit rate an unbounded prefix cache would have in the
trace's order (each request's leading blocks already seen, block_tokens
each, capped at its input).  tests/unit/test_trace.c holds tb_trace to them.

    scripts/gen-traces.py [--seed N] [--out DIR]
"""
import argparse
import datetime
import gzip
import io
import json
import math
import os
import random


def lognormal_int(rng, median, sigma, lo, hi):
    return max(lo, min(hi, int(round(median * math.exp(rng.gauss(0, sigma))))))


def arrivals(rng, n, rate):
    """n arrival times (s), Poisson at rate, four times faster in the middle third."""
    t, out = 0.0, []
    for i in range(n):
        r = rate * (4 if n // 3 <= i < 2 * n // 3 else 1)
        t += rng.expovariate(r)
        out.append(t)
    return out


class Blocks:
    """Dense block ids: shared prefixes and blocks of a request's own."""

    def __init__(self, rng, nprefix, prefix_blocks):
        self.rng = rng
        self.next = 0
        self.prefixes = [self.fresh(prefix_blocks) for _ in range(nprefix)]
        self.weights = [1.0 / (k + 1) for k in range(nprefix)]

    def fresh(self, n):
        ids = list(range(self.next, self.next + n))
        self.next += n
        return ids

    def request(self, nblocks, p_shared=0.7):
        ids = []
        if self.prefixes and self.rng.random() < p_shared:
            pre = self.rng.choices(self.prefixes, self.weights)[0]
            ids = pre[: min(len(pre), nblocks)]
        return ids + self.fresh(nblocks - len(ids))


def extend(blocks, ctx, n_in, bs, grow=False):
    """A turn's blocks: its parent's context (ctx, for n_in tokens so far) and
    new blocks to cover n_in.  Without grow: ctx with a partial last block
    dropped, since a block id names a block's content and a partial block
    that grows is other content (a new id), as in Mooncake's own traces."""
    if not grow:
        return ctx[: n_in // bs]
    need = -(-n_in // bs)
    return blocks.request(need) if not ctx else ctx + blocks.fresh(need - len(ctx))


def implied(reqs, block_tokens):
    """reqs: (input tokens, [scoped block ids]) in trace order."""
    seen, hit, total = set(), 0, 0
    for n_in, ids in reqs:
        k = 0
        while k < len(ids) and ids[k] in seen:
            k += 1
        hit += min(k * block_tokens, n_in)
        total += n_in
        seen.update(ids)
    return hit / total if total else 0.0


def expect(path, reqs, times, sessions, block_tokens):
    uniq = len({b for _, ids in reqs for b in ids})
    e = {
        "requests": len(reqs),
        "sessions": sessions,
        "unique_blocks": uniq,
        "block_tokens": block_tokens if uniq else 0,
        "span_s": round(max(times) - min(times), 9),
        "input_tokens_mean": sum(n for n, _ in reqs) / len(reqs),
        "implied_hit_rate": implied(reqs, block_tokens),
    }
    with open(path + ".expect.json", "w") as f:
        json.dump(e, f, indent=1, sort_keys=True)
        f.write("\n")


def mooncake(rng, out, n=240):
    bs = 512
    blocks = Blocks(rng, 4, 6)
    lines, reqs = [], []
    for t in arrivals(rng, n, 8.0):
        n_in = lognormal_int(rng, 3000, 0.6, 64, 20000)
        ids = blocks.request(-(-n_in // bs))
        lines.append(json.dumps({"timestamp": int(t * 1000), "input_length": n_in,
                                 "output_length": lognormal_int(rng, 200, 0.7, 1, 2000),
                                 "hash_ids": ids}))
        reqs.append((n_in, ids))
    text = "\n".join(lines) + "\n"
    p = os.path.join(out, "mooncake.jsonl")
    with open(p, "w") as f:
        f.write(text)
    times = [json.loads(l)["timestamp"] / 1000 for l in lines]
    expect(p, reqs, times, 0, bs)
    # the same trace gzipped (mtime 0: the bytes are a function of the seed)
    gz = io.BytesIO()
    with gzip.GzipFile(fileobj=gz, mode="wb", mtime=0, filename="") as g:
        g.write(text.encode())
    with open(p + ".gz", "wb") as f:
        f.write(gz.getvalue())
    expect(p + ".gz", reqs, times, 0, bs)


def mooncake_sessions(rng, out, nsess=30):
    """AIPerf's sessions: session_id, a first turn's timestamp, later turns' delay."""
    bs = 512
    blocks = Blocks(rng, 3, 4)
    rows, reqs, times = [], [], []
    for s, t in enumerate(arrivals(rng, nsess, 2.0)):
        ctx, n_in = [], 0
        for turn in range(rng.randint(1, 5)):
            ctx = extend(blocks, ctx, n_in, bs)
            n_in += lognormal_int(rng, 900, 0.5, 32, 8000)
            ctx = extend(blocks, ctx, n_in, bs, grow=True)
            row = {"session_id": "s%03d" % s, "input_length": n_in,
                   "output_length": lognormal_int(rng, 150, 0.6, 1, 1000), "hash_ids": list(ctx)}
            if turn == 0:
                row["timestamp"] = int(t * 1000)
                times.append(int(t * 1000) / 1000)
                first = int(t * 1000) / 1000
            else:
                row["delay"] = rng.randint(200, 3000)
                times.append(first)   # a delay-only turn sits at its parent's time
            rows.append((int(t * 1000), s, turn, row))
            reqs.append((n_in, list(ctx)))
    p = os.path.join(out, "mooncake-sessions.jsonl")
    with open(p, "w") as f:
        for r in rows:
            f.write(json.dumps(r[3]) + "\n")
    expect(p, reqs, times, nsess, bs)


def azure(rng, out, name, year, n=300):
    base = datetime.datetime(year, 11 if year == 2023 else 5, 16 if year == 2023 else 10, 18, 15, 46)
    lines = ["TIMESTAMP,ContextTokens,GeneratedTokens"]
    reqs, times = [], []
    for t in arrivals(rng, n, 5.0):
        us = int(round(t * 1e6))
        when = base + datetime.timedelta(microseconds=us)
        stamp = when.strftime("%Y-%m-%d %H:%M:%S.%f") + "0"     # 7 digits, as the 2023 file
        if year == 2024:
            stamp += "+00:00"
        n_in = lognormal_int(rng, 1000, 1.0, 1, 16000)
        lines.append("%s,%d,%d" % (stamp, n_in, lognormal_int(rng, 120, 0.9, 1, 2000)))
        reqs.append((n_in, []))
        times.append(us / 1e6)
    p = os.path.join(out, name)
    with open(p, "w") as f:
        f.write("\n".join(lines) + "\n")
    expect(p, reqs, times, 0, 0)


def burstgpt(rng, out, n=300):
    lines = ["Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type"]
    reqs, times = [], []
    for t in arrivals(rng, n, 3.0):
        ts = int(t) + 5                      # whole seconds, as BurstGPT's
        n_in = lognormal_int(rng, 600, 0.9, 1, 8000)
        n_out = 0 if rng.random() < 0.05 else lognormal_int(rng, 250, 0.8, 1, 4000)
        model = rng.choice(["ChatGPT", "GPT-4"])
        kind = rng.choice(["Conversation log", "API log"])
        lines.append("%d,%s,%d,%d,%d,%s" % (ts, model, n_in, n_out, n_in + n_out, kind))
        reqs.append((n_in, []))
        times.append(ts)
    p = os.path.join(out, "burstgpt.csv")
    with open(p, "w") as f:
        f.write("\n".join(lines) + "\n")
    expect(p, reqs, times, 0, 0)


def bailian(rng, out, nsess=60):
    bs = 16
    blocks = Blocks(rng, 5, 24)
    rows = []
    chat = 1000
    for t in arrivals(rng, nsess, 4.0):
        parent, ctx, n_in, ts = -1, [], 0, t
        for turn in range(1, rng.randint(1, 4) + 1):
            ctx = extend(blocks, ctx, n_in, bs)
            n_in += lognormal_int(rng, 500, 0.5, 16, 3000)
            ctx = extend(blocks, ctx, n_in, bs, grow=True)
            rows.append({"chat_id": chat, "parent_chat_id": parent, "timestamp": round(ts, 3),
                         "input_length": n_in, "output_length": lognormal_int(rng, 100, 0.6, 1, 800),
                         "type": "text", "turn": turn, "hash_ids": list(ctx)})
            parent, chat = chat, chat + 1
            ts += rng.uniform(5, 40)
    rows.sort(key=lambda r: (r["timestamp"], r["chat_id"]))   # the trace is in time order
    p = os.path.join(out, "bailian.jsonl")
    with open(p, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    reqs = [(r["input_length"], r["hash_ids"]) for r in rows]
    expect(p, reqs, [r["timestamp"] for r in rows], nsess, bs)


def weka(rng, out, nconv=4):
    """Conversations of TRACE_FORMAT.md: ids numbered per conversation from
    1, a subagent in a cache of its own; one JSON object per line."""
    bs = 64
    convs, reqs, times, sessions = [], [], [], 0
    for c in range(nconv):
        sessions += 1
        nxt = [1]

        def fresh(n):
            ids = list(range(nxt[0], nxt[0] + n))
            nxt[0] += n
            return ids

        scope = ("c", c)
        ctx, n_in, t, items = [], 0, 0.0, []
        for i in range(rng.randint(5, 12)):
            if i > 0 and rng.random() < 0.2:
                sessions += 1
                sub, st, sctx, sn = [], 0.0, [], 0
                sscope = ("s", c, i)
                snext = [1]
                for _ in range(rng.randint(2, 4)):
                    sn += lognormal_int(rng, 800, 0.4, 64, 4000)
                    add = max(0, sn // bs - len(sctx))
                    sctx = sctx + list(range(snext[0], snext[0] + add))
                    snext[0] += add
                    sub.append({"t": round(st, 3), "type": "s", "in": sn,
                                "out": lognormal_int(rng, 80, 0.5, 1, 500), "hash_ids": list(sctx)})
                    reqs.append((sn, [(sscope, b) for b in sctx]))
                    times.append(round(t, 3) + round(st, 3))
                    st += rng.uniform(1, 6)
                items.append({"t": round(t, 3), "type": "subagent", "agent_id": "a%d%d" % (c, i),
                              "requests": sub})
                t += rng.uniform(1, 5)
                continue
            n_in += lognormal_int(rng, 1500, 0.5, 64, 8000)
            need = n_in // bs                        # full blocks only, as the format's
            ctx = ctx + fresh(max(0, need - len(ctx)))
            row = {"t": round(t, 3), "type": "s", "in": n_in,
                   "out": lognormal_int(rng, 120, 0.6, 1, 1000), "hash_ids": list(ctx)}
            if any(x.get("type") != "subagent" for x in items):
                row["think_time"] = round(rng.uniform(0.5, 4), 3)
            items.append(row)
            reqs.append((n_in, [(scope, b) for b in ctx]))
            times.append(round(t, 3))
            t += rng.uniform(2, 15)
        convs.append({"id": "conv%04d" % c, "models": ["model-a"], "block_size": bs,
                      "tool_tokens": 0, "system_tokens": 0, "requests": items})
    p = os.path.join(out, "weka.json")
    with open(p, "w") as f:
        for cv in convs:
            f.write(json.dumps(cv) + "\n")
    expect(p, reqs, times, sessions, bs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=25)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests",
                                                  "fixtures", "traces"))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    rng = random.Random(a.seed)
    mooncake(rng, a.out)
    mooncake_sessions(rng, a.out)
    azure(rng, a.out, "azure2023.csv", 2023)
    azure(rng, a.out, "azure2024.csv", 2024)
    burstgpt(rng, a.out)
    bailian(rng, a.out)
    weka(rng, a.out)


if __name__ == "__main__":
    main()
