#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#else
#error("needs the C library of Darwin, glibc or Musl (Windows is out of scope)")
#endif

/// A thread, as the registry's thread records and a dependent key's pending values name it: POSIX's
/// `pthread_t`, compared with `pthread_equal` (it is a pointer on Musl, an integer on glibc and
/// Darwin). The one place outside the lock that uses the C library's threads.
@usableFromInline
struct _ThreadID {
    @usableFromInline let thread: pthread_t

    @inlinable
    init(_ thread: pthread_t) {
        self.thread = thread
    }

    /// The calling thread.
    @inlinable
    static var current: _ThreadID { _ThreadID(pthread_self()) }

    @inlinable
    func isSame(as other: _ThreadID) -> Bool {
        pthread_equal(thread, other.thread) != 0
    }

    /// The thread as an integer (`_threadToken`), for an atomic word that names its owner (a tracked
    /// observation's, a lock's in a debug build).
    var token: UInt { _threadToken(thread) }
}

/// A `pthread_t` as an integer, whatever the C library makes it: an integer on glibc, a pointer on
/// Musl and Darwin. Chosen by the type, not by a platform condition, so that every C library whose
/// `pthread_t` is one of these compiles.
@inline(__always)
func _threadToken(_ thread: UInt) -> UInt { thread }

@inline(__always)
func _threadToken(_ thread: OpaquePointer) -> UInt { UInt(bitPattern: thread) }

@inline(__always)
func _threadToken<Pointee>(_ thread: UnsafeMutablePointer<Pointee>) -> UInt { UInt(bitPattern: thread) }
