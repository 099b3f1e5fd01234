import KeyValueObserving

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#elseif canImport(Musl)
import Musl
#endif

/// TLS for `https` endpoints: the system's OpenSSL (libssl 3 or 1.1), loaded at run time, so the
/// package needs no package and links nothing new (the toolchain's FoundationNetworking already
/// depends on it through libcurl).
///
/// Certificates are verified against the system's trust store (OpenSSL's default paths: on Debian
/// `/etc/ssl/certs`, which `update-ca-certificates` rebuilds; the `SSL_CERT_FILE` and `SSL_CERT_DIR`
/// environment variables override them) plus, when given, a PEM file of private certificate
/// authorities. The server's name (or IP address) must match its certificate. TLS 1.2 at least.
final class EtcdTLS: Sendable {
    /// The C functions, resolved once.
    private struct Functions: @unchecked Sendable {
        // Invariant: immutable C function pointers into a library that is never unloaded.
        let clientMethod: @convention(c) () -> OpaquePointer?
        let contextNew: @convention(c) (OpaquePointer?) -> OpaquePointer?
        let contextFree: @convention(c) (OpaquePointer?) -> Void
        let contextCtrl: @convention(c) (OpaquePointer?, Int32, Int, UnsafeMutableRawPointer?) -> Int
        let setDefaultVerifyPaths: @convention(c) (OpaquePointer?) -> Int32
        let loadVerifyLocations: @convention(c) (OpaquePointer?, UnsafePointer<CChar>?, UnsafePointer<CChar>?) -> Int32
        let setVerify: @convention(c) (OpaquePointer?, Int32, OpaquePointer?) -> Void
        let new: @convention(c) (OpaquePointer?) -> OpaquePointer?
        let free: @convention(c) (OpaquePointer?) -> Void
        let setFileDescriptor: @convention(c) (OpaquePointer?, Int32) -> Int32
        let ctrl: @convention(c) (OpaquePointer?, Int32, Int, UnsafeMutableRawPointer?) -> Int
        let parameters: @convention(c) (OpaquePointer?) -> OpaquePointer?
        let setHost: @convention(c) (OpaquePointer?, UnsafePointer<CChar>?, Int) -> Int32
        let setAddress: @convention(c) (OpaquePointer?, UnsafePointer<CChar>?) -> Int32
        let connect: @convention(c) (OpaquePointer?) -> Int32
        let read: @convention(c) (OpaquePointer?, UnsafeMutableRawPointer?, Int32) -> Int32
        let write: @convention(c) (OpaquePointer?, UnsafeRawPointer?, Int32) -> Int32
        let error: @convention(c) (OpaquePointer?, Int32) -> Int32
        let verifyResult: @convention(c) (OpaquePointer?) -> Int
        let verifyErrorText: @convention(c) (Int) -> UnsafePointer<CChar>?
        let nextError: @convention(c) () -> UInt
        let errorText: @convention(c) (UInt, UnsafeMutablePointer<CChar>?, Int) -> Void
        let clearErrors: @convention(c) () -> Void
    }

