/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file cucopy.h
 * @brief cucopy: copies between host memory and the memories of several GPUs
 *        inside one process.
 *
 * The public C ABI. It does the job of UCX's cuda_copy transport with
 * multi-device support: streams and events live per CUDA context, are created
 * lazily on first use in that context and are found again by context id.
 *
 * General rules
 * - Every function returns a ::cucopy_status_t unless stated otherwise:
 *   ::CUCOPY_OK (0), ::CUCOPY_INPROGRESS (1), or a negative error. On an
 *   error, cucopy_last_error() on the same thread describes it.
 * - Handles are opaque. Destroy/close functions accept NULL (no-op).
 *   A handle used after its destroy/close gets ::CUCOPY_ERR_INVALID_HANDLE.
 * - Params and attr structs open with `uint64_t field_mask`; a field is read
 *   (params) or written (attr) only when its bit is set. Unknown bits are
 *   ::CUCOPY_ERR_INVALID_PARAM. Structs only ever grow at their end.
 * - The library never changes the calling thread's current CUDA context as
 *   seen after a call returns, never creates a CUDA context, and never
 *   activates an inactive primary context.
 * - The driver (libcuda.so.1, or $CUCOPY_CUDA_DRIVER) is loaded at the first
 *   cucopy_context_create(), never earlier.
 * - In a child process created by fork() after the library was loaded, every
 *   function returns ::CUCOPY_ERR_FORKED (CUDA cannot be used there anyway).
 */
#ifndef CUCOPY_H
#define CUCOPY_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define CUCOPY_API __attribute__((visibility("default")))
#else
#define CUCOPY_API
#endif

/** @name Version
 *  Compile-time version; cucopy_get_version() returns the run-time one. */
/**@{*/
#define CUCOPY_VERSION_MAJOR 0
#define CUCOPY_VERSION_MINOR 5
#define CUCOPY_VERSION_PATCH 0
/** MAJOR*10000 + MINOR*100 + PATCH */
#define CUCOPY_VERSION \
    (CUCOPY_VERSION_MAJOR * 10000 + CUCOPY_VERSION_MINOR * 100 + CUCOPY_VERSION_PATCH)
/**@}*/

/** Status codes. The numeric values are part of the ABI and never change. */
typedef enum cucopy_status {
    CUCOPY_OK = 0,                  /**< Success; the operation is complete. */
    CUCOPY_INPROGRESS = 1,          /**< Started; completion is reported later. */
    CUCOPY_ERR_INVALID_PARAM = -1,  /**< An argument is invalid (NULL, overflow, unknown flag or field bit). */
    CUCOPY_ERR_INVALID_HANDLE = -2, /**< A handle is NULL, closed, or poisoned by an internal error. */
    CUCOPY_ERR_NO_MEMORY = -3,      /**< Memory could not be allocated (host memory, or device memory in cucopy_mem_alloc()). */
    CUCOPY_ERR_NO_RESOURCE = -4,    /**< A configured limit is reached; call progress and retry. */
    CUCOPY_ERR_BUSY = -5,           /**< Work is ready (event arm) or the object is still in use. */
    CUCOPY_ERR_UNSUPPORTED = -6,    /**< The driver or memory kind does not support the request. */
    CUCOPY_ERR_NO_DEVICE = -7,      /**< No usable CUDA device or context for the request. */
    CUCOPY_ERR_NO_DRIVER = -8,      /**< The CUDA driver library could not be loaded. */
    CUCOPY_ERR_CUDA = -9,           /**< A CUDA driver call failed; cucopy_last_error() names it. */
    CUCOPY_ERR_FORKED = -10,        /**< Called in a child process after fork(). */
    CUCOPY_ERR_INTERNAL = -11,      /**< An internal error (a bug); the handle is poisoned. */
    CUCOPY_ERR_OUT_OF_RANGE = -12,  /**< An address range crosses the end of its allocation. */
    CUCOPY_ERR_ALREADY_EXISTS = -13, /**< The range is already registered (by cucopy or the program). */
    CUCOPY_ERR_CANCELED = -14        /**< Canceled: its CUDA context was reset (or the driver unloaded) while it ran. */
} cucopy_status_t;

/** Opaque handles. */
typedef struct cucopy_context *cucopy_context_h; /**< Driver + memory domain. */
typedef struct cucopy_iface *cucopy_iface_h;     /**< Streams, events, progress. */
typedef struct cucopy_ep *cucopy_ep_h;           /**< Issues copies on an iface. */
typedef struct cucopy_memh *cucopy_memh_h;       /**< A range pinned by cucopy_mem_reg() or described by cucopy_mem_describe(). */

/**
 * Completion of asynchronous operations.
 *
 * The caller sets @a count to the number of operations that will report to
 * this object (each call that returned ::CUCOPY_INPROGRESS reports once) and
 * @a status to ::CUCOPY_OK. When an operation finishes, the library
 * decrements @a count; if the operation failed and @a status is still OK,
 * it stores the error (first error wins). When @a count reaches 0, @a func
 * is called with the object.
 *
 * @a func runs only inside cucopy_iface_progress() (or flush/arm of the same
 * iface), on the thread that called it; never on a driver or library thread.
 * Callbacks of one iface run one at a time, in the order their operations
 * completed: on a ::CUCOPY_THREAD_MODE_MULTI iface, in whichever progressing
 * thread finds them first. It may call any cucopy function except
 * cucopy_iface_close() of the iface that is progressing. The object must stay valid until @a func has run.
 * A fault inside @a func is a fault of the host program.
 */
typedef struct cucopy_completion {
    void (*func)(struct cucopy_completion *self); /**< Called once count reaches 0. */
    int count;                                     /**< Operations still to report. */
    cucopy_status_t status;                        /**< First error, or CUCOPY_OK. */
} cucopy_completion_t;

/** One contiguous piece of local memory (any memory type). */
typedef struct cucopy_iov {
    void *buffer;  /**< Start address; host, device or managed memory. */
    size_t length; /**< Bytes. */
} cucopy_iov_t;

/** An iov entry with the memory handle of its buffer (cucopy_ep_put_zcopy_memh()). */
typedef struct cucopy_iov_memh {
    void *buffer;       /**< Start address; host, device or managed memory. */
    size_t length;      /**< Bytes. */
    cucopy_memh_h memh; /**< A handle whose range holds [buffer, +length), or NULL. */
} cucopy_iov_memh_t;

/** One entry of cucopy_ep_copy_batch(): @a length bytes from @a src to @a dst. */
typedef struct cucopy_copy {
    void *dst;              /**< Destination; host, device or managed memory. */
    const void *src;        /**< Source. */
    size_t length;          /**< Bytes; 0 skips the entry. */
    cucopy_memh_h dst_memh; /**< A handle whose range holds the destination, or NULL. */
    cucopy_memh_h src_memh; /**< A handle whose range holds the source, or NULL. */
} cucopy_copy_t;

/**
 * One entry of cucopy_ep_copy_2d(): @a height rows of @a width bytes, row i
 * from @a src + i * @a src_pitch to @a dst + i * @a dst_pitch. Each side
 * spans [p, p + (height - 1) * pitch + width); the bytes between its rows are
 * neither read (source) nor written (destination).
 */
