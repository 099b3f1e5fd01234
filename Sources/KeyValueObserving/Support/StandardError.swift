#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#else
#error("needs the C library of Darwin, glibc or Musl (Windows is out of scope)")
#endif

/// Writes `line` and a newline to standard error at once, unbuffered: the package's one writer of
/// diagnostics and error messages (the modules' and the command-line tool's). A write that fails is
/// dropped: there is nowhere left to report it.
package func writeLineToStandardError(_ line: String) {
    _ = writeLine(line, toDescriptor: 2)
}

/// Writes `line` and a newline to `descriptor` at once, unbuffered, resuming a write that a signal
/// interrupted or that wrote part of the line. Returns `false` if the write failed (a closed pipe).
package func writeLine(_ line: String, toDescriptor descriptor: Int32) -> Bool {
    var text = line + "\n"
    return text.withUTF8 { bytes in
        guard var next = bytes.baseAddress else { return true }
        var remaining = bytes.count
        while remaining > 0 {
            let written = write(descriptor, next, remaining)
            if written < 0, errno == EINTR { continue }
            guard written > 0 else { return false }
            next += written
            remaining -= written
        }
        return true
    }
}
