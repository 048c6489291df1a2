/* SPDX-License-Identifier: BSD-3-Clause */
/* The public header compiles on its own, twice (include guard), in strict C. */
#include "cucopy.h"
#include "cucopy.h"

/* Use a few declarations so unused-type diagnostics would show. */
static cucopy_status_t (*const check_fn)(cucopy_ep_h, const void *, size_t, uint64_t) =
    cucopy_ep_put_short;

int main(void)
{
    cucopy_completion_t comp = {0, 0, CUCOPY_OK};
    cucopy_iov_t iov = {0, 0};
    (void)comp;
    (void)iov;
    return check_fn == 0 && CUCOPY_VERSION < 0;
}
