// What KeyValueObserving needs from C: a process-wide word and thread-local pointers that Swift
// code inlined into clients can reach without a global's lazy-initialization call (a Swift global
// costs a call to its addressor on every access from another module; these cost one load).
//
// They are defined here, weakly, rather than in a .c file: every module that uses them emits the
// same weak definition and the linker keeps one. (A .c file's debug information, DWARF 5 from
// clang, is also more than the valgrind of the callgrind gate reads.)
#ifndef KEY_VALUE_OBSERVING_SHIMS_H
#define KEY_VALUE_OBSERVING_SHIMS_H

#include <stdint.h>

/// How many threads are recording the observable reads they make (a tracked observation's
/// evaluation, a registration's probe): while it is 0, an @Observed getter records nothing.
__attribute__((weak)) long _kvo_recording_threads = 0;

/// Which form of the package's platform-specific fast paths this build has: 1 for the fast forms
/// (this header's initial-exec thread-local slots, the runtime's unowned reference count and
/// `swift_tryRetain`, and the futex the package's lock sleeps on, declared below; in Swift,
/// `_kvoFastPathsCompiled`), 0 for the portable forms (a pthread key, a Swift `weak` reference, a
/// `pthread_mutex_t`). The fast forms are compiled only on x86_64 glibc Linux, the platform CI
/// tests, and never with `KVO_PORTABLE` defined (`-Xcc -DKVO_PORTABLE`, beside
/// `-Xswiftc -DKVO_PORTABLE` for the Swift side). Decided here from predefined macros because a
/// target's C defines do not reach the modules that import it; a test checks that Swift and C agree
/// (`_kvo_fast_paths_compiled`).
#if defined(__x86_64__) && defined(__GLIBC__) && !defined(KVO_PORTABLE)
#define _KVO_FAST_PATHS 1
#else
#define _KVO_FAST_PATHS 0
#endif

/// This thread's four pointers: [0] the innermost read recorder (a `_ReadRecorder`, unretained) or
/// null; [1] the tracked-change deferral (a `_TrackingDeferral`, unretained), set while a batch's
/// changes are delivered so that a tracked observation is evaluated once for them, or null; [2]
/// and [3] the reads the innermost recorder expects next, when it is a tracked observation's
/// evaluation: the next (object address, key offset) pair of its previous evaluation's inputs and
/// the end of them, or both null (see `_kvo_read_is_expected`).
#if _KVO_FAST_PATHS
/// The fast form: a weak thread-local array (with an initialiser: without one the importer does
/// not emit its definition): every module, and every object file of a debug build, that uses it
/// emits the same weak definition and the linker keeps one, so there is one array per thread. An
/// access is inlined and, in the initial-exec model, is the thread pointer plus an offset: no call,
/// and no call of `__tls_get_addr` (a library loaded later with `dlopen` takes the 32 bytes from the
/// static TLS reserve the C library keeps for that).
__attribute__((weak, tls_model("initial-exec"))) __thread void *_kvo_thread_slot_array[4] = {0, 0, 0, 0};
static inline __attribute__((always_inline)) void **_kvo_thread_slots(void) { return _kvo_thread_slot_array; }
#else
#include <pthread.h>
#include <stdlib.h>

/// The portable form: a POSIX thread-specific key (`pthread_key_create`, `pthread_getspecific`),
/// whose value for a thread is its four pointers, allocated on the thread's first use and freed
/// when the thread ends. The key is created once per process (`pthread_once`); the key and its
/// once-flag are weak definitions, so every module that uses them shares one. (A `static` variable
/// would be one per object file.)
__attribute__((weak)) pthread_key_t _kvo_thread_slots_key = 0;
__attribute__((weak)) pthread_once_t _kvo_thread_slots_once = PTHREAD_ONCE_INIT;

static void _kvo_free_thread_slots(void *slots) { free(slots); }

static void _kvo_make_thread_slots_key(void) {
    if (pthread_key_create(&_kvo_thread_slots_key, _kvo_free_thread_slots) != 0) abort();
}

__attribute__((weak)) void **_kvo_thread_slots(void) {
    pthread_once(&_kvo_thread_slots_once, _kvo_make_thread_slots_key);
    void **slots = (void **)pthread_getspecific(_kvo_thread_slots_key);
    if (slots == 0) {
        slots = (void **)calloc(4, sizeof(void *));
        if (slots == 0 || pthread_setspecific(_kvo_thread_slots_key, slots) != 0) abort();
    }
    return slots;
}
#endif

