#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#else
#error("needs the C library of Darwin, glibc or Musl (Windows is out of scope)")
#endif

/// Writing: under the lock every writer takes, atomically (temporary file, fsync, rename, fsync of
/// the directory), and the copies aside of a broken file.
extension DefaultsFile {
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
    /// directory, fsync, rename, fsync of the directory. Call it with the lock held. A file that
    /// exists keeps its mode; a new one is readable by its owner only if `isPrivate` (0600), by
    /// everyone otherwise (0644, less the umask).
    ///
    /// - Returns: the `CLOCK_MONOTONIC` time just before the (fsynced) new file replaced the old one,
    ///   and the identity of the file written (taken from its descriptor before the rename, so that
    ///   it is this process's file even if another program replaces it right after).
    /// - Throws: `.writeFailed` (with the file left as it was) on any failure, a full disk included.
    @discardableResult
    func write(_ values: [String: JSONValue], isPrivate: Bool = false) throws(DefaultsError) -> (replacedAt: UInt64, identity: Identity) {
        let text = JSONValue.object(values).prettyText + "\n"
        let temporary = directory + "/." + name + ".tmp-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        // A private file is created private: a secret is never readable by others, not even
        // between this open and a fchmod.
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, isPrivate ? 0o600 : 0o644)
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
    /// and returns the copy's path. Call it with the lock held, before overwriting a broken file. A
    /// copy that cannot be written whole (a full disk) is removed.
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
}

// `write` is shadowed by the method above inside the type.
func systemWrite(_ descriptor: Int32, _ buffer: UnsafeRawPointer?, _ count: Int) -> Int {
    write(descriptor, buffer, count)
}
