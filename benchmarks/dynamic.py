"""Sequences of changing sizes, the tracer vs torch.compile side by side (issue 12).

Cases (each a sequence of calls whose sizes change, as real programs make them):
  * mlp:     an MLP over batch sizes 1..32 (an epoch's ragged last batch, a serving queue);
  * attn:    a causal self-attention block over sequence lengths 4..64;
  * decode:  a tiny HF GPT2 greedy decoding loop: prompt of 8, then 24 steps with the KV
             cache growing by one token per step (transformers; skipped when missing).

Both front ends compile with backend "eager" (the graph's own forward), so only the front
ends differ: tracing, guards, symbolic sizes, the cache lookup. Measured per case:

  * total: thread CPU time of the whole sequence from empty caches (compiles included),
    median over rounds; tracer and torch.compile rounds interleaved;
  * compiles: graphs each one compiled over the sequence;
  * per-call overhead on a hit: after the sequence, calls at sizes the dynamic entry
    covers; the front end's own time per call = (block time - time spent inside the
    compiled graphs, measured by the backend) / calls, median over interleaved blocks
    (tracer, torch, tracer, ...), gc off while timing. (Compiled minus eager is no measure
    here: running the graph skips the model's Python, so it is often negative.)

Ratios are tracer / torch.compile (below 1: the tracer is faster). Goals: total <= 0.5,
per-call overhead <= 0.5.

    python benchmarks/dynamic.py              # writes benchmarks/dynamic.md
    python benchmarks/dynamic.py --quick      # fewer rounds (noisier)
"""
import argparse
import copy
import gc
import os
import platform
import statistics
import sys
import time
import warnings

import torch
import torch._dynamo
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import tracer  # noqa: E402

clock = time.thread_time_ns


# ---- cases -----------------------------------------------------------------------------------

class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1, self.l2, self.l3 = nn.Linear(32, 64), nn.Linear(64, 64), nn.Linear(64, 10)

    def forward(self, x):
        return self.l3(torch.relu(self.l2(torch.relu(self.l1(x)))))


class Attention(nn.Module):
    def __init__(self, d=32, heads=4):
        super().__init__()
        self.heads = heads
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / (c // self.heads) ** 0.5)
        mask = torch.ones(t, t, dtype=torch.bool).tril()
        att = att.masked_fill(~mask, float("-inf")).softmax(-1)
        return self.proj((att @ v).transpose(1, 2).reshape(b, t, c))


def mlp_case():
    torch.manual_seed(0)
    model = MLP().eval()
    seq = [(torch.randn(b, 32),) for b in range(1, 33)]
    hits = [(torch.randn(b, 32),) for b in (7, 19, 30)]
    return model, lambda f, args: f(*args), seq, hits


def attn_case():
    torch.manual_seed(0)
    model = Attention().eval()
    seq = [(torch.randn(2, t, 32),) for t in range(4, 65, 4)]
    hits = [(torch.randn(2, t, 32),) for t in (10, 33, 50)]
    return model, lambda f, args: f(*args), seq, hits


def decode_case():
    import transformers as tf
    torch.manual_seed(0)
    c = tf.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=100, n_positions=64,
                      bos_token_id=0, eos_token_id=0)
    model = tf.GPT2LMHeadModel(c).eval()
    ids = torch.randint(1, 100, (2, 8))

    def loop(f, _args):  # one "call" of the sequence is the whole decoding loop
        past, cur = None, ids
        for _ in range(24):
            o = f(input_ids=cur, past_key_values=past, use_cache=True)
            past, cur = o.past_key_values, o.logits[:, -1:].argmax(-1)
        return cur

    # a hit: one decoding step at a cache length the symbolic entry covers; a step appends to
    # the cache it is given, so every call gets its own copy (made before timing)
    with torch.no_grad():
        o = model(input_ids=ids, use_cache=True)
        for _ in range(5):
            o = model(input_ids=o.logits[:, -1:].argmax(-1), past_key_values=o.past_key_values, use_cache=True)
    nxt, cache = o.logits[:, -1:].argmax(-1), o.past_key_values

    def hits(count):
        return [dict(input_ids=nxt, past_key_values=copy.deepcopy(cache), use_cache=True) for _ in range(count)]
    return model, loop, [None], hits


CASES = {"mlp": mlp_case, "attn": attn_case, "decode": decode_case}


# ---- measuring -------------------------------------------------------------------------------

class Counter:
    """A backend: counts graphs; the graph's forward, timed, so a hit's overhead is the call
    minus the time spent inside the graphs (the front end's own cost)."""

    def __init__(self):
        self.graphs = 0
        self.inside = [0]

    def __call__(self, gm, example_inputs):
        self.graphs += 1
        forward, inside = gm.forward, self.inside

        def timed(*args):
            t0 = clock()
            try:
                return forward(*args)
            finally:
                inside[0] += clock() - t0
        return timed


def fresh():
    tracer.reset()
    tracer.reset_stats()
    torch._dynamo.reset()


