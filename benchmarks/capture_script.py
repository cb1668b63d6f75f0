"""`capture()` around a whole program: a small training script with a pure-Python data
pipeline (issue "One long process, many models", part 5).

The script (`train`): a regex tokenizer, a growing vocabulary, a `Dataset`, a collate
function that pads token ids and builds tensors, a metrics class with running sums, logging
every few steps, and a 2-layer transformer classifier trained with Adam. The data is random
sentences made here (nothing is downloaded).

Run three ways, each in a fresh subprocess (first-epoch cost includes tracing, so every run
starts cold), REPEATS times, medians reported:
  plain     the script as Python
  capture   `with tracer.capture():` around the whole script (backend "eager")
  compile   `torch.compile(model, backend="eager")`, the rest as Python
Per epoch: this process's CPU time (torch on one thread). Also the losses (compared with
plain's exactly), the warnings, and `tracer.stats()` (frames traced, recompiles, limits).

Micro benchmarks (one subprocess):
  call-heavy pure Python: 200k calls of small helpers with no tensors, plain vs capture;
  a warm model call: the script's model called under `capture()` vs through `tracer.compile`.

    python benchmarks/capture_script.py [--repeats 3] [--out benchmarks/capture_script.md]
    python benchmarks/capture_script.py --run plain|capture|compile|micro   (one run, JSON out)
"""
import argparse
import json
import logging
import os
import platform
import random
import re
import statistics
import subprocess
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

import torch  # noqa: E402

torch.set_num_threads(1)
cpu = time.process_time

# ---------------------------------------------------------------- the training script --------

WORDS = ("the a movie film plot actor scene story music good great bad awful boring fun "
         "loved hated slow fast dull brilliant terrible nice weak strong ending start").split()
POSITIVE = {"good", "great", "fun", "loved", "brilliant", "nice", "strong"}
TOKEN_RE = re.compile(r"[a-z]+|\d+|[^\sa-z\d]")

log = logging.getLogger("capture_script")


def make_corpus(n, seed):
    rng = random.Random(seed)
    texts = []
    for _ in range(n):
        words = [rng.choice(WORDS) for _ in range(rng.randint(4, 20))]
        if rng.random() < 0.3:
            words.append(str(rng.randint(1, 10)))
        texts.append(" ".join(words) + rng.choice([".", "!", "?"]))
    return texts


def tokenize(text):
    return TOKEN_RE.findall(text.lower())


def label_of(tokens):
    score = 0
    for t in tokens:
        if t in POSITIVE:
            score += 1
    return 1 if score * 3 >= 1 + len(tokens) // 8 else 0


class Vocab:
    def __init__(self):
        self.stoi = {"<pad>": 0, "<unk>": 1}
        self.itos = ["<pad>", "<unk>"]

    def add(self, token):
        idx = self.stoi.get(token)
        if idx is None:
            idx = len(self.itos)
            self.stoi[token] = idx
            self.itos.append(token)
        return idx

    def encode(self, tokens, grow=True):
        if grow:
            return [self.add(t) for t in tokens]
        return [self.stoi.get(t, 1) for t in tokens]

    def __len__(self):
        return len(self.itos)


class TextDataset(torch.utils.data.Dataset):
    def __init__(self, texts, vocab, max_len=24):
        self.items = []
        for text in texts:
            tokens = tokenize(text)
            ids = vocab.encode(tokens)[:max_len]
            self.items.append((ids, label_of(tokens)))

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


def collate(batch):
    longest = max(len(ids) for ids, _ in batch)
    padded, labels, lengths = [], [], []
    for ids, label in batch:
        padded.append(ids + [0] * (longest - len(ids)))
        labels.append(label)
        lengths.append(len(ids))
    return torch.tensor(padded), torch.tensor(labels), lengths


def batches(dataset, batch_size, rng):
    order = list(range(len(dataset)))
    rng.shuffle(order)
    for start in range(0, len(order), batch_size):
        yield collate([dataset[i] for i in order[start:start + batch_size]])


class Metrics:
    def __init__(self):
        self.reset()

    def reset(self):
        self.loss_sum = 0.0
        self.correct = 0
        self.seen = 0
        self.steps = 0

    def update(self, loss, correct, n):
        self.loss_sum += loss * n
        self.correct += correct
        self.seen += n
        self.steps += 1

    def summary(self):
        return {"loss": self.loss_sum / max(self.seen, 1), "acc": self.correct / max(self.seen, 1),
                "steps": self.steps}


