// SPDX-License-Identifier: BSD-3-Clause
// The public header compiles on its own, twice (include guard), in strict C++.
#include "cucopy.h"
#include "cucopy.h"

static_assert(CUCOPY_OK == 0 && CUCOPY_INPROGRESS == 1, "status values are ABI");

int main()
{
    cucopy_status_t (*fn)(cucopy_ep_h, const void *, size_t, uint64_t) = cucopy_ep_put_short;
    cucopy_completion_t comp = {nullptr, 0, CUCOPY_OK};
    (void)comp;
    return fn == nullptr;
}
