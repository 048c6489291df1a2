! SPDX-License-Identifier: BSD-3-Clause
!
! cucopy: the Fortran interface (module cucopy, ISO_C_BINDING) of the C ABI
! declared in include/cucopy.h. Compile this file with your program and link
! libcucopy (-lcucopy); no CUDA Fortran is needed.
!
! Two layers:
!
! 1. The C ABI, one to one. Every CUCOPY_API function has a bind(C) interface
!    of the same name and argument list, every struct a bind(C) derived type
!    of the same name and components, every enum value and macro a named
!    constant of the same name. tests/fortran/check_module_* fail when the
!    header changes and this module does not. Conventions:
!    - handles (cucopy_context_h, cucopy_iface_h, cucopy_ep_h, cucopy_memh_h)
!      are type(c_ptr);
!      "destroy of NULL" is destroy(c_null_ptr);
!    - uint64_t values (remote_addr, field_mask, flags) are integer(c_int64_t),
!      size_t is integer(c_size_t), int/unsigned/enums are integer(c_int);
!    - pointers that the library may keep after the call returns
!      (cucopy_completion_t *comp) and memory buffers (void *buffer) are
!      type(c_ptr), value: pass c_null_ptr for NULL, c_loc(x) of a TARGET
!      variable, or cucopy_addr_ptr(addr) of a device address;
!    - optional input structs (params, NULL in C) are OPTIONAL arguments;
!    - structs the call fills (attr) are passed by reference.
!
! 2. Helpers (module procedures, not in the C ABI), for what is awkward in
!    raw Fortran:
!    - cucopy_string(p), cucopy_status_str(s), cucopy_last_error_str():
!      C strings as Fortran strings; cucopy_check(s, what) stops with a
!      message on an error, cucopy_failed(s, what) prints and returns .true.;
!    - type(cucopy_f_completion): a ready-made completion that counts its
!      firings (see below);
!    - cucopy_iov(buffer, length): one cucopy_iov_t, from a c_ptr or an
!      integer(c_int64_t) address, length of any integer kind;
!    - cucopy_addr(x): the address of a contiguous host variable or array
!      (needs TARGET) as integer(c_int64_t), the form remote_addr takes;
!      cucopy_ptr_addr(p) / cucopy_addr_ptr(a): c_ptr <-> integer(c_int64_t)
!      (device pointers are plain 64-bit addresses: hold them in either);
!    - cucopy_f_mem_alloc(ctx, length, addr, mem_type, device, flags) /
!      cucopy_f_mem_free(ctx, addr): memory as an integer(c_int64_t) address;
!      cucopy_chars(attr%name), cucopy_uuid_str(attr%uuid): device attrs;
!    - cucopy_f_context_create(ctx, driver_path, log_level),
!      cucopy_f_iface_open(ctx, iface, thread_mode, max_poll, max_events):
!      create with optional settings, no params struct or C string to build.
!
! Completions. The library keeps the address of a cucopy_completion_t until
! its callback ran, and calls the callback (a bind(C) procedure) from inside
! cucopy_iface_progress(). type(cucopy_f_completion) does both for you:
!
!     type(cucopy_f_completion), target :: done   ! TARGET: its address is kept
!     call cucopy_f_completion_init(done, 1)
!     s = cucopy_ep_put_zcopy(ep, iov, 1_c_size_t, raddr, cucopy_f_completion_ptr(done))
!     call cucopy_f_completion_account(done, s)  ! OK/error: it will not report
!     s = cucopy_f_completion_wait(iface, done, 10.0d0)
!     ! done%fired == 1; s (= done%comp%status) is the first error or CUCOPY_OK
!
! For n operations on one object: init with n, account each returned status.
!
! The object must have the TARGET attribute and stay in scope (not be
! deallocated or go out of scope) until it fired or the iface is closed. Read
! it after progress calls only through variables with TARGET (or VOLATILE),
! as cucopy_f_completion_wait() and cucopy_f_completion_done() do.
!
! Your own callback: write `subroutine cb(self) bind(C)` with
! `type(c_ptr), value :: self` (the address of the cucopy_completion_t), and
! set comp%func = c_funloc(cb); put the completion first in a bind(C) type
! to get from self to your data with c_f_pointer, as cucopy_f_completion does.
module cucopy
  use, intrinsic :: iso_c_binding
  implicit none
  private :: c_strlen, cucopy_f_completion_fire
  private :: cucopy_iov_ptr4, cucopy_iov_ptr8, cucopy_iov_addr4, cucopy_iov_addr8

  ! ------------------------------------------------------------- version
  integer(c_int), parameter :: CUCOPY_VERSION_MAJOR = 0
  integer(c_int), parameter :: CUCOPY_VERSION_MINOR = 5
  integer(c_int), parameter :: CUCOPY_VERSION_PATCH = 0
  integer(c_int), parameter :: CUCOPY_VERSION = &
      CUCOPY_VERSION_MAJOR * 10000 + CUCOPY_VERSION_MINOR * 100 + CUCOPY_VERSION_PATCH

  ! ------------------------------------------------- cucopy_status_t
  integer(c_int), parameter :: CUCOPY_OK = 0
  integer(c_int), parameter :: CUCOPY_INPROGRESS = 1
  integer(c_int), parameter :: CUCOPY_ERR_INVALID_PARAM = -1
  integer(c_int), parameter :: CUCOPY_ERR_INVALID_HANDLE = -2
  integer(c_int), parameter :: CUCOPY_ERR_NO_MEMORY = -3
  integer(c_int), parameter :: CUCOPY_ERR_NO_RESOURCE = -4
  integer(c_int), parameter :: CUCOPY_ERR_BUSY = -5
  integer(c_int), parameter :: CUCOPY_ERR_UNSUPPORTED = -6
  integer(c_int), parameter :: CUCOPY_ERR_NO_DEVICE = -7
  integer(c_int), parameter :: CUCOPY_ERR_NO_DRIVER = -8
  integer(c_int), parameter :: CUCOPY_ERR_CUDA = -9
  integer(c_int), parameter :: CUCOPY_ERR_FORKED = -10
  integer(c_int), parameter :: CUCOPY_ERR_INTERNAL = -11
  integer(c_int), parameter :: CUCOPY_ERR_OUT_OF_RANGE = -12
  integer(c_int), parameter :: CUCOPY_ERR_ALREADY_EXISTS = -13
  integer(c_int), parameter :: CUCOPY_ERR_CANCELED = -14

  ! ------------------------------------------ cucopy_context_params_t
  ! Field bits are integer(c_int64_t), like field_mask: ior() them directly.
  integer(c_int64_t), parameter :: CUCOPY_CONTEXT_PARAM_DRIVER_PATH = 1
  integer(c_int64_t), parameter :: CUCOPY_CONTEXT_PARAM_LOG_LEVEL = 2

  ! cucopy_log_level_t
  integer(c_int), parameter :: CUCOPY_LOG_ERROR = 0
  integer(c_int), parameter :: CUCOPY_LOG_WARN = 1
  integer(c_int), parameter :: CUCOPY_LOG_INFO = 2
  integer(c_int), parameter :: CUCOPY_LOG_DEBUG = 3
  integer(c_int), parameter :: CUCOPY_LOG_TRACE = 4

  ! ---------------------------------------- cucopy_device_attr_t
  integer(c_int64_t), parameter :: CUCOPY_DEVICE_ATTR_NAME = 1
  integer(c_int64_t), parameter :: CUCOPY_DEVICE_ATTR_UUID = 2
  integer(c_int64_t), parameter :: CUCOPY_DEVICE_ATTR_PCI_BUS_ID = 4
  integer(c_int64_t), parameter :: CUCOPY_DEVICE_ATTR_NUMA_NODE = 8
  integer(c_int64_t), parameter :: CUCOPY_DEVICE_ATTR_MEMORY = 16
  integer(c_int64_t), parameter :: CUCOPY_DEVICE_ATTR_COMPUTE_CAPABILITY = 32
  integer(c_int64_t), parameter :: CUCOPY_DEVICE_ATTR_PEERS = 64
  integer(c_int64_t), parameter :: CUCOPY_DEVICE_ATTR_PRIMARY_ACTIVE = 128
  integer(c_int), parameter :: CUCOPY_MAX_DEVICES = 64

  ! cucopy_peer_attr_t field bits
  integer(c_int64_t), parameter :: CUCOPY_PEER_ATTR_CAN_ACCESS = 1
  integer(c_int64_t), parameter :: CUCOPY_PEER_ATTR_ACCESS_SUPPORTED = 2
  integer(c_int64_t), parameter :: CUCOPY_PEER_ATTR_NATIVE_ATOMICS = 4
  integer(c_int64_t), parameter :: CUCOPY_PEER_ATTR_PERFORMANCE_RANK = 8

  ! ------------------------------------------------ memory domain
  ! cucopy_memory_type_t
  integer(c_int), parameter :: CUCOPY_MEMORY_TYPE_HOST = 0
  integer(c_int), parameter :: CUCOPY_MEMORY_TYPE_CUDA = 1
  integer(c_int), parameter :: CUCOPY_MEMORY_TYPE_CUDA_MANAGED = 2

  ! cucopy_mem_attr_t field bits
  integer(c_int64_t), parameter :: CUCOPY_MEM_ATTR_MEM_TYPE = 1
  integer(c_int64_t), parameter :: CUCOPY_MEM_ATTR_PINNED = 2
  integer(c_int64_t), parameter :: CUCOPY_MEM_ATTR_DEVICE = 4
  integer(c_int64_t), parameter :: CUCOPY_MEM_ATTR_CONTEXT_ID = 8
  integer(c_int64_t), parameter :: CUCOPY_MEM_ATTR_ALLOCATION = 16
  integer(c_int64_t), parameter :: CUCOPY_MEM_ATTR_FLAGS = 32
  integer(c_int64_t), parameter :: CUCOPY_MEM_ATTR_ACCESS = 64

  ! cucopy_mem_attr_t::flags bits
  integer(c_int64_t), parameter :: CUCOPY_MEM_FLAG_VMM = 1
  integer(c_int64_t), parameter :: CUCOPY_MEM_FLAG_POOL = 2
  integer(c_int64_t), parameter :: CUCOPY_MEM_FLAG_REGISTERED = 4
  integer(c_int64_t), parameter :: CUCOPY_MEM_FLAG_ALLOCATED = 8
  integer(c_int64_t), parameter :: CUCOPY_MEM_FLAG_PREFERRED = 16
  integer(c_int64_t), parameter :: CUCOPY_MEM_FLAG_HOST_LOCATED = 32

  ! cucopy_mem_attr_t::preferred_location values besides device ordinals
  integer(c_int), parameter :: CUCOPY_LOCATION_HOST = -1
  integer(c_int), parameter :: CUCOPY_LOCATION_NONE = -2

  ! cucopy_mem_alloc_params_t field bits
  integer(c_int64_t), parameter :: CUCOPY_MEM_ALLOC_PARAM_LENGTH = 1
  integer(c_int64_t), parameter :: CUCOPY_MEM_ALLOC_PARAM_MEM_TYPE = 2
  integer(c_int64_t), parameter :: CUCOPY_MEM_ALLOC_PARAM_DEVICE = 4
  integer(c_int64_t), parameter :: CUCOPY_MEM_ALLOC_PARAM_FLAGS = 8

  ! cucopy_mem_alloc_params_t::flags bits (unsigned in C)
  integer(c_int), parameter :: CUCOPY_MEM_ALLOC_FLAG_ACTIVATE = 1

  ! cucopy_thread_mode_t
  integer(c_int), parameter :: CUCOPY_THREAD_MODE_SINGLE = 0
  integer(c_int), parameter :: CUCOPY_THREAD_MODE_MULTI = 1

  ! ------------------------------------------- cucopy_iface_params_t
  integer(c_int64_t), parameter :: CUCOPY_IFACE_PARAM_THREAD_MODE = 1
  integer(c_int64_t), parameter :: CUCOPY_IFACE_PARAM_MAX_POLL = 2
  integer(c_int64_t), parameter :: CUCOPY_IFACE_PARAM_MAX_EVENTS = 4

  ! cucopy_iface_attr_t::cap_flags bits
  integer(c_int64_t), parameter :: CUCOPY_IFACE_CAP_PUT_SHORT = 1
  integer(c_int64_t), parameter :: CUCOPY_IFACE_CAP_GET_SHORT = 2
  integer(c_int64_t), parameter :: CUCOPY_IFACE_CAP_PUT_ZCOPY = 4
  integer(c_int64_t), parameter :: CUCOPY_IFACE_CAP_GET_ZCOPY = 8
  integer(c_int64_t), parameter :: CUCOPY_IFACE_CAP_EVENT_FD = 16
  integer(c_int64_t), parameter :: CUCOPY_IFACE_CAP_CROSS_DEVICE = 32
  integer(c_int64_t), parameter :: CUCOPY_IFACE_CAP_CONTEXT_ID = 64

  ! cucopy_iface_attr_t field bits
  integer(c_int64_t), parameter :: CUCOPY_IFACE_ATTR_CAP_FLAGS = 1
  integer(c_int64_t), parameter :: CUCOPY_IFACE_ATTR_MAX_IOV = 2
  integer(c_int64_t), parameter :: CUCOPY_IFACE_ATTR_MAX_POLL = 4
  integer(c_int64_t), parameter :: CUCOPY_IFACE_ATTR_MAX_EVENTS = 8
  integer(c_int64_t), parameter :: CUCOPY_IFACE_ATTR_THREAD_MODE = 16
  integer(c_int64_t), parameter :: CUCOPY_IFACE_ATTR_DEVICE_COUNT = 32

  ! cucopy_dir_t: direction kinds of the statistics (index + 1 of the arrays
  ! of cucopy_iface_stats_t; device arrays: device * CUCOPY_DIR_COUNT + dir + 1)
  integer(c_int), parameter :: CUCOPY_DIR_H2D = 0
  integer(c_int), parameter :: CUCOPY_DIR_D2H = 1
  integer(c_int), parameter :: CUCOPY_DIR_D2D = 2
  integer(c_int), parameter :: CUCOPY_DIR_PEER = 3
  integer(c_int), parameter :: CUCOPY_DIR_HOST = 4
  integer(c_int), parameter :: CUCOPY_DIR_COUNT = 5

  ! cucopy_iface_stats_t field bits
  integer(c_int64_t), parameter :: CUCOPY_IFACE_STATS_EVENTS = 1
  integer(c_int64_t), parameter :: CUCOPY_IFACE_STATS_DIRECTIONS = 2
  integer(c_int64_t), parameter :: CUCOPY_IFACE_STATS_DEVICES = 4
  integer(c_int64_t), parameter :: CUCOPY_IFACE_STATS_CONTEXTS = 8
  integer(c_int64_t), parameter :: CUCOPY_IFACE_STATS_INCARNATIONS = 16
  ! cucopy_incarnation_state_t
  integer(c_int), parameter :: CUCOPY_INCARNATION_LIVE = 0
  integer(c_int), parameter :: CUCOPY_INCARNATION_RELEASED = 1
  integer(c_int), parameter :: CUCOPY_INCARNATION_RESET = 2
  integer(c_int), parameter :: CUCOPY_MAX_ENDED_INCARNATIONS = 1024

  ! ---------------------------------------------- performance model
  ! host memory near its GPU (the device argument of cucopy_iface_estimate)
  integer(c_int), parameter :: CUCOPY_NUMA_ANY = -1
  ! cucopy_iface_estimate() flags (unsigned in C)
  integer(c_int), parameter :: CUCOPY_ESTIMATE_SRC_PINNED = 1
  integer(c_int), parameter :: CUCOPY_ESTIMATE_DST_PINNED = 2
  integer(c_int), parameter :: CUCOPY_ESTIMATE_CALIBRATE = 4
  ! cucopy_estimate_source_t
  integer(c_int), parameter :: CUCOPY_ESTIMATE_SOURCE_MODEL = 0
  integer(c_int), parameter :: CUCOPY_ESTIMATE_SOURCE_CALIBRATED = 1
  ! cucopy_path_t
  integer(c_int), parameter :: CUCOPY_PATH_CPU = 0
  integer(c_int), parameter :: CUCOPY_PATH_PCIE = 1
  integer(c_int), parameter :: CUCOPY_PATH_PCIE_STAGED = 2
  integer(c_int), parameter :: CUCOPY_PATH_DEVICE = 3
  integer(c_int), parameter :: CUCOPY_PATH_NVLINK = 4
  integer(c_int), parameter :: CUCOPY_PATH_PCIE_PEER = 5
  integer(c_int), parameter :: CUCOPY_PATH_HOST_STAGED = 6
  ! cucopy_estimate_attr_t field bits
  integer(c_int64_t), parameter :: CUCOPY_ESTIMATE_ATTR_LATENCY = 1
  integer(c_int64_t), parameter :: CUCOPY_ESTIMATE_ATTR_BANDWIDTH = 2
  integer(c_int64_t), parameter :: CUCOPY_ESTIMATE_ATTR_TIME = 4
  integer(c_int64_t), parameter :: CUCOPY_ESTIMATE_ATTR_SOURCE = 8
  integer(c_int64_t), parameter :: CUCOPY_ESTIMATE_ATTR_PATH = 16
  integer(c_int64_t), parameter :: CUCOPY_ESTIMATE_ATTR_NUMA_REMOTE = 32

  ! cucopy_iface_event_arm() events (unsigned in C)
  integer(c_int), parameter :: CUCOPY_EVENT_SEND_COMP = 1

  ! ------------------------------------------------------------ structs
  !> struct cucopy_incarnation_stats: one life of a (CUDA context, lane);
  !> arrays indexed by CUCOPY_DIR_H2D .. CUCOPY_DIR_PEER, + 1.
  type, bind(C) :: cucopy_incarnation_stats_t
    integer(c_int64_t) :: serial
    integer(c_int64_t) :: context_id
    integer(c_int) :: device
    integer(c_int) :: lane
    integer(c_int) :: state
    integer(c_int) :: reserved
    integer(c_int64_t) :: operations(4)
    integer(c_int64_t) :: pieces(4)
    integer(c_int64_t) :: bytes(4)
  end type cucopy_incarnation_stats_t

  !> struct cucopy_iface_stats (cucopy_iface_stats()); incarnations: c_loc of
  !> an array of cucopy_incarnation_stats_t, or c_null_ptr.
  type, bind(C) :: cucopy_iface_stats_t
    integer(c_int64_t) :: field_mask
    integer(c_int64_t) :: no_resource
    integer(c_int64_t) :: flushes
    integer(c_int64_t) :: fences
    integer(c_int64_t) :: dir_operations(5)
    integer(c_int64_t) :: dir_pieces(5)
    integer(c_int64_t) :: dir_bytes(5)
    integer(c_int) :: device_count
    integer(c_int64_t) :: device_operations(320)
    integer(c_int64_t) :: device_pieces(320)
    integer(c_int64_t) :: device_bytes(320)
    integer(c_int64_t) :: contexts_seen
    integer(c_int64_t) :: contexts_released
    integer(c_int64_t) :: contexts_reset
    type(c_ptr) :: incarnations
    integer(c_size_t) :: incarnations_capacity
    integer(c_size_t) :: incarnations_count
    integer(c_int64_t) :: incarnations_dropped
  end type cucopy_iface_stats_t

  !> struct cucopy_estimate_attr (cucopy_iface_estimate()): seconds and bytes per second.
  type, bind(C) :: cucopy_estimate_attr_t
    integer(c_int64_t) :: field_mask
    real(c_double) :: latency
    real(c_double) :: bandwidth
    real(c_double) :: time
    integer(c_int) :: source
    integer(c_int) :: path
    integer(c_int) :: path_gen
    integer(c_int) :: path_width
    integer(c_int) :: numa_remote
  end type cucopy_estimate_attr_t

  !> struct cucopy_completion: func(self) runs once count reaches 0.
  type, bind(C) :: cucopy_completion_t
    type(c_funptr) :: func
    integer(c_int) :: count
    integer(c_int) :: status
  end type cucopy_completion_t

  !> struct cucopy_iov: one contiguous piece of local memory.
  type, bind(C) :: cucopy_iov_t
    type(c_ptr) :: buffer
    integer(c_size_t) :: length
  end type cucopy_iov_t

  !> struct cucopy_iov_memh: an iov entry with its buffer's memory handle.
  type, bind(C) :: cucopy_iov_memh_t
    type(c_ptr) :: buffer
    integer(c_size_t) :: length
    type(c_ptr) :: memh
  end type cucopy_iov_memh_t

  !> struct cucopy_copy: one entry of cucopy_ep_copy_batch.
  type, bind(C) :: cucopy_copy_t
    type(c_ptr) :: dst
    type(c_ptr) :: src
    integer(c_size_t) :: length
    type(c_ptr) :: dst_memh
    type(c_ptr) :: src_memh
  end type cucopy_copy_t

  !> struct cucopy_copy_2d: one entry of cucopy_ep_copy_2d, height rows of
  !> width bytes, row i at dst + i * dst_pitch and src + i * src_pitch.
  type, bind(C) :: cucopy_copy_2d_t
    type(c_ptr) :: dst
    integer(c_size_t) :: dst_pitch
    type(c_ptr) :: src
    integer(c_size_t) :: src_pitch
    integer(c_size_t) :: width
    integer(c_size_t) :: height
    type(c_ptr) :: dst_memh
    type(c_ptr) :: src_memh
  end type cucopy_copy_2d_t

  type, bind(C) :: cucopy_context_params_t
    integer(c_int64_t) :: field_mask
    type(c_ptr) :: driver_path
    integer(c_int) :: log_level
  end type cucopy_context_params_t

  !> What one device is. name and pci_bus_id are NUL-terminated C strings:
  !> cucopy_chars(attr%name) gives a Fortran string; cucopy_uuid_str(attr%uuid)
  !> the UUID as nvidia-smi prints it.
  type, bind(C) :: cucopy_device_attr_t
    integer(c_int64_t) :: field_mask
    character(kind=c_char) :: name(256)
    integer(c_int8_t) :: uuid(16)
    character(kind=c_char) :: pci_bus_id(32)
    integer(c_int) :: numa_node
    integer(c_int64_t) :: total_memory
    integer(c_int) :: cc_major
    integer(c_int) :: cc_minor
    integer(c_int64_t) :: peer_mask
    integer(c_int) :: primary_active
  end type cucopy_device_attr_t

  type, bind(C) :: cucopy_peer_attr_t
    integer(c_int64_t) :: field_mask
    integer(c_int) :: can_access
    integer(c_int) :: access_supported
    integer(c_int) :: native_atomics
    integer(c_int) :: performance_rank
  end type cucopy_peer_attr_t

  type, bind(C) :: cucopy_mem_attr_t
    integer(c_int64_t) :: field_mask
    integer(c_int) :: mem_type
    integer(c_int) :: pinned
    integer(c_int) :: device
    integer(c_int64_t) :: context_id
    integer(c_int64_t) :: base_address
    integer(c_size_t) :: alloc_length
    integer(c_int64_t) :: flags
    integer(c_int) :: preferred_location
    integer(c_int64_t) :: access_mask
  end type cucopy_mem_attr_t

  type, bind(C) :: cucopy_mem_alloc_params_t
    integer(c_int64_t) :: field_mask
    integer(c_size_t) :: length
    integer(c_int) :: mem_type
    integer(c_int) :: device
    integer(c_int) :: flags
  end type cucopy_mem_alloc_params_t

  type, bind(C) :: cucopy_iface_params_t
    integer(c_int64_t) :: field_mask
    integer(c_int) :: thread_mode
    integer(c_int) :: max_poll
    integer(c_int) :: max_events
  end type cucopy_iface_params_t

  type, bind(C) :: cucopy_iface_attr_t
    integer(c_int64_t) :: field_mask
    integer(c_int64_t) :: cap_flags
    integer(c_size_t) :: max_iov
    integer(c_int) :: max_poll
    integer(c_int) :: max_events
    integer(c_int) :: thread_mode
    integer(c_int) :: device_count
  end type cucopy_iface_attr_t

  ! ------------------------------------------------- helper types
  !> A completion that counts its firings. Give the variable the TARGET
  !> attribute, keep it in scope until it fired; see the module header.
  type, bind(C) :: cucopy_f_completion
    type(cucopy_completion_t) :: comp   ! first: its address is the object's
    integer(c_int) :: fired             ! times comp%func ran
    integer(c_int) :: expected          ! count given to cucopy_f_completion_init
  end type cucopy_f_completion

  ! ------------------------------------------------- cucopy_iov()
  interface cucopy_iov
    module procedure cucopy_iov_ptr4, cucopy_iov_ptr8, cucopy_iov_addr4, cucopy_iov_addr8
  end interface cucopy_iov

  ! ------------------------------------------------------ the C ABI
  interface

    ! ------------------------------------------ version and errors
    function cucopy_get_version() bind(C, name="cucopy_get_version") result(version)
      import :: c_int
      integer(c_int) :: version
    end function cucopy_get_version

    function cucopy_status_string(status) bind(C, name="cucopy_status_string") result(str)
      import :: c_int, c_ptr
      integer(c_int), value :: status
      type(c_ptr) :: str
    end function cucopy_status_string

    function cucopy_last_error() bind(C, name="cucopy_last_error") result(str)
      import :: c_ptr
      type(c_ptr) :: str
    end function cucopy_last_error

    ! --------------------------------------------------- context
    function cucopy_context_create(params, ctx_p) &
        bind(C, name="cucopy_context_create") result(status)
      import :: c_int, c_ptr, cucopy_context_params_t
      type(cucopy_context_params_t), intent(in), optional :: params
      type(c_ptr), intent(out) :: ctx_p
      integer(c_int) :: status
    end function cucopy_context_create

    function cucopy_context_destroy(ctx) bind(C, name="cucopy_context_destroy") result(status)
      import :: c_int, c_ptr
      type(c_ptr), value :: ctx
      integer(c_int) :: status
    end function cucopy_context_destroy

    function cucopy_device_count(ctx, count) bind(C, name="cucopy_device_count") result(status)
      import :: c_int, c_ptr
      type(c_ptr), value :: ctx
      integer(c_int), intent(out) :: count
      integer(c_int) :: status
    end function cucopy_device_count

    ! --------------------------------------------- devices, topology
    function cucopy_device_query(ctx, ordinal, attr) &
        bind(C, name="cucopy_device_query") result(status)
      import :: c_int, c_ptr, cucopy_device_attr_t
      type(c_ptr), value :: ctx
      integer(c_int), value :: ordinal
      type(cucopy_device_attr_t), intent(inout) :: attr
      integer(c_int) :: status
    end function cucopy_device_query

    function cucopy_device_peer_query(ctx, device, peer, attr) &
        bind(C, name="cucopy_device_peer_query") result(status)
      import :: c_int, c_ptr, cucopy_peer_attr_t
      type(c_ptr), value :: ctx
      integer(c_int), value :: device
      integer(c_int), value :: peer
      type(cucopy_peer_attr_t), intent(inout) :: attr
      integer(c_int) :: status
    end function cucopy_device_peer_query

    ! --------------------------------------------- memory domain
    !> addr: c_loc(x) of a host variable, or cucopy_addr_ptr(a) of an address.
    function cucopy_mem_query(ctx, addr, length, attr) &
        bind(C, name="cucopy_mem_query") result(status)
      import :: c_int, c_ptr, c_size_t, cucopy_mem_attr_t
      type(c_ptr), value :: ctx
      type(c_ptr), value :: addr
      integer(c_size_t), value :: length
      type(cucopy_mem_attr_t), intent(inout) :: attr
      integer(c_int) :: status
    end function cucopy_mem_query

    !> addr_p receives the memory's address; cucopy_ptr_addr(addr_p) gives
    !> it as integer(c_int64_t). See also cucopy_f_mem_alloc().
    function cucopy_mem_alloc(ctx, params, addr_p) &
        bind(C, name="cucopy_mem_alloc") result(status)
      import :: c_int, c_ptr, cucopy_mem_alloc_params_t
      type(c_ptr), value :: ctx
      type(cucopy_mem_alloc_params_t), intent(in) :: params
      type(c_ptr), intent(out) :: addr_p
      integer(c_int) :: status
    end function cucopy_mem_alloc

    function cucopy_mem_free(ctx, addr) bind(C, name="cucopy_mem_free") result(status)
      import :: c_int, c_ptr
      type(c_ptr), value :: ctx
      type(c_ptr), value :: addr
      integer(c_int) :: status
    end function cucopy_mem_free

    function cucopy_mem_reg(ctx, addr, length, flags, memh_p) &
        bind(C, name="cucopy_mem_reg") result(status)
      import :: c_int, c_ptr, c_size_t
      type(c_ptr), value :: ctx
      type(c_ptr), value :: addr
      integer(c_size_t), value :: length
      integer(c_int), value :: flags
      type(c_ptr), intent(out) :: memh_p
      integer(c_int) :: status
    end function cucopy_mem_reg

    function cucopy_mem_dereg(ctx, memh) bind(C, name="cucopy_mem_dereg") result(status)
      import :: c_int, c_ptr
      type(c_ptr), value :: ctx
      type(c_ptr), value :: memh
      integer(c_int) :: status
    end function cucopy_mem_dereg

    function cucopy_mem_describe(ctx, addr, length, memh_p) &
        bind(C, name="cucopy_mem_describe") result(status)
      import :: c_int, c_ptr, c_size_t
      type(c_ptr), value :: ctx
      type(c_ptr), value :: addr
      integer(c_size_t), value :: length
      type(c_ptr), intent(out) :: memh_p
      integer(c_int) :: status
    end function cucopy_mem_describe

    ! --------------------------------------------------- interface
    function cucopy_iface_open(ctx, params, iface_p) &
        bind(C, name="cucopy_iface_open") result(status)
      import :: c_int, c_ptr, cucopy_iface_params_t
      type(c_ptr), value :: ctx
      type(cucopy_iface_params_t), intent(in), optional :: params
      type(c_ptr), intent(out) :: iface_p
      integer(c_int) :: status
    end function cucopy_iface_open

    function cucopy_iface_close(iface) bind(C, name="cucopy_iface_close") result(status)
      import :: c_int, c_ptr
      type(c_ptr), value :: iface
      integer(c_int) :: status
    end function cucopy_iface_close

    function cucopy_iface_query(iface, attr) bind(C, name="cucopy_iface_query") result(status)
      import :: c_int, c_ptr, cucopy_iface_attr_t
      type(c_ptr), value :: iface
      type(cucopy_iface_attr_t), intent(inout) :: attr
      integer(c_int) :: status
    end function cucopy_iface_query

    !> Number of operations completed (>= 0), or a negative status.
    function cucopy_iface_progress(iface) bind(C, name="cucopy_iface_progress") result(n)
      import :: c_int, c_ptr
      type(c_ptr), value :: iface
      integer(c_int) :: n
    end function cucopy_iface_progress

    function cucopy_iface_flush(iface, flags, comp) &
        bind(C, name="cucopy_iface_flush") result(status)
      import :: c_int, c_ptr
      type(c_ptr), value :: iface
      integer(c_int), value :: flags
      type(c_ptr), value :: comp
      integer(c_int) :: status
    end function cucopy_iface_flush

    function cucopy_iface_fence(iface, flags) bind(C, name="cucopy_iface_fence") result(status)
      import :: c_int, c_ptr
      type(c_ptr), value :: iface
      integer(c_int), value :: flags
      integer(c_int) :: status
    end function cucopy_iface_fence

    function cucopy_iface_event_fd(iface, fd_p) bind(C, name="cucopy_iface_event_fd") result(status)
      import :: c_int, c_ptr
      type(c_ptr), value :: iface
      integer(c_int), intent(out) :: fd_p
      integer(c_int) :: status
    end function cucopy_iface_event_fd

    function cucopy_iface_event_arm(iface, events) &
        bind(C, name="cucopy_iface_event_arm") result(status)
      import :: c_int, c_ptr
      type(c_ptr), value :: iface
      integer(c_int), value :: events
      integer(c_int) :: status
    end function cucopy_iface_event_arm

    ! Release one CUDA context's resources now (before destroying a
    ! context the program created); cuda_ctx_id from cuCtxGetId.
    function cucopy_iface_release_context(iface, cuda_ctx_id) &
        bind(C, name="cucopy_iface_release_context") result(status)
      import :: c_int, c_ptr, c_int64_t
      type(c_ptr), value :: iface
      integer(c_int64_t), value :: cuda_ctx_id
      integer(c_int) :: status
    end function cucopy_iface_release_context

    function cucopy_iface_stats(iface, stats) bind(C, name="cucopy_iface_stats") result(status)
      import :: c_int, c_ptr, cucopy_iface_stats_t
      type(c_ptr), value :: iface
      type(cucopy_iface_stats_t), intent(inout) :: stats
      integer(c_int) :: status
    end function cucopy_iface_stats

    !> src_type, dst_type: CUCOPY_MEMORY_TYPE_*; src_device, dst_device: a device
    !> ordinal, or for host memory a NUMA node or CUCOPY_NUMA_ANY; flags:
    !> CUCOPY_ESTIMATE_*.
    function cucopy_iface_estimate(iface, src_type, src_device, dst_type, dst_device, length, &
        flags, attr) bind(C, name="cucopy_iface_estimate") result(status)
      import :: c_int, c_ptr, c_size_t, cucopy_estimate_attr_t
      type(c_ptr), value :: iface
      integer(c_int), value :: src_type
      integer(c_int), value :: src_device
      integer(c_int), value :: dst_type
      integer(c_int), value :: dst_device
      integer(c_size_t), value :: length
      integer(c_int), value :: flags
      type(cucopy_estimate_attr_t), intent(inout) :: attr
      integer(c_int) :: status
    end function cucopy_iface_estimate

    ! ---------------------------------------------------- endpoint
    function cucopy_ep_create(iface, ep_p) bind(C, name="cucopy_ep_create") result(status)
      import :: c_int, c_ptr
      type(c_ptr), value :: iface
      type(c_ptr), intent(out) :: ep_p
      integer(c_int) :: status
    end function cucopy_ep_create

    function cucopy_ep_destroy(ep) bind(C, name="cucopy_ep_destroy") result(status)
      import :: c_int, c_ptr
      type(c_ptr), value :: ep
      integer(c_int) :: status
    end function cucopy_ep_destroy

    function cucopy_ep_put_short(ep, buffer, length, remote_addr) &
        bind(C, name="cucopy_ep_put_short") result(status)
      import :: c_int, c_ptr, c_size_t, c_int64_t
      type(c_ptr), value :: ep
      type(c_ptr), value :: buffer
      integer(c_size_t), value :: length
      integer(c_int64_t), value :: remote_addr
      integer(c_int) :: status
    end function cucopy_ep_put_short

    function cucopy_ep_get_short(ep, buffer, length, remote_addr) &
        bind(C, name="cucopy_ep_get_short") result(status)
      import :: c_int, c_ptr, c_size_t, c_int64_t
      type(c_ptr), value :: ep
      type(c_ptr), value :: buffer
      integer(c_size_t), value :: length
      integer(c_int64_t), value :: remote_addr
      integer(c_int) :: status
    end function cucopy_ep_get_short

    function cucopy_ep_put_zcopy(ep, iov, iovcnt, remote_addr, comp) &
        bind(C, name="cucopy_ep_put_zcopy") result(status)
      import :: c_int, c_ptr, c_size_t, c_int64_t, cucopy_iov_t
      type(c_ptr), value :: ep
      type(cucopy_iov_t), intent(in) :: iov(*)
      integer(c_size_t), value :: iovcnt
      integer(c_int64_t), value :: remote_addr
      type(c_ptr), value :: comp
      integer(c_int) :: status
    end function cucopy_ep_put_zcopy

    function cucopy_ep_get_zcopy(ep, iov, iovcnt, remote_addr, comp) &
        bind(C, name="cucopy_ep_get_zcopy") result(status)
      import :: c_int, c_ptr, c_size_t, c_int64_t, cucopy_iov_t
      type(c_ptr), value :: ep
      type(cucopy_iov_t), intent(in) :: iov(*)
      integer(c_size_t), value :: iovcnt
      integer(c_int64_t), value :: remote_addr
      type(c_ptr), value :: comp
      integer(c_int) :: status
    end function cucopy_ep_get_zcopy

    function cucopy_ep_put_short_memh(ep, buffer, memh, length, remote_addr, remote_memh) &
        bind(C, name="cucopy_ep_put_short_memh") result(status)
      import :: c_int, c_ptr, c_size_t, c_int64_t
      type(c_ptr), value :: ep
      type(c_ptr), value :: buffer
      type(c_ptr), value :: memh
      integer(c_size_t), value :: length
      integer(c_int64_t), value :: remote_addr
      type(c_ptr), value :: remote_memh
      integer(c_int) :: status
    end function cucopy_ep_put_short_memh

    function cucopy_ep_get_short_memh(ep, buffer, memh, length, remote_addr, remote_memh) &
        bind(C, name="cucopy_ep_get_short_memh") result(status)
      import :: c_int, c_ptr, c_size_t, c_int64_t
      type(c_ptr), value :: ep
      type(c_ptr), value :: buffer
      type(c_ptr), value :: memh
      integer(c_size_t), value :: length
      integer(c_int64_t), value :: remote_addr
      type(c_ptr), value :: remote_memh
      integer(c_int) :: status
    end function cucopy_ep_get_short_memh

    function cucopy_ep_put_zcopy_memh(ep, iov, iovcnt, remote_addr, remote_memh, comp) &
        bind(C, name="cucopy_ep_put_zcopy_memh") result(status)
      import :: c_int, c_ptr, c_size_t, c_int64_t, cucopy_iov_memh_t
      type(c_ptr), value :: ep
      type(cucopy_iov_memh_t), intent(in) :: iov(*)
      integer(c_size_t), value :: iovcnt
      integer(c_int64_t), value :: remote_addr
      type(c_ptr), value :: remote_memh
      type(c_ptr), value :: comp
      integer(c_int) :: status
    end function cucopy_ep_put_zcopy_memh

    function cucopy_ep_get_zcopy_memh(ep, iov, iovcnt, remote_addr, remote_memh, comp) &
        bind(C, name="cucopy_ep_get_zcopy_memh") result(status)
      import :: c_int, c_ptr, c_size_t, c_int64_t, cucopy_iov_memh_t
      type(c_ptr), value :: ep
      type(cucopy_iov_memh_t), intent(in) :: iov(*)
      integer(c_size_t), value :: iovcnt
      integer(c_int64_t), value :: remote_addr
      type(c_ptr), value :: remote_memh
      type(c_ptr), value :: comp
      integer(c_int) :: status
    end function cucopy_ep_get_zcopy_memh

    function cucopy_ep_copy_batch(ep, copies, count, comp) &
        bind(C, name="cucopy_ep_copy_batch") result(status)
      import :: c_int, c_ptr, c_size_t, cucopy_copy_t
      type(c_ptr), value :: ep
      type(cucopy_copy_t), intent(in) :: copies(*)
      integer(c_size_t), value :: count
      type(c_ptr), value :: comp
      integer(c_int) :: status
    end function cucopy_ep_copy_batch

    function cucopy_ep_copy_2d(ep, copies, count, comp) &
        bind(C, name="cucopy_ep_copy_2d") result(status)
      import :: c_int, c_ptr, c_size_t, cucopy_copy_2d_t
      type(c_ptr), value :: ep
      type(cucopy_copy_2d_t), intent(in) :: copies(*)
      integer(c_size_t), value :: count
      type(c_ptr), value :: comp
      integer(c_int) :: status
    end function cucopy_ep_copy_2d

    function cucopy_ep_flush(ep, flags, comp) bind(C, name="cucopy_ep_flush") result(status)
      import :: c_int, c_ptr
      type(c_ptr), value :: ep
      integer(c_int), value :: flags
      type(c_ptr), value :: comp
      integer(c_int) :: status
    end function cucopy_ep_flush

    function cucopy_ep_fence(ep, flags) bind(C, name="cucopy_ep_fence") result(status)
      import :: c_int, c_ptr
      type(c_ptr), value :: ep
      integer(c_int), value :: flags
      integer(c_int) :: status
    end function cucopy_ep_fence

    ! ------------------------------------------- libc (private)
    function c_strlen(s) bind(C, name="strlen") result(n)
      import :: c_ptr, c_size_t
      type(c_ptr), value :: s
      integer(c_size_t) :: n
    end function c_strlen

  end interface

