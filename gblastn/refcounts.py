"""Array views that numba does not reference-count, and cache prefetches (for hot loops over
tables). The intrinsics are made, and numba imported, when a compilation first types them
(numba_start.intrinsic)."""

from .numba_start import intrinsic


@intrinsic
def borrowed(typingctx, array):
    """`array` without its reference count: a view numba neither increfs nor decrefs.

    numba increfs every array argument of a compiled function on entry and decrefs it on
    exit, with an atomic instruction on the array's one shared counter. Its pass that drops
    matched pairs misses those of a helper inlined into a loop with branches, so a hot loop
    calling helpers with a dozen tables paid two dozen atomic operations per iteration (the
    CPU scan spent 59 % of its time on kleb q_medium there). Only for a function's own use
    of an argument, while the caller holds it: never returned, stored, or kept past the
    call."""
    from numba import types
    from numba.core import cgutils

    if not isinstance(array, types.Array):
        return None

    def codegen(context, builder, signature, args):
        view = context.make_array(array)(context, builder, value=args[0])
        view.meminfo = cgutils.get_null_value(view.meminfo.type)
        return view._getvalue()

    return array(array), codegen


@intrinsic
def prefetch(typingctx, array, index):
    """A hint to bring array[index]'s cache line in ahead of its use (LLVM's prefetch for
    reading: it never faults, so any index is safe)."""
    from numba import types

    if not isinstance(array, types.Array) or not isinstance(index, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        view = context.make_array(array)(context, builder, value=args[0])
        _prefetch(builder, builder.gep(view.data, [args[1]]))
        return context.get_dummy_value()

    return types.none(array, index), codegen


@intrinsic
def prefetch_address(typingctx, address):
    """prefetch of the byte at a raw address: for loops that hold addresses rather than
    arrays (an array handed to a helper is counted in and out, two atomic operations)."""
    from numba import types
    from numba.core import cgutils

    if not isinstance(address, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        _prefetch(builder, builder.inttoptr(args[0], cgutils.voidptr_t))
        return context.get_dummy_value()

    return types.none(address), codegen


def _prefetch(builder, address) -> None:
    """LLVM's prefetch of `address` for reading, into every cache level."""
    from llvmlite import ir
    from numba.core import cgutils

    int32 = ir.IntType(32)
    hint = builder.module.declare_intrinsic(
        "llvm.prefetch", [cgutils.voidptr_t],
        ir.FunctionType(ir.VoidType(), [cgutils.voidptr_t, int32, int32, int32]))
    builder.call(hint, [builder.bitcast(address, cgutils.voidptr_t), int32(0), int32(3),
                        int32(1)])
