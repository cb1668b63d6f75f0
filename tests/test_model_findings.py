"""Regression tests for what real models found (issue 9), each on the smallest program that
shows the mechanism. The zoo (tests/zoo/) runs the models themselves."""
import pytest
import torch

import tracer


@pytest.fixture(autouse=True)
def _fresh():
    tracer.reset()
    yield
    tracer.reset()


def _traced_since(before):
    return tracer.stats().frames_traced - before.frames_traced


# ---- nn.Transformer: torch's own is_compiling() branches take eager's path ----------------------

def test_nn_transformer_padding_mask_no_grad_equals_eager():
    """Eager runs the encoder on nested tensors here (padded positions come out as 0, and the
    decoder, given no memory mask, attends to them); under torch.compile the `is_compiling()`
    check turns that path off and the result differed by up to 0.55. In torch's own frames
    the tracer answers is_compiling() as eager does."""
    torch.manual_seed(0)
    m = torch.nn.Transformer(d_model=64, nhead=8, num_encoder_layers=2, num_decoder_layers=2,
                             dim_feedforward=128, batch_first=True).eval()
    src, tgt = torch.randn(2, 10, 64), torch.randn(2, 7, 64)
    pad = torch.zeros(2, 10, dtype=torch.bool)
    pad[1, 7:] = True
    compiled = tracer.compile(m)
    with torch.no_grad():
        ref = m(src, tgt, src_key_padding_mask=pad)
        before = tracer.stats()
        out = compiled(src, tgt, src_key_padding_mask=pad)
        s = tracer.stats()
        assert torch.equal(out, ref)
        assert s.graphs > before.graphs  # the decoder, after the encoder's break, is a graph
        assert torch.equal(compiled(src, tgt, src_key_padding_mask=pad), ref)
        pad2 = torch.zeros(2, 10, dtype=torch.bool)
        pad2[0, 5:] = True
        assert torch.equal(compiled(src, tgt, src_key_padding_mask=pad2), m(src, tgt, src_key_padding_mask=pad2))
    assert _traced_since(s) == 0


def test_is_compiling_is_still_true_in_library_code():
    def f(x):
        return x + 1 if torch.compiler.is_compiling() else x - 1

    before = tracer.stats()
    assert torch.equal(tracer.compile(f)(torch.zeros(2)), torch.ones(2))
    assert tracer.stats().graphs == before.graphs + 1


# ---- a fake kernel's made-up Python scalar is never folded ---------------------------------------

def test_scalar_computed_from_tensor_data_is_a_break_not_a_constant():
    """`_nested_tensor_from_mask_left_aligned` has a fake kernel that returns True for any
    mask; folding it would take the wrong branch for a mask that is not left-aligned."""
    def f(x, keep):
        if torch._nested_tensor_from_mask_left_aligned(x, keep):
            return x + 1
        return x - 1

    x = torch.zeros(2, 4, 3)
    aligned = torch.tensor([[True] * 4, [True, True, False, False]])
    not_aligned = torch.tensor([[True] * 4, [False, False, True, True]])
    c = tracer.compile(f)
    before = tracer.stats()
    assert torch.equal(c(x, not_aligned), f(x, not_aligned))
    assert torch.equal(c(x, aligned), f(x, aligned))
    s = tracer.stats()
    assert [r for r in s.break_reasons if "computed from tensor data" in r]
    assert s.graph_breaks > before.graph_breaks


def test_metadata_scalars_still_fold():
    def f(x, y):
        if torch.is_same_size(x, y) and torch.is_floating_point(x):
            return x + y
        return x - y

    before = tracer.stats()
    out = tracer.compile(f)(torch.ones(3), torch.ones(3))
    s = tracer.stats()
    assert torch.equal(out, torch.full((3,), 2.0))
    assert (s.graphs - before.graphs, s.graph_breaks - before.graph_breaks) == (1, 0)


# ---- the rest of a torch frame the user compiled is traced ---------------------------------------

def test_resume_function_of_a_torch_frame_is_traced():
    def f(x, keep):
        return torch.nn.functional.relu(x) if torch._nested_tensor_from_mask_left_aligned(x, keep) else x

    torch_frame = torch.nn.modules.transformer._get_seq_len  # any torch function: check the rule
    from tracer.runtime.policy import DEFAULT_SKIP_PREFIXES, should_skip
    assert should_skip(torch_frame.__code__, DEFAULT_SKIP_PREFIXES)
    m = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(8, 2, 16, batch_first=True), 1).eval()
    pad = torch.tensor([[False] * 4, [False, False, True, True]])
    x = torch.randn(2, 4, 8)
    before = tracer.stats()
    with torch.no_grad():
        out = tracer.compile(m)(x, src_key_padding_mask=pad)
        expected = m(x, src_key_padding_mask=pad)
    s = tracer.stats()
    resumed = [e for e in s.of("frame")[-(s.frames_traced - before.frames_traced):] if "<resume@" in e.frame]
    assert resumed and torch.allclose(out, expected, atol=1e-5, equal_nan=True)
    from tracer.rewrite.graph_break import _RESUME_CACHE
    resumes = [c for made in _RESUME_CACHE.get(torch.nn.TransformerEncoder.forward.__code__, {}).values()
               for c in [made]]
    assert resumes and not any(should_skip(c, DEFAULT_SKIP_PREFIXES) for c in resumes)
    del f


# ---- what a compiled graph runs is not traced as user frames --------------------------------------

