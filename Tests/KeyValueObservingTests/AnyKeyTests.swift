import KeyValueObserving
import Testing

class Playlist2: KeyValueObservable {
    @Observed var title = "Mix"
    @Observed var tracks: [String] = []
}

final class SmartPlaylist: Playlist2 {
    @Observed var rule = "all"
}

@Suite("Observers of every key")
struct AnyKeyTests {
    @Test func theArticlesCounts() {
        let playlist = Playlist2()
        let titles = Counter(0)
        let tracks = Counter(0)
        let anyKey = Locked<[AnyKeyPath]>([])
        let t1 = playlist.observe(\.title) { _, _ in titles.increment() }
        let t2 = playlist.observe(\.tracks) { _, _ in tracks.increment() }
        let t3 = playlist.observeAnyKey { _, change in anyKey.append(change.keyPath) }
        playlist.title = "Road"
        playlist.title = "Road"
        playlist.tracks.append("b")
        playlist.tracks.append("a")
        playlist.tracks.sort()
        #expect(titles.current == 2)
        #expect(tracks.current == 3)
        #expect(anyKey.current.count == 5)
        #expect(anyKey.current == [\Playlist2.title, \Playlist2.title, \Playlist2.tracks, \Playlist2.tracks, \Playlist2.tracks])
        [t1, t2, t3].forEach { $0.invalidate() }
    }

    @Test func propertiesOfSubclassesNotifyObserversRegisteredThroughTheBaseClass() {
        let smart = SmartPlaylist()
        let base: Playlist2 = smart
        let keys = Locked<[AnyKeyPath]>([])
        let token = base.observeAnyKey { _, change in keys.append(change.keyPath) }
        smart.rule = "recent"
        smart.title = "Auto"
        #expect(keys.current == [\SmartPlaylist.rule, \Playlist2.title])
        token.invalidate()
    }

    @Test func priorComesBeforeTheKeysObserversAndTheNotificationAfterThem() {
        let playlist = Playlist2()
        let log = Locked<[String]>([])
        let anyKey = playlist.observeAnyKey(options: [.prior]) { playlist, change in
            log.append("any \(change.isPrior ? "will" : "did") \(playlist.title)")
        }
        let title = playlist.observe(\.title, options: [.prior]) { playlist, change in
            log.append("title \(change.isPrior ? "will" : "did") \(playlist.title)")
        }
        playlist.title = "New"
        #expect(log.current == ["any will Mix", "title will Mix", "title did New", "any did New"])
        anyKey.invalidate()
        title.invalidate()
    }

    @Test func manualNotificationsReachObserversOfEveryKey() {
        let settings = Settings()
        let keys = Locked<[AnyKeyPath]>([])
        let token = settings.observeAnyKey { _, change in keys.append(change.keyPath) }
        settings.setTheme("dark")
        settings.balance = 3  // automatic notification is off for `balance`
        settings.deposit(1)
        #expect(keys.current == [\Settings.theme, \Settings.balance])
        token.invalidate()
    }

    @Test func invalidatingStopsTheNotificationsAndLeavesNoObserver() {
        let playlist = Playlist2()
        let calls = Counter(0)
        let token = playlist.observeAnyKey { _, _ in calls.increment() }
        playlist.title = "A"
        token.invalidate()
        playlist.title = "B"
        #expect(calls.current == 1)
        // Sets of keys nobody observes skip the registry again.
        let other = playlist.observe(\.tracks) { _, _ in }
        playlist.title = "C"
        #expect(calls.current == 1)
        other.invalidate()
    }

    @Test func ownersChangeWhileOtherThreadsInvalidate() {
        let playlists = (0..<4).map { _ in UncheckedBox(Playlist2()) }
        let pool = Locked<[KeyValueObservation]>([])
        let wrong = Locked<[String]>([])
        let ownersDone = Counter(0)
        TestThread.run(8) { me in
            if me < 4 {
                let playlist = playlists[me].value
                for step in 0..<2_000 {
                    if step % 3 == 0 {
                        pool.append(
                            playlist.observeAnyKey { playlist, change in
                                if change.keyPath != \Playlist2.title && change.keyPath != \Playlist2.tracks {
                                    wrong.append("\(change.keyPath)")
                                }
                                _ = playlist.title
                            })
                    } else if step % 3 == 1 {
                        playlist.title = "t\(step)"
                    } else {
                        playlist.tracks.append("x")
                    }
                }
                ownersDone.increment()
                return
            }
            while ownersDone.current < 4 || !pool.current.isEmpty {
                pool.withLock { $0.isEmpty ? nil : $0.removeFirst() }?.invalidate()
            }
        }
        #expect(wrong.current == [])
    }
}
