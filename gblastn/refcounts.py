"""Array views that numba does not reference-count (for hot loops over tables). Its own
module: it imports numba, which gblastn.arrays' users (the output's line writer in a
process that only formats, say) must not."""

from numba import types
from numba.core import cgutils
from numba.extending import intrinsic


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
    if not isinstance(array, types.Array):
        return None

    def codegen(context, builder, signature, args):
        view = context.make_array(array)(context, builder, value=args[0])
        view.meminfo = cgutils.get_null_value(view.meminfo.type)
        return view._getvalue()

    return array(array), codegen
