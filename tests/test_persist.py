"""The disk cache (issue 33, "warm start"): entries written by one process, loaded by the next.

Every scenario runs real child processes with TRACER_CACHE_DIR set to a directory of the
test's own; a child runs a list of jobs (CHILD below) and prints one JSON line: per job, what
tracer.stats() counted during it and whether each output equalled eager. Processes are shared
between the tests through module-scoped fixtures (one child compiles several things) to keep
the file's runtime short. Not `one_version`: the entries hold rewritten bytecode, which differs
between Python versions.
"""
import json
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest
import torch

import tracer
from tracer.runtime import config


ROOT = pathlib.Path(__file__).resolve().parents[1]

CHILD = r'''
import json, os, sys, warnings
sys.path.insert(0, os.environ["PT_MODDIR"])
import torch, tracer
from tracer.persist.portable import code_key

def same(a, b):
    try:
        torch.testing.assert_close(a, b)
        return True
    except AssertionError:
        return False

def counts():
    s = tracer.stats()
    return dict(traced=s.frames_traced, saved=s.cache_saved, loaded=s.cache_loaded, stale=s.cache_stale,
                internal=s.internal_errors, fallbacks=s.fallbacks, unsaved=dict(s.cache_unsaved))

def job_load(p):
    return dict(n=tracer.load_cache(p["path"]), cache_dir_set=bool(tracer.config.cache_dir))

def job_user(p):
    from usermod import user
    c = tracer.compile(user)
    ok = []
    for x in p["xs"]:
        x = torch.tensor(x)
        ok.append(same(c(x, 3), user(x, 3)))
    return dict(ok=ok)

def job_enc(p):
    torch.manual_seed(0)
    m = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(64, 4, 128, batch_first=True, dropout=0.0),
                                    12, enable_nested_tensor=False).eval()
    x = torch.randn(2, 10, 64)
    with torch.no_grad():
        return dict(ok=[same(tracer.compile(m)(x), m(x))])

def job_gpt2(p):
    import transformers
    from transformers import GPT2Config, GPT2LMHeadModel
    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    m = GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=100, n_positions=64,
                                   bos_token_id=0, eos_token_id=0)).eval()
    x = torch.randint(0, 100, (1, 8))
    with torch.no_grad():
        return dict(ok=[same(tracer.compile(m)(x).logits, m(x).logits)])

def job_edited(p):
    from editmod import f
    from usesmod import g
    x = torch.linspace(0.1, 1.0, 4)
    out_f, out_g = tracer.compile(f)(x), tracer.compile(g)(x)
    return dict(ok=[same(out_f, f(x)), same(out_g, g(x))], f=out_f.tolist(), g=out_g.tolist())

def job_block(p):
    from blockmod import Block
    torch.manual_seed(0)
    m = Block(16, p["nhead"], p["layers"]).eval()
    x = torch.randn(2, 3, 16)
    with torch.no_grad():
        return dict(ok=[same(tracer.compile(m)(x), m(x))])

def job_dtype(p):
    from cfgmod import h
    x = torch.linspace(-1, 1, p["n"], dtype=getattr(torch, p["dtype"]))
    return dict(ok=[same(tracer.compile(h)(x), h(x))])

def job_backend(p):
    from cfgmod import bk
    x = torch.linspace(-1, 1, 6)
    return dict(ok=[same(tracer.compile(bk, backend=p["backend"])(x), bk(x))])

def job_constn(p):
    from cfgmod import addn
    x = torch.linspace(-1, 1, 6)
    return dict(ok=[same(tracer.compile(addn)(x, p["n"]), addn(x, p["n"]))])

def job_numpy(p):
    import numpy as np
    from npmod import feats
    ok = []
    for seed in range(2):
        x = torch.randn(3, 4, generator=torch.Generator().manual_seed(seed))
        a = np.random.default_rng(seed).standard_normal((5, 4))
        got, ref = tracer.compile(feats)(x, a.copy()), feats(x, a.copy())
        ok.append(bool(same(got[0], ref[0]) and [type(v) for v in got] == [type(v) for v in ref]
                  and np.allclose(got[1], ref[1]) and got[2] == ref[2] and got[3] == ref[3]))
    return dict(ok=ok)

def job_scalars(p):
    from scalarmod import counted
    c = tracer.compile(counted, fullgraph=True, backend="aot_eager")
    ok = []
    for seed in range(2):
        x = torch.randn(7, generator=torch.Generator().manual_seed(seed))
        got, ref = c(x), counted(x)
        ok.append(bool(same(got[0], ref[0]) and abs(got[1] - ref[1]) < 1e-5))
    return dict(ok=ok)

def job_keyed(p):
    import collections
    from keyedmod import step
    torch.manual_seed(0)
    m = torch.nn.Linear(2, 2)
    state = collections.defaultdict(dict)
    for p_ in m.parameters():  # keyed from the start: the process reads it by key on call 1
        state[p_]["buf"] = torch.zeros_like(p_)
    c = tracer.compile(step)
    for _ in range(2):
        c(m, state)
    return dict(ok=[all(torch.equal(v["buf"], 2 * q.detach()) for q, v in zip(m.parameters(), state.values()))])

def job_pair(p):
    from cfgmod import k1, k2
    x = torch.linspace(-1, 1, 6)
    ok = []
    for _ in range(2):
        ok += [same(tracer.compile(k1)(x), k1(x)), same(tracer.compile(k2)(x), k2(x))]
    return dict(ok=ok, keys=[code_key(k1.__code__), code_key(k2.__code__)])

out = {}
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    for name, params in json.loads(sys.argv[1]):
        before = counts()
        res = globals()["job_" + name](params)
        after = counts()
        for k in ("traced", "saved", "loaded", "stale", "internal", "fallbacks"):
            res[k] = after[k] - before[k]
        res["unsaved"] = {k: v for k, v in after["unsaved"].items() if k not in before["unsaved"]}
        out[name] = res
out["warnings"] = [f"{w.category.__name__}: {w.message}" for w in caught]
print("RESULT " + json.dumps(out))
'''

