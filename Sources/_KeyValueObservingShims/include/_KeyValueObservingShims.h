// What KeyValueObserving needs from C: a process-wide word and thread-local pointers that Swift
// code inlined into clients can reach without a global's lazy-initialization call (a Swift global
// costs a call to its addressor on every access from another module; these cost one load).
//
// They are defined here, weakly, rather than in a .c file: every module that uses them emits the
// same weak definition and the linker keeps one. (A .c file's debug information, DWARF 5 from
// clang, is also more than the valgrind of the callgrind gate reads.)
#ifndef KEY_VALUE_OBSERVING_SHIMS_H
#define KEY_VALUE_OBSERVING_SHIMS_H

/// How many threads are recording the observable reads they make (a tracked observation's
/// evaluation, a registration's probe): while it is 0, an @Observed getter records nothing.
__attribute__((weak)) long _kvo_recording_threads = 0;

/// This thread's two pointers: [0] the innermost read recorder (a `_ReadRecorder`, unretained) or
/// null; [1] the tracked-change deferral (a `_TrackingDeferral`, unretained), set while a batch's
/// changes are delivered so that a tracked observation is evaluated once for them, or null.
///
/// A weak function holding a function-local thread-local array: every module (every object file
/// of a debug build) that uses it emits the same weak definition, the linker keeps one, and so
/// there is one array per thread. (A `static` variable would be one per object file; a weak
/// thread-local variable is not supported everywhere.)
__attribute__((weak)) void **_kvo_thread_slots(void) {
    static __thread void *slots[2];
    return slots;
}

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

static inline void *_kvo_get_thread_recorder(void) { return _kvo_thread_slots()[0]; }
static inline void _kvo_set_thread_recorder(void *recorder) { _kvo_thread_slots()[0] = recorder; }
static inline void *_kvo_get_thread_deferral(void) { return _kvo_thread_slots()[1]; }
static inline void _kvo_set_thread_deferral(void *deferral) { _kvo_thread_slots()[1] = deferral; }

#endif