typedef struct cucopy_copy_2d {
    void *dst;              /**< Destination of row 0; host, device or managed memory. */
    size_t dst_pitch;       /**< Bytes from one destination row to the next; >= width. */
    const void *src;        /**< Source of row 0. */
    size_t src_pitch;       /**< Bytes from one source row to the next; >= width. */
    size_t width;           /**< Bytes per row; 0 skips the entry. */
    size_t height;          /**< Rows; 0 skips the entry. */
    cucopy_memh_h dst_memh; /**< A handle whose range holds the destination span, or NULL. */
    cucopy_memh_h src_memh; /**< A handle whose range holds the source span, or NULL. */
} cucopy_copy_2d_t;

/** @name Version and errors */
/**@{*/

/** Run-time version, encoded as ::CUCOPY_VERSION. Thread-safe. */
CUCOPY_API unsigned cucopy_get_version(void);

/**
 * Name and meaning of a status, e.g. "CUCOPY_ERR_CUDA: CUDA driver call failed".
 * The string is static; never free it. Unknown values get "unknown status".
 */
CUCOPY_API const char *cucopy_status_string(cucopy_status_t status);

/**
 * Detail of the last error returned to the calling thread: the operation,
 * and where a driver call failed, the call, the CUDA error name and the
 * context. "" when no error happened yet on this thread. Successful calls do
 * not clear it (like errno). The string is thread-local and valid until the
 * next failing cucopy call on the same thread; never free it.
 */
CUCOPY_API const char *cucopy_last_error(void);
/**@}*/

/** @name Context: the driver and the memory domain */
/**@{*/

/** cucopy_context_params_t field bits. */
enum {
    CUCOPY_CONTEXT_PARAM_DRIVER_PATH = 1u << 0, /**< driver_path is set. */
    CUCOPY_CONTEXT_PARAM_LOG_LEVEL = 1u << 1    /**< log_level is set. */
};

/** Log levels for ::CUCOPY_CONTEXT_PARAM_LOG_LEVEL (messages go to stderr). */
typedef enum cucopy_log_level {
    CUCOPY_LOG_ERROR = 0,
    CUCOPY_LOG_WARN = 1,
    CUCOPY_LOG_INFO = 2,
    CUCOPY_LOG_DEBUG = 3,
    CUCOPY_LOG_TRACE = 4
} cucopy_log_level_t;

/** Context parameters. Unset fields come from the environment (CUCOPY_*). */
typedef struct cucopy_context_params {
    uint64_t field_mask;
    /** Path of the CUDA driver library. Default $CUCOPY_CUDA_DRIVER, else
     *  "libcuda.so.1". Copied; the caller keeps ownership. Only the first
     *  context of the process loads the driver; a later context naming a
     *  different path gets ::CUCOPY_ERR_INVALID_PARAM. */
    const char *driver_path;
    /** Default $CUCOPY_LOG_LEVEL, else ::CUCOPY_LOG_WARN. Process-wide. */
    cucopy_log_level_t log_level;
} cucopy_context_params_t;

/**
 * Load the driver (first call in the process) and create a context.
 * @param params  may be NULL: everything from the environment.
 * @param ctx_p   receives the handle.
 * Invalid configuration (an environment variable or a param) is an error here.
 * Thread-safe.
 */
CUCOPY_API cucopy_status_t cucopy_context_create(const cucopy_context_params_t *params,
                                                 cucopy_context_h *ctx_p);

/**
 * Destroy a context. ::CUCOPY_ERR_BUSY while ifaces opened on it are open or
 * memory allocated (cucopy_mem_alloc) or registered (cucopy_mem_reg) through
 * it is held: free it first.
 */
CUCOPY_API cucopy_status_t cucopy_context_destroy(cucopy_context_h ctx);

/**@}*/

/** @name Devices and topology
 * From the CUDA driver, without creating or activating any context. */
/**@{*/

/** Number of CUDA devices the driver shows (CUDA_VISIBLE_DEVICES applies). */
CUCOPY_API cucopy_status_t cucopy_device_count(cucopy_context_h ctx, int *count);

/** cucopy_device_attr_t field bits. */
enum {
    CUCOPY_DEVICE_ATTR_NAME = 1u << 0,
    CUCOPY_DEVICE_ATTR_UUID = 1u << 1,
    CUCOPY_DEVICE_ATTR_PCI_BUS_ID = 1u << 2,
    CUCOPY_DEVICE_ATTR_NUMA_NODE = 1u << 3,
    CUCOPY_DEVICE_ATTR_MEMORY = 1u << 4,
    CUCOPY_DEVICE_ATTR_COMPUTE_CAPABILITY = 1u << 5,
    CUCOPY_DEVICE_ATTR_PEERS = 1u << 6,
    CUCOPY_DEVICE_ATTR_PRIMARY_ACTIVE = 1u << 7
};

/** Most devices the peer mask describes. */
#define CUCOPY_MAX_DEVICES 64

/** What one device is; set field_mask to the fields wanted. */
typedef struct cucopy_device_attr {
    uint64_t field_mask;
    char name[256];         /**< e.g. "NVIDIA H200" */
    uint8_t uuid[16];       /**< the GPU's UUID (as nvidia-smi's GPU-... without dashes) */
    char pci_bus_id[32];    /**< "dddd:bb:dd.f", lower case */
    int numa_node;          /**< host NUMA node of the PCI device, -1 if unknown */
    uint64_t total_memory;  /**< bytes */
    int cc_major;           /**< compute capability */
    int cc_minor;
    uint64_t peer_mask;     /**< bit p: this device can access device p's memory (cuDeviceCanAccessPeer) */
    int primary_active;     /**< the device's primary context is active (read only; never changed) */
} cucopy_device_attr_t;

/** Fill the fields of @a attr selected by attr->field_mask for device @a ordinal. */
CUCOPY_API cucopy_status_t cucopy_device_query(cucopy_context_h ctx, int ordinal,
                                               cucopy_device_attr_t *attr);

/** cucopy_peer_attr_t field bits. */
enum {
    CUCOPY_PEER_ATTR_CAN_ACCESS = 1u << 0,
    CUCOPY_PEER_ATTR_ACCESS_SUPPORTED = 1u << 1,
    CUCOPY_PEER_ATTR_NATIVE_ATOMICS = 1u << 2,
    CUCOPY_PEER_ATTR_PERFORMANCE_RANK = 1u << 3
};

/** What the driver says of one ordered device pair. */
typedef struct cucopy_peer_attr {
    uint64_t field_mask;
    int can_access;        /**< cuDeviceCanAccessPeer(device, peer) */
    int access_supported;  /**< CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED */
    int native_atomics;    /**< CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED */
    int performance_rank;  /**< CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK (lower is better) */
} cucopy_peer_attr_t;

/** Fill @a attr for the pair (@a device, @a peer); the two must differ. */
CUCOPY_API cucopy_status_t cucopy_device_peer_query(cucopy_context_h ctx, int device, int peer,
                                                    cucopy_peer_attr_t *attr);
/**@}*/

/** @name Memory domain: query, allocation, host registration
 *
 * All of these work from any thread, with or without a current context, and
 * leave the calling thread's current context as they found it.
 */
/**@{*/