def run_sequence(kind, model, call, seq, reset=True):
    """(thread CPU ns of the whole sequence from empty caches, graphs compiled, compiled)."""
    if reset:
        fresh()
    counter = Counter()
    compiled = tracer.compile(model, backend=counter) if kind == "tracer" else \
        torch.compile(model, backend=counter)
    gc.collect()
    t0 = clock()
    for args in seq:
        call(compiled, args)
    compiled.counter = counter
    return clock() - t0, counter.graphs, compiled


def _invoke(f, args):
    return f(**args) if isinstance(args, dict) else f(*args)


def hit_overhead(model, compiled_t, compiled_c, hits, blocks):
    """Per hit call, the front end's own time: the call minus the time inside its graphs
    (median over interleaved blocks, tracer and torch.compile). `hits`: argument tuples (or
    kwargs dicts), or a function giving `count` fresh ones."""
    make = hits if callable(hits) else (lambda count: [hits[i % len(hits)] for i in range(count)])
    calls = max(30, int(3_000_000 / max(1, _time_one(model, make(3)))))
    over = {"t": [], "c": []}
    for _ in range(blocks):
        for key, compiled in (("t", compiled_t), ("c", compiled_c)):
            args = make(calls)
            compiled.counter.inside[0] = 0
            total = _block(compiled, args)
            over[key].append((total - compiled.counter.inside[0]) / calls)
    return statistics.median(over["t"]), statistics.median(over["c"])


def _time_one(f, args_list):
    t0 = clock()
    for a in args_list:
        _invoke(f, a)
    return (clock() - t0) / len(args_list)


def _block(f, args_list):
    gc.collect()
    gc.disable()
    try:
        t0 = clock()
        for a in args_list:
            _invoke(f, a)
        return clock() - t0
    finally:
        gc.enable()


def measure(name, rounds, blocks):
    model, call, seq, hits = CASES[name]()
    totals = {"tracer": [], "torch": []}
    graphs = {}
    compiled = {}
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        eager_out = call(model, seq[0])
        for _ in range(rounds):
            for kind in ("tracer", "torch"):
                ns, g, compiled[kind] = run_sequence(kind, model, call, seq)
                totals[kind].append(ns)
                graphs[kind] = g
        # steady state: both front ends hold the entries the whole sequence made
        fresh()
        for kind in ("tracer", "torch"):
            _ns, _g, compiled[kind] = run_sequence(kind, model, call, seq, reset=False)
        assert torch.equal(call(compiled["tracer"], seq[0]), eager_out)
        before = tracer.stats().frames_traced
        t_over, c_over = hit_overhead(model, compiled["tracer"], compiled["torch"], hits, blocks)
        assert tracer.stats().frames_traced == before, "hit calls traced a frame"
    return dict(name=name, calls=len(seq), total_t=statistics.median(totals["tracer"]),
                total_c=statistics.median(totals["torch"]), graphs_t=graphs["tracer"],
                graphs_c=graphs["torch"], over_t=t_over, over_c=c_over)


# ---- report ----------------------------------------------------------------------------------

def ms(ns):
    return f"{ns / 1e6:.1f}"


def us(ns):
    return f"{ns / 1e3:.1f}"


def render(rows, cfg):
    out = ["# Dynamic shapes: sequences of changing sizes, tracer vs torch.compile", "",
           f"{cfg}", "",
           "| sequence | calls | graphs tracer / torch | total ms tracer | total ms torch | ratio "
           "| hit overhead us tracer | torch | ratio |",
           "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['name']} | {r['calls']} | {r['graphs_t']} / {r['graphs_c']} | {ms(r['total_t'])} | "
                   f"{ms(r['total_c'])} | {r['total_t'] / r['total_c']:.2f} | {us(r['over_t'])} | "
                   f"{us(r['over_c'])} | {r['over_t'] / r['over_c']:.2f} |")
    return "\n".join(out) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", default=None)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "dynamic.md"))
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    rounds, blocks = (3, 5) if args.quick else (5, 11)
    names = args.only.split(",") if args.only else list(CASES)
    rows = []
    for name in names:
        try:
            rows.append(measure(name, rounds, blocks))
        except ImportError as e:
            print(f"{name}: skipped ({e})")
            continue
        r = rows[-1]
        print(f"{name}: total {ms(r['total_t'])} ms vs {ms(r['total_c'])} ms "
              f"({r['total_t'] / r['total_c']:.2f}), graphs {r['graphs_t']} vs {r['graphs_c']}, "
              f"hit overhead {us(r['over_t'])} us vs {us(r['over_c'])} us ({r['over_t'] / r['over_c']:.2f})",
              flush=True)
    cfg = (f"torch {torch.__version__}, Python {platform.python_version()}, {platform.machine()}, "
           f"1 thread; {rounds} rounds (total), {blocks} interleaved blocks (overhead); medians of "
           f"thread CPU time; backend eager for both")
    text = render(rows, cfg)
    with open(args.out, "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
