import KeyValueObserving
import Testing
import TestSupport
@testable import ObservableProgress

@Suite("Progress cancel, pause and resume")
struct ControlTests {
    @Test func cancelReachesTheWholeSubtreeAndChildrenAddedLater() {
        let root = ObservableProgress(totalUnitCount: 2)
        let child = ObservableProgress(totalUnitCount: 2, parent: root, pendingUnitCount: 1)
        let grandchild = ObservableProgress(totalUnitCount: 2, parent: child, pendingUnitCount: 1)
        let sibling = ObservableProgress(totalUnitCount: 2)
        root.cancel()
        #expect(root.isCancelled && child.isCancelled && grandchild.isCancelled)
        #expect(!sibling.isCancelled)
        let late = ObservableProgress(totalUnitCount: 2, parent: grandchild, pendingUnitCount: 1)
        #expect(late.isCancelled)
    }

    @Test func cancelDoesNotGoUp() {
        let root = ObservableProgress(totalUnitCount: 2)
        let child = ObservableProgress(totalUnitCount: 2, parent: root, pendingUnitCount: 1)
        child.cancel()
        #expect(child.isCancelled)
        #expect(!root.isCancelled)
    }

    @Test func everyCancellationHandlerRunsOnce() {
        let progress = ObservableProgress(totalUnitCount: 2)
        let log = Locked<[String]>([])
        let tokens = [progress.onCancel { log.append("first") }, progress.onCancel { log.append("second") }]
        progress.cancel()
        progress.cancel()
        #expect(log.current == ["first", "second"])
        // Added after the fact: runs at once, once.
        let late = progress.onCancel { log.append("late") }
        #expect(log.current == ["first", "second", "late"])
        withExtendedLifetime((tokens, late)) {}
    }

    @Test func aHandlerWhoseTokenIsDroppedOrInvalidatedDoesNotRun() {
        let progress = ObservableProgress(totalUnitCount: 2)
        let log = Locked<[String]>([])
        _ = progress.onCancel { log.append("dropped cancel") }
        _ = progress.onPause { log.append("dropped pause") }
        _ = progress.onResume { log.append("dropped resume") }
        let kept = [progress.onCancel { log.append("cancel") }, progress.onPause { log.append("pause") }]
        let invalidated = progress.onResume { log.append("invalidated resume") }
        invalidated.invalidate()
        invalidated.invalidate()
        progress.pause()
        progress.resume()
        progress.cancel()
        #expect(log.current == ["pause", "cancel"])
        withExtendedLifetime(kept) {}
    }

    @Test func aHandlerTokenDoesNotKeepTheProgressAlive() {
        weak var weakProgress: ObservableProgress?
        var token: KeyValueObservation?
        do {
            let progress = ObservableProgress(totalUnitCount: 2)
            weakProgress = progress
            token = progress.onCancel {}
        }
        #expect(weakProgress == nil)
        token?.invalidate()
    }

    @Test func childHandlersRunWhenAnAncestorIsCancelled() {
        let root = ObservableProgress(totalUnitCount: 2)
        let child = ObservableProgress(totalUnitCount: 2, parent: root, pendingUnitCount: 1)
        let count = Counter(0)
        let token = child.onCancel { count.increment() }
        root.cancel()
        #expect(count.current == 1)
        withExtendedLifetime(token) {}
    }

    @Test func pauseAndResumePropagateAndRunHandlersPerTransition() {
        let root = ObservableProgress(totalUnitCount: 2)
        let child = ObservableProgress(totalUnitCount: 2, parent: root, pendingUnitCount: 1)
        let log = Locked<[String]>([])
        let tokens = [
            child.onPause { log.append("pause") },
            child.onPause { log.append("pause 2") },
            child.onResume { log.append("resume") },
        ]
        root.pause()
        root.pause()
        #expect(child.isPaused)
        let late = ObservableProgress(totalUnitCount: 2, parent: root, pendingUnitCount: 1)
        #expect(late.isPaused)
        root.resume()
        root.resume()
        #expect(!child.isPaused && !late.isPaused && !root.isPaused)
        #expect(log.current == ["pause", "pause 2", "resume"])
        withExtendedLifetime(tokens) {}
    }

    @Test func cancellableAndPausableAreHintsWithFoundationsDefaults() {
        let progress = ObservableProgress(totalUnitCount: 2)
        #expect(progress.isCancellable)
        #expect(!progress.isPausable)
        progress.isCancellable = false
        progress.cancel()
        #expect(progress.isCancelled)
    }

    @Test func handlersMayUseTheProgress() {
        // No handler runs under a lock: reading and updating the progress from one cannot deadlock.
        let progress = ObservableProgress(totalUnitCount: 2)
        let seen = Locked<[Bool]>([])
        let token = progress.onCancel {
            seen.append(progress.isCancelled)
            progress.completedUnitCount = 2
        }
        progress.cancel()
        withExtendedLifetime(token) {}
        #expect(seen.current == [true])
        #expect(progress.isFinished)
    }

    @Test func pauseReachesNodesThatWereAlreadyInThatState() {
        let root = ObservableProgress(totalUnitCount: 1)
        let child = ObservableProgress(totalUnitCount: 1, parent: root, pendingUnitCount: 1)
        let grandchild = ObservableProgress(totalUnitCount: 1, parent: child, pendingUnitCount: 1)
        child.pause()
        grandchild.resume()
        #expect(child.isPaused && !grandchild.isPaused)
        root.pause()
        #expect(grandchild.isPaused)
        root.resume()
        #expect(!child.isPaused && !grandchild.isPaused)
    }

    @Test func concurrentPauseAndResumeLeaveChildrenInTheParentsState() {
        for _ in 0..<500 {
            let root = ObservableProgress(totalUnitCount: 1)
            let children = (0..<3).map { _ in ObservableProgress(totalUnitCount: 1, parent: root, pendingUnitCount: 1) }
            TestThread.run(2) { index in
                if index == 0 { root.pause() } else { root.resume() }
            }
            let state = root.isPaused
            #expect(children.allSatisfy { $0.isPaused == state })
        }
    }

    @Test func childrenAddedWhileTheParentIsPausedAndResumedEndInItsState() {
        for _ in 0..<200 {
            let root = ObservableProgress(totalUnitCount: 100)
            root.pause()
            let added = Locked<[ObservableProgress]>([])
            TestThread.run(2) { index in
                if index == 0 {
                    for _ in 0..<5 { added.append(ObservableProgress(totalUnitCount: 1, parent: root, pendingUnitCount: 1)) }
                } else {
                    root.resume()
                }
            }
            #expect(!root.isPaused)
            #expect(added.current.allSatisfy { !$0.isPaused })
        }
    }
}