/** Memory types. */
typedef enum cucopy_memory_type {
    CUCOPY_MEMORY_TYPE_HOST = 0,        /**< host memory: pageable, pinned or registered */
    CUCOPY_MEMORY_TYPE_CUDA = 1,        /**< device memory (cuMemAlloc, VMM, pools) */
    CUCOPY_MEMORY_TYPE_CUDA_MANAGED = 2 /**< managed (unified) memory */
} cucopy_memory_type_t;

/** cucopy_mem_attr_t field bits. */
enum {
    CUCOPY_MEM_ATTR_MEM_TYPE = 1u << 0,
    CUCOPY_MEM_ATTR_PINNED = 1u << 1,
    CUCOPY_MEM_ATTR_DEVICE = 1u << 2,
    CUCOPY_MEM_ATTR_CONTEXT_ID = 1u << 3,
    CUCOPY_MEM_ATTR_ALLOCATION = 1u << 4,
    CUCOPY_MEM_ATTR_FLAGS = 1u << 5,
    CUCOPY_MEM_ATTR_ACCESS = 1u << 6
};

/** cucopy_mem_attr_t::flags bits. */
enum {
    CUCOPY_MEM_FLAG_VMM = 1u << 0,        /**< cuMemCreate + cuMemMap memory */
    CUCOPY_MEM_FLAG_POOL = 1u << 1,       /**< stream-ordered pool memory (cuMemAllocAsync) */
    CUCOPY_MEM_FLAG_REGISTERED = 1u << 2, /**< host memory inside a range pinned by cucopy_mem_reg() */
    CUCOPY_MEM_FLAG_ALLOCATED = 1u << 3,  /**< memory from cucopy_mem_alloc() */
    CUCOPY_MEM_FLAG_PREFERRED = 1u << 4,  /**< managed memory with a preferred location set */
    CUCOPY_MEM_FLAG_HOST_LOCATED = 1u << 5 /**< VMM memory physically on the host */
};

/** Location values of cucopy_mem_attr_t::preferred_location besides device ordinals. */
#define CUCOPY_LOCATION_HOST (-1)
#define CUCOPY_LOCATION_NONE (-2)

/** What a range of memory is; set field_mask to the fields wanted. */
typedef struct cucopy_mem_attr {
    uint64_t field_mask;
    cucopy_memory_type_t mem_type;
    int pinned;              /**< host memory: page-locked (host-allocated or registered) */
    int device;              /**< device ordinal of device or managed memory (for managed: where
                                  it was allocated), of the context owning pinned memory; -1 none */
    uint64_t context_id;     /**< owning CUDA context's id; 0 for VMM and pool memory (no owner),
                                  for plain host memory, and on drivers without cuCtxGetId */
    uint64_t base_address;   /**< start of the allocation holding addr; 0 if not known (pageable) */
    size_t alloc_length;     /**< its length; 0 if not known */
    uint64_t flags;          /**< CUCOPY_MEM_FLAG_* */
    int preferred_location;  /**< managed: a device ordinal, ::CUCOPY_LOCATION_HOST or
                                  ::CUCOPY_LOCATION_NONE */
    uint64_t access_mask;    /**< bit d: device d may access the memory (VMM and pool memory:
                                  from cuMemGetAccess / cuMemPoolGetAccess; device memory:
                                  its device; managed and pinned memory: every device) */
} cucopy_mem_attr_t;

/**
 * Say what [@a addr, @a addr + @a length) is. @a length may be 0 (the address
 * alone). A range crossing the end of its CUDA allocation is
 * ::CUCOPY_ERR_OUT_OF_RANGE. Memory the driver does not know (malloc, stack,
 * freed CUDA memory) is host memory, never device memory.
 */
CUCOPY_API cucopy_status_t cucopy_mem_query(cucopy_context_h ctx, const void *addr, size_t length,
                                            cucopy_mem_attr_t *attr);

/** cucopy_mem_alloc_params_t field bits. */
enum {
    CUCOPY_MEM_ALLOC_PARAM_LENGTH = 1u << 0, /**< required */
    CUCOPY_MEM_ALLOC_PARAM_MEM_TYPE = 1u << 1,
    CUCOPY_MEM_ALLOC_PARAM_DEVICE = 1u << 2,
    CUCOPY_MEM_ALLOC_PARAM_FLAGS = 1u << 3
};

/** cucopy_mem_alloc_params_t::flags bits. */
enum {
    /** The device's primary context may be activated (retained) if it is not
     *  active; without it an inactive primary context is an error. */
    CUCOPY_MEM_ALLOC_FLAG_ACTIVATE = 1u << 0
};

/** Allocation parameters. */
typedef struct cucopy_mem_alloc_params {
    uint64_t field_mask;
    size_t length;                 /**< bytes, > 0; required */
    cucopy_memory_type_t mem_type; /**< default ::CUCOPY_MEMORY_TYPE_CUDA; HOST means pinned host memory */
    int device;                    /**< default: the device of the current context */
    unsigned flags;                /**< CUCOPY_MEM_ALLOC_FLAG_* */
} cucopy_mem_alloc_params_t;

/**
 * Allocate params->length bytes: device memory, managed memory (attached
 * globally) or pinned host memory (portable to every context).
 *
 * Which context allocates: the current context if it is on the requested
 * device (or no device was requested); otherwise the device's primary
 * context if it is active, or with ::CUCOPY_MEM_ALLOC_FLAG_ACTIVATE. Pinned
 * host memory needs any context: the current one, else the first active
 * primary context. The library retains a primary context it allocates in
 * until cucopy_mem_free(). Nothing is left current.
 */
CUCOPY_API cucopy_status_t cucopy_mem_alloc(cucopy_context_h ctx,
                                            const cucopy_mem_alloc_params_t *params, void **addr_p);

/**
 * Free memory from cucopy_mem_alloc(); other addresses get
 * ::CUCOPY_ERR_INVALID_PARAM. Memory whose primary context the program reset
 * went with it: OK. If the driver fails to free, the memory stays allocated
 * and the call can be repeated.
 */
CUCOPY_API cucopy_status_t cucopy_mem_free(cucopy_context_h ctx, void *addr);

/** cucopy_mem_reg() flags: none defined; pass 0. */

/**
 * Pin host memory for every context (cuMemHostRegister with PORTABLE), so
 * copies from and to it run at pinned speed on every device.
 * Needs a current context or an active primary context (never activates one).
 * Outcomes: device or managed memory, NULL or length 0:
 * ::CUCOPY_ERR_INVALID_PARAM; a range overlapping one already registered (by
 * cucopy or the program): ::CUCOPY_ERR_ALREADY_EXISTS.
 */
CUCOPY_API cucopy_status_t cucopy_mem_reg(cucopy_context_h ctx, void *addr, size_t length,
                                          unsigned flags, cucopy_memh_h *memh_p);

/**
 * Unpin memory pinned by cucopy_mem_reg(). If the registration is already
 * gone (its context was reset or destroyed), the handle is released and
 * ::CUCOPY_OK returned. If the driver fails to unpin, the range stays pinned,
 * the handle stays valid and the call can be repeated. NULL is a no-op.
 */
CUCOPY_API cucopy_status_t cucopy_mem_dereg(cucopy_context_h ctx, cucopy_memh_h memh);

