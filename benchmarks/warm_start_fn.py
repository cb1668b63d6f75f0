"""The user function of benchmarks/warm_start.py: two graph breaks (a print, a data-dependent if)."""


def two_breaks(x, n):
    y = (x.sin() * 2).relu()
    print("step", n)
    if y.sum() > 0:
        return y.cos() + n
    return y - n
