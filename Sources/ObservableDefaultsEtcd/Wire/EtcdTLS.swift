import KeyValueObserving

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#elseif canImport(Musl)
import Musl
#else
#error("needs the C library of Darwin, glibc or Musl (Windows is out of scope)")
#endif

/// TLS for `https` endpoints: the system's OpenSSL (libssl 3 or 1.1), loaded at run time, so the
/// package needs no package and links nothing new (the toolchain's FoundationNetworking already
/// depends on it through libcurl). Not on Darwin: there `https` endpoints are refused (see
/// `functions`).
///
/// Certificates are verified against the system's trust store (OpenSSL's default paths: on Debian
/// `/etc/ssl/certs`, which `update-ca-certificates` rebuilds; the `SSL_CERT_FILE` and `SSL_CERT_DIR`
/// environment variables override them) plus, when given, a PEM file of private certificate
/// authorities. The server's name (or IP address) must match its certificate. TLS 1.2 at least.
///
/// Every OpenSSL call that reports a status is checked (`Call`): a context or connection whose
/// verification settings did not all apply is refused, never used.
final class EtcdTLS: Sendable {
    /// The OpenSSL calls whose status is checked, named as in OpenSSL's documentation.
    enum Call: String, CaseIterable, Sendable {
        case setDefaultVerifyPaths = "SSL_CTX_set_default_verify_paths"
        case loadVerifyLocations = "SSL_CTX_load_verify_locations"
        case setMinimumVersion = "SSL_CTX_set_min_proto_version"
        case setFileDescriptor = "SSL_set_fd"
        case verifyParameters = "SSL_get0_param"
        case setServerName = "SSL_set_tlsext_host_name"
        case setHost = "X509_VERIFY_PARAM_set1_host"
        case setAddress = "X509_VERIFY_PARAM_set1_ip_asc"
        case verifyResult = "SSL_get_verify_result"

        /// Whether the call configures the context (made once, in `init`), not a connection.
        var isContextCall: Bool { [.setDefaultVerifyPaths, .loadVerifyLocations, .setMinimumVersion].contains(self) }
    }

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

    /// The libraries tried, in order: the two ABIs `Functions` matches, by their versioned names.
    /// Never an unversioned name: on macOS `libssl.dylib` is Apple's stub, which calls `abort()`
    /// when it is loaded.
    static let libraryNames = ["libssl.so.3", "libssl.so.1.1"]