/**
 * Describe [@a addr, +@a length) once, for copies: a memory handle for any
 * memory kind (device, managed, VMM or pool memory, pinned or pageable host
 * memory), pinning nothing. A copy whose buffer or remote range names a
 * handle (the _memh functions, cucopy_ep_copy_batch()) makes no pointer
 * query for that side: on an H200 that is 80 to 210 ns per side and copy.
 * A handle from cucopy_mem_reg() works the same way (it keeps describing
 * pinned memory: if the registration went with its context, the copies stay
 * correct, the driver then staging them as pageable memory). Release with
 * cucopy_mem_dereg(); cucopy_context_destroy() is ::CUCOPY_ERR_BUSY while
 * any is held.
 *
 * A handle is a promise that its range stays what it was when described:
 * - memory freed through cucopy_mem_free() invalidates the handles inside
 *   it (copies naming them: ::CUCOPY_ERR_INVALID_HANDLE);
 * - device memory of a primary context that was reset since fails cleanly
 *   (::CUCOPY_ERR_INVALID_HANDLE; each copy checks the context's id, which
 *   the copy path reads anyway);
 * - memory the program frees itself (cuMemFree), or memory of a context the
 *   program destroys (cuCtxDestroy, which cucopy cannot check without
 *   touching it), must not be copied with a handle, as with the driver:
 *   release the handle first.
 * On drivers without cuCtxGetId (CUDA < 12) device-side handles are valid
 * but their sides are classified per copy (no id to tell a reset by).
 * Outcomes: NULL, length 0 or overflow: ::CUCOPY_ERR_INVALID_PARAM; a
 * device-side range crossing the end of its allocation:
 * ::CUCOPY_ERR_OUT_OF_RANGE.
 */
CUCOPY_API cucopy_status_t cucopy_mem_describe(cucopy_context_h ctx, const void *addr,
                                               size_t length, cucopy_memh_h *memh_p);
/**@}*/

/** @name Interface: per-context streams and events, progress, flush */
/**@{*/

/** Thread modes. */
typedef enum cucopy_thread_mode {
    /** The caller serializes all calls on the iface and its eps. */
    CUCOPY_THREAD_MODE_SINGLE = 0,
    /** Any number of threads may call on the iface and its eps at once. */
    CUCOPY_THREAD_MODE_MULTI = 1
} cucopy_thread_mode_t;

/** cucopy_iface_params_t field bits. */
enum {
    CUCOPY_IFACE_PARAM_THREAD_MODE = 1u << 0,
    CUCOPY_IFACE_PARAM_MAX_POLL = 1u << 1,
    CUCOPY_IFACE_PARAM_MAX_EVENTS = 1u << 2
};

/** Interface parameters. */
typedef struct cucopy_iface_params {
    uint64_t field_mask;
    /** Default ::CUCOPY_THREAD_MODE_SINGLE. */
    cucopy_thread_mode_t thread_mode;
    /** Events checked per stream queue per progress call; default
     *  $CUCOPY_MAX_POLL, else 16. At least 1. */
    unsigned max_poll;
    /** Events (outstanding zcopy pieces) per CUDA context (and, on a
     *  ::CUCOPY_THREAD_MODE_MULTI iface, per lane: see $CUCOPY_LANES);
     *  reaching it makes zcopy return ::CUCOPY_ERR_NO_RESOURCE, with nothing
     *  of the operation issued, until progress frees some; an operation that
     *  needs more than max_events events in one context by itself (one per
     *  run of consecutive iov entries on one stream) gets
     *  ::CUCOPY_ERR_INVALID_PARAM instead. Default
     *  $CUCOPY_MAX_EVENTS, else 4096. At least 1. */
    unsigned max_events;
} cucopy_iface_params_t;

/** Capability bits in cucopy_iface_attr_t::cap_flags. */
enum {
    CUCOPY_IFACE_CAP_PUT_SHORT = 1u << 0,
    CUCOPY_IFACE_CAP_GET_SHORT = 1u << 1,
    CUCOPY_IFACE_CAP_PUT_ZCOPY = 1u << 2,
    CUCOPY_IFACE_CAP_GET_ZCOPY = 1u << 3,
    CUCOPY_IFACE_CAP_EVENT_FD = 1u << 4,
    /** Device-to-device copies between different GPUs: set when the driver
     *  shows two devices or more (peer access where the devices allow it,
     *  the driver's staged copy otherwise). */
    CUCOPY_IFACE_CAP_CROSS_DEVICE = 1u << 5,
    /** The driver has cuCtxGetId: resources are keyed by context id. */
    CUCOPY_IFACE_CAP_CONTEXT_ID = 1u << 6
};

/** cucopy_iface_attr_t field bits. */
enum {
    CUCOPY_IFACE_ATTR_CAP_FLAGS = 1u << 0,
    CUCOPY_IFACE_ATTR_MAX_IOV = 1u << 1,
    CUCOPY_IFACE_ATTR_MAX_POLL = 1u << 2,
    CUCOPY_IFACE_ATTR_MAX_EVENTS = 1u << 3,
    CUCOPY_IFACE_ATTR_THREAD_MODE = 1u << 4,
    CUCOPY_IFACE_ATTR_DEVICE_COUNT = 1u << 5
};

/** Interface attributes; set field_mask to the fields wanted. */
typedef struct cucopy_iface_attr {
    uint64_t field_mask;
    uint64_t cap_flags;               /**< CUCOPY_IFACE_CAP_* */
    size_t max_iov;                   /**< Most iov entries per zcopy. */
    unsigned max_poll;                /**< Effective max_poll. */
    unsigned max_events;              /**< Effective max_events per context. */
    cucopy_thread_mode_t thread_mode; /**< Effective thread mode. */
    int device_count;                 /**< Devices the driver shows. */
} cucopy_iface_attr_t;

/**
 * Open an interface on a context. No CUDA resource is created here: streams
 * and events are made on first use in each CUDA context.
 * @param params may be NULL (defaults).
 */
CUCOPY_API cucopy_status_t cucopy_iface_open(cucopy_context_h ctx,
                                             const cucopy_iface_params_t *params,
                                             cucopy_iface_h *iface_p);

/**
 * Close an interface: waits for the copies in flight, then releases every
 * stream, event and primary-context retain it holds. Completions still
 * pending are not called (flush first to get them). Endpoints of the iface
 * become invalid. Must not be called from a completion callback of this iface.
 * If a driver call fails while releasing, the error is returned, the iface
 * stays open (holding only what it could not release) and close can be
 * called again.
 */
CUCOPY_API cucopy_status_t cucopy_iface_close(cucopy_iface_h iface);

/** Fill the fields of @a attr selected by attr->field_mask. */
CUCOPY_API cucopy_status_t cucopy_iface_query(cucopy_iface_h iface, cucopy_iface_attr_t *attr);

/**
 * Check outstanding copies on every CUDA context of the iface and run the
 * completion callbacks of those that finished, on the calling thread (on a
 * ::CUCOPY_THREAD_MODE_MULTI iface, unless another thread is running this
 * iface's callbacks at the moment: it runs them).
 * Works from any thread, with or without a current CUDA context.
 * @return the number of operations completed (>= 0), or a negative status.
 */