/// Whether this build has the fast forms (`_KVO_FAST_PATHS`), for the test that checks that the
/// Swift side agrees.
static inline long _kvo_fast_paths_compiled(void) { return _KVO_FAST_PATHS; }

/// How many tracked observations exist in the process: while 0, a batch sets up no deferral.
__attribute__((weak)) long _kvo_live_trackers = 0;

static inline __attribute__((always_inline)) long _kvo_is_recording(void) {
    return __atomic_load_n(&_kvo_recording_threads, __ATOMIC_RELAXED);
}

static inline void _kvo_add_recording_threads(long delta) {
    __atomic_fetch_add(&_kvo_recording_threads, delta, __ATOMIC_RELAXED);
}

static inline long _kvo_has_live_trackers(void) {
    return __atomic_load_n(&_kvo_live_trackers, __ATOMIC_RELAXED);
}

static inline void _kvo_add_live_trackers(long delta) {
    __atomic_fetch_add(&_kvo_live_trackers, delta, __ATOMIC_RELAXED);
}

#if _KVO_FAST_PATHS
/// The Swift runtime's own reference counting entry points (exported by libswiftCore, C calling
/// convention), under names of ours so that no other declaration of them can clash: a tracked
/// observation holds its root by an unowned reference count, which keeps the object's memory (not
/// the object) valid, and takes a strong reference with `swift_tryRetain`, which fails once the
/// object's deinitialisation began. A Swift `weak` reference does the same through a side table,
/// which puts every later retain and release of the object on the runtime's slow path. Their ABI is
/// stable on Darwin and promised nowhere else, so they are declared only for the fast form, on the
/// one platform CI tests; the portable form uses a `weak` reference.
extern void *_kvo_swift_tryRetain(void *object) __asm__("swift_tryRetain");
extern void *_kvo_swift_unownedRetain(void *object) __asm__("swift_unownedRetain");
extern void _kvo_swift_unownedRelease(void *object) __asm__("swift_unownedRelease");

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

/// The fast form of the package's lock (`PlatformLock`) sleeps and wakes on its 32-bit word with
/// the futex system call (`futex(2)`, private to the process): waits while the word still holds
/// `expected`, and wakes one waiter.
static inline void _kvo_futex_wait(uint32_t *word, uint32_t expected) {
    syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, expected, (void *)0);
}
static inline void _kvo_futex_wake_one(uint32_t *word) { syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, 1); }
#endif

/// The usable size of the heap block at `object`, an object the Swift runtime allocated with the C
/// library's `malloc` (or `aligned_alloc`): the bound within which a set may write through an
/// `@Observed` property's storage offset.
#if defined(__APPLE__)
#include <malloc/malloc.h>
static inline size_t _kvo_allocation_size(const void *object) { return malloc_size(object); }
#elif defined(__linux__) || defined(__wasi__)
#include <malloc.h>
static inline size_t _kvo_allocation_size(const void *object) { return malloc_usable_size((void *)object); }
#elif defined(__FreeBSD__)
#include <malloc_np.h>
static inline size_t _kvo_allocation_size(const void *object) { return malloc_usable_size(object); }
#else
#error "KeyValueObserving needs the C library to tell the size of a heap block (Linux, Darwin, FreeBSD, WASI)"
#endif

static inline void *_kvo_get_thread_recorder(void) { return _kvo_thread_slots()[0]; }
static inline void _kvo_set_thread_recorder(void *recorder) { _kvo_thread_slots()[0] = recorder; }
static inline void *_kvo_get_expected_read(void) { return _kvo_thread_slots()[2]; }
static inline void _kvo_set_expected_reads(void *next, void *end) {
    void **slots = _kvo_thread_slots();
    slots[2] = next;
    slots[3] = end;
}

/// Whether a read of the key at `offset` of the object at `object` needs nothing more: this thread
/// records nothing, or its innermost recorder expected exactly this read next (the cursor then
/// moves past it). A tracked evaluation that reads what its previous one read pays this per read:
/// no call, no reference count.
static inline __attribute__((always_inline)) long _kvo_read_is_expected(const void *object, intptr_t offset) {
    void **slots = _kvo_thread_slots();
    if (slots[0] == 0) return 1;
    const intptr_t *next = (const intptr_t *)slots[2];
    if (next == (const intptr_t *)slots[3] || (const void *)next[0] != object || next[1] != offset) return 0;
    slots[2] = (void *)(next + 2);
    return 1;
}

static inline void *_kvo_get_thread_deferral(void) { return _kvo_thread_slots()[1]; }
static inline void _kvo_set_thread_deferral(void *deferral) { _kvo_thread_slots()[1] = deferral; }

#endif
