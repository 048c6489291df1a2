/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The library's run-time version equals the header's compile-time version,
 * and cucopy_status_string() gives every status a distinct, non-empty string
 * that names it. None of this may need a CUDA driver.
 */
#include <stdio.h>
#include <string.h>

#include "cucopy.h"

struct status_name {
    cucopy_status_t status;
    const char *name;
};

#define STATUS(s) {s, #s}
static const struct status_name statuses[] = {
    STATUS(CUCOPY_OK),
    STATUS(CUCOPY_INPROGRESS),
    STATUS(CUCOPY_ERR_INVALID_PARAM),
    STATUS(CUCOPY_ERR_INVALID_HANDLE),
    STATUS(CUCOPY_ERR_NO_MEMORY),
    STATUS(CUCOPY_ERR_NO_RESOURCE),
    STATUS(CUCOPY_ERR_BUSY),
    STATUS(CUCOPY_ERR_UNSUPPORTED),
    STATUS(CUCOPY_ERR_NO_DEVICE),
    STATUS(CUCOPY_ERR_NO_DRIVER),
    STATUS(CUCOPY_ERR_CUDA),
    STATUS(CUCOPY_ERR_FORKED),
    STATUS(CUCOPY_ERR_INTERNAL),
    STATUS(CUCOPY_ERR_OUT_OF_RANGE),
    STATUS(CUCOPY_ERR_ALREADY_EXISTS),
    STATUS(CUCOPY_ERR_CANCELED),
};
#define NSTATUS (sizeof(statuses) / sizeof(statuses[0]))

int main(void)
{
    int failures = 0;
    size_t i;
    size_t j;
    const char *strs[NSTATUS];
    const char *unknown;
    const char *last;
    unsigned version = cucopy_get_version();

    if (version != CUCOPY_VERSION) {
        printf("FAIL: cucopy_get_version() = %u, header CUCOPY_VERSION = %u\n", version,
               (unsigned)CUCOPY_VERSION);
        failures++;
    } else {
        printf("ok: version %u (%d.%d.%d)\n", version, CUCOPY_VERSION_MAJOR,
               CUCOPY_VERSION_MINOR, CUCOPY_VERSION_PATCH);
    }

    for (i = 0; i < NSTATUS; i++) {
        strs[i] = cucopy_status_string(statuses[i].status);
        if (strs[i] == NULL || strs[i][0] == '\0') {
            printf("FAIL: cucopy_status_string(%s) is %s\n", statuses[i].name,
                   strs[i] == NULL ? "NULL" : "empty");
            failures++;
            continue;
        }
        if (strstr(strs[i], statuses[i].name) == NULL) {
            printf("FAIL: cucopy_status_string(%s) = \"%s\" does not name the status\n",
                   statuses[i].name, strs[i]);
            failures++;
        }
        for (j = 0; j < i; j++) {
            if (strs[j] != NULL && strcmp(strs[i], strs[j]) == 0) {
                printf("FAIL: %s and %s share the string \"%s\"\n", statuses[j].name,
                       statuses[i].name, strs[i]);
                failures++;
            }
        }
    }

    unknown = cucopy_status_string((cucopy_status_t)-1000);
    if (unknown == NULL || unknown[0] == '\0') {
        printf("FAIL: cucopy_status_string(-1000) is %s\n", unknown == NULL ? "NULL" : "empty");
        failures++;
    } else {
        for (i = 0; i < NSTATUS; i++) {
            if (strs[i] != NULL && strcmp(unknown, strs[i]) == 0) {
                printf("FAIL: unknown status -1000 gets %s's string\n", statuses[i].name);
                failures++;
            }
        }
    }

    last = cucopy_last_error();
    if (last == NULL || last[0] != '\0') {
        printf("FAIL: cucopy_last_error() before any error is %s%s%s, want \"\"\n",
               last == NULL ? "NULL" : "\"", last == NULL ? "" : last,
               last == NULL ? "" : "\"");
        failures++;
    }

    if (failures == 0) {
        printf("ok: %u status strings distinct and named\n", (unsigned)NSTATUS);
    }
    return failures == 0 ? 0 : 1;
}
