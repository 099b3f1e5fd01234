import Testing
import TestSupport
import _KeyValueObservingShims

@testable import KeyValueObserving

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#else
#error("needs the C library of Darwin, glibc or Musl (Windows is out of scope)")
#endif

/// Which form of the platform-specific fast paths a build has, and the portable pieces they fall
/// back to.
@Suite("Portability")
struct PortabilityTests {
    /// The shim header picks its form from C's predefined macros (and `-Xcc -DKVO_PORTABLE`), the
    /// Swift code from its own conditions (and `-Xswiftc -DKVO_PORTABLE`): a build where they
    /// disagree would pair, say, the weak-reference root with thread slots of the other form.
    @Test func swiftAndCAgreeOnWhichFormIsBuilt() {
        #expect((_kvo_fast_paths_compiled() != 0) == _kvoFastPathsCompiled)
    }

    @Test func theFastFormsAreBuiltOnlyOnX86_64GlibcLinuxWithoutKVOPortable() {
        #if arch(x86_64) && canImport(Glibc) && !KVO_PORTABLE
        #expect(_kvoFastPathsCompiled)
        #else
        #expect(!_kvoFastPathsCompiled)
        #endif
    }

    /// The thread slots (either form) are per thread: what one thread stores, another does not see.
    @Test func theThreadSlotsArePerThread() {
        let mine = UnsafeMutableRawPointer(bitPattern: 0x1000)!
        _kvo_set_thread_deferral(mine)
        defer { _kvo_set_thread_deferral(nil) }
        let seen = Locked<UnsafeMutableRawPointer?>(mine)
        TestThread { seen.withLock { $0 = _kvo_get_thread_deferral() } }.join()
        #expect(seen.current == nil)
        #expect(_kvo_get_thread_deferral() == mine)
    }

    /// A thread's token is the same for every call on that thread and differs between two threads
    /// alive at once.
    @Test func aThreadsTokenIsItsOwn() {
        let here = _threadToken(pthread_self())
        #expect(here == _threadToken(pthread_self()))
        #expect(here != 0)
        let there = Locked<UInt>(0)
        TestThread { there.withLock { $0 = _threadToken(pthread_self()) } }.join()
        #expect(there.current != here)
        #expect(there.current != 0)
    }
}