    private static let functions: Result<Functions, EtcdSocketFailure> = {
        #if canImport(Darwin)
        // macOS ships no OpenSSL that may be loaded (only the aborting stub), and this package
        // carries no TLS of its own there: https is refused when the client is made.
        return .failure(
            EtcdSocketFailure(
                reason: "https endpoints are not supported on this platform (no OpenSSL); use http, or a TLS proxy such as stunnel"))
        #else
        guard let library = libraryNames.lazy.compactMap({ dlopen($0, RTLD_NOW | RTLD_GLOBAL) }).first else {
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
        #endif
    }()

    private let functions: Functions
    // Invariant: created in init, freed in deinit; OpenSSL allows one SSL_CTX to serve connections
    // on many threads at once.
    private nonisolated(unsafe) let context: OpaquePointer
    /// Calls treated as failed whatever they return (a test hook; empty otherwise).
    private let failing: Set<Call>

    /// A TLS client context trusting the system's store and, when given, the certificate
    /// authorities in the PEM file at `trustedCertificatesFile`.
    ///
    /// - Parameters:
    ///   - trustedCertificatesFile: A PEM file of private certificate authorities, or nil.
    ///   - failing: For tests: calls to treat as failed whatever they return.
    /// - Throws: `EtcdSocketFailure` when OpenSSL is missing, the file cannot be loaded, or a
    ///   setting does not apply.
    init(trustedCertificatesFile: String?, failing: Set<Call> = []) throws(EtcdSocketFailure) {
        functions = try Self.functions.get()
        self.failing = failing
        functions.clearErrors()
        guard let context = functions.contextNew(functions.clientMethod()) else {
            throw EtcdSocketFailure(reason: "https: SSL_CTX_new failed: \(Self.lastError(functions))")
        }
        self.context = context
        // Every property is set: from here on, deinit frees the context when init throws.
        try check(.setDefaultVerifyPaths, functions.setDefaultVerifyPaths(context) == 1, "cannot use the system's trust store")
        if let file = trustedCertificatesFile {
            try check(
                .loadVerifyLocations, functions.loadVerifyLocations(context, file, nil) == 1,
                "cannot load the certificate authorities in \(file)")
        }
        functions.setVerify(context, 1, nil)  // SSL_VERIFY_PEER; returns nothing
        try check(.setMinimumVersion, functions.contextCtrl(context, 123, 0x0303, nil) == 1, "cannot require TLS 1.2")
        // SSL_CTX_set_mode returns the new mode bitmask, not a status: nothing to check.
        _ = functions.contextCtrl(context, 33, 0x2, nil)  // SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER
    }

    deinit {
        functions.contextFree(context)
    }

    /// Throws naming `call` and OpenSSL's reason unless it `succeeded` (and is not in `failing`).
    private func check(_ call: Call, _ succeeded: Bool, _ meaning: String) throws(EtcdSocketFailure) {
        guard succeeded && !failing.contains(call) else {
            throw EtcdSocketFailure(reason: "https: \(meaning) (\(call.rawValue) failed: \(Self.lastError(functions)))")
        }
    }

    /// Starts TLS on the connected, non-blocking `descriptor` for `host`, waiting with `wait`: the
    /// server's certificate must be valid and name `host` (a name, or an IP address).
    func handshake(descriptor: Int32, host: String, wait: (Int16) throws(EtcdSocketFailure) -> Void) throws(EtcdSocketFailure)
        -> EtcdTLSSession
    {
        functions.clearErrors()
        guard let ssl = functions.new(context) else {
            throw EtcdSocketFailure(reason: "TLS: SSL_new failed: \(Self.lastError(functions))")
        }
        let session = EtcdTLSSession(ssl: ssl, tls: self)
        try check(.setFileDescriptor, functions.setFileDescriptor(ssl, descriptor) == 1, "cannot attach TLS to the connection")
        let parameters = functions.parameters(ssl)
        try check(.verifyParameters, parameters != nil, "cannot set what the certificate must name")
        if Self.isAddress(host) {
            try check(.setAddress, functions.setAddress(parameters, host) == 1, "cannot require a certificate for the address \(host)")
        } else {
            let named = host.withCString { functions.ctrl(ssl, 55, 0, UnsafeMutableRawPointer(mutating: $0)) }
            try check(.setServerName, named == 1, "cannot send the server name \(host)")
            try check(.setHost, functions.setHost(parameters, host, 0) == 1, "cannot require a certificate for the name \(host)")
        }
        while true {
            let result = withoutBrokenPipeSignal { functions.connect(ssl) }
            if result == 1 {
                // SSL_VERIFY_PEER already refused a bad certificate; this says so once more.
                try check(.verifyResult, functions.verifyResult(ssl) == 0, "the server's certificate for \(host) is not verified")
                return session
            }
            switch functions.error(ssl, result) {
            case 2: try wait(Int16(POLLIN))
            case 3: try wait(Int16(POLLOUT))
            default:
                let verification = functions.verifyResult(ssl)
                if verification != 0 {
                    let text = functions.verifyErrorText(verification).map { String(cString: $0) } ?? "error \(verification)"
                    throw EtcdSocketFailure(reason: "TLS: the server's certificate was refused for \(host): \(text)")
                }
                throw EtcdSocketFailure(reason: "TLS handshake failed: \(Self.lastError(functions))")
            }
        }
    }

    /// Whether `host` is an IPv4 or IPv6 address (verified as an address, and sent without SNI).
    static func isAddress(_ host: String) -> Bool {
        var address = [UInt8](repeating: 0, count: 16)
        return inet_pton(AF_INET, host, &address) == 1 || inet_pton(AF_INET6, host, &address) == 1
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
    enum Outcome: Equatable {
        case done(Int)
        case wantRead
        case wantWrite
        /// The peer closed TLS (close_notify).
        case closed
        /// The connection ended without close_notify.
        case truncated
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
        Self.outcome(count: result.count, error: result.error) { tls.lastError }
    }

    /// What a read or write that returned `count` means, with `SSL_get_error`'s `error`.
    static func outcome(count: Int32, error: Int32, detail: () -> String) -> Outcome {
        if count > 0 { return .done(Int(count)) }
        switch error {
        case 2: return .wantRead  // SSL_ERROR_WANT_READ
        case 3: return .wantWrite  // SSL_ERROR_WANT_WRITE
        case 6: return .closed  // SSL_ERROR_ZERO_RETURN: the peer closed TLS (close_notify)
        // SSL_ERROR_SYSCALL at end of file: the TCP connection ended without close_notify (OpenSSL
        // 1.1; 3 reports it as SSL_ERROR_SSL, "unexpected eof"). A body framed by the connection's
        // end may be cut short: never a clean end.
        case 5 where count == 0: return .truncated
        default: return .failed("TLS: \(detail())")
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
