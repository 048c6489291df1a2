/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The staging pool: pinned host memory (cucopy_mem_alloc, HOST: portable to
 * every context), in power-of-two classes from 4 KiB, kept on free lists and
 * reused; never a pinned allocation per message once the pool is warm.
 *
 * Growth is capped by CUCOPY_MPI_POOL_MB (pinned bytes held, free or in use).
 * At the cap, free buffers of other classes are given back to make room;
 * when that is not enough (or the message alone is larger than the cap, or
 * pinning fails), the message is staged through pageable memory (malloc) for
 * that call only: correct, slower, counted, warned about once.
 */
#include "shim.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define POOL_MIN_SHIFT 12
#define POOL_CLASSES 64

static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static char *free_list[POOL_CLASSES]; /* the link sits in each free buffer's first bytes */
static size_t pool_cap;
static size_t pinned_held;            /* bytes of pinned memory held (free + in use) */
static size_t pinned_high_water;
static _Atomic long fallbacks;
static _Atomic int warned_cap, warned_pin;

void shim_pool_configure(size_t cap_bytes)
{
    pool_cap = cap_bytes;
}

static unsigned class_of(size_t bytes)
{
    unsigned k = POOL_MIN_SHIFT;
    while (k < POOL_CLASSES - 1 && ((size_t)1 << k) < bytes)
        k++;
    return k;
}

static char *pop_locked(unsigned k)
{
    char *p = free_list[k];
    if (p != NULL)
        memcpy(&free_list[k], p, sizeof p);
    return p;
}

/* Take free buffers of other classes off their lists until @p need more
 * bytes fit under the cap; returns them chained, to free outside the lock. */
static char *trim_locked(size_t need, unsigned keep)
{
    char *victims = NULL;
    for (int k = POOL_CLASSES - 1; k >= POOL_MIN_SHIFT && pinned_held + need > pool_cap; k--) {
        while ((unsigned)k != keep && free_list[k] != NULL && pinned_held + need > pool_cap) {
            char *p = pop_locked((unsigned)k);
            memcpy(p, &victims, sizeof victims);
            victims = p;
            pinned_held -= (size_t)1 << k;
        }
    }
    return victims;
}

static void free_chain(char *p)
{
    while (p != NULL) {
        char *next;
        memcpy(&next, p, sizeof next);
        shim_cucopy_host_free(p);
        p = next;
    }
}

char *shim_pool_get(size_t bytes, size_t *cap, int *pinned)
{
    unsigned k = class_of(bytes);
    size_t c = (size_t)1 << k;
    pthread_mutex_lock(&pool_mu);
    char *p = pop_locked(k);
    if (p != NULL) {
        pthread_mutex_unlock(&pool_mu);
        *cap = c;
        *pinned = 1;
        return p;
    }
    char *victims = NULL;
    if (c <= pool_cap && pinned_held + c > pool_cap)
        victims = trim_locked(c, k);
    int room = c <= pool_cap && pinned_held + c <= pool_cap;
    if (room)
        pinned_held += c;
    pthread_mutex_unlock(&pool_mu);
    free_chain(victims);

    if (room) {
        void *mem = NULL;
        if (shim_cucopy_host_alloc(c, &mem) == CUCOPY_OK) {
            pthread_mutex_lock(&pool_mu);
            if (pinned_held > pinned_high_water)
                pinned_high_water = pinned_held;
            pthread_mutex_unlock(&pool_mu);
            *cap = c;
            *pinned = 1;
            return mem;
        }
        pthread_mutex_lock(&pool_mu);
        pinned_held -= c;
        pthread_mutex_unlock(&pool_mu);
        if (!atomic_exchange(&warned_pin, 1))
            fprintf(stderr,
                    "cucopy_mpi: cannot allocate pinned staging memory (%zu bytes): staging "
                    "through pageable memory (slower)\n",
                    c);
    } else if (!atomic_exchange(&warned_cap, 1)) {
        fprintf(stderr,
                "cucopy_mpi: the pinned staging pool is at its cap (CUCOPY_MPI_POOL_MB=%zu) for a "
                "%zu-byte message: staging through pageable memory (slower)\n",
                pool_cap >> 20, bytes);
    }
    atomic_fetch_add(&fallbacks, 1);
    *cap = bytes;
    *pinned = 0;
    return malloc(bytes);
}

void shim_pool_put(char *p, size_t cap, int pinned)
{
    if (!pinned) {
        free(p);
        return;
    }
    unsigned k = class_of(cap);
    pthread_mutex_lock(&pool_mu);
    memcpy(p, &free_list[k], sizeof p);
    free_list[k] = p;
    pthread_mutex_unlock(&pool_mu);
}

void shim_pool_release_all(void)
{
    char *all = NULL;
    pthread_mutex_lock(&pool_mu);
    for (unsigned k = POOL_MIN_SHIFT; k < POOL_CLASSES; k++) {
        char *p;
        while ((p = pop_locked(k)) != NULL) {
            memcpy(p, &all, sizeof all);
            all = p;
            pinned_held -= (size_t)1 << k;
        }
    }
    pthread_mutex_unlock(&pool_mu);
    free_chain(all);
}

size_t shim_pool_high_water(void)
{
    pthread_mutex_lock(&pool_mu);
    size_t hw = pinned_high_water;
    pthread_mutex_unlock(&pool_mu);
    return hw;
}

long shim_pool_fallbacks(void)
{
    return atomic_load(&fallbacks);
}