    private static let functions: Result<Functions, EtcdSocketFailure> = {
        let names = ["libssl.so.3", "libssl.so.1.1", "libssl.so", "libssl.dylib"]
        guard let library = names.lazy.compactMap({ dlopen($0, RTLD_NOW | RTLD_GLOBAL) }).first else {
            return .failure(EtcdSocketFailure(reason: "https needs OpenSSL (libssl.so.3 or libssl.so.1.1), which is not installed"))
        }
        var missing: [String] = []
        func load<Function>(_ name: String, as type: Function.Type) -> Function? {
            guard let symbol = dlsym(library, name) else {
                missing.append(name)
                return nil
            }
            return unsafeBitCast(symbol, to: type)
        }
        guard
            let clientMethod = load("TLS_client_method", as: (@convention(c) () -> OpaquePointer?).self),
            let contextNew = load("SSL_CTX_new", as: (@convention(c) (OpaquePointer?) -> OpaquePointer?).self),
            let contextFree = load("SSL_CTX_free", as: (@convention(c) (OpaquePointer?) -> Void).self),
            let contextCtrl = load("SSL_CTX_ctrl", as: (@convention(c) (OpaquePointer?, Int32, Int, UnsafeMutableRawPointer?) -> Int).self),
            let setDefaultVerifyPaths = load("SSL_CTX_set_default_verify_paths", as: (@convention(c) (OpaquePointer?) -> Int32).self),
            let loadVerifyLocations = load(
                "SSL_CTX_load_verify_locations",
                as: (@convention(c) (OpaquePointer?, UnsafePointer<CChar>?, UnsafePointer<CChar>?) -> Int32).self),
            let setVerify = load("SSL_CTX_set_verify", as: (@convention(c) (OpaquePointer?, Int32, OpaquePointer?) -> Void).self),
            let new = load("SSL_new", as: (@convention(c) (OpaquePointer?) -> OpaquePointer?).self),
            let free = load("SSL_free", as: (@convention(c) (OpaquePointer?) -> Void).self),
            let setFileDescriptor = load("SSL_set_fd", as: (@convention(c) (OpaquePointer?, Int32) -> Int32).self),
            let ctrl = load("SSL_ctrl", as: (@convention(c) (OpaquePointer?, Int32, Int, UnsafeMutableRawPointer?) -> Int).self),
            let parameters = load("SSL_get0_param", as: (@convention(c) (OpaquePointer?) -> OpaquePointer?).self),
            let setHost = load(
                "X509_VERIFY_PARAM_set1_host", as: (@convention(c) (OpaquePointer?, UnsafePointer<CChar>?, Int) -> Int32).self),
            let setAddress = load(
                "X509_VERIFY_PARAM_set1_ip_asc", as: (@convention(c) (OpaquePointer?, UnsafePointer<CChar>?) -> Int32).self),
            let connect = load("SSL_connect", as: (@convention(c) (OpaquePointer?) -> Int32).self),
            let read = load("SSL_read", as: (@convention(c) (OpaquePointer?, UnsafeMutableRawPointer?, Int32) -> Int32).self),
            let write = load("SSL_write", as: (@convention(c) (OpaquePointer?, UnsafeRawPointer?, Int32) -> Int32).self),
            let error = load("SSL_get_error", as: (@convention(c) (OpaquePointer?, Int32) -> Int32).self),
            let verifyResult = load("SSL_get_verify_result", as: (@convention(c) (OpaquePointer?) -> Int).self),
            let verifyErrorText = load("X509_verify_cert_error_string", as: (@convention(c) (Int) -> UnsafePointer<CChar>?).self),
            let nextError = load("ERR_get_error", as: (@convention(c) () -> UInt).self),
            let errorText = load("ERR_error_string_n", as: (@convention(c) (UInt, UnsafeMutablePointer<CChar>?, Int) -> Void).self),
            let clearErrors = load("ERR_clear_error", as: (@convention(c) () -> Void).self)
        else {
            return .failure(EtcdSocketFailure(reason: "https: the installed OpenSSL lacks \(missing.joined(separator: ", "))"))
        }
        return .success(
            Functions(
                clientMethod: clientMethod,
                contextNew: contextNew,
                contextFree: contextFree,
                contextCtrl: contextCtrl,
                setDefaultVerifyPaths: setDefaultVerifyPaths,
                loadVerifyLocations: loadVerifyLocations,
                setVerify: setVerify,
                new: new,
                free: free,
                setFileDescriptor: setFileDescriptor,
                ctrl: ctrl,
                parameters: parameters,
                setHost: setHost,
                setAddress: setAddress,
                connect: connect,
                read: read,
                write: write,
                error: error,
                verifyResult: verifyResult,
                verifyErrorText: verifyErrorText,
                nextError: nextError,
                errorText: errorText,
                clearErrors: clearErrors))
    }()

    private let functions: Functions
    // Invariant: created in init, freed in deinit; OpenSSL allows one SSL_CTX to serve connections
    // on many threads at once.
    private nonisolated(unsafe) let context: OpaquePointer

    /// A TLS client context trusting the system's store and, when given, the certificate
    /// authorities in the PEM file at `trustedCertificatesFile`.
    ///
    /// - Throws: `EtcdSocketFailure` when OpenSSL is missing or the file cannot be loaded.
    init(trustedCertificatesFile: String?) throws(EtcdSocketFailure) {
        functions = try Self.functions.get()
        functions.clearErrors()
        guard let context = functions.contextNew(functions.clientMethod()) else {
            throw EtcdSocketFailure(reason: "https: SSL_CTX_new failed: \(Self.lastError(functions))")
        }
        self.context = context
        _ = functions.setDefaultVerifyPaths(context)
        if let file = trustedCertificatesFile, functions.loadVerifyLocations(context, file, nil) != 1 {
            // Every property is set: deinit frees the context.
            throw EtcdSocketFailure(reason: "https: cannot load the certificate authorities in \(file): \(Self.lastError(functions))")
        }
        functions.setVerify(context, 1, nil)  // SSL_VERIFY_PEER
        _ = functions.contextCtrl(context, 123, 0x0303, nil)  // SSL_CTX_set_min_proto_version(TLS 1.2)
        _ = functions.contextCtrl(context, 33, 0x2, nil)  // SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER
    }

    deinit {
        functions.contextFree(context)
    }

    /// Starts TLS on the connected, non-blocking `descriptor` for `host`, waiting with `wait`.
    func handshake(descriptor: Int32, host: String, wait: (Int16) throws(EtcdSocketFailure) -> Void) throws(EtcdSocketFailure)
        -> EtcdTLSSession
    {
        functions.clearErrors()
        guard let ssl = functions.new(context) else {
            throw EtcdSocketFailure(reason: "TLS: SSL_new failed: \(Self.lastError(functions))")
        }
        let session = EtcdTLSSession(ssl: ssl, tls: self)
        _ = functions.setFileDescriptor(ssl, descriptor)
        let isAddress = host.contains(":") || host.split(separator: ".").count == 4 && host.allSatisfy { $0.isNumber || $0 == "." }
        let parameters = functions.parameters(ssl)
        if isAddress {
            _ = functions.setAddress(parameters, host)
        } else {
            _ = host.withCString { functions.ctrl(ssl, 55, 0, UnsafeMutableRawPointer(mutating: $0)) }  // SNI
            _ = functions.setHost(parameters, host, 0)
        }
        while true {
            let result = withoutBrokenPipeSignal { functions.connect(ssl) }
            if result == 1 { return session }
            switch functions.error(ssl, result) {
            case 2: try wait(Int16(POLLIN))
            case 3: try wait(Int16(POLLOUT))
            default:
                let verification = functions.verifyResult(ssl)
                if verification != 0 {
                    let text = functions.verifyErrorText(verification).map { String(cString: $0) } ?? "error \(verification)"
                    throw EtcdSocketFailure(reason: "TLS: the server's certificate was refused: \(text)")
                }
                throw EtcdSocketFailure(reason: "TLS handshake failed: \(Self.lastError(functions))")
            }
        }
    }

