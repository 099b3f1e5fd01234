#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The files of one defaults suite and the system calls on them: read and parse, write atomically
/// under a lock, copy a broken file aside.
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

    private static func identity(of info: stat) -> Identity {
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

    // MARK: Writing

    /// Runs `body` holding the exclusive lock of the file writes replace (`writeTarget()`, which
    /// `body` gets), the lock every writing process takes. Does not wait for it: one store waiting
    /// for another process must not hold up the other stores' writes, which share one thread.
    ///
    /// - Throws: a `DefaultsError` whose `isLockContention` is true if another process holds the
    ///   lock (try again later); `.unsupportedFile` for a link to nothing; `.writeFailed` if the lock
    ///   file cannot be opened or locked.
    func withExclusiveLock<Result>(_ body: (DefaultsFile) throws(DefaultsError) -> Result) throws(DefaultsError) -> Result {
        let target = try writeTarget()
        let lockPath = target.lockPath
        let descriptor = open(lockPath, O_RDONLY | O_CREAT | O_CLOEXEC, 0o644)
        if descriptor < 0 {
            let error = errno
            throw failure(.writeFailed, "cannot open lock file \(lockPath): \(Self.describe(error))", errno: error)
        }
        defer { close(descriptor) }
        while flock(descriptor, LOCK_EX | LOCK_NB) != 0 {
            let error = errno
            if error == EINTR { continue }
            if error == EWOULDBLOCK { throw DefaultsError.lockContention(path: path, lockPath: lockPath) }
            throw failure(.writeFailed, "cannot lock \(lockPath): \(Self.describe(error))", errno: error)
        }
        defer { flock(descriptor, LOCK_UN) }
        return try body(target)
    }

    /// Replaces the file with `values`, pretty-printed with sorted keys: temporary file in the same
    /// directory, fsync, rename, fsync of the directory. Call it with the lock held.
    ///
    /// - Returns: the `CLOCK_MONOTONIC` time just before the (fsynced) new file replaced the old one,
    ///   and the identity of the file written (taken from its descriptor before the rename, so that
    ///   it is this process's file even if another program replaces it right after).
    /// - Throws: `.writeFailed` (with the file left as it was) on any failure, a full disk included.
    @discardableResult
    func write(_ values: [String: JSONValue]) throws(DefaultsError) -> (replacedAt: UInt64, identity: Identity) {
        let text = JSONValue.object(values).prettyText + "\n"
        let temporary = directory + "/." + name + ".tmp-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        if descriptor < 0 {
            let error = errno
            throw failure(.writeFailed, "cannot create \(temporary): \(Self.describe(error))", errno: error)
        }
        var succeeded = false
        defer {
            if !succeeded { unlink(temporary) }
        }
        let identity: Identity
        do {
            defer { close(descriptor) }
            var existing = stat()
            if stat(path, &existing) == 0 { _ = fchmod(descriptor, existing.st_mode & 0o777) }
            try writeAll(Array(text.utf8), to: descriptor, at: temporary)
            if synchronize(descriptor) != 0 {
                let error = errno
                throw failure(.writeFailed, "cannot fsync \(temporary): \(Self.describe(error))", errno: error)
            }
            var info = stat()
            if fstat(descriptor, &info) != 0 {
                let error = errno
                throw failure(.writeFailed, "cannot stat \(temporary): \(Self.describe(error))", errno: error)
            }
            identity = Self.identity(of: info)
        }
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        let replacedAt = UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
        if rename(temporary, path) != 0 {
            let error = errno
            throw failure(.writeFailed, "cannot rename \(temporary) to \(path): \(Self.describe(error))", errno: error)
        }
        succeeded = true
        let directoryDescriptor = open(directory, O_RDONLY | O_CLOEXEC)
        if directoryDescriptor >= 0 {
            // The rename is durable only once the directory is; some file systems refuse fsync on a
            // directory (EINVAL), where the rename is as durable as it gets.
            _ = fsync(directoryDescriptor)
            close(directoryDescriptor)
        }
        return (replacedAt, identity)
    }

    /// Removes the temporary files of writers that were killed mid-write (`.NAME.tmp-PID-N` whose
    /// process is gone, at least `minimumAge` seconds old: a live writer's lasts milliseconds, and
    /// the age also spares a writer in another PID namespace). Call it with the lock held.
    func sweepAbandonedTemporaryFiles(minimumAge: Int = 60) {
        guard let stream = opendir(directory) else { return }
        defer { closedir(stream) }
        let prefix = "." + name + ".tmp-"
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        while let entry = readdir(stream) {
            let entryName = Self.name(of: entry)
            guard entryName.hasPrefix(prefix) else { continue }
            let rest = entryName.dropFirst(prefix.count)
            guard let dash = rest.firstIndex(of: "-"), let pid = Int32(rest[..<dash]), pid > 0 else { continue }
            guard kill(pid, 0) != 0, errno == ESRCH else { continue }
            let candidate = directory + "/" + entryName
            var info = stat()
            guard lstat(candidate, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { continue }
            #if canImport(Darwin)
            let modified = info.st_mtimespec.tv_sec
            #else
            let modified = info.st_mtim.tv_sec
            #endif
            if Int(now.tv_sec) - Int(modified) >= minimumAge { unlink(candidate) }
        }
    }

    /// The name in a directory entry, read in place: the record is only as long as its name, so a
    /// copy of the whole `d_name` array (256 bytes) can read past the end of the mapped buffer (a
    /// crash in a directory of a thousand files).
    static func name(of entry: UnsafePointer<dirent>) -> String {
        let offset = MemoryLayout<dirent>.offset(of: \dirent.d_name)!
        return String(cString: (UnsafeRawPointer(entry) + offset).assumingMemoryBound(to: CChar.self))
    }

    /// Makes a new file's data durable: `fdatasync` on Linux (the data and the size, which is all a
    /// new file needs before the rename), `fsync` elsewhere.
    private func synchronize(_ descriptor: Int32) -> Int32 {
        #if os(Linux)
        fdatasync(descriptor)
        #else
        fsync(descriptor)
        #endif
    }

    private func writeAll(_ bytes: [UInt8], to descriptor: Int32, at path: String) throws(DefaultsError) {
        var offset = 0
        while offset < bytes.count {
            let count = bytes[offset...].withUnsafeBytes { systemWrite(descriptor, $0.baseAddress, $0.count) }
            if count < 0 {
                let error = errno
                if error == EINTR { continue }
                throw failure(.writeFailed, "cannot write \(path): \(Self.describe(error))", errno: error)
            }
            offset += count
        }
    }

    /// Keeps `bytes`, the broken file as it was read and parsed (not the file as it may be by now), in
    /// `NAME.LABEL-YYYYMMDD-HHMMSS` (with a number if that exists; with the file's permission bits)
    /// and returns the copy's path. Call
    /// it with the lock held, before overwriting a broken file. A copy that cannot be written whole
    /// (a full disk) is removed.
    func copyAside(_ bytes: [UInt8], as label: String = "corrupt") throws(DefaultsError) -> String {
        var now = time(nil)
        var parts = tm()
        gmtime_r(&now, &parts)
        func padded(_ number: Int32, _ width: Int) -> String {
            let digits = String(number)
            return String(repeating: "0", count: max(0, width - digits.count)) + digits
        }
        let stamp =
            padded(parts.tm_year + 1900, 4) + padded(parts.tm_mon + 1, 2) + padded(parts.tm_mday, 2) + "-"
            + padded(parts.tm_hour, 2) + padded(parts.tm_min, 2) + padded(parts.tm_sec, 2)
        var attempt = 0
        while true {
            let copy = path + "." + label + "-" + stamp + (attempt == 0 ? "" : "-\(attempt)")
            // Readable by whom the original is (a 0600 file's copy must not be everyone's); 0600 if it is gone.
            let output = open(copy, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
            if output < 0 {
                let error = errno
                if error == EEXIST, attempt < 1000 {
                    attempt += 1
                    continue
                }
                throw failure(.writeFailed, "cannot create \(copy): \(Self.describe(error))", errno: error)
            }
            defer { close(output) }
            var original = stat()
            if stat(path, &original) == 0 { _ = fchmod(output, original.st_mode & 0o777) }
            do throws(DefaultsError) {
                try writeAll(bytes, to: output, at: copy)
                if fsync(output) != 0 {
                    let error = errno
                    throw failure(.writeFailed, "cannot fsync \(copy): \(Self.describe(error))", errno: error)
                }
            } catch {
                // A full disk: an empty or partial copy keeps nothing and would be left on every retry.
                unlink(copy)
                throw error
            }
            return copy
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

// `read` and `write` are shadowed by the methods above inside the type.
func systemRead(_ descriptor: Int32, _ buffer: UnsafeMutableRawPointer?, _ count: Int) -> Int {
    read(descriptor, buffer, count)
}

func systemWrite(_ descriptor: Int32, _ buffer: UnsafeRawPointer?, _ count: Int) -> Int {
    write(descriptor, buffer, count)
}