contains

  ! ------------------------------------------------------ strings

  !> A NUL-terminated C string as a Fortran string ("" for c_null_ptr).
  function cucopy_string(p) result(s)
    type(c_ptr), intent(in) :: p
    character(len=:), allocatable :: s
    character(kind=c_char), pointer :: chars(:)
    integer(c_size_t) :: n, i
    if (.not. c_associated(p)) then
      s = ""
      return
    end if
    n = c_strlen(p)
    call c_f_pointer(p, chars, [n])
    allocate(character(len=n) :: s)
    do i = 1, n
      s(i:i) = chars(i)
    end do
  end function cucopy_string

  !> A Fortran string as a NUL-terminated C string (keep it, with TARGET, as
  !> long as C may read it; c_loc(x) gives the char pointer).
  function cucopy_c_string(s) result(c)
    character(len=*), intent(in) :: s
    character(kind=c_char), allocatable :: c(:)
    integer :: i
    allocate(c(len(s) + 1))
    do i = 1, len(s)
      c(i) = s(i:i)
    end do
    c(len(s) + 1) = c_null_char
  end function cucopy_c_string

  !> A C char array (e.g. an attr name field) up to its first NUL.
  function cucopy_chars(chars) result(s)
    character(kind=c_char), intent(in) :: chars(:)
    character(len=:), allocatable :: s
    integer :: n, i
    n = size(chars)
    do i = 1, size(chars)
      if (chars(i) == c_null_char) then
        n = i - 1
        exit
      end if
    end do
    allocate(character(len=n) :: s)
    do i = 1, n
      s(i:i) = chars(i)
    end do
  end function cucopy_chars

  !> A 16-byte UUID (cucopy_device_attr_t%uuid) as nvidia-smi prints it:
  !> "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", lower-case hex.
  function cucopy_uuid_str(uuid) result(s)
    integer(c_int8_t), intent(in) :: uuid(16)
    character(len=40) :: s
    character(len=16), parameter :: hex = "0123456789abcdef"
    integer :: i, b, k
    s = "GPU-"
    k = 5
    do i = 1, 16
      b = iand(int(uuid(i)), 255)
      s(k:k) = hex(b / 16 + 1:b / 16 + 1)
      s(k + 1:k + 1) = hex(mod(b, 16) + 1:mod(b, 16) + 1)
      k = k + 2
      if (i == 4 .or. i == 6 .or. i == 8 .or. i == 10) then
        s(k:k) = "-"
        k = k + 1
      end if
    end do
  end function cucopy_uuid_str

  !> cucopy_status_string(status) as a Fortran string.
  function cucopy_status_str(status) result(s)
    integer(c_int), intent(in) :: status
    character(len=:), allocatable :: s
    s = cucopy_string(cucopy_status_string(status))
  end function cucopy_status_str

  !> cucopy_last_error() of the calling thread as a Fortran string.
  function cucopy_last_error_str() result(s)
    character(len=:), allocatable :: s
    s = cucopy_string(cucopy_last_error())
  end function cucopy_last_error_str

  !> .true. (after printing what, the status and the last error to stderr)
  !> when status is an error (< 0); .false. for OK, INPROGRESS and counts.
  function cucopy_failed(status, what) result(failed)
    use, intrinsic :: iso_fortran_env, only: error_unit
    integer(c_int), intent(in) :: status
    character(len=*), intent(in) :: what
    logical :: failed
    failed = status < 0
    if (failed) then
      write(error_unit, '(a)') what // ": " // cucopy_status_str(status) // &
          " (" // cucopy_last_error_str() // ")"
    end if
  end function cucopy_failed

  !> Stop the program (error stop 1) with a message when status is an error.
  subroutine cucopy_check(status, what)
    integer(c_int), intent(in) :: status
    character(len=*), intent(in) :: what
    if (cucopy_failed(status, what)) error stop 1
  end subroutine cucopy_check

  ! ------------------------------------------------------ addresses

  !> Address of a contiguous host variable or array (TARGET) as the 64-bit
  !> integer remote_addr takes.
  function cucopy_addr(x) result(addr)
    type(*), dimension(..), target, intent(in) :: x
    integer(c_int64_t) :: addr
    addr = transfer(c_loc(x), 0_c_int64_t)
  end function cucopy_addr

  !> A c_ptr as a 64-bit address (0 for c_null_ptr).
  elemental function cucopy_ptr_addr(p) result(addr)
    type(c_ptr), intent(in) :: p
    integer(c_int64_t) :: addr
    addr = transfer(p, 0_c_int64_t)
  end function cucopy_ptr_addr

  !> A 64-bit address (e.g. of device memory) as a c_ptr, for buffer
  !> arguments and iov entries. Never dereference it in Fortran.
  elemental function cucopy_addr_ptr(addr) result(p)
    integer(c_int64_t), intent(in) :: addr
    type(c_ptr) :: p
    p = transfer(addr, c_null_ptr)
  end function cucopy_addr_ptr

  ! ------------------------------------------------------ iov
  function cucopy_iov_ptr8(buffer, length) result(iov)
    type(c_ptr), intent(in) :: buffer
    integer(c_int64_t), intent(in) :: length
    type(cucopy_iov_t) :: iov
    iov%buffer = buffer
    iov%length = int(length, c_size_t)
  end function cucopy_iov_ptr8

  function cucopy_iov_ptr4(buffer, length) result(iov)
    type(c_ptr), intent(in) :: buffer
    integer(c_int32_t), intent(in) :: length
    type(cucopy_iov_t) :: iov
    iov%buffer = buffer
    iov%length = int(length, c_size_t)
  end function cucopy_iov_ptr4

  function cucopy_iov_addr8(addr, length) result(iov)
    integer(c_int64_t), intent(in) :: addr
    integer(c_int64_t), intent(in) :: length
    type(cucopy_iov_t) :: iov
    iov%buffer = cucopy_addr_ptr(addr)
    iov%length = int(length, c_size_t)
  end function cucopy_iov_addr8

  function cucopy_iov_addr4(addr, length) result(iov)
    integer(c_int64_t), intent(in) :: addr
    integer(c_int32_t), intent(in) :: length
    type(cucopy_iov_t) :: iov
    iov%buffer = cucopy_addr_ptr(addr)
    iov%length = int(length, c_size_t)
  end function cucopy_iov_addr4

  ! ------------------------------------------------------ completions

  !> The callback of cucopy_f_completion: counts one firing. self is the
  !> address of the cucopy_completion_t, the first component of the object.
  subroutine cucopy_f_completion_fire(self) bind(C, name="")
    type(c_ptr), value :: self
    type(cucopy_f_completion), pointer :: c
    call c_f_pointer(self, c)
    c%fired = c%fired + 1
  end subroutine cucopy_f_completion_fire

  !> Prepare c for count operations (comp%count = count, status OK, fired 0).
  subroutine cucopy_f_completion_init(c, count)
    type(cucopy_f_completion), target, intent(inout) :: c
    integer, intent(in) :: count
    c%comp%func = c_funloc(cucopy_f_completion_fire)
    c%comp%count = int(count, c_int)
    c%comp%status = CUCOPY_OK
    c%fired = 0
    c%expected = int(count, c_int)
  end subroutine cucopy_f_completion_init

  !> Account for the status an operation given c returned. CUCOPY_INPROGRESS:
  !> it will report through the callback. Anything else (OK: finished now;
  !> an error): it never reports, so count drops by one here and an error is
  !> recorded (first error wins); when count reaches 0 this way, c counts as
  !> fired. So: init with the number of operations, account each status,
  !> wait.
  subroutine cucopy_f_completion_account(c, status)
    type(cucopy_f_completion), target, intent(inout) :: c
    integer(c_int), intent(in) :: status
    if (status == CUCOPY_INPROGRESS) return
    if (status < 0 .and. c%comp%status == CUCOPY_OK) c%comp%status = status
    c%comp%count = c%comp%count - 1
    if (c%comp%count == 0) c%fired = c%fired + 1
  end subroutine cucopy_f_completion_account

  !> The cucopy_completion_t * to pass as comp (c must be a TARGET).
  function cucopy_f_completion_ptr(c) result(p)
    type(cucopy_f_completion), target, intent(inout) :: c
    type(c_ptr) :: p
    p = c_loc(c%comp)
  end function cucopy_f_completion_ptr

  !> .true. once the callback ran.
  function cucopy_f_completion_done(c) result(done)
    type(cucopy_f_completion), target, intent(in) :: c
    logical :: done
    done = c%fired > 0
  end function cucopy_f_completion_done

  !> Call cucopy_iface_progress() until c fired. Returns c%comp%status once
  !> it fired, a negative progress status if progress failed, or
  !> CUCOPY_INPROGRESS when timeout_s seconds passed first.
  function cucopy_f_completion_wait(iface, c, timeout_s) result(status)
    type(c_ptr), intent(in) :: iface
    type(cucopy_f_completion), target, intent(inout) :: c
    double precision, intent(in) :: timeout_s
    integer(c_int) :: status
    integer(c_int) :: n
    integer(c_int64_t) :: t0, t, rate
    call system_clock(t0, rate)
    do
      if (c%fired > 0) then
        status = c%comp%status
        return
      end if
      n = cucopy_iface_progress(iface)
      if (n < 0) then
        status = n
        return
      end if
      if (c%fired > 0) cycle
      call system_clock(t)
      if (dble(t - t0) / dble(rate) > timeout_s) then
        status = CUCOPY_INPROGRESS
        return
      end if
    end do
  end function cucopy_f_completion_wait

  ! ------------------------------------------------------ create/open

  !> cucopy_context_create() with optional driver path and log level.
  function cucopy_f_context_create(ctx, driver_path, log_level) result(status)
    type(c_ptr), intent(out) :: ctx
    character(len=*), intent(in), optional :: driver_path
    integer(c_int), intent(in), optional :: log_level
    integer(c_int) :: status
    type(cucopy_context_params_t) :: params
    character(kind=c_char), allocatable, target :: path(:)
    params%field_mask = 0
    params%driver_path = c_null_ptr
    params%log_level = CUCOPY_LOG_WARN
    if (present(driver_path)) then
      allocate(path(len(driver_path) + 1))
      path(:) = cucopy_c_string(driver_path)
      params%driver_path = c_loc(path)
      params%field_mask = ior(params%field_mask, CUCOPY_CONTEXT_PARAM_DRIVER_PATH)
    end if
    if (present(log_level)) then
      params%log_level = log_level
      params%field_mask = ior(params%field_mask, CUCOPY_CONTEXT_PARAM_LOG_LEVEL)
    end if
    status = cucopy_context_create(params, ctx)
  end function cucopy_f_context_create

  !> cucopy_mem_alloc() of length bytes; addr receives the address as a
  !> 64-bit integer (device memory is never dereferenced in Fortran: pass it
  !> as remote_addr, or cucopy_addr_ptr(addr) as a buffer). mem_type default
  !> CUCOPY_MEMORY_TYPE_CUDA; device default: the current context's device;
  !> flags e.g. CUCOPY_MEM_ALLOC_FLAG_ACTIVATE. Free with cucopy_f_mem_free.
  function cucopy_f_mem_alloc(ctx, length, addr, mem_type, device, flags) result(status)
    type(c_ptr), intent(in) :: ctx
    integer(c_size_t), intent(in) :: length
    integer(c_int64_t), intent(out) :: addr
    integer(c_int), intent(in), optional :: mem_type, device, flags
    integer(c_int) :: status
    type(cucopy_mem_alloc_params_t) :: params
    type(c_ptr) :: p
    params%field_mask = CUCOPY_MEM_ALLOC_PARAM_LENGTH
    params%length = length
    params%mem_type = CUCOPY_MEMORY_TYPE_CUDA
    params%device = 0
    params%flags = 0
    if (present(mem_type)) then
      params%mem_type = mem_type
      params%field_mask = ior(params%field_mask, CUCOPY_MEM_ALLOC_PARAM_MEM_TYPE)
    end if
    if (present(device)) then
      params%device = device
      params%field_mask = ior(params%field_mask, CUCOPY_MEM_ALLOC_PARAM_DEVICE)
    end if
    if (present(flags)) then
      params%flags = flags
      params%field_mask = ior(params%field_mask, CUCOPY_MEM_ALLOC_PARAM_FLAGS)
    end if
    p = c_null_ptr
    status = cucopy_mem_alloc(ctx, params, p)
    addr = cucopy_ptr_addr(p)
  end function cucopy_f_mem_alloc

  !> cucopy_mem_free() of an address from cucopy_f_mem_alloc().
  function cucopy_f_mem_free(ctx, addr) result(status)
    type(c_ptr), intent(in) :: ctx
    integer(c_int64_t), intent(in) :: addr
    integer(c_int) :: status
    status = cucopy_mem_free(ctx, cucopy_addr_ptr(addr))
  end function cucopy_f_mem_free

  !> cucopy_iface_open() with optional thread mode, max_poll, max_events.
  function cucopy_f_iface_open(ctx, iface, thread_mode, max_poll, max_events) result(status)
    type(c_ptr), intent(in) :: ctx
    type(c_ptr), intent(out) :: iface
    integer(c_int), intent(in), optional :: thread_mode, max_poll, max_events
    integer(c_int) :: status
    type(cucopy_iface_params_t) :: params
    params%field_mask = 0
    params%thread_mode = CUCOPY_THREAD_MODE_SINGLE
    params%max_poll = 0
    params%max_events = 0
    if (present(thread_mode)) then
      params%thread_mode = thread_mode
      params%field_mask = ior(params%field_mask, CUCOPY_IFACE_PARAM_THREAD_MODE)
    end if
    if (present(max_poll)) then
      params%max_poll = max_poll
      params%field_mask = ior(params%field_mask, CUCOPY_IFACE_PARAM_MAX_POLL)
    end if
    if (present(max_events)) then
      params%max_events = max_events
      params%field_mask = ior(params%field_mask, CUCOPY_IFACE_PARAM_MAX_EVENTS)
    end if
    status = cucopy_iface_open(ctx, params, iface)
  end function cucopy_f_iface_open

end module cucopy
