#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#else
#error("needs the C library of Darwin, glibc or Musl (Windows is out of scope)")
#endif

/// The files of one defaults suite and the system calls on them: read and parse (here), write
/// atomically under a lock and copy a broken file aside (`DefaultsFile+Writing`), make the
/// directories (`DefaultsFile+Directories`).
///
/// A write locks a separate, never-renamed lock file (`.NAME.lock`: a lock on the data file itself
/// would be lost when the file is renamed over), writes a temporary file in the same directory,
/// fsyncs it, renames it over the data file and fsyncs the directory, so that readers see either the
/// old or the new file, never a torn one, even if the writer is killed.
struct DefaultsFile: Sendable, Hashable {
    /// The data file's absolute path.
    let path: String
    /// Its directory.
    let directory: String
    /// Its name in the directory.
    let name: String

    init(path: String) {
        let slash = path.lastIndex(of: "/")!
        self.path = path
        self.directory = slash == path.startIndex ? "/" : String(path[..<slash])
        self.name = String(path[path.index(after: slash)...])
    }

    /// The stable lock file every writer locks.
    var lockPath: String { directory + "/." + name + ".lock" }

    /// What identifies one version of the file cheaply (the polling watcher compares these).
    struct Identity: Hashable, Sendable {
        let device: UInt64
        let inode: UInt64
        let size: Int64
        let modificationSeconds: Int
        let modificationNanoseconds: Int
    }

    /// The result of reading the file.
    enum Contents: Sendable {
        /// There is no file: every key is absent.
        case missing
        /// The file's values.
        case values([String: JSONValue], Identity)
        /// The file's values, one key of which appears twice: the last value is kept, and the others
        /// are lost when the file is written, so the file is copied aside first. The error names
        /// the key and its place; the bytes are what a copy aside must keep.
        case duplicateKeys([String: JSONValue], Identity, DefaultsError, [UInt8])
        /// The file is not a JSON object: the parse error, the file it was found in, and the bytes
        /// that were parsed (what a copy aside must keep, whatever the file holds by then).
        case corrupt(DefaultsError, Identity, [UInt8])
    }

    // MARK: Reading

