import Foundation
import KeyValueObserving
@testable import ObservableDefaults
import Testing

/// What a file may hold besides plain JSON, and what the store makes of it.
@Suite("File contents")
struct FileContentTests {
    let directory = TemporaryDirectory()

    @Test func aUTF8ByteOrderMarkIsAccepted() throws {
        let url = directory.file("s.json")
        try Data([0xEF, 0xBB, 0xBF] + Array(#"{"a": 1}"#.utf8)).write(to: url)
        let errors = Locked<[DefaultsError]>([])
        let store = DefaultsStore(fileURL: url) { errors.append($0) }
        #expect(store[DefaultsKey("a", default: 0)] == 1)
        #expect(errors.current.isEmpty, "\(errors.current)")
    }

    @Test func anErrorAfterAByteOrderMarkCountsItsBytes() throws {
        let url = directory.file("s.json")
        try Data([0xEF, 0xBB, 0xBF] + Array("{oops".utf8)).write(to: url)
        let errors = Locked<[DefaultsError]>([])
        _ = DefaultsStore(fileURL: url) { errors.append($0) }
        #expect(errors.current.map(\.kind) == [.corruptFile])
        #expect(errors.current.first?.column == 5)
        #expect(errors.current.first?.byteOffset == 4)
    }

    @Test func aDuplicateKeyIsReportedTheLastValueWinsAndTheFileIsCopiedAsideBeforeAWrite() throws {
        let url = directory.file("s.json")
        let text = "{\n  \"a\": 1,\n  \"a\": 2\n}\n"
        try text.write(to: url, atomically: true, encoding: .utf8)
        let errors = Locked<[DefaultsError]>([])
        let store = DefaultsStore(fileURL: url) { errors.append($0) }
        let first = try #require(errors.current.first)
        #expect(first.kind == .duplicateKey)
        #expect(first.line == 3 && first.column == 3)
        #expect(first.description.contains("the key \"a\" appears more than once"), "\(first)")
        #expect(store[DefaultsKey("a", default: 0)] == 2)
        store[DefaultsKey("b", default: 0)] = 3
        try store.flush()
        #expect(jsonObject(at: url) == ["a": .number("2"), "b": .number("3")])
        let copy = try #require(errors.current.last?.corruptCopyPath)
        #expect(copy.hasPrefix(url.path + ".duplicate-keys-"))
        #expect(contents(of: URL(fileURLWithPath: copy)) == text)
        #expect(errors.current.count == 2)
    }

    @Test(arguments: [("1.5", "1.5 is not an Int"), ("1e400", "1e400 overflows Int"), ("1e19", "1e19 overflows Int")])
    func aNumberOfTheWrongKindIsNamed(found: String, cause: String) throws {
        let url = directory.file("s.json")
        try "{\"n\": \(found)}".write(to: url, atomically: true, encoding: .utf8)
        let errors = Locked<[DefaultsError]>([])
        let store = DefaultsStore(fileURL: url) { errors.append($0) }
        #expect(store[DefaultsKey("n", default: 7)] == 7)
        let error = try #require(errors.current.first)
        #expect(error.kind == .typeMismatch)
        #expect(error.description.contains(cause), "\(error)")
        #expect(!error.description.contains("not valid JSON"))
    }

    @Test func aNumberTooLargeForADoubleIsNamed() throws {
        let url = directory.file("s.json")
        try "{\"n\": 1e400}".write(to: url, atomically: true, encoding: .utf8)
        let errors = Locked<[DefaultsError]>([])
        let store = DefaultsStore(fileURL: url) { errors.append($0) }
        #expect(store[DefaultsKey<Double>("n", default: 0.5)] == 0.5)
        #expect(errors.current.first?.description.contains("1e400 overflows Double") == true, "\(errors.current)")
    }

    @Test func theFileEndsWithANewline() throws {
        let url = directory.file("s.json")
        let store = DefaultsStore(fileURL: url)
        store[DefaultsKey("a", default: 0)] = 1
        try store.flush()
        #expect(try Data(contentsOf: url).last == UInt8(ascii: "\n"))
        #expect(contents(of: url) == "{\n  \"a\": 1\n}\n")
    }
}