@torch.library.custom_op("tracer_tests::grouped_scale", mutates_args=())
def _grouped_scale(x: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    start = 0
    for i, n in enumerate(counts.tolist()):  # data-dependent Python: as transformers' MoE fallback
        out[start:start + n] = x[start:start + n] * (i + 1)
        start += n
    return out


@_grouped_scale.register_fake
def _(x, counts):
    return torch.empty_like(x)


def test_custom_op_python_kernel_is_not_traced_when_the_graph_runs():
    """Mixtral recompiled on every call: its MoE custom op's Python implementation, run by the
    graph, was handed to the frame hook and specialised on each call's routing counts."""
    def f(x, counts):
        y = torch.ops.tracer_tests.grouped_scale(x.sin(), counts)
        print(end="")  # a graph break: the entry runs with the frame hook on
        return y.cos()

    c = tracer.compile(f)
    x = torch.randn(6)
    c(x, torch.tensor([2, 4]))
    before = tracer.stats()
    for counts in ([1, 5], [3, 3], [6, 0]):
        t = torch.tensor(counts)
        assert torch.allclose(c(x, t), f(x, t))
    s = tracer.stats()
    assert s.frames_traced == before.frames_traced and s.recompiles == before.recompiles


# ---- a break in every iteration of a long loop ---------------------------------------------------

@pytest.mark.loop_resumes
def test_break_in_a_long_loop_is_bounded():
    def f(x):
        for _ in range(300):
            print(end="")
            x = x + 1
        return x

    before = tracer.stats()
    assert torch.equal(tracer.compile(f)(torch.zeros(2)), torch.full((2,), 300.0))
    s = tracer.stats()
    from tracer.rewrite.graph_break import LOOP_RESUME_LIMIT
    assert s.frames_traced - before.frames_traced == LOOP_RESUME_LIMIT + 1
    assert s.fallbacks - before.fallbacks == 1


@pytest.mark.loop_resumes
def test_several_breaks_per_iteration_count_iterations_not_breaks():
    """Three breaks in each iteration: the loop is captured for LOOP_RESUME_LIMIT iterations
    (one resume per break, none calling itself), then the rest runs as Python. The limit
    used to count breaks, so a 3-item loop with three breaks per item fell back."""
    from tracer.rewrite.graph_break import LOOP_RESUME_LIMIT

    def f(x, n):
        for i in range(n):
            print(end="")
            x = x + i
            print(end="")
            x = x * 2
            print(end="")
        return x

    c = tracer.compile(f)
    before = tracer.stats()
    assert torch.equal(c(torch.ones(2), 3), f(torch.ones(2), 3))
    s = tracer.stats()
    assert s.fallbacks == before.fallbacks and s.graph_breaks - before.graph_breaks == 9
    assert s.frames_traced - before.frames_traced == 1 + 9 and s.ops - before.ops >= 6
    before = tracer.stats()
    assert torch.equal(c(torch.ones(2), 300), f(torch.ones(2), 300))
    s = tracer.stats()
    assert s.fallbacks - before.fallbacks == 1   # the resume of iteration 9 runs as Python
    traced = s.frames_traced
    assert torch.equal(c(torch.ones(2), 300), f(torch.ones(2), 300))  # warm: nothing compiles
    assert tracer.stats().frames_traced == traced


@pytest.mark.loop_resumes
def test_many_breaks_in_one_loop_body_nest_a_bounded_number_of_frames():
    """A body with 40 breaks reaches LOOP_NEST_LIMIT resume frames before LOOP_RESUME_LIMIT
    iterations: the nesting stays far below the recursion limit."""
    from tracer.rewrite.graph_break import LOOP_NEST_LIMIT

    src = "def f(x, n):\n    for i in range(n):\n" + "        print(end='')\n        x = x + 1\n" * 40
    src += "    return x\n"
    ns = {}
    exec(compile(src, "<many_breaks>", "exec"), ns)
    f = ns["f"]
    before = tracer.stats()
    assert torch.equal(tracer.compile(f)(torch.zeros(2), 5), torch.full((2,), 200.0))
    s = tracer.stats()
    assert s.frames_traced - before.frames_traced == 1 + LOOP_NEST_LIMIT
    # f breaks before its first op; resume 64 is refused its break and runs as Python
    assert s.fallbacks - before.fallbacks == 1 and s.graphs - before.graphs == LOOP_NEST_LIMIT - 1


def test_iterating_a_huge_range_does_not_unroll():
    def f(x):
        it = iter(range(1 << 1000))
        return x + next(it)

    assert torch.equal(tracer.compile(f)(torch.zeros(2)), torch.zeros(2))


# ---- nested tensors reach a frame ----------------------------------------------------------------

@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors")
def test_nested_tensor_input_runs_as_python_and_dense_still_traces():
    """TensorGuards aborts the process when it reads a nested tensor's strides: the generated
    check asks `is_nested` first. A nested input runs the frame as Python (guarded)."""
    def f(x):
        return x * 2

    c = tracer.compile(f)
    dense = torch.ones(2, 3)
    nested = torch.nested.nested_tensor([torch.ones(2, 3), torch.ones(1, 3)])
    assert torch.equal(c(dense), dense * 2)
    for _ in range(2):
        out = c(nested)
        assert out.is_nested and all(torch.equal(a, b * 2) for a, b in zip(out.unbind(), nested.unbind()))
    before = tracer.stats()
    assert torch.equal(c(dense), dense * 2) and torch.equal(c(nested).unbind()[1], torch.full((1, 3), 2.0))
    s = tracer.stats()
    assert s.frames_traced == before.frames_traced
    assert any("nested" in r for r in s.fallback_reasons)
