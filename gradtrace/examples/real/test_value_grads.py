"""A test file: tensors live inside test functions (run one with FILE::FUNC, or the file).

Source: modeled on the PyTorch half of micrograd's test/test_engine.py (karpathy/micrograd,
MIT): the same expressions and expected values, written here with torch only.
Changes: no micrograd import; the reference values are asserted directly.
"""

import torch


def test_sanity_check():
    x = torch.Tensor([-4.0]).double()
    x.requires_grad = True
    z = 2 * x + 2 + x
    q = z.relu() + z * x
    h = (z * z).relu()
    y = h + q + q * x
    y.backward()
    assert y.data.item() == -20.0
    assert x.grad.item() == 46.0


def test_more_ops():
    a = torch.Tensor([-4.0]).double()
    b = torch.Tensor([2.0]).double()
    a.requires_grad = True
    b.requires_grad = True
    c = a + b
    d = a * b + b**3
    c = c + c + 1
    c = c + 1 + c + (-a)
    d = d + d * 2 + (b + a).relu()
    d = d + 3 * d + (b - a).relu()
    e = c - d
    f = e**2
    g = f / 2.0
    g = g + 10.0 / f
    g.backward()
    tol = 1e-6
    assert abs(g.data.item() - 24.70408163265306) < tol
    assert abs(a.grad.item() - 138.83381924198252) < tol
    assert abs(b.grad.item() - 645.5772594752186) < tol
