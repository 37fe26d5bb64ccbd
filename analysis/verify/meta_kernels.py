"""The meta device on torch's C++ meta functions, where an operator has one.

torch registers the Python reference implementation (torch._refs and torch._decomp) of every
operator it has one for as that operator's Meta kernel, over the C++ meta function the operator
already has: on meta a ``mul`` costs ~230 us in Python, ~1 us in C++, and a verify runs hundreds
of thousands of them (transformers' RecurrentGemma scan alone loops over every token of a
prefill past its 2,048-token window). The C++ meta functions are the ones torch's CPU and CUDA
kernels size their outputs with: the same shapes and dtypes, so the same parameter counts,
FLOPs and cache bytes (tests/test_against.py measures verify's checks and transformers' models
both ways and compares). The Python ones are kept where an operator has no C++ one.

This replaces torch's internal library of those registrations
(``torch._meta_registrations._meta_lib_dont_use_me_use_register_meta``): one more of the
internals verify relies on, which is why it runs only on the torch releases the suite passes on
(:data:`llmcalc.analysis.verify.TESTED_TORCH`).
"""

from __future__ import annotations

import torch
import torch._meta_registrations as registrations
from torch._decomp import global_decomposition_table

# the Python meta kernel of each operator torch registers one for, as torch picks it (meta, then
# post- then pre-autograd decompositions), by its key in the Library
_PYTHON: dict[str, tuple] = {}
for _table in ("meta", "post_autograd", "pre_autograd"):
    for _op, _fn in global_decomposition_table[_table].items():
        if isinstance(_op, torch._ops.OpOverload):
            _PYTHON.setdefault(f"aten/{_op.name().split('::')[-1]}/Meta", (_op, _fn))
_TORCH_DEFAULT = frozenset(registrations._meta_lib_dont_use_me_use_register_meta._op_impls)
_RETIRED = []  # the libraries replaced: kept alive (a collected Library resets its registrations again)
_state = {"cpp": False}


def use_cpp_meta(on: bool) -> None:
    """Meta kernels in C++ where the operator has one (``on``), or torch's default: Python for
    every operator torch registers one for. For the whole process (verify's workers: :func:`cpp_meta`
    passed on)."""
    if _state["cpp"] == on:
        return
    old = registrations._meta_lib_dont_use_me_use_register_meta
    old._destroy()  # now only C++ kernels (and other libraries') answer _dispatch_has_kernel_for_dispatch_key
    _RETIRED.append(old)
    new = torch.library.Library("aten", "IMPL", "Meta")
    for key in sorted(_TORCH_DEFAULT):
        op, fn = _PYTHON[key]
        if not (on and torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "Meta")):
            new.impl(op, fn)
    registrations._meta_lib_dont_use_me_use_register_meta = new
    _state["cpp"] = on


def cpp_meta() -> bool:
    """Whether :func:`use_cpp_meta` switched the C++ meta functions on in this process."""
    return _state["cpp"]