MODULES = {
    "usermod.py": '''
        def user(x, n):
            y = x.sin() * 2
            print("hi")
            if y.sum() > 0:
                return y.cos() + n
            return y - n
    ''',
    "editmod.py": '''
        def f(x):
            return x.sin() * 2
    ''',
    "helpermod.py": '''
        def helper(x):
            return x.sin() + 1
    ''',
    "usesmod.py": '''
        from helpermod import helper

        def g(x):
            return helper(x) * 3
    ''',
    "blockmod.py": '''
        import torch
        from torch import nn

        class Block(nn.Module):
            def __init__(self, d, nhead, layers):
                super().__init__()
                self.nhead = nhead
                self.layers = nn.ModuleList(nn.Linear(d, d) for _ in range(layers))
                self.norm = nn.LayerNorm(d)

            def forward(self, x):
                b, t, d = x.shape
                for lin in self.layers:
                    x = x + lin(x).view(b, t, self.nhead, d // self.nhead).softmax(-1).view(b, t, d)
                return self.norm(x)
    ''',
    "npmod.py": '''
        import numpy as np
        import torch

        def feats(x, a):
            z = (a - a.mean(axis=0)) / (a.std(axis=0) + 1e-6)
            b = x.detach().numpy()
            return torch.from_numpy(z @ b.T.astype(np.float64)), np.abs(z).max(), z.dtype, np.sqrt(2.0)
    ''',
    "keyedmod.py": '''
        def step(model, state):
            for p in model.parameters():
                state[p]["buf"].add_(p.detach())
            return len(state)
    ''',
    "scalarmod.py": '''
        import torch

        def counted(x):
            n = int((x > 0).sum())
            return torch.arange(n) * x.max().item(), x.sum().item()
    ''',
    "cfgmod.py": '''
        def h(x):
            return (x * 2).tanh() + 1

        def bk(x):
            return x.cos() * 3 - 1

        def addn(x, n):
            return x * n + n

        def k1(x):
            return x.exp() - 1

        def k2(x):
            return x.abs() * 0.5
    ''',
}


