"""The handled exception and exception chains in traced code (issue 10): bare `raise`
after nested handlers, `__context__`/`__cause__` of exceptions raised in except and finally
blocks, and the same after a graph break inside a handler."""
import torch

from semantics_helpers import check, run
import tracer


def chain(e):
    """(type name, args, suppress) of an exception and everything it chains to."""
    out = []
    while e is not None:
        out.append((type(e).__name__, e.args, e.__suppress_context__))
        e = e.__cause__ if e.__cause__ is not None else e.__context__
    return out


def test_bare_raise_after_nested_handled_exceptions():
    def f(x):
        try:
            try:
                raise ValueError("a")
            except ValueError:
                try:
                    raise KeyError("b")
                except KeyError:
                    pass
                x = x + 1
                raise
        except ValueError as e:
            return x, e.args

    check(f, torch.ones(2), dynamo=True)


def test_bare_raise_escapes_with_the_handled_exception():
    def f(x):
        try:
            raise ValueError("a")
        except ValueError:
            try:
                raise KeyError("b")
            except KeyError:
                pass
            raise

    c = tracer.compile(f)
    _, d = run(c, f, torch.ones(2))


def test_bare_raise_after_a_graph_break_in_the_handler():
    def f(x):
        try:
            raise ValueError("a")
        except ValueError:
            x = x + 1
            print("in handler")
            x = x * 2
            raise

    c = tracer.compile(f)
    _, d = run(c, f, torch.ones(2))
    assert d.fallbacks == 0 and d.breaks >= 1


def test_context_of_exception_raised_in_finally_and_except():
    def f(x):
        out = []
        try:
            try:
                raise ValueError("a")
            finally:
                x = x + 1
                raise KeyError("b")
        except KeyError as e:
            out.append(chain(e))
        try:
            try:
                raise IndexError("i")
            except IndexError:
                {}["missing"]
        except KeyError as e:
            out.append(chain(e))
        try:
            try:
                raise IndexError("i")
            except IndexError as e:
                raise TypeError("t") from e
        except TypeError as e:
            out.append(chain(e))
        try:
            try:
                raise IndexError("i")
            except IndexError:
                raise TypeError("t") from None
        except TypeError as e:
            out.append(chain(e))
        return x, out

    check(f, torch.ones(2), dynamo=True)


def test_chain_survives_after_the_graph():
    def f(x):
        try:
            try:
                raise ValueError("a")
            except ValueError as e:
                raise KeyError("b") from e
        except KeyError as e:
            return x + 1, e

    c, _ = check(f, torch.ones(2))
    out = c(torch.ones(2))[1]
    assert chain(out) == [("KeyError", ("b",), True), ("ValueError", ("a",), False)]


def test_exception_escaping_a_finally_keeps_its_context():
    def f(x):
        try:
            raise ValueError("a")
        finally:
            raise KeyError("b")

    c = tracer.compile(f)
    try:
        c(torch.ones(2))
    except KeyError as e:
        assert chain(e) == [("KeyError", ("b",), False), ("ValueError", ("a",), False)]
    else:
        raise AssertionError("KeyError expected")


def test_called_from_an_except_block():
    def f(x):
        try:
            raise ValueError("inner")
        except ValueError as e:
            return x + 1, type(e.__context__).__name__

    c = tracer.compile(f)
    ref = f(torch.ones(1))
    try:
        raise KeyError("outer")
    except KeyError:
        out = c(torch.ones(1))
        ref2 = f(torch.ones(1))
    assert out[1] == ref2[1] == "KeyError"
    assert c(torch.ones(1))[1] == ref[1] == "NoneType"


def _traceback_text(text):
    """format_exc() without the caret lines (`~^^^`), which only eager can draw: the rebuilt
    traceback points at a line, not at an instruction of the original code."""
    return [ln for ln in text.splitlines() if ln.strip(" ~^")]


