"""The meta device's kernels for the tests: torch's C++ shape functions where an operator has one
(tests/conftest.py switches them on for a session with reference tests; tests/test_against.py
checks that both kernel sets measure the same).

torch registers the Python reference implementation (torch._refs and torch._decomp) of every
operator it has one for as that operator's Meta kernel, over the C++ meta function the operator
already has: on meta a ``mul`` costs ~230 us in Python, ~1 us in C++. transformers' models run
tens of thousands of them (RecurrentGemma's RG-LRU scan loops over every token of a prefill past
its 2,048-token window), most of the reference tier's time. The C++ meta functions are the ones
torch's CPU and CUDA kernels size their outputs with: the same shapes and dtypes, so the same
parameter counts, FLOPs and cache bytes. The console script in its own process keeps torch's
default (`llmcalc verify` is unchanged)."""

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


def use_cpp_meta(on: bool) -> None:
    """Meta kernels in C++ where the operator has one (``on``), or torch's default: Python for
    every operator torch registers one for."""
    old = registrations._meta_lib_dont_use_me_use_register_meta
    old._destroy()  # now only C++ kernels (and other libraries') answer _dispatch_has_kernel_for_dispatch_key
    _RETIRED.append(old)
    new = torch.library.Library("aten", "IMPL", "Meta")
    for key in sorted(_TORCH_DEFAULT):
        op, fn = _PYTHON[key]
        if not (on and torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "Meta")):
            new.impl(op, fn)
    registrations._meta_lib_dont_use_me_use_register_meta = new