    fileprivate func read(_ ssl: OpaquePointer, into buffer: UnsafeMutableRawBufferPointer) -> (count: Int32, error: Int32) {
        functions.clearErrors()
        let count = withoutBrokenPipeSignal { functions.read(ssl, buffer.baseAddress, Int32(clamping: buffer.count)) }
        return (count, count > 0 ? 0 : functions.error(ssl, count))
    }

    fileprivate func write(_ ssl: OpaquePointer, _ buffer: UnsafeRawBufferPointer) -> (count: Int32, error: Int32) {
        functions.clearErrors()
        let count = withoutBrokenPipeSignal { functions.write(ssl, buffer.baseAddress, Int32(clamping: buffer.count)) }
        return (count, count > 0 ? 0 : functions.error(ssl, count))
    }

    fileprivate func free(_ ssl: OpaquePointer) {
        functions.free(ssl)
    }

    fileprivate var lastError: String { Self.lastError(functions) }

    private static func lastError(_ functions: Functions) -> String {
        let code = functions.nextError()
        guard code != 0 else { return "no detail from OpenSSL" }
        var buffer = [CChar](repeating: 0, count: 256)
        functions.errorText(code, &buffer, buffer.count)
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// One TLS connection (an OpenSSL `SSL`), used by one `EtcdSocket`'s owner at a time.
final class EtcdTLSSession: @unchecked Sendable {
    // Invariant: `ssl` is used only by the socket's owner thread, and freed once, in deinit (after
    // the owner's last call).
    private let ssl: OpaquePointer
    private let tls: EtcdTLS

    /// What a read or write needs next.
    enum Outcome {
        case done(Int)
        case wantRead
        case wantWrite
        case closed
        case failed(String)
    }

    fileprivate init(ssl: OpaquePointer, tls: EtcdTLS) {
        self.ssl = ssl
        self.tls = tls
    }

    deinit {
        tls.free(ssl)
    }

    func read(into buffer: UnsafeMutableRawBufferPointer) -> Outcome {
        outcome(tls.read(ssl, into: buffer))
    }

    func write(_ buffer: UnsafeRawBufferPointer) -> Outcome {
        outcome(tls.write(ssl, buffer))
    }

    private func outcome(_ result: (count: Int32, error: Int32)) -> Outcome {
        if result.count > 0 { return .done(Int(result.count)) }
        switch result.error {
        case 2: return .wantRead  // SSL_ERROR_WANT_READ
        case 3: return .wantWrite  // SSL_ERROR_WANT_WRITE
        case 6: return .closed  // SSL_ERROR_ZERO_RETURN: the peer closed TLS
        case 5 where result.count == 0: return .closed  // SSL_ERROR_SYSCALL at end of file
        default: return .failed("TLS: \(tls.lastError)")
        }
    }
}

/// Runs `body` (an OpenSSL call, which writes to the socket with `write`, not `send` with
/// `MSG_NOSIGNAL`) so that a write to a connection the server closed fails with `EPIPE` instead of
/// killing the process with SIGPIPE: the signal is blocked on this thread, a SIGPIPE the call
/// raised is consumed, and the thread's mask is restored. Other threads and the process's signal
/// handling are untouched.
private func withoutBrokenPipeSignal<Result>(_ body: () -> Result) -> Result {
    #if canImport(Glibc) || canImport(Musl)
    var pipeSignal = sigset_t()
    sigemptyset(&pipeSignal)
    sigaddset(&pipeSignal, SIGPIPE)
    var previous = sigset_t()
    pthread_sigmask(SIG_BLOCK, &pipeSignal, &previous)
    var pendingBefore = sigset_t()
    sigpending(&pendingBefore)
    let alreadyPending = sigismember(&pendingBefore, SIGPIPE) == 1
    let result = body()
    if !alreadyPending {
        var pending = sigset_t()
        sigpending(&pending)
        if sigismember(&pending, SIGPIPE) == 1 {
            var noWait = timespec(tv_sec: 0, tv_nsec: 0)
            _ = sigtimedwait(&pipeSignal, nil, &noWait)
        }
    }
    pthread_sigmask(SIG_SETMASK, &previous, nil)
    return result
    #else
    // Darwin: the socket has SO_NOSIGPIPE.
    return body()
    #endif
}