CUCOPY_API int cucopy_iface_progress(cucopy_iface_h iface);

/**
 * Flush: completes once every operation issued on the iface before the call
 * has completed, its completion callback included: while a covered callback
 * is still pending or running on another thread, flush is not done (@a comp
 * runs after it). Called from inside one of this iface's completion
 * callbacks it covers the copies only (it cannot wait for its own callback).
 * @param flags must be 0.
 * @param comp  NULL or a completion; with ::CUCOPY_INPROGRESS its count is
 *              decremented once all those operations completed (inside
 *              progress). With NULL, call flush again until it returns OK.
 * @return ::CUCOPY_OK when nothing is outstanding, ::CUCOPY_INPROGRESS, or an
 *         error.
 */
CUCOPY_API cucopy_status_t cucopy_iface_flush(cucopy_iface_h iface, unsigned flags,
                                              cucopy_completion_t *comp);

/**
 * Fence: every operation issued on the iface after the call starts only
 * after every operation issued on it before the call has finished its data
 * movement, on every stream, lane, CUDA context and device (a chain
 * host -> GPU 0 -> GPU 1 -> host with a fence between the steps needs no
 * wait in between). Completions are not ordered by it (use flush for that).
 *
 * Cost model: the call never waits. With nothing in flight it is a scan of
 * the iface's queues. Otherwise it records the last piece of every busy
 * queue and marks every stream; the first copy on each marked stream after
 * the fence makes that stream wait for those pieces on the GPU
 * (cuStreamWaitEvent, one per busy queue, across contexts, and a check that
 * a primary context involved was not reset meanwhile), once. A host to
 * host copy (run on the CPU) issued while pieces before a fence are still
 * in flight waits for their streams on the CPU, once: the one case a fence
 * blocks.
 * Thread-safe on a ::CUCOPY_THREAD_MODE_MULTI iface; operations issued by
 * other threads concurrently with the fence may fall on either side of it.
 * @param flags must be 0.
 * @return ::CUCOPY_OK, or an error (a CUDA error of a stream that cannot be
 *         made to wait is reported by the copy that needed it).
 */
CUCOPY_API cucopy_status_t cucopy_iface_fence(cucopy_iface_h iface, unsigned flags);

/**
 * The iface's event file descriptor (an eventfd). It becomes readable
 * (POLLIN) after cucopy_iface_event_arm() returned OK and a copy then in
 * flight finished. Owned by the iface; closed by cucopy_iface_close().
 *
 * Protocol: (1) cucopy_iface_event_arm(); (2) if it returns ::CUCOPY_ERR_BUSY,
 * call cucopy_iface_progress() and go to (1); (3) otherwise poll/epoll the fd;
 * (4) when readable, call cucopy_iface_progress() and go to (1).
 * poll/epoll may fail with EINTR: besides the program's own signals, the Go
 * runtime inside the library preempts with SIGURG, which can reach any thread
 * that called in. Retry on EINTR (GODEBUG=asyncpreemptoff=1 in the
 * environment at load turns those signals off).
 */
CUCOPY_API cucopy_status_t cucopy_iface_event_fd(cucopy_iface_h iface, int *fd_p);

/** Event bits for cucopy_iface_event_arm(). */
enum {
    CUCOPY_EVENT_SEND_COMP = 1u << 0 /**< A put/get zcopy completed. */
};

/**
 * Arm the event fd for @a events (::CUCOPY_EVENT_SEND_COMP).
 * @return ::CUCOPY_OK when armed (the fd will signal when copies now in
 *         flight finish), ::CUCOPY_ERR_BUSY when completions are already
 *         waiting for progress, or an error. Works from any thread, with or
 *         without a current CUDA context, for work on any number of devices.
 */
CUCOPY_API cucopy_status_t cucopy_iface_event_arm(cucopy_iface_h iface, unsigned events);

/**
 * Release, now, everything the iface holds in one CUDA context: its streams,
 * events and the retain cucopy holds on it. Copies in flight there are waited
 * for and complete normally (their callbacks run at the next progress).
 *
 * A program that destroys a context it created (cuCtxCreate) must call this
 * first on every iface that copied with memory of that context: cucopy cannot
 * tell a destroyed context's handle from a live one without undefined
 * behaviour. Primary contexts need no call: cucopy holds a retain on them, and
 * a reset (cuDevicePrimaryCtxReset, cudaDeviceReset, acc_shutdown) is
 * detected before any call on the dead incarnation; copies then in flight
 * complete with ::CUCOPY_ERR_CANCELED.
 *
 * @param cuda_ctx_id the context's id from cuCtxGetId (CUDA >= 12; also
 *        cucopy_mem_attr_t::context_id); on drivers without cuCtxGetId, the
 *        CUcontext handle's value. An id the iface holds nothing for is OK.
 */
CUCOPY_API cucopy_status_t cucopy_iface_release_context(cucopy_iface_h iface,
                                                        uint64_t cuda_ctx_id);

/** Direction kinds of the statistics (index of cucopy_iface_stats_t's arrays). */
typedef enum cucopy_dir {
    CUCOPY_DIR_H2D = 0,  /**< host to device (managed memory counts as device) */
    CUCOPY_DIR_D2H = 1,  /**< device to host */
    CUCOPY_DIR_D2D = 2,  /**< device to device within one CUDA context */
    CUCOPY_DIR_PEER = 3, /**< device to device across two contexts (two GPUs, or two contexts of one) */
    CUCOPY_DIR_HOST = 4, /**< host to host, copied on the CPU */
    CUCOPY_DIR_COUNT = 5
} cucopy_dir_t;

/** cucopy_iface_stats_t field bits. */
enum {
    CUCOPY_IFACE_STATS_EVENTS = 1u << 0,      /**< no_resource, flushes, fences */
    CUCOPY_IFACE_STATS_DIRECTIONS = 1u << 1,  /**< dir_operations, dir_pieces, dir_bytes */
    CUCOPY_IFACE_STATS_DEVICES = 1u << 2,     /**< device_count, device_operations, ... */
    CUCOPY_IFACE_STATS_CONTEXTS = 1u << 3,    /**< contexts_seen, _released, _reset */
    CUCOPY_IFACE_STATS_INCARNATIONS = 1u << 4 /**< incarnations, _capacity (in), _count, _dropped */
};

/** cucopy_incarnation_stats_t::state */
typedef enum cucopy_incarnation_state {
    CUCOPY_INCARNATION_LIVE = 0,     /**< the iface holds resources in it now */
    CUCOPY_INCARNATION_RELEASED = 1, /**< released: release_context, reclaim of an idle slot */
    CUCOPY_INCARNATION_RESET = 2     /**< found ended (reset, driver deinitialized) and dropped */
} cucopy_incarnation_state_t;

/**
 * One life of a (CUDA context, lane) in an iface: from the first copy that
 * gave the iface resources in that context (on a ::CUCOPY_THREAD_MODE_MULTI
 * iface, per lane) until they were released or the context was found ended.
 * A context released and used again, or a primary context reset and
 * recreated, starts a new life with a new serial. The counts are those of
 * cucopy_iface_stats_t (operations under their first piece's direction),
 * for the GPU directions.
 */
