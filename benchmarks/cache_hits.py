"""What a cache hit costs on real models: guard checks and the whole warm call (issue 13).

For each model, in one process, side by side with torch.compile (backend "eager" for both, so
the graphs run the same kernels and only the front ends differ):

  * guards: how many guards the tracer's root entry has;
  * check (us): the entry's check function alone, called with the real inputs of a warm call
    (the same L, G, C the hot path hands it), many calls per block, thread CPU time, median
    and minimum over blocks; beside it torch.compile's own guard check on its cache entry
    (`guard_manager.check(f_locals)`, where this torch exposes it);
  * warm-call overhead (us): compiled call minus eager call, for the tracer and for
    torch.compile. Eager, tracer and torch.compile blocks are interleaved (e, t, c, e, t, c,
    ...) so slow drifts of a shared machine hit all three alike; each block is timed with
    `time.thread_time_ns` (CPU time of this thread: time the scheduler gives to other
    processes is not counted), gc is off while timing, and the overhead is the median over
    blocks of (compiled block - eager block of the same round) / calls; the minimum-based
    figure (fastest compiled block - fastest eager block) is shown beside it.

    python benchmarks/cache_hits.py                  # all models, writes benchmarks/guards.md
    python benchmarks/cache_hits.py --quick          # fewer blocks (noisier)
    python benchmarks/cache_hits.py --only te2,gpt2  # some models
    python benchmarks/cache_hits.py --profile gpt2   # cProfile of warm calls of one model
"""
import argparse
import gc
import inspect
import os
import platform
import statistics
import sys
import time
import warnings

import torch
import torch._dynamo
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import tracer  # noqa: E402
from cases import args1, args4, args16  # noqa: E402  (the same small functions as make bench)

clock = time.thread_time_ns


# ----------------------------------------------------------------------------------------------
# Models
# ----------------------------------------------------------------------------------------------

def _encoder(layers):
    def make():
        layer = nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128, dropout=0.1,
                                           batch_first=True)
        m = nn.TransformerEncoder(layer, num_layers=layers, enable_nested_tensor=False).eval()
        return m, (torch.randn(2, 16, 64),), {}
    return make


def _gpt2():
    import transformers as tf
    c = tf.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=100, n_positions=64,
                      bos_token_id=0, eos_token_id=0)
    return tf.GPT2LMHeadModel(c).eval(), (), dict(input_ids=torch.randint(0, 100, (2, 8)))


def _llama():
    import transformers as tf
    c = tf.LlamaConfig(num_hidden_layers=2, hidden_size=32, num_attention_heads=2,
                       num_key_value_heads=2, intermediate_size=64, vocab_size=100,
                       max_position_embeddings=64)
    return tf.LlamaForCausalLM(c).eval(), (), dict(input_ids=torch.randint(0, 100, (2, 8)))


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        idt = x if self.down is None else self.down(x)
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + idt)


class ResNet(nn.Module):
    """ResNet-18's shape (4 stages of 2 basic blocks) with narrow channels."""

    def __init__(self, width=8, classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width),
                                  nn.ReLU())
        blocks, cin = [], width
        for i, cout in enumerate((width, 2 * width, 4 * width, 8 * width)):
            blocks += [BasicBlock(cin, cout, 1 if i == 0 else 2), BasicBlock(cout, cout, 1)]
            cin = cout
        self.layers = nn.Sequential(*blocks)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x):
        return self.fc(self.pool(self.layers(self.stem(x))).flatten(1))


def _resnet():
    return ResNet().eval(), (torch.randn(2, 3, 16, 16),), {}


def pointwise(x, y):
    return (x.sin() + y).relu()


def _fn(fn, n, shape=(4, 4)):
    return lambda: (fn, tuple(torch.randn(*shape) for _ in range(n)), {})


MODELS = {  # key: (label, factory, kind)
    "te2": ("TransformerEncoder x2", _encoder(2), "model"),
    "te12": ("TransformerEncoder x12", _encoder(12), "model"),
    "gpt2": ("tiny GPT2 (2 layers)", _gpt2, "model"),
    "llama": ("tiny LLaMA (2 layers)", _llama, "model"),
    "resnet": ("ResNet-18-style CNN", _resnet, "model"),
    "pw": ("fn: sin+add+relu", _fn(pointwise, 2), "small"),
    "a1": ("fn: 1 tensor arg", _fn(args1, 1), "small"),
    "a4": ("fn: 4 tensor args", _fn(args4, 4), "small"),
    "a16": ("fn: 16 tensor args", _fn(args16, 16), "small"),
}


# ----------------------------------------------------------------------------------------------
# Timing
# ----------------------------------------------------------------------------------------------