def write_modules(moddir):
    moddir.mkdir(parents=True, exist_ok=True)
    for name, src in MODULES.items():
        (moddir / name).write_text(textwrap.dedent(src).lstrip())


def child_env(cache_dir, moddir):
    env = dict(os.environ, PYTHONPATH=str(ROOT), TRACER_CACHE_DIR=str(cache_dir), PT_MODDIR=str(moddir),
               PYTHONDONTWRITEBYTECODE="1", PYTHONWARNINGS="default")
    return env


def child_args(jobs):
    return [sys.executable, "-c", CHILD, json.dumps(jobs)]


def parse(done):
    assert done.returncode == 0, f"child failed ({done.returncode}):\n{done.stderr[-4000:]}"
    lines = [l for l in done.stdout.splitlines() if l.startswith("RESULT ")]
    assert lines, f"no result:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    out = json.loads(lines[-1][len("RESULT "):])
    out["stderr"] = done.stderr
    for name, res in out.items():
        if isinstance(res, dict):  # (the suite's rules, in the children too)
            assert res["internal"] == 0, f"{name}: tracer internal error in the child:\n{done.stderr[-4000:]}"
    return out


def run_child(cache_dir, moddir, jobs, timeout=240):
    done = subprocess.run(child_args(jobs), env=child_env(cache_dir, moddir), cwd=str(ROOT), capture_output=True,
                          text=True, timeout=timeout)
    return parse(done)


def entry_files(cache_dir, key=None):
    files = sorted(pathlib.Path(cache_dir).rglob("*.entry"))
    if key is not None:
        files = [p for p in files if p.parent.name == key]
    return files


X_POS = torch.linspace(0.1, 1.0, 4).tolist()  # sin(x)*2 sums > 0: the first branch
X_NEG = (-torch.linspace(0.1, 1.0, 4)).tolist()  # the other branch
X_POS2 = torch.linspace(0.2, 0.9, 4).tolist()  # another value of the same shape, first branch


@pytest.fixture(scope="module")
def warm(tmp_path_factory):
    """Process 1 compiles everything; the parent edits two module files; process 2 runs the
    same jobs (some with another config, input, backend or value) on the same directory."""
    base = tmp_path_factory.mktemp("warm")
    cache, moddir = base / "cache", base / "mods"
    write_modules(moddir)
    first = run_child(cache, moddir, [
        ["user", {"xs": [X_POS, X_NEG]}], ["enc", {}], ["gpt2", {}], ["edited", {}],
        ["block", {"nhead": 4, "layers": 2}], ["dtype", {"dtype": "float32", "n": 8}],
        ["backend", {"backend": "eager"}], ["constn", {"n": 3}], ["numpy", {}], ["scalars", {}], ["keyed", {}],
    ])
    (moddir / "editmod.py").write_text("def f(x):\n    return x.cos() * 2 + 1\n")
    (moddir / "helpermod.py").write_text("def helper(x):\n    return x.cos() - 1.5\n")
    second = run_child(cache, moddir, [
        ["user", {"xs": [X_POS, X_POS2, X_NEG]}], ["enc", {}], ["gpt2", {}], ["edited", {}],
        ["block", {"nhead": 2, "layers": 3}], ["dtype", {"dtype": "float64", "n": 5}],
        ["backend", {"backend": "aot_eager"}], ["constn", {"n": 5}], ["numpy", {}], ["scalars", {}], ["keyed", {}],
    ])
    third = run_child(cache, moddir, [["backend", {"backend": "eager"}], ["constn", {"n": 5}]])
    return dict(first=first, second=second, third=third, cache=cache)


def test_user_function_with_two_breaks_is_loaded_not_traced(warm):
    one, two = warm["first"]["user"], warm["second"]["user"]
    assert one["ok"] == [True, True] and two["ok"] == [True, True, True]
    # the function, the resume after print, and a resume per branch
    assert one["traced"] >= 3 and one["saved"] >= 3 and one["saved"] == one["traced"], one
    assert one["unsaved"] == {} and one["fallbacks"] == 0, one
    assert two["traced"] == 0 and two["loaded"] >= 3 and two["saved"] == 0, two
    assert two["stale"] == 0 and two["fallbacks"] == 0, two