    /// The identity of the file as it is now, or `nil` if there is none.
    func identity() -> Identity? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return Self.identity(of: info)
    }

    static func identity(of info: stat) -> Identity {
        #if canImport(Darwin)
        let seconds = info.st_mtimespec.tv_sec
        let nanoseconds = info.st_mtimespec.tv_nsec
        #else
        let seconds = info.st_mtim.tv_sec
        let nanoseconds = info.st_mtim.tv_nsec
        #endif
        return Identity(
            device: UInt64(info.st_dev),
            inode: UInt64(info.st_ino),
            size: Int64(info.st_size),
            modificationSeconds: Int(seconds),
            modificationNanoseconds: Int(nanoseconds)
        )
    }

    /// Reads and parses the file (through a symbolic link, if `path` is one).
    ///
    /// - Throws: `.unsupportedFile` if the path is not a regular file or a symbolic link to one (a
    ///   FIFO, a device: reading those would block or never end), or is a link to nothing;
    ///   `.readFailed` if the file exists but cannot be read.
    func read() throws(DefaultsError) -> Contents {
        var info = stat()
        // Looked at before opening: opening a device can have effects of its own.
        if stat(path, &info) == 0 { try requireRegularFile(info) }
        // Without blocking: opening a FIFO that replaced the file since would wait for a writer.
        let descriptor = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        if descriptor < 0 {
            let error = errno
            if error == ENOENT || error == ENOTDIR {
                if let target = symbolicLinkDestination() { throw danglingLink(to: target) }
                // No file, or a missing directory on its path: every key is absent.
                return .missing
            }
            throw failure(.readFailed, "cannot open \(path): \(Self.describe(error))", errno: error)
        }
        defer { close(descriptor) }
        guard fstat(descriptor, &info) == 0 else {
            let error = errno
            throw failure(.readFailed, "cannot stat \(path): \(Self.describe(error))", errno: error)
        }
        try requireRegularFile(info)
        let identity = Self.identity(of: info)
        let bytes = try readAll(descriptor)
        return Self.parse(bytes, path: path, identity: identity)
    }

    /// Throws `.unsupportedFile` unless `info` describes a regular file.
    private func requireRegularFile(_ info: stat) throws(DefaultsError) {
        let type = info.st_mode & S_IFMT
        guard type != S_IFREG else { return }
        let name =
            switch type {
            case S_IFIFO: "a FIFO (named pipe)"
            case S_IFCHR: "a character device"
            case S_IFBLK: "a block device"
            case S_IFDIR: "a directory"
            case S_IFSOCK: "a socket"
            default: "a special file"
            }
        throw DefaultsError(
            .unsupportedFile, location: .file(path: path), errno: EINVAL,
            reason: "it is \(name), not a regular file; a defaults file must be a regular file or a symbolic link to one"
        )
    }

    /// What the symbolic link at `path` points to, or `nil` if `path` is not a symbolic link.
    private func symbolicLinkDestination() -> String? {
        var info = stat()
        guard lstat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFLNK else { return nil }
        var buffer = [UInt8](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = buffer.withUnsafeMutableBytes { readlink(path, $0.baseAddress!.assumingMemoryBound(to: CChar.self), $0.count - 1) }
        return count < 0 ? "?" : String(decoding: buffer[..<count], as: UTF8.self)
    }

    private func danglingLink(to target: String) -> DefaultsError {
        DefaultsError(
            .unsupportedFile, location: .file(path: path), errno: ENOENT,
            reason: "it is a symbolic link to \(target), which does not exist; create the target first (nothing is created through a link)"
        )
    }

    /// The file that writes replace: this one, or, if `path` is a symbolic link (a dotfile manager's
    /// `prefs.json -> ../dotfiles/prefs.json`), the file it points to now, so that the link stays a
    /// link and the write reaches the file it names.
    ///
    /// - Throws: `.unsupportedFile` if the link points to nothing; `.writeFailed` if it cannot be
    ///   resolved (a loop of links); `.unsupportedFile` if the file is not a regular file (checked
    ///   before anything, the lock file included, is created beside it).
    func writeTarget() throws(DefaultsError) -> DefaultsFile {
        var target = self
        if let destination = symbolicLinkDestination() {
            guard let resolved = realpath(path, nil) else {
                let error = errno
                if error == ENOENT || error == ENOTDIR { throw danglingLink(to: destination) }
                throw failure(.writeFailed, "cannot resolve the symbolic link \(path): \(Self.describe(error))", errno: error)
            }
            defer { free(resolved) }
            target = DefaultsFile(path: String(cString: resolved))
        }
        var info = stat()
        if stat(target.path, &info) == 0 { try requireRegularFile(info) }
        return target
    }

    /// Parses the bytes of a defaults file: a JSON object, one member per key, after a UTF-8
    /// byte-order mark if there is one (some Windows editors write it).
    static func parse(_ bytes: [UInt8], path: String, identity: Identity) -> Contents {
        let bom: [UInt8] = [0xEF, 0xBB, 0xBF]
        let skipped = bytes.starts(with: bom) ? bom.count : 0
        func place(_ error: JSONParseError) -> (line: Int, column: Int, byteOffset: Int) {
            (error.line, error.column + (error.line == 1 ? skipped : 0), error.offset + skipped)
        }
        if bytes.dropFirst(skipped).allSatisfy({ $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }) {
            let error = DefaultsError(
                .corruptFile, location: .file(path: path), line: 1, column: 1, byteOffset: 0,
                reason: "the file is empty (expected a JSON object, e.g. {})")
            return .corrupt(error, identity, bytes)
        }
        do throws(JSONParseError) {
            let (value, duplicate) = try JSONValue.parseFindingDuplicateKeys(bytes.dropFirst(skipped))
            guard case .object(let values) = value else {
                let error = DefaultsError(
                    .corruptFile, location: .file(path: path), line: 1, column: 1, byteOffset: 0,
                    reason: "the top-level value is not a JSON object")
                return .corrupt(error, identity, bytes)
            }
            if let duplicate {
                let (line, column, offset) = place(duplicate)
                let error = DefaultsError(
                    .duplicateKey, location: .file(path: path), line: line, column: column, byteOffset: offset, reason: duplicate.reason)
                return .duplicateKeys(values, identity, error, bytes)
            }
            return .values(values, identity)
        } catch {
            // The parser's reason quotes no character of the file (a secret's value may be where
            // it broke): it says what was expected at the line and column given.
            let (line, column, offset) = place(error)
            let corrupt = DefaultsError(
                .corruptFile, location: .file(path: path), line: line, column: column, byteOffset: offset, reason: error.reason)
            return .corrupt(corrupt, identity, bytes)
        }
    }

    private func readAll(_ descriptor: Int32) throws(DefaultsError) -> [UInt8] {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16_384)
        while true {
            let count = chunk.withUnsafeMutableBytes { systemRead(descriptor, $0.baseAddress, $0.count) }
            if count == 0 { return bytes }
            if count < 0 {
                let error = errno
                if error == EINTR { continue }
                throw failure(.readFailed, "cannot read \(path): \(Self.describe(error))", errno: error)
            }
            bytes.append(contentsOf: chunk[0..<count])
        }
    }

    // MARK: Errors

    func failure(_ kind: DefaultsError.Kind, _ reason: String, errno: Int32) -> DefaultsError {
        DefaultsError(kind, location: .file(path: path), errno: errno, reason: reason)
    }

    static func describe(_ error: Int32) -> String {
        String(cString: strerror(error))
    }
}

// `read` is shadowed by the method above inside the type.
func systemRead(_ descriptor: Int32, _ buffer: UnsafeMutableRawPointer?, _ count: Int) -> Int {
    read(descriptor, buffer, count)
}
