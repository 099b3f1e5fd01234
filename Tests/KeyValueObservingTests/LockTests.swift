import KeyValueObserving
import Testing
import TestSupport

@Suite("The package's lock")
struct LockTests {
    @Test func aLockGuardsAValueAcrossThreads() {
        let total = Locked(0)
        let threads = (0..<4).map { _ in
            TestThread { for _ in 0..<1_000 { total.withLock { $0 += 1 } } }
        }
        for thread in threads { thread.join() }
        #expect(total.current == 4_000)
    }

    // A plain mutex deadlocks (or, unlocked by a thread that does not hold it, breaks silently) in
    // release builds, so these run only where the debug build's error-checking mutex is used.
    #if DEBUG && !canImport(Darwin)
    @Test func takingTheLockTwiceOnOneThreadTrapsWithAMessageInDebugBuilds() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let lock = Lock()
            lock.lock()
            lock.lock()
        }
        let message = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
        #expect(message.contains("this thread already holds the lock; it is not recursive"), "\(message)")
    }

    @Test func unlockingALockThisThreadDoesNotHoldTrapsWithAMessageInDebugBuilds() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let lock = Lock()
            lock.unlock()
        }
        let message = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
        #expect(message.contains("this thread does not hold the lock"), "\(message)")
    }
    #endif
}
