import Foundation
import KeyValueObserving
import ObservableDefaults
import Testing

@Suite("Defaults key names")
struct KeyNameTests {
    /// A name starting with U+0000 is where the etcd store keeps its bookkeeping keys: a set of it
    /// was stored and flushed, and no other process ever saw it. Making such a key traps, naming it.
    @Test func aKeyNameStartingWithNULTrapsWithAMessageNamingIt() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let directory = TemporaryDirectory()
            let store = DefaultsStore(fileURL: directory.file("s.json"))
            store[DefaultsKey("\u{0}writer", default: 0)] = 1
            try? store.flush()
        }
        let message = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
        #expect(message.contains("starts with U+0000, which is reserved"), "\(message)")
        #expect(message.contains(#""\0writer""#), "\(message)")
    }

    @Test func isValidNameRefusesOnlyALeadingNUL() {
        #expect(DefaultsKey<Int>.isValidName("launches"))
        #expect(DefaultsKey<Int>.isValidName("a\u{0}b"))
        #expect(!DefaultsKey<Int>.isValidName("\u{0}"))
        #expect(!DefaultsKey<Int>.isValidName("\u{0}kvo-writer/1"))
    }
}