@pytest.mark.parametrize("model", ["enc", "gpt2"])
def test_models_warm_start(warm, model):
    one, two = warm["first"][model], warm["second"][model]
    assert one["ok"] == [True] and two["ok"] == [True]
    assert one["traced"] >= 1 and one["saved"] >= 1 and one["unsaved"] == {}, one
    assert two["traced"] == 0 and two["loaded"] >= 1, two


def test_numpy_entry_is_loaded_not_traced(warm):
    """NumPy traced as tensors (an array input, Tensor.numpy(), a NumPy scalar, a dtype, a
    folded constant in the results) is written and read back like any entry."""
    one, two = warm["first"]["numpy"], warm["second"]["numpy"]
    assert one["ok"] == [True, True] and two["ok"] == [True, True]
    assert one["traced"] == 1 and one["saved"] == 1 and one["unsaved"] == {}, one
    assert two["traced"] == 0 and two["loaded"] == 1 and two["stale"] == 0, two


def test_a_graph_of_scalar_outputs_is_loaded_and_compiled_again(warm):
    """`t.item()` in the graph (fullgraph=True: config.capture_scalar_outputs), read back and
    given to aot_eager, which traces it again on a ShapeEnv that allows scalar outputs."""
    one, two = warm["first"]["scalars"], warm["second"]["scalars"]
    assert one["ok"] == [True, True] and two["ok"] == [True, True]
    assert one["traced"] == 1 and one["saved"] == 1 and one["unsaved"] == {}, one
    assert two["traced"] == 0 and two["loaded"] == 1 and two["fallbacks"] == 0, two


def test_a_dict_keyed_by_parameters_is_read_by_key_after_a_reload(warm):
    """KeyedItemSource/KeyedPresenceSource written and read back: the second process's state,
    keyed by its own parameters, is served by the first process's entry."""
    one, two = warm["first"]["keyed"], warm["second"]["keyed"]
    assert one["ok"] == [True] and two["ok"] == [True]
    assert one["traced"] == 1 and one["saved"] == 1 and one["unsaved"] == {}, one
    assert two["traced"] == 0 and two["loaded"] == 1 and two["fallbacks"] == 0, two


def test_edited_function_and_edited_helper_run_the_new_code(warm):
    one, two = warm["first"]["edited"], warm["second"]["edited"]
    x = torch.linspace(0.1, 1.0, 4)
    torch.testing.assert_close(torch.tensor(one["f"]), x.sin() * 2)
    torch.testing.assert_close(torch.tensor(one["g"]), (x.sin() + 1) * 3)
    assert one["ok"] == [True, True] and one["saved"] >= 2, one
    # the new bodies, not the entries written for the old ones
    torch.testing.assert_close(torch.tensor(two["f"]), x.cos() * 2 + 1)
    torch.testing.assert_close(torch.tensor(two["g"]), (x.cos() - 1.5) * 3)
    assert two["ok"] == [True, True]
    assert two["traced"] >= 2, two  # f (another code key) and g (its helper's module changed)
    assert two["stale"] >= 1, two  # g's old entry was found and refused


def test_changed_model_config_and_input_recompile(warm):
    for job in ("block", "dtype"):
        one, two = warm["first"][job], warm["second"][job]
        assert one["ok"] == [True] and one["saved"] >= 1, (job, one)
        assert two["ok"] == [True] and two["traced"] >= 1, (job, two)


def test_other_backend_never_loads_the_entry(warm):
    one, two, three = warm["first"]["backend"], warm["second"]["backend"], warm["third"]["backend"]
    assert one["ok"] == two["ok"] == three["ok"] == [True]
    assert one["saved"] >= 1, one
    assert two["traced"] >= 1 and two["loaded"] == 0, two  # aot_eager: eager's entry is not for it
    assert three["traced"] == 0 and three["loaded"] >= 1, three  # eager's entry is still there


def test_python_int_constant_recompiles_for_another_value(warm):
    one, two, three = warm["first"]["constn"], warm["second"]["constn"], warm["third"]["constn"]
    assert one["ok"] == two["ok"] == three["ok"] == [True]
    assert one["saved"] >= 1 and two["traced"] >= 1 and two["saved"] >= 1, (one, two)
    assert three["traced"] == 0 and three["loaded"] >= 1, three  # n=5's entry, written by process 2


