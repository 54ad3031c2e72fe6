// The context of a concatenated query offset: the last context whose offset is at most q
// (a binary search of the contexts' offsets), as gblastn.scan.cpu.context_of finds it.
// Included after device_host.cuh (the loader inlines one level of headers).
#pragma once

HD int context_of(const int* context_offset, int num_contexts, long long q) {
    int lo = 0, hi = num_contexts;
    while (lo < hi - 1) {
        const int mid = (lo + hi) >> 1;
        if (LOAD(context_offset + mid) > q) hi = mid; else lo = mid;
    }
    return lo;
}