typedef struct cucopy_incarnation_stats {
    uint64_t serial;        /**< 1, 2, ...: the order the iface started using them */
    uint64_t context_id;    /**< cuCtxGetId (the handle's value on drivers without it) */
    int device;             /**< the context's device ordinal */
    int lane;               /**< 0 on single-thread ifaces */
    int state;              /**< cucopy_incarnation_state_t */
    int reserved;           /**< 0 */
    uint64_t operations[4]; /**< [CUCOPY_DIR_H2D .. CUCOPY_DIR_PEER] */
    uint64_t pieces[4];     /**< [CUCOPY_DIR_H2D .. CUCOPY_DIR_PEER] */
    uint64_t bytes[4];      /**< [CUCOPY_DIR_H2D .. CUCOPY_DIR_PEER] */
} cucopy_incarnation_stats_t;

/** The most ended lives an iface keeps for cucopy_iface_stats_t::incarnations
 *  (the oldest go first; cucopy_iface_stats_t::incarnations_dropped counts them). */
#define CUCOPY_MAX_ENDED_INCARNATIONS 1024

/**
 * An iface's statistics: always on, cumulative for the iface's life (the
 * counts of a released or reset context stay). An operation (a zcopy or a
 * short copy) is counted once, under the direction of its first piece; a
 * piece is one contiguous copy (an iov entry, or a short copy). Per device,
 * the device is that of the CUDA context the copy ran on (a peer copy: the
 * source's); CUCOPY_DIR_HOST has no device. Two approximations: pieces an
 * operation issued before it was refused with ::CUCOPY_ERR_NO_RESOURCE are
 * counted (they were copied), and so is the operation again when retried;
 * a short copy that overlaps a release of its context may be counted on
 * the context that next takes its place.
 */
typedef struct cucopy_iface_stats {
    uint64_t field_mask;
    uint64_t no_resource;           /**< ::CUCOPY_ERR_NO_RESOURCE returns */
    uint64_t flushes;               /**< iface and ep flush calls */
    uint64_t fences;                /**< iface and ep fence calls */
    uint64_t dir_operations[5];     /**< [CUCOPY_DIR_*] */
    uint64_t dir_pieces[5];         /**< [CUCOPY_DIR_*] */
    uint64_t dir_bytes[5];          /**< [CUCOPY_DIR_*] */
    int device_count;               /**< devices with entries below (at most CUCOPY_MAX_DEVICES) */
    uint64_t device_operations[320]; /**< [device * CUCOPY_DIR_COUNT + CUCOPY_DIR_*] */
    uint64_t device_pieces[320];    /**< [device * CUCOPY_DIR_COUNT + CUCOPY_DIR_*] */
    uint64_t device_bytes[320];     /**< [device * CUCOPY_DIR_COUNT + CUCOPY_DIR_*] */
    uint64_t contexts_seen;         /**< (context, lane) pairs that got resources */
    uint64_t contexts_released;     /**< released: release_context, close, reclaim of an idle slot */
    uint64_t contexts_reset;        /**< found ended (reset, driver deinitialized) and dropped */
    /** in: an array of incarnations_capacity entries (NULL if 0); filled with
     *  the first lives, in serial order: the ended ones kept, then the live ones */
    cucopy_incarnation_stats_t *incarnations;
    size_t incarnations_capacity; /**< in: the array's length */
    size_t incarnations_count;    /**< out: the lives there are (more than the capacity: call again) */
    uint64_t incarnations_dropped; /**< out: ended lives no longer kept (their counts stay in the totals) */
} cucopy_iface_stats_t;

/**
 * Fill the fields of @a stats selected by stats->field_mask. Cheap enough
 * to call now and then (a lock and a walk of the iface's contexts); copies
 * running meanwhile may or may not be counted yet. CUCOPY_STATS=1 prints the
 * same data when the iface is closed. With ::CUCOPY_IFACE_STATS_INCARNATIONS
 * the caller passes incarnations and incarnations_capacity; a NULL array
 * with a capacity above 0 is ::CUCOPY_ERR_INVALID_PARAM.
 */
CUCOPY_API cucopy_status_t cucopy_iface_stats(cucopy_iface_h iface, cucopy_iface_stats_t *stats);
/**@}*/

/** @name Performance model
 *
 * What a copy between two memory kinds and devices is expected to cost:
 * time(length) = latency + length / bandwidth. Numbers come from a model of
 * the topology (PCIe generation and width from sysfs, device memory rate
 * from the driver, NVLink links from NVML where it can be loaded, peer
 * support from the driver; docs/design.md, "Performance model", lists the
 * constants) or, when asked, from a short measurement of the pair through
 * this library's own copy path, made once and kept for the iface's life.
 * Protocol choices (e.g. an MPI's eager/rendezvous switch) can use it.
 */
/**@{*/

/** A device argument of cucopy_iface_estimate() for host memory: host
 *  memory on the NUMA node of the GPU it is copied from or to (or any node). */
#define CUCOPY_NUMA_ANY (-1)

/** cucopy_iface_estimate() flags. */
enum {
    /** The source is pinned host memory (cuMemHostAlloc, cucopy_mem_reg(),
     *  cudaHostRegister); without it host memory is pageable. Only with
     *  ::CUCOPY_MEMORY_TYPE_HOST. */
    CUCOPY_ESTIMATE_SRC_PINNED = 1u << 0,
    /** The destination is pinned host memory; as for the source. */
    CUCOPY_ESTIMATE_DST_PINNED = 1u << 1,
    /** Measure the pair now if it was not measured yet on this iface (as
     *  $CUCOPY_CALIBRATE=1 does for every call). */
    CUCOPY_ESTIMATE_CALIBRATE = 1u << 2
};

/** Where an estimate comes from (cucopy_estimate_attr_t::source). */
typedef enum cucopy_estimate_source {
    CUCOPY_ESTIMATE_SOURCE_MODEL = 0,     /**< the topology model and its constants */
    CUCOPY_ESTIMATE_SOURCE_CALIBRATED = 1 /**< measured on this iface (its NUMA correction
                                               modelled: see cucopy_estimate_attr_t::numa_remote) */
} cucopy_estimate_source_t;

/** The way the data takes (cucopy_estimate_attr_t::path). */
typedef enum cucopy_path {
    CUCOPY_PATH_CPU = 0,         /**< host to host: a CPU copy, no GPU */
    CUCOPY_PATH_PCIE = 1,        /**< DMA between pinned host memory and a GPU over PCIe
                                      (path_gen: PCIe generation, path_width: lanes) */
    CUCOPY_PATH_PCIE_STAGED = 2, /**< pageable host memory and a GPU: the driver stages the
                                      data through its pinned buffers (path_gen/width: the
                                      PCIe link) */
    CUCOPY_PATH_DEVICE = 3,      /**< within one GPU's memory (path_width: memory bus bits) */
    CUCOPY_PATH_NVLINK = 4,      /**< GPU to GPU over NVLink (path_gen: NVLink version,
                                      path_width: links) */
    CUCOPY_PATH_PCIE_PEER = 5,   /**< GPU to GPU, peer DMA over PCIe (path_gen/width: the
                                      slower of the two links) */
    CUCOPY_PATH_HOST_STAGED = 6  /**< GPU to GPU without peer access: through host memory */
} cucopy_path_t;

