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
/// Darwin). The one place outside the lock and the tracker that uses the C library's threads.
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
}