class Classifier(torch.nn.Module):
    def __init__(self, vocab_size, dim=32, heads=4, layers=2, classes=2):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab_size, dim, padding_idx=0)
        self.pos = torch.nn.Parameter(torch.randn(64, dim) * 0.02)
        layer = torch.nn.TransformerEncoderLayer(dim, heads, dim_feedforward=2 * dim, dropout=0.0,
                                                 batch_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = torch.nn.Linear(dim, classes)

    def forward(self, ids):
        mask = ids == 0
        x = self.embed(ids) + self.pos[: ids.shape[1]]
        x = self.encoder(x, src_key_padding_mask=mask)
        keep = (~mask).unsqueeze(-1).float()
        pooled = (x * keep).sum(1) / keep.sum(1).clamp(min=1.0)
        return self.head(pooled)


def train(mode, epochs=3, n_texts=512, batch_size=32):
    """The whole program; returns (per-epoch CPU seconds, per-epoch mean losses)."""
    torch.manual_seed(0)
    texts = make_corpus(n_texts, seed=1)
    vocab = Vocab()
    t0 = cpu()
    dataset = TextDataset(texts, vocab)
    model = Classifier(vocab_size=64)  # (the vocabulary stays below 64 tokens)
    run = torch.compile(model, backend="eager") if mode == "compile" else model
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = torch.nn.CrossEntropyLoss()
    rng = random.Random(2)
    metrics = Metrics()
    times, losses = [], []
    for epoch in range(epochs):
        metrics.reset()
        for step, (ids, labels, lengths) in enumerate(batches(dataset, batch_size, rng)):
            logits = run(ids)
            loss = loss_fn(logits, labels)
            opt.zero_grad()
            loss.backward()
            opt.step()
            correct = int((logits.argmax(-1) == labels).sum().item())
            metrics.update(loss.item(), correct, len(lengths))
            if step % 4 == 0:
                log.info("epoch %d step %d loss %.4f", epoch, step, metrics.summary()["loss"])
        s = metrics.summary()
        log.info("epoch %d: %s (vocab %d)", epoch, s, len(vocab))
        t1 = cpu()
        times.append(t1 - t0)
        t0 = t1
        losses.append(s["loss"])
    return times, losses


def one_run(mode):
    logging.basicConfig(level=logging.INFO, stream=open(os.devnull, "w"))
    import tracer
    tracer.reset_stats()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if mode == "capture":
            with tracer.capture():
                times, losses = train(mode)
        else:
            times, losses = train(mode)
    s = tracer.stats()
    return {"mode": mode, "times": times, "losses": losses,
            "warnings": [f"{w.category.__name__}: {w.message}" for w in caught],
            "frames_traced": s.frames_traced, "graphs": s.graphs, "recompiles": s.recompiles,
            "recompile_limits": s.recompile_limits, "fallbacks": s.fallbacks,
            "given_up": sorted(getattr(s, "given_up", {}) or {})}


# ---------------------------------------------------------------- micro benchmarks -----------

def leaf(a):
    return a + 1


def mid(a, b):
    return leaf(a) * 2 - leaf(b)


def fmt_row(i, total):
    return f"{i:>4}/{total}: {i / total:.2%}"


def call_heavy(n=100_000):
    s = 0
    rows = []
    for i in range(n):
        s = (s + mid(i, s % 7)) % 1_000_003
        if i % 1000 == 0:
            rows.append(fmt_row(i, n))
    return s, len(rows)


def _best(fn, reps=5):
    out = []
    for _ in range(reps):
        t0 = time.thread_time_ns()
        fn()
        out.append(time.thread_time_ns() - t0)
    return min(out) / 1e9


def micro():
    import tracer
    from tracer.runtime.frame_hook import skip_code
    res = {}
    # call-heavy pure Python: two learning runs under capture (the first traces and gives up
    # on the frames, the second is the watched run that lets them run unhooked), then plain
    # and captured runs interleaved, median of 7 each
    tracer.reset_stats()
    with tracer.capture():
        call_heavy(2000)
        learn_s = _best(call_heavy, reps=1)
    plain_t, cap_t = [], []
    for _ in range(7):
        plain_t.append(_best(call_heavy, reps=1))
        with tracer.capture():
            cap_t.append(_best(call_heavy, reps=1))
    with tracer.capture():
        r_cap = call_heavy(1000)
    plain, captured = statistics.median(plain_t), statistics.median(cap_t)
    res["call_heavy"] = {"plain_s": plain, "capture_s": captured, "ratio": captured / plain,
                         "learning_run_s": learn_s,
                         "equal": r_cap == call_heavy(1000), "frames_traced": tracer.stats().frames_traced}
    # a warm model call: capture vs tracer.compile
    torch.manual_seed(0)
    model = Classifier(64).eval()
    ids = torch.randint(1, 64, (8, 16))
    n = 200

    def loop(f):
        t0 = time.thread_time_ns()
        for _ in range(n):
            f(ids)
        return (time.thread_time_ns() - t0) / n / 1e3

    skip_code(loop.__code__)
    compiled = tracer.compile(model)
    with torch.no_grad():
        compiled(ids), compiled(ids)
        with tracer.capture():
            model(ids), model(ids)
        eager_t, comp_t, cap_t = [], [], []
        for _ in range(7):  # interleaved
            eager_t.append(loop(model))
            comp_t.append(loop(compiled))
            with tracer.capture():
                cap_t.append(loop(model))
    res["warm_call"] = {"eager_us": min(eager_t), "compile_us": min(comp_t), "capture_us": min(cap_t),
                        "ratio": min(cap_t) / min(comp_t)}
    return res


# ---------------------------------------------------------------- driver ---------------------

def _sub(arg):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run([sys.executable, os.path.abspath(__file__), "--run", arg], capture_output=True,
                       text=True, env=env, cwd=ROOT)
    if p.returncode != 0:
        raise SystemExit(f"--run {arg} failed:\n{p.stderr[-4000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--run")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out")
    a = ap.parse_args()
    if a.run:
        print(json.dumps(micro() if a.run == "micro" else one_run(a.run)))
        return
    runs = {m: [_sub(m) for _ in range(a.repeats)] for m in ("plain", "capture", "compile")}
    mic = _sub("micro")
    med = {m: {"first": statistics.median(r["times"][0] for r in rs),
               "later": statistics.median(t for r in rs for t in r["times"][1:])} for m, rs in runs.items()}
    ref = runs["plain"][0]["losses"]
    lines = [f"# capture() around a whole training script (benchmarks/capture_script.py)", "",
             f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores (shared), "
             f"Python {platform.python_version()}, torch {torch.__version__}, torch on 1 thread. "
             f"CPU time of the process, median of {a.repeats} fresh subprocesses per way.", "",
             "| way | first epoch (s) | later epochs (s, median) | first / plain | later / plain | "
             "losses == plain | warnings | frames traced | recompiles | limits |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for m, rs in runs.items():
        r = rs[0]
        lines.append(f"| {m} | {med[m]['first']:.3f} | {med[m]['later']:.3f} | "
                     f"{med[m]['first'] / med['plain']['first']:.2f}x | {med[m]['later'] / med['plain']['later']:.2f}x | "
                     f"{all(x['losses'] == ref for x in rs)} | {len(r['warnings'])} | {r['frames_traced']} | "
                     f"{r['recompiles']} | {r['recompile_limits']} |")
    cap = runs["capture"][0]
    lines += ["", f"capture: first epoch / torch.compile's first epoch = "
              f"{med['capture']['first'] / med['compile']['first']:.2f}x (target <= 1.0); "
              f"later epochs / plain = {med['capture']['later'] / med['plain']['later']:.2f}x (target <= 1.1).",
              f"capture: graphs {cap['graphs']}, fallbacks {cap['fallbacks']}, frames given up "
              f"({len(cap['given_up'])}): {', '.join(cap['given_up'])}",
              f"warnings under capture: {cap['warnings'] or 'none'}", ""]
    ch, wc = mic["call_heavy"], mic["warm_call"]
    lines += ["| micro | plain / compile | capture | ratio | target |", "|---|---|---|---|---|",
              f"| call-heavy pure Python (100k calls of 3 helpers), s | {ch['plain_s']:.4f} | {ch['capture_s']:.4f} | "
              f"{ch['ratio']:.2f}x | <= 1.1x |",
              f"| warm model call (Classifier, 8x16 ids, no_grad), us | {wc['compile_us']:.1f} | {wc['capture_us']:.1f} | "
              f"{wc['ratio']:.2f}x | <= 1.1x |", "",
              f"(eager model call: {wc['eager_us']:.1f} us; call-heavy results equal: {ch['equal']}; "
              f"frames traced by the call-heavy run: {ch['frames_traced']}; call-heavy: median of 7 runs "
              f"interleaved with plain ones, after a traced run and a watched one "
              f"({ch['learning_run_s']:.4f} s); warm model call: best of 7 interleaved loops)"]
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