/** cucopy_estimate_attr_t field bits. */
enum {
    CUCOPY_ESTIMATE_ATTR_LATENCY = 1u << 0,
    CUCOPY_ESTIMATE_ATTR_BANDWIDTH = 1u << 1,
    CUCOPY_ESTIMATE_ATTR_TIME = 1u << 2,
    CUCOPY_ESTIMATE_ATTR_SOURCE = 1u << 3,
    CUCOPY_ESTIMATE_ATTR_PATH = 1u << 4, /**< path, path_gen, path_width */
    CUCOPY_ESTIMATE_ATTR_NUMA_REMOTE = 1u << 5
};

/** An estimate; set field_mask to the fields wanted. */
typedef struct cucopy_estimate_attr {
    uint64_t field_mask;
    double latency;                  /**< seconds: issue to completion of a lone small copy */
    double bandwidth;                /**< bytes per second of a large copy */
    double time;                     /**< seconds for `length` bytes: latency + length / bw */
    cucopy_estimate_source_t source; /**< model or calibrated */
    cucopy_path_t path;
    int path_gen;                    /**< PCIe generation or NVLink version; 0 if none or unknown */
    int path_width;                  /**< PCIe lanes, NVLink links or memory bus bits; 0 if none */
    int numa_remote;                 /**< host memory on another NUMA node than the GPU's (the
                                          model's cross-node factor applied) */
} cucopy_estimate_attr_t;

/**
 * Estimate a copy of @a length bytes from (@a src_type, @a src_device) to
 * (@a dst_type, @a dst_device).
 *
 * @param src_type, dst_type  ::CUCOPY_MEMORY_TYPE_HOST (pageable, or pinned with
 *        ::CUCOPY_ESTIMATE_SRC_PINNED / ::CUCOPY_ESTIMATE_DST_PINNED),
 *        ::CUCOPY_MEMORY_TYPE_CUDA, or ::CUCOPY_MEMORY_TYPE_CUDA_MANAGED
 *        (estimated as device memory resident on its device; migrations
 *        are not modelled).
 * @param src_device, dst_device  for device and managed memory the device
 *        ordinal; for host memory a host NUMA node or ::CUCOPY_NUMA_ANY.
 * @param flags  CUCOPY_ESTIMATE_* bits.
 * @param attr   receives the fields selected by attr->field_mask.
 *
 * The first call on an iface reads the topology (driver attributes, sysfs,
 * NVML if present; no context is created or made current) and keeps it. Calibration
 * (::CUCOPY_ESTIMATE_CALIBRATE or $CUCOPY_CALIBRATE=1) of a pair not yet
 * measured on this iface copies 8 bytes and 256 MiB a few times (medians)
 * through a private iface on the same context, in buffers it allocates
 * through the driver and frees before returning: tens to hundreds of
 * milliseconds, once per pair. It needs a context on each device involved
 * (the current one, or an active primary context; none is activated): where
 * it cannot run, or its allocation fails, the model's numbers are returned
 * with ::CUCOPY_ESTIMATE_SOURCE_MODEL and the call still succeeds (the next
 * calibrating call tries again). Host memory is measured where the allocator
 * puts it; a named NUMA node applies the model's cross-node factor on top.
 * Calibration leaves the caller's current context, this iface's streams and
 * its completions untouched; copies in flight meanwhile share the hardware
 * and skew the measurement.
 *
 * Thread-safe on a ::CUCOPY_THREAD_MODE_MULTI iface (calibrations run one at
 * a time).
 * @return ::CUCOPY_OK; ::CUCOPY_ERR_INVALID_PARAM for an unknown memory type,
 *         a device out of range, an unknown NUMA node, unknown flags or field
 *         bits, a PINNED flag on non-host memory, or NULL @a attr;
 *         ::CUCOPY_ERR_INVALID_HANDLE for a NULL or closed iface;
 *         ::CUCOPY_ERR_CUDA when a driver query of the topology failed.
 */
CUCOPY_API cucopy_status_t cucopy_iface_estimate(cucopy_iface_h iface,
                                                 cucopy_memory_type_t src_type, int src_device,
                                                 cucopy_memory_type_t dst_type, int dst_device,
                                                 size_t length, unsigned flags,
                                                 cucopy_estimate_attr_t *attr);
/**@}*/

/** @name Endpoint: copies
 *
 * Which CUDA context runs a copy follows from the buffers, never from the
 * caller's current context: device or managed memory runs on its owning
 * context; memory with no owning context (VMM, stream-ordered pools) on its
 * device's primary context if that is active. A copy between two device
 * buffers of different contexts runs on the source buffer's context (the
 * driver uses peer access where enabled, its staged path otherwise).
 * Host-to-host copies (pageable or pinned) run on the CPU and complete
 * immediately; an address that is not mapped (freed memory, an invented
 * pointer) gives ::CUCOPY_ERR_INVALID_PARAM there, not a crash. Zero-length
 * copies succeed and do nothing.
 *
 * Ordering: zcopy operations of one endpoint with the same (CUDA context,
 * direction) complete in issue order.
 */
/**@{*/

/** Create an endpoint on @a iface. Thread-safe in ::CUCOPY_THREAD_MODE_MULTI. */
CUCOPY_API cucopy_status_t cucopy_ep_create(cucopy_iface_h iface, cucopy_ep_h *ep_p);

/** Destroy an endpoint. Its outstanding copies still complete through the iface. */
CUCOPY_API cucopy_status_t cucopy_ep_destroy(cucopy_ep_h ep);

/**
 * Synchronous copy of @a length bytes from @a buffer to @a remote_addr.
 * Returns once the data is in place (::CUCOPY_OK) or with an error. A length
 * of 0 returns ::CUCOPY_OK whatever the addresses.
 */
CUCOPY_API cucopy_status_t cucopy_ep_put_short(cucopy_ep_h ep, const void *buffer,
                                               size_t length, uint64_t remote_addr);

/** Synchronous copy of @a length bytes from @a remote_addr to @a buffer. */
CUCOPY_API cucopy_status_t cucopy_ep_get_short(cucopy_ep_h ep, void *buffer, size_t length,
                                               uint64_t remote_addr);

