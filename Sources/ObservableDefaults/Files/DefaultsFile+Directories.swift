#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#else
#error("needs the C library of Darwin, glibc or Musl (Windows is out of scope)")
#endif

/// The file's directory: whether it exists, where to wait for it while it does not, and its
/// creation, which only a write does (reading or watching a store creates nothing).
extension DefaultsFile {
    /// Whether the file's directory exists (as a directory).
    func directoryExists() -> Bool {
        Self.isDirectory(directory)
    }

    /// Creates the file's directory and its missing parents. Only a write calls this.
    ///
    /// - Throws: `.writeFailed` if a component cannot be created (a parent is a file, no permission).
    func createDirectory() throws(DefaultsError) {
        if directoryExists() { return }
        var current = ""
        for component in directory.split(separator: "/") {
            current += "/" + component
            if mkdir(current, 0o755) != 0 {
                let error = errno
                if error == EEXIST, Self.isDirectory(current) { continue }
                let cause =
                    error == EEXIST
                    ? "\(current) exists and is not a directory" : "cannot create directory \(current): \(Self.describe(error))"
                throw failure(.writeFailed, cause, errno: error == EEXIST ? ENOTDIR : error)
            }
        }
    }

    /// While the file's directory does not exist: its nearest existing ancestor and the name, in
    /// it, of the next component of the directory's path (what must appear there first). `nil` if
    /// the directory exists, or if that component is a symbolic link (to a place that does not
    /// exist: what would make it appear happens elsewhere).
    func awaitedEntry() -> (ancestor: String, name: String)? {
        var child = directory
        while !Self.isDirectory(child) {
            let (parent, name) = Self.split(child)
            guard !name.isEmpty else { return nil }
            if Self.isDirectory(parent) {
                var info = stat()
                if lstat(child, &info) == 0, (info.st_mode & S_IFMT) == S_IFLNK { return nil }
                return (parent, name)
            }
            child = parent
        }
        return nil
    }

    /// This file with the existing part of its directory's path resolved (symbolic links, `.` and
    /// `..`), the rest kept as given: so that a store made before its directory exists and one made
    /// after name the same file.
    func resolvingExistingDirectories() -> DefaultsFile {
        var existing = directory
        var missing: [String] = []
        while !Self.isDirectory(existing) {
            let (parent, name) = Self.split(existing)
            guard !name.isEmpty else { return self }
            missing.append(name)
            existing = parent
        }
        guard let resolved = realpath(existing, nil) else { return self }
        var path = String(cString: resolved)
        free(resolved)
        for name in missing.reversed() + [name] {
            path = (path == "/" ? "" : path) + "/" + name
        }
        return DefaultsFile(path: path)
    }

    /// Whether `path` is a directory (through symbolic links).
    static func isDirectory(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFDIR
    }

    /// `path`'s parent and last component (`("/", "")` for `/`).
    private static func split(_ path: String) -> (parent: String, name: String) {
        guard let slash = path.lastIndex(of: "/") else { return (".", path) }
        let parent = slash == path.startIndex ? "/" : String(path[..<slash])
        return (parent, String(path[path.index(after: slash)...]))
    }
}