@pytest.fixture(scope="module")
def shared_dir(tmp_path_factory):
    """Two processes write one directory at once, then a third loads from it."""
    base = tmp_path_factory.mktemp("shared")
    cache, moddir = base / "cache", base / "mods"
    write_modules(moddir)
    jobs = [["pair", {}], ["user", {"xs": [X_POS, X_NEG]}]]
    # (and, meanwhile, the same jobs in two fresh directories of their own)
    alone = [base / "alone1", base / "alone2"]
    procs = [subprocess.Popen(child_args(jobs), env=child_env(d, moddir), cwd=str(ROOT), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for d in [cache, cache] + alone]
    writers = []
    for p in procs:
        out, err = p.communicate(timeout=240)
        writers.append(parse(subprocess.CompletedProcess(p.args, p.returncode, out, err)))
    reader = run_child(cache, moddir, jobs)
    return dict(writers=writers[:2], alone_writers=writers[2:], alone=alone, reader=reader, cache=cache,
                moddir=moddir)


def test_same_entries_get_the_same_file_names(shared_dir):
    """Two processes that make the same entries write the same files (what lets two writers of
    one directory leave one file per entry)."""
    for w in shared_dir["alone_writers"]:
        assert w["pair"]["saved"] == 2 and w["user"]["saved"] >= 3, w
    one, two = ([str(p.relative_to(d)) for p in entry_files(d)] for d in shared_dir["alone"])
    assert len(one) >= 5 and one == two


def test_two_writers_at_once_then_a_reader_loads(shared_dir):
    for w in shared_dir["writers"]:
        assert all(w["pair"]["ok"]) and all(w["user"]["ok"]), w
        assert w["warnings"] == [] and "CacheFileWarning" not in w["stderr"], w["stderr"][-3000:]
    r = shared_dir["reader"]
    assert all(r["pair"]["ok"]) and all(r["user"]["ok"])
    assert r["pair"]["traced"] == 0 and r["user"]["traced"] == 0 and r["pair"]["loaded"] >= 2, r
    assert r["warnings"] == [], r["warnings"]
    assert not list(pathlib.Path(shared_dir["cache"]).rglob(".tmp-*")), "a temporary file was left behind"
    # both writers made the same entries: one file each (named by the record, not by marshal's bytes)
    for key in r["pair"]["keys"]:
        assert len(entry_files(shared_dir["cache"], key)) == 1, entry_files(shared_dir["cache"], key)


def test_truncated_and_garbage_files_warn_once_and_retrace(shared_dir):
    cache, moddir = shared_dir["cache"], shared_dir["moddir"]
    key1, key2 = shared_dir["reader"]["pair"]["keys"]
    (f1,), (f2,) = entry_files(cache, key1), entry_files(cache, key2)
    data = f1.read_bytes()
    f1.write_bytes(data[:len(data) // 2])
    f2.write_bytes(b"not a cache file at all" * 10)
    out = run_child(cache, moddir, [["pair", {}]])
    res = out["pair"]
    assert all(res["ok"]) and len(res["ok"]) == 4
    assert res["traced"] == 2 and res["loaded"] == 0, res  # k1 and k2 once each, the second call hits
    ws = [w for w in out["warnings"] if w.startswith("CacheFileWarning")]
    assert len(ws) == 2, out["warnings"]  # one per bad file, though each code object is called twice
    assert any(str(f1) in w for w in ws) and any(str(f2) in w for w in ws), ws


# ---- in-process: an entry that cannot be written ------------------------------------------------

def _with_local_class():
    class Local:
        k = 2.0

    obj = Local()

    def g(x):
        return (x * obj.k).sin()
    return g


@pytest.mark.usefixtures("fresh_tracer")
def test_an_unsaved_entry_keeps_no_argument_alive(tmp_path, monkeypatch):
    """Writing an entry that turns out unportable must leave no reference cycle holding the
    call's values (a kept exception's traceback did: found by the fuzzer's lifetime check)."""
    import gc
    import weakref
    tracer.compile(lambda a: a.sin() + 1)(torch.randn(2))  # the first trace's lazy imports, once
    monkeypatch.setattr(config, "cache_dir", str(tmp_path))
    g = _with_local_class()
    compiled = tracer.compile(g)
    was = gc.isenabled()
    gc.disable()
    try:
        x = torch.linspace(-1, 1, 5)
        ref = weakref.ref(x)
        out = compiled(x)
        torch.testing.assert_close(out, g(x))
        del x, out
        assert ref() is None, gc.get_referrers(ref())
    finally:
        if was:
            gc.enable()
    assert tracer.stats().cache_unsaved


@pytest.mark.usefixtures("fresh_tracer")
def test_unportable_entry_is_reported_and_not_written(tmp_path, monkeypatch):
    monkeypatch.setattr(config, "cache_dir", str(tmp_path))
    g = _with_local_class()
    x = torch.linspace(-1, 1, 5)
    torch.testing.assert_close(tracer.compile(g)(x), g(x))
    s = tracer.stats()
    assert s.frames_traced == 1 and s.cache_saved == 0, s
    reasons = [why for name, why in s.cache_unsaved.items() if name.endswith("g")]
    assert len(reasons) == 1 and "Local" in reasons[0], s.cache_unsaved
    assert entry_files(tmp_path) == []
    # a portable function in the same process is written
    from tracer.persist.portable import code_key

    def portable(x):
        return x.cos() + 2
    torch.testing.assert_close(tracer.compile(portable)(x), portable(x))
    s = tracer.stats()
    assert s.cache_saved == 1 and len(entry_files(tmp_path, code_key(portable.__code__))) == 1
    assert len(entry_files(tmp_path)) == 1


# ---- shipping a cache, looking inside one, and the mistakes a user can make -------------------

def _in_child(code, cache_dir, timeout=120):
    """Run `code` in a fresh process of this Python (its environment: the suite's own process
    may hold torch patches other tests left, which are another environment)."""
    env = child_env(cache_dir, ROOT)
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=str(ROOT), capture_output=True, text=True,
                          timeout=timeout)
    return done


def test_save_cache_then_load_cache_in_a_process_without_a_cache_dir(warm, tmp_path):
    archive = tmp_path / "model.tracercache"
    done = _in_child(f"import tracer; print('SAVED', tracer.save_cache({str(archive)!r}))", warm["cache"])
    assert done.returncode == 0, done.stderr[-3000:]
    n = int(done.stdout.split("SAVED ")[-1])
    assert n == len(entry_files(warm["cache"])) and n >= 5, n
    moddir = tmp_path / "mods"
    write_modules(moddir)
    got = run_child("", moddir, [["load", {"path": str(archive)}], ["user", {"xs": [X_POS, X_NEG]}],
                                 ["enc", {}]])
    assert got["load"]["n"] == n and got["load"]["cache_dir_set"], got["load"]
    assert got["user"]["ok"] == [True, True] and got["user"]["traced"] == 0 and got["user"]["loaded"] >= 3, got["user"]
    assert got["enc"]["ok"] == [True] and got["enc"]["traced"] == 0, got["enc"]


def test_tracer_dump_lists_a_cache(warm):
    dump = "from tracer.tools.dump import main; raise SystemExit(main({}))"
    done = _in_child(dump.format(["--cache", str(warm["cache"])]), warm["cache"])
    assert done.returncode == 0, done.stderr[-3000:]
    text = done.stdout
    assert "this process's" in text
    for name in ("user", "TransformerEncoder.forward", "GPT2LMHeadModel.forward", "user.<resume@"):
        assert name in text, text[:3000]
    assert "guards" in text and "ops" in text and "KiB" in text
    done = _in_child(dump.format(["--cache", str(warm["cache"]), "--json"]), warm["cache"])
    listing = json.loads(done.stdout)
    entries = [e for env in listing for code in env["codes"] for e in code["entries"]]
    assert len(entries) == len(entry_files(warm["cache"]))
    assert all(e["guards"] > 0 and "name" in e for e in entries)


def test_cache_mistakes_are_one_line(tmp_path, monkeypatch, capsys):
    from tracer.tools.dump import main
    monkeypatch.setattr(config, "cache_dir", None)
    with pytest.raises(tracer.CacheError, match="no cache directory is set"):
        tracer.save_cache(tmp_path / "x.zip")
    with pytest.raises(tracer.CacheError, match="no such file"):
        tracer.load_cache(tmp_path / "missing.zip")
    junk = tmp_path / "junk.zip"
    junk.write_bytes(b"not a zip")
    with pytest.raises(tracer.CacheError, match="not a file written by tracer.save_cache"):
        tracer.load_cache(junk)
    assert main(["--cache", str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no such directory" in err[0], err


CAPTURE_PROGRAM = r'''
import json, sys, torch, tracer
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.1)

def step(x, y):
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    return loss

def main():
    torch.manual_seed(1)
    losses = []
    for i in range(5):
        x, y = torch.randn(4, 8), torch.randn(4, 2)
        opt.zero_grad()
        losses.append(step(x, y).item())
        opt.step()
    return losses

if sys.argv[1] == "capture":
    with tracer.capture():
        losses = main()
else:
    losses = main()
s = tracer.stats()
print("RESULT " + json.dumps(dict(losses=losses, traced=s.frames_traced, loaded=s.cache_loaded,
                                  unsaved=len(s.cache_unsaved), internal=s.internal_errors)))
'''


def test_capture_around_a_training_loop_warm_starts(tmp_path):
    """capture(): the frames the hook traced (the loop, the step, the model's forward) are
    written too, and the next process runs the same loop with every one of them loaded."""
    path = tmp_path / "train.py"
    path.write_text(CAPTURE_PROGRAM)

    def run(mode):
        done = subprocess.run([sys.executable, str(path), mode], env=child_env(tmp_path / "cache", tmp_path),
                              cwd=str(ROOT), capture_output=True, text=True, timeout=240)
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout.split("RESULT ")[-1])
    eager, one, two = run("eager"), run("capture"), run("capture")
    assert one["losses"] == pytest.approx(eager["losses"], rel=1e-5)
    assert two["losses"] == pytest.approx(eager["losses"], rel=1e-5)
    assert one["traced"] >= 2 and one["unsaved"] == 0 and one["internal"] == 0, one
    assert two["traced"] == 0 and two["loaded"] == one["traced"] and two["internal"] == 0, two


SWITCHED_PROGRAM = r'''
import json, os, sys, torch, tracer
import torch.nn.functional as F
SIG = os.environ.get("ACT") == "sig"
if SIG:
    def act(x):
        return x.sigmoid()
else:
    def act(x):
        return x.relu()

class Block(torch.nn.Module):
    if SIG:
        def forward(self, x):
            return x.sigmoid() + 1
    else:
        def forward(self, x):
            return x.relu() + 1

class Util:
    scale = staticmethod(lambda x: x * 2)

if SIG:
    Util.scale = staticmethod(lambda x: x * 3)
if os.environ.get("PATCH_GELU"):
    F.gelu = lambda x, approximate="none": x.sigmoid()

def f(x):
    return act(x) * 2

def g(m, x):
    return m(x) - 1

def h(x):
    return Util.scale(x) + F.gelu(x)

x = torch.tensor([-1.0, 0.5, 2.0])
out = {}
for name, fn, args in (("f", f, (x,)), ("g", g, (Block(), x)), ("h", h, (x,))):
    before = tracer.stats()
    got = tracer.compile(fn)(*args)
    after = tracer.stats()
    out[name] = dict(ok=bool(torch.allclose(got, fn(*args))), loaded=after.cache_loaded - before.cache_loaded,
                     traced=after.frames_traced - before.frames_traced)
print("RESULT " + json.dumps(out))
'''


@pytest.mark.parametrize("flag", ["", "-O"])
def test_a_name_bound_to_other_code_in_the_next_process_is_not_loaded(tmp_path, flag):
    """The same file, run again with another environment switch: a function, a class's method
    and a staticmethod defined under an `if`, and a torch function monkeypatched, are found
    under the same names with other code (the file unchanged). Entries traced with the first
    code must not be served (each name is written with its code's fingerprint; the patched
    torch namespace is another environment); under -O too (another environment again)."""
    path = tmp_path / "switched.py"
    path.write_text(SWITCHED_PROGRAM)

    def run(act, opt, patch=""):
        env = child_env(tmp_path / "cache", tmp_path)
        env["ACT"] = act
        env["PATCH_GELU"] = patch
        done = subprocess.run([sys.executable, *([opt] if opt else []), str(path)], env=env, cwd=str(ROOT),
                              capture_output=True, text=True, timeout=240)
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout.split("RESULT ")[-1])
    first, again = run("relu", flag), run("relu", flag)
    assert all(r["ok"] for r in first.values()) and all(r["ok"] for r in again.values())
    assert all(r["traced"] == 0 and r["loaded"] >= 1 for r in again.values()), again
    switched = run("sig", flag)
    assert all(r["ok"] for r in switched.values()), switched
    assert all(r["traced"] >= 1 for r in switched.values()), switched
    patched = run("relu", flag, patch="1")  # torch.nn.functional.gelu replaced: another environment
    assert patched["h"]["ok"] and patched["h"]["traced"] >= 1, patched
    other = run("relu", "" if flag else "-O")  # the other optimisation level: another environment
    assert all(r["ok"] for r in other.values()) and all(r["traced"] >= 1 for r in other.values()), other


@pytest.mark.usefixtures("fresh_tracer")
@pytest.mark.parametrize("where", ["a file", "under a file"])
def test_a_cache_directory_that_cannot_be_used_is_said_once_and_tracing_goes_on(tmp_path, monkeypatch, where):
    """TRACER_CACHE_DIR naming a file (or a path under one): torch's inductor cache was put
    under it for every backend, and torch._dynamo's import, which the first trace makes, raised
    NotADirectoryError: an internal error on every frame, and torch.compile broken in the
    process. Now one CacheFileWarning names the directory, pointed at the user's call, and the
    process traces as without a disk cache."""
    afile = tmp_path / "afile"
    afile.write_text("not a directory")
    monkeypatch.setattr(config, "cache_dir", str(afile if where == "a file" else afile / "sub"))
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    f = tracer.compile(lambda x: x.sin() + 1)
    with pytest.warns(tracer.CacheFileWarning, match="cannot be used") as got:
        for _ in range(2):
            torch.testing.assert_close(f(torch.ones(3)), torch.ones(3).sin() + 1)
    assert len(got) == 1 and got[0].filename == __file__, [str(w.message) for w in got]
    s = tracer.stats()
    assert s.graphs == 1 and s.internal_errors == 0 and s.fallbacks == 0
    assert not os.environ.get("TORCHINDUCTOR_CACHE_DIR", "").startswith(str(afile))


@pytest.mark.usefixtures("fresh_tracer")
def test_load_cache_says_what_it_cannot_use(tmp_path, monkeypatch):
    """load_cache of an archive holding only another environment's entries, or of a zip that
    save_cache did not write, returned 0 and said nothing."""
    import zipfile
    other = tmp_path / "other.zip"
    with zipfile.ZipFile(other, "w") as z:
        z.writestr("0123456789abcdef0123/environment.json",
                   json.dumps({"python": "3.99.0", "torch": "9.9.9", "frametracer": "x", "format": 2}))
        z.writestr("0123456789abcdef0123/ab/abcd/e.entry", b"...")
    unrelated = tmp_path / "z.zip"
    with zipfile.ZipFile(unrelated, "w") as z:
        z.writestr("readme.txt", "hello")
    monkeypatch.setattr(config, "cache_dir", str(tmp_path / "cache"))
    with pytest.warns(tracer.CacheFileWarning, match="another environment .*python 3.99.0, torch 9.9.9"):
        assert tracer.load_cache(str(other)) == 0
    with pytest.raises(tracer.CacheError, match="not a file written by tracer.save_cache"):
        tracer.load_cache(str(unrelated))
    with pytest.raises(tracer.CacheError, match="a directory"):
        tracer.load_cache(str(tmp_path))