/**
 * Asynchronous copy of the iov entries, in order and back to back, to
 * @a remote_addr. Buffers must stay untouched until completion.
 * Entries of length 0 are skipped (their buffer may be NULL); an operation
 * of total length 0 returns ::CUCOPY_OK. Consecutive entries that run on
 * one CUDA context in one direction are issued together (one
 * cuMemcpyBatchAsync on CUDA >= 13.0 drivers, one event; see
 * CUCOPY_IOV_BATCH in docs/configuration.md), and their copies run in no
 * set order among themselves: the entries must not overlap one another.
 * @param iovcnt 1 to cucopy_iface_attr_t::max_iov; 0 is ::CUCOPY_ERR_INVALID_PARAM.
 * @param comp   NULL, or decremented once when the whole operation finished.
 * @return ::CUCOPY_OK (finished now, nothing left in flight: host to host
 *         copies, large pageable copies and runs of small device-to-pageable
 *         copies staged through the library's bounce buffers (CUCOPY_STAGE
 *         and CUCOPY_STAGE_SMALL in docs/configuration.md); @a comp is not
 *         touched),
 *         ::CUCOPY_INPROGRESS (a piece went to a GPU stream: the operation
 *         completes through cucopy_iface_progress(), with ::CUCOPY_ERR_CANCELED
 *         if its context was reset meanwhile; see cucopy_completion_t),
 *         ::CUCOPY_ERR_NO_RESOURCE (a limit is reached: the operation is not in
 *         flight and @a comp is not touched; call progress and retry it
 *         whole. The events an operation needs are made sure of before any
 *         of it is issued, so for max_events nothing was copied; the rare
 *         exceptions, where pieces issued before the limit hit were copied
 *         and are copied again by the retry, are a full context table and a
 *         multi-thread iface whose endpoint or lane another thread issues on
 *         at the same moment),
 *         or another error (@a comp is not touched and nothing is left in
 *         flight on the buffers).
 *
 * Consecutive iov entries that run on the same context and stream share one
 * event; an operation needs as many events as it has such runs.
 */
CUCOPY_API cucopy_status_t cucopy_ep_put_zcopy(cucopy_ep_h ep, const cucopy_iov_t *iov,
                                               size_t iovcnt, uint64_t remote_addr,
                                               cucopy_completion_t *comp);

/** As cucopy_ep_put_zcopy(), from @a remote_addr into the iov entries. */
CUCOPY_API cucopy_status_t cucopy_ep_get_zcopy(cucopy_ep_h ep, const cucopy_iov_t *iov,
                                               size_t iovcnt, uint64_t remote_addr,
                                               cucopy_completion_t *comp);

/**
 * cucopy_ep_put_short() with memory handles: @a memh describes @a buffer,
 * @a remote_memh the remote range (either NULL: classified). A range
 * outside its handle's is ::CUCOPY_ERR_INVALID_PARAM; a handle of another
 * cucopy context, released, or invalid (see cucopy_mem_describe()) is
 * ::CUCOPY_ERR_INVALID_HANDLE. Nothing is copied then.
 */
CUCOPY_API cucopy_status_t cucopy_ep_put_short_memh(cucopy_ep_h ep, const void *buffer,
                                                    cucopy_memh_h memh, size_t length,
                                                    uint64_t remote_addr,
                                                    cucopy_memh_h remote_memh);

/** cucopy_ep_get_short() with memory handles, as cucopy_ep_put_short_memh(). */
CUCOPY_API cucopy_status_t cucopy_ep_get_short_memh(cucopy_ep_h ep, void *buffer,
                                                    cucopy_memh_h memh, size_t length,
                                                    uint64_t remote_addr,
                                                    cucopy_memh_h remote_memh);

/**
 * cucopy_ep_put_zcopy() with memory handles: each entry's @a memh describes
 * its buffer, @a remote_memh the remote range [@a remote_addr, + the total
 * length) (NULL: classified). Handle errors as cucopy_ep_put_short_memh():
 * a range outside its handle's, a released, foreign or freed handle are
 * found before anything is issued; a handle to device memory of a primary
 * context reset since is found when its entry is issued, so entries before
 * it may have been copied (they are waited for: nothing is left in flight,
 * as for any error).
 */
CUCOPY_API cucopy_status_t cucopy_ep_put_zcopy_memh(cucopy_ep_h ep, const cucopy_iov_memh_t *iov,
                                                    size_t iovcnt, uint64_t remote_addr,
                                                    cucopy_memh_h remote_memh,
                                                    cucopy_completion_t *comp);

/** As cucopy_ep_put_zcopy_memh(), from the remote range into the iov entries. */
CUCOPY_API cucopy_status_t cucopy_ep_get_zcopy_memh(cucopy_ep_h ep, const cucopy_iov_memh_t *iov,
                                                    size_t iovcnt, uint64_t remote_addr,
                                                    cucopy_memh_h remote_memh,
                                                    cucopy_completion_t *comp);

/**
 * Many independent copies in one call, with one completion: the contract
 * of cucopy_ep_put_zcopy() (return values, NO_RESOURCE, ordering within
 * the endpoint), with a source and a destination per entry. Consecutive
 * entries that run on one CUDA context in one direction (and, device to
 * device, to one peer context) are one cuMemcpyBatchAsync on CUDA >= 13.0
 * drivers and one event; group the entries by context and direction to get
 * the fewest driver calls. The copies run in no set order among
 * themselves: no entry's destination may overlap another entry's source or
 * destination. Host-to-host entries run on the CPU.
 * @param count 1 to cucopy_iface_attr_t::max_iov.
 */
CUCOPY_API cucopy_status_t cucopy_ep_copy_batch(cucopy_ep_h ep, const cucopy_copy_t *copies,
                                                size_t count, cucopy_completion_t *comp);

/**
 * Strided (2-D) copies in one call, with one completion: the contract of
 * cucopy_ep_copy_batch() (return values, NO_RESOURCE with nothing issued,
 * the completion called exactly once, ordering within the endpoint), with
 * @a height rows of @a width bytes per entry (cucopy_copy_2d_t). An entry of
 * one row, or whose pitches both equal its width, is a contiguous copy (a
 * cucopy_ep_copy_batch() entry); any other entry is one cuMemcpy2DAsync, or
 * for rows narrower than CUCOPY_2D_PACK_BELOW bytes between device memory
 * and pinned or registered host memory whose rows are packed (host pitch ==
 * width), a 2-D copy inside the device through a scratch buffer and one
 * contiguous copy across the bus (docs/design.md); either way the call is
 * asynchronous. Thread safety as the other ep calls. Any memory kind on either
 * side: device, managed, pinned, registered or pageable host memory;
 * host-to-host entries run on the CPU. The copies run in no set order among
 * themselves: no entry's destination span may overlap another entry's
 * source or destination span, nor its own source span.
 * @return CUCOPY_ERR_INVALID_PARAM for @a count 0 or above
 *   cucopy_iface_attr_t::max_iov, NULL @a copies, a NULL address in a
 *   non-empty entry, a pitch below the width with more than one row, or a
 *   span that overflows the address space; handle errors as
 *   cucopy_ep_copy_batch(); all found before anything is issued.
 */
CUCOPY_API cucopy_status_t cucopy_ep_copy_2d(cucopy_ep_h ep, const cucopy_copy_2d_t *copies,
                                             size_t count, cucopy_completion_t *comp);

/**
 * Flush the endpoint: completes once every operation issued on it before the
 * call has completed. Same contract as cucopy_iface_flush().
 */
CUCOPY_API cucopy_status_t cucopy_ep_flush(cucopy_ep_h ep, unsigned flags,
                                           cucopy_completion_t *comp);

/**
 * Fence the endpoint: its operations issued after the call start only after
 * those issued before it finished their data movement. Endpoints share
 * their iface's streams, so this is cucopy_iface_fence() of the endpoint's
 * iface (it orders everything issued on the iface: a superset). Same cost
 * model.
 * @param flags must be 0.
 */
CUCOPY_API cucopy_status_t cucopy_ep_fence(cucopy_ep_h ep, unsigned flags);
/**@}*/

#ifdef __cplusplus
}
#endif

#endif /* CUCOPY_H */