def _block(fn, args, kwargs, n):
    t0 = clock()
    for _ in range(n):
        fn(*args, **kwargs)
    return clock() - t0


def calls_per_block(fn, args, kwargs, target_ns=2_000_000):
    """Enough calls that one block takes about `target_ns` of CPU time (clock noise < 0.1%)."""
    n = 1
    while True:
        t = _block(fn, args, kwargs, n)
        if t >= target_ns // 4 or n >= 1 << 20:
            return max(1, int(n * target_ns / max(t, 1)))
        n *= 4


def interleaved(fns, args, kwargs, blocks, n):
    """Per-call CPU ns of each fn, one block of each per round: list of lists (blocks)."""
    out = [[] for _ in fns]
    gc.collect()
    gc.disable()
    try:
        for _ in range(blocks):
            for i, fn in enumerate(fns):
                out[i].append(_block(fn, args, kwargs, n) / n)
    finally:
        gc.enable()
    return out


def overhead(compiled_times, eager_times):
    """(median of per-round differences, min-based difference), ns per call."""
    diffs = [c - e for c, e in zip(compiled_times, eager_times)]
    return statistics.median(diffs), min(compiled_times) - min(eager_times)


def time_check(check, L, G, C, blocks):
    """Median and min ns of one guard check call (blocks of many calls)."""
    def one():
        return check(L, G, C)
    n = calls_per_block(one, (), {}, 1_000_000)
    times = interleaved([one], (), {}, blocks, n)[0]
    return statistics.median(times), min(times)


# ----------------------------------------------------------------------------------------------
# Inputs a warm call hands the guard check
# ----------------------------------------------------------------------------------------------

def tracer_root(compiled):
    return compiled._compiled_forward if isinstance(compiled, tracer.CompiledModule) else compiled


def check_inputs(compiled, obj, args, kwargs):
    """(check, L, G, C) exactly as CompiledFunction.__call__ hands them on a hit."""
    cf = tracer_root(compiled)
    call_args = ((obj,) + tuple(args)) if isinstance(compiled, tracer.CompiledModule) else tuple(args)
    if kwargs or len(call_args) != cf._n or not cf._simple:
        L = cf._bind(call_args, kwargs)
    else:
        L = call_args
    for check, _run in cf._hits:
        if check(L, cf._G, cf._C):
            return check, L, cf._G, cf._C
    raise RuntimeError("no tracer cache entry passes its guards on a warm call")


def torch_guard_check(obj, args, kwargs):
    """torch.compile's guard check for its first cache entry on this frame, or None."""
    try:
        from torch._dynamo.eval_frame import _debug_get_cache_entry_list
        fn = type(obj).forward if isinstance(obj, nn.Module) else obj
        entries = _debug_get_cache_entry_list(fn.__code__)
        if not entries:
            return None
        gm = entries[0].guard_manager
        call_args = ((obj,) + tuple(args)) if isinstance(obj, nn.Module) else tuple(args)
        bound = inspect.signature(fn).bind(*call_args, **kwargs)
        bound.apply_defaults()
        f_locals = dict(bound.arguments)
        if not gm.check(f_locals):
            return None
        return lambda L, G, C: gm.check(f_locals)
    except Exception:  # noqa: BLE001 - a torch-internal view; absent in some versions
        return None


# ----------------------------------------------------------------------------------------------
# Main
# ----------------------------------------------------------------------------------------------

def measure(key, blocks):
    label, make, kind = MODELS[key]
    torch.manual_seed(0)
    obj, args, kwargs = make()
    tracer.reset()
    torch._dynamo.reset()
    ct = tracer.compile(obj)
    cc = torch.compile(obj, backend="eager")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = obj(*args, **kwargs)
        for _ in range(3):
            out_t = ct(*args, **kwargs)
            cc(*args, **kwargs)
    before = tracer.stats().frames_traced
    root = tracer_root(ct)
    entry = root.entries[0]
    check, L, G, C = check_inputs(ct, obj, args, kwargs)
    chk_med, chk_min = time_check(check, L, G, C, blocks)
    tcheck = torch_guard_check(obj, args, kwargs)
    tchk = time_check(tcheck, None, None, None, blocks) if tcheck else (float("nan"),) * 2

    n = calls_per_block(obj, args, kwargs)
    e, t, c = interleaved([obj, ct, cc], args, kwargs, blocks, n)
    ov_t, ov_t_min = overhead(t, e)
    ov_c, ov_c_min = overhead(c, e)
    if tracer.stats().frames_traced != before:
        raise RuntimeError(f"{label}: warm calls traced a frame")
    same = _same(ref, out_t)
    return dict(key=key, label=label, kind=kind, guards=len(entry.guards), check=chk_med,
                check_min=chk_min, tcheck=tchk[0], eager=statistics.median(e),
                tracer=statistics.median(t), tc=statistics.median(c), ov_t=ov_t,
                ov_t_min=ov_t_min, ov_c=ov_c, ov_c_min=ov_c_min, calls=n, same=same,
                graphs=sum(1 for x in root.entries if x.graph is not None),
                breaks=sum(len(x.breaks) for x in root.entries))