def test_a_handler_after_a_graph_break_sees_the_traceback():
    """An exception raised and caught in the traced frame is rebuilt for the code after a
    break; it carries a traceback of the frame at the line it was raised at, so a handler's
    `logger.exception()` / `traceback.format_exc()` prints what eager prints (it printed no
    traceback at all). An exception made and not raised has none, as in eager."""
    import io
    import logging
    import traceback

    buf = io.StringIO()
    log = logging.getLogger("test_a_handler_after_a_graph_break_sees_the_traceback")
    log.addHandler(logging.StreamHandler(buf))
    log.propagate = False

    def f(x, d):
        unraised = ValueError("made")
        try:
            n = d["k"]
        except KeyError as e:
            log.exception("missing")  # I/O: the graph break
            text = traceback.format_exc()
            return x - 1, e.__traceback__.tb_lineno, text, unraised.__traceback__ is None
        return x + n, None, None, unraised.__traceback__ is None

    c = tracer.compile(f)
    before = tracer.stats()
    mine = c(torch.ones(2), {})
    logged, _ = buf.getvalue(), buf.truncate(0)
    buf.seek(0)
    ref = f(torch.ones(2), {})
    assert tracer.stats().graph_breaks > before.graph_breaks and not tracer.stats().fallbacks > before.fallbacks
    assert torch.equal(mine[0], ref[0]) and mine[1] == ref[1] and mine[3] and ref[3]
    assert _traceback_text(mine[2]) == _traceback_text(ref[2])
    assert "Traceback (most recent call last)" in mine[2] and 'n = d["k"]' in mine[2]
    assert _traceback_text(logged) == _traceback_text(buf.getvalue())


def test_a_context_chain_that_is_a_cycle_does_not_hang_the_trace():
    """Raising while handling an exception whose __context__ chain is a cycle: CPython stops
    walking the chain at the cycle; the trace walked it for ever (Dynamo's
    test_no_hang_on_context_chain_cycle1)."""
    def cycle():
        try:
            raise ValueError(1)
        except ValueError as ex:
            ex.__context__ = ex
            raise TypeError(2)

    def f(x):
        try:
            cycle()
        except Exception as e:
            exc = e
        return x + 1, type(exc.__context__) is ValueError

    check(f, torch.ones(1), graphs=1)


class _AppError(Exception):
    """A user's exception class that adds nothing its instances do: modelled as Exception."""
    code = 3


class _NotFound(_AppError):
    def describe(self):
        return "not found"


class _WithInit(ValueError):
    def __init__(self, v):
        super().__init__(v)
        self.v = v


def test_user_exception_classes_raised_and_caught_in_the_frame():
    """Dynamo's test_exceptions raise and catch their own classes with fullgraph=True: a
    subclass that defines no __init__/__new__/__str__ (and the like) is raised, matched,
    chained and rebuilt as the builtin it derives from; a class attribute reads through."""
    def f(t, flag):
        try:
            if flag:
                raise _NotFound("bad", 2)
            raise _AppError
        except _NotFound as e:
            return t.sin(), e.args, str(e), type(e).__name__, isinstance(e, _AppError)
        except _AppError as e:
            return t.cos(), e.args, str(e), type(e).__name__, e.code

    check(f, torch.ones(2), True, graphs=1, dynamo=True)
    check(f, torch.ones(2), False, graphs=1, dynamo=True)

    def escapes(t):
        err = _NotFound("out")
        try:
            raise err
        except Exception as e:
            return t + 1, e, e.__class__ is _NotFound

    c, _ = check(escapes, torch.ones(2), graphs=1)
    out = c(torch.ones(2))
    assert type(out[1]) is _NotFound and out[1].args == ("out",) and out[2]


def test_a_user_exception_class_with_its_own_init_is_still_a_break():
    def f(t):
        try:
            raise _WithInit(5)
        except ValueError as e:
            return t + 1, e.v

    c = tracer.compile(f)
    before = tracer.stats()
    out = c(torch.ones(2))
    assert torch.equal(out[0], torch.ones(2) + 1) and out[1] == 5
    assert tracer.stats().graph_breaks > before.graph_breaks or tracer.stats().fallbacks > before.fallbacks