def _same(a, b):
    if isinstance(a, torch.Tensor):
        return torch.allclose(a, b, atol=1e-5)
    if hasattr(a, "to_tuple"):
        return _same(a.to_tuple(), b.to_tuple())
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return True


def us(ns):
    return "n/a" if ns != ns else f"{ns / 1e3:.2f}"


def ratio(a, b):
    if b != b or a != a:
        return "n/a"
    if b > 0:
        return f"{a / b:.2f}"
    return "tc < eager"


def render(rows, cfg):
    out = ["# Cache hits: guard checks and warm-call overhead (`benchmarks/cache_hits.py`)", ""]
    out.append(f"- python {platform.python_version()}, torch {torch.__version__}, "
               f"{platform.machine()}, {os.cpu_count()} cores, torch threads=1, {cfg}, load "
               f"average at the end {os.getloadavg()[0]:.2f} (a shared machine)")
    out.append("- thread CPU time; eager / tracer / torch.compile blocks interleaved; check = "
               "the root entry's guard check with a warm call's real inputs; overhead = median "
               "over rounds of (compiled - eager) per call, min-based in brackets; backend "
               "\"eager\" for both; models in eval mode, called under torch.no_grad()")
    out.append("")
    out.append("| case | guards | check us (min) | torch.compile check us | eager us | "
               "tracer overhead us (min) | torch.compile overhead us (min) | ratio |")
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        flag = "" if r["same"] else " **(differs from eager!)**"
        out.append(f"| {r['label']}{flag} | {r['guards']} | {us(r['check'])} ({us(r['check_min'])}) | "
                   f"{us(r['tcheck'])} | {us(r['eager'])} | {us(r['ov_t'])} ({us(r['ov_t_min'])}) | "
                   f"{us(r['ov_c'])} ({us(r['ov_c_min'])}) | {ratio(r['ov_t'], r['ov_c'])} |")
    out.append("")
    out.append("ratio = tracer overhead / torch.compile overhead; \"tc < eager\": torch.compile's "
               "warm call is faster than eager (its graph skips the model's Python glue), then "
               "compare call times: tracer call us vs torch.compile call us below.")
    out.append("")
    out.append("| case | eager us | tracer call us | torch.compile call us |")
    out.append("|---|---:|---:|---:|")
    for r in rows:
        out.append(f"| {r['label']} | {us(r['eager'])} | {us(r['tracer'])} | {us(r['tc'])} |")
    out.append("")
    return "\n".join(out)


def profile(key):
    import cProfile
    import pstats
    label, make, _kind = MODELS[key]
    obj, args, kwargs = make()
    ct = tracer.compile(obj)
    with torch.no_grad():
        for _ in range(3):
            ct(*args, **kwargs)
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(2000):
            ct(*args, **kwargs)
        pr.disable()
    print(f"cProfile of 2000 warm calls: {label}")
    pstats.Stats(pr).sort_stats("tottime").print_stats(25)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--only", default="", help="comma-separated keys: " + ",".join(MODELS))
    p.add_argument("--profile", default="", help="cProfile warm calls of one model key")
    p.add_argument("--blocks", type=int, default=0, help="rounds of interleaved blocks")
    p.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                 "guards.md"))
    a = p.parse_args(argv)
    torch.set_num_threads(1)
    if a.profile:
        return profile(a.profile)
    keys = [k for k in a.only.split(",") if k] or list(MODELS)
    blocks = a.blocks or (7 if a.quick else 21)
    rows = []
    with torch.no_grad():
        for k in keys:
            r = measure(k, blocks)
            rows.append(r)
            print(f"  {r['label']}: {r['guards']} guards, check {us(r['check'])} us; overhead "
                  f"tracer {us(r['ov_t'])} us, torch.compile {us(r['ov_c'])} us", file=sys.stderr)
    text = render(rows, f"{'--quick, ' if a.quick else ''}{blocks} blocks")
    print(text)
    if a.out and (not a.only or a.out != p.get_default("out")):
        with open(a.out, "w") as f:
            f.write(text)
        print(f"wrote {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
