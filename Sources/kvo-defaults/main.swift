#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#else
#error("needs the C library of Darwin, glibc or Musl (Windows is out of scope)")
#endif
import Dispatch
import Foundation
import KVOToolArguments
import KeyValueObserving
import ObservableDefaults
import ObservableDefaultsEtcd

let usage = """
    USAGE: kvo-defaults read   STORE [KEY] [--explain] [--reveal]
           kvo-defaults write  STORE KEY VALUE [KEY VALUE ...] [--timeout SECONDS] [--replace-corrupt]
           kvo-defaults update STORE KEY --add N [--timeout SECONDS]
           kvo-defaults delete STORE KEY
           kvo-defaults watch  STORE [KEY] [--timestamps]
           kvo-defaults help | -h | --help

      STORE: SUITE | --file PATH | --etcd URL[,URL...] --prefix PREFIX [--user USER] [--cacert PATH]
      LAYERS (any command): [--arg ARG]... [--env-prefix P] [--directory D]; [--secret KEY]...

    Reads, writes and watches the defaults stores of ObservableDefaults. A SUITE is the file
    SUITE.json in $XDG_CONFIG_HOME (else ~/.config; ~/Library/Preferences on macOS); --file PATH
    names any file instead; --etcd names the members of an etcd cluster, and --prefix the keys of
    the store there (one etcd key per defaults key: PREFIX followed by the key's name).

    COMMANDS:
      read     prints the value of KEY as JSON, or every key and value as a JSON object (exit 1 if
               there is no file); creates nothing, not even a missing directory. With layers,
               KEY's value is the one a program with those layers reads. With --explain, prints
               which layer answers for KEY and what every layer holds
      write    sets KEY to VALUE, a JSON value (1.5, true, "text", [1,2], {"a":1}); a VALUE that
               is not valid JSON is stored as a string (write S greeting hello == write S greeting
               '"hello"'). Several pairs are written as one change: other processes see all of
               them or none. Returns when the file is durably written. A file that does not
               parse is not written (exit 1): fix it, or use --replace-corrupt. A VALUE given
               here is visible to every user of the machine while the command runs (ps,
               /proc/PID/cmdline): never write a secret this way; mount it as a file of a
               --directory layer, or have a program write it
      update   adds N (an integer, or any number) to the number KEY holds (0 if absent)
               atomically, even with other processes updating it at once, and prints the result;
               returns when it is durably written (exit 1 if KEY holds something else)
      delete   removes KEY
      watch    prints one line per change of KEY (or of any key), "KEY: OLD -> NEW" with JSON
               values ("(absent)" for a missing key), flushed line by line, until SIGINT or SIGTERM
               (exit status 130 or 143); a file or directory that does not exist yet is waited
               for, and nothing is created. On standard error: a file that stops parsing, when it
               does and when it reads again; a --directory that is removed, and when it is back;
               with --etcd, an outage when it starts and when it ends, with the revision the watch
               resumed from

    OPTIONS:
      --file PATH     use the file at PATH instead of a suite
      --etcd URL[,URL...]
                      use the etcd cluster whose members answer at these http or https URLs
      --prefix PREFIX (etcd) the key prefix of the store, such as myapp/
      --user USER     (etcd) authenticate as USER; the password is read from the environment
                      variable KVO_ETCD_PASSWORD, or from the first line of --password-file
                      (never from the command line, which other users can read)
      --password-file PATH
                      (etcd) the file holding USER's password
      --cacert PATH   (etcd) a PEM file of private certificate authorities trusted for https
                      members, in addition to the system's trust store
      --arg ARG       a program's command-line argument (repeat for each: --arg --speed=2 --arg
                      --verbose), read as the program's arguments layer would; like a VALUE of
                      write, visible to every user of the machine: never pass a secret's value
      --env-prefix P  the environment layer: this tool's variables named P_KEY_NAME (the tool cannot
                      see another process's environment: run it with the same variables)
      --directory D   the directory layer: one file per key (Kubernetes' and Docker's mounted
                      secrets and ConfigMaps); its values are printed as <redacted>
      --secret KEY    KEY (a key's name, not a value) is secret: its values are printed as
                      <redacted> (repeat for each key), and a file the tool creates is readable by
                      its owner only
      --reveal        (read) print secret values and a directory's values as they are
      --explain       (read) which layer answers for KEY, what each holds, and why one is skipped
      --add N         (update) the number to add (negative to subtract)
      --replace-corrupt
                      (write) if the file does not parse, copy it aside (the copy's path is
                      printed), then replace it with the values given
      --timestamps    (watch) prefix each line with the CLOCK_MONOTONIC time in nanoseconds at
                      which the change was received
      --timeout SECONDS
                      (write, update, delete) give up (exit 1) if another process holds the file's lock
                      longer than SECONDS; without it, wait as long as it takes (a wait longer
                      than a second is announced on standard error). With --etcd, any command:
                      how long to wait for the cluster's answers (default 5)
      -h, --help      show this help

    The file must be a regular file or a symbolic link to one (a write replaces the file the link
    points to and keeps the link); a FIFO, a device or a link to nothing is refused.

    EXIT STATUS: 0 on success; 1 on a runtime error (no file or missing key on read, missing key
    on delete, unreadable, unsupported or corrupt file, a write not made because the file does not
    parse, failed write, --timeout expired, an etcd cluster that does not answer or refuses the
    user); 2 on a usage error (an argument that is not valid UTF-8 included); 130 or
    143 when watch is ended by SIGINT or SIGTERM.
    """

func printError(_ message: String) {
    writeLineToStandardError("kvo-defaults: \(message)")
}

/// Writes `text` and a newline to standard output at once (unbuffered: one line per change).
func printLine(_ text: String) {
    if !writeLine(text, toDescriptor: 1) { exit(1) }
}

func fail(_ message: String) -> Never {
    printError(message)
    exit(1)
}

func usageError(_ message: String) -> Never {
    printError("\(message)\nRun 'kvo-defaults --help' for usage.")
    exit(2)
}

// MARK: Arguments

// Arguments are decoded from the raw bytes: `CommandLine.arguments` turns invalid UTF-8 into
// U+FFFD, which would name another key (or file) than the one given.
let rawArguments = (1..<Int(CommandLine.argc)).map { index in
    CommandLine.unsafeArgv[index].map { Array(UnsafeBufferPointer(start: $0, count: strlen($0))).map(UInt8.init(bitPattern:)) } ?? []
}
let invocation: DefaultsToolCommand
switch parseDefaultsToolArguments(rawArguments) {
case .failure(let error):
    usageError(error.message)
case .success(.help):
    printLine(usage)
    exit(0)
case .success(.command(let parsed)):
    invocation = parsed
}
let command = invocation.name.rawValue
let positional = invocation.operands
let layerOptions = invocation.layers
let timeout = invocation.timeout
let replacesCorruptFile = invocation.replacesCorruptFile

/// The problems the store reported (corrupt file, unreadable directory), made fatal for commands that
/// would otherwise act on an incomplete view of the file.
let problems = Locked<[DefaultsError]>([])

extension Locked<[DefaultsError]> {
    /// The problems reported so far, which are forgotten.
    func take() -> [DefaultsError] {
        withLock { errors in
            defer { errors = [] }
            return errors
        }
    }
}

let isWatching = command == "watch"
let handler: @Sendable (DefaultsError) -> Void = { error in
    if isWatching {
        // Keep watching: the next good version of the file will be reported.
        printError(error.description)
        // Except that there is no good version of a FIFO or a device (checked before watching).
        if error.kind == .unsupportedFile { problems.withLock { $0.append(error) } }
    } else {
        problems.withLock { $0.append(error) }
    }
}
let store: DefaultsStore
switch invocation.store {
case .suite(let suite):
    let fileURL = DefaultsStore.defaultDirectory().appendingPathComponent(suite + ".json")
    store = DefaultsStore(fileURL: fileURL, layers: layerOptions.layers, secrets: layerOptions.secrets, errorHandler: handler)
case .file(let path):
    let fileURL = URL(fileURLWithPath: path)
    store = DefaultsStore(fileURL: fileURL, layers: layerOptions.layers, secrets: layerOptions.secrets, errorHandler: handler)
case .etcd(let etcd):
    do {
        store = try etcd.openStore(timeout: timeout, layers: layerOptions.layers, secrets: layerOptions.secrets, errorHandler: handler)
    } catch {
        fail(error.description)
    }
}
let path = store.location.description

/// Whether `problem` concerns one etcd key's value only (not JSON): the other keys are fine, and a
/// write or delete of that key replaces it.
func isValueProblem(_ problem: DefaultsError) -> Bool {
    problem.kind == .corruptFile && problem.path == nil && problem.key != nil
}

/// Fails on the problems met so far, but for warnings: a key found twice (its last value is used,
/// and a write keeps a copy first), (printed only with `warnAboutValues`, for a read of every key)
/// an etcd value that is not JSON, and, for `write`, a file that does not parse (the write says
/// what it does about it: see `flushOrFail`).
@MainActor
func failOnProblems(warnAboutValues: Bool = false) {
    for problem in problems.take() {
        if isValueProblem(problem) {
            if warnAboutValues { printError(problem.description) }
            continue
        }
        if problem.kind == .corruptFile, command == "write" { continue }
        if problem.kind == .corruptFile, command != "read" { fail(notChanged(problem)) }
        guard problem.kind == .duplicateKey else { fail(problem.description) }
        printError(problem.description)
    }
}

/// What a command that changes the store says of a file that does not parse: that nothing was
/// written, where the file is broken, and what to do (only `write` has `--replace-corrupt`).
func notChanged(_ problem: DefaultsError) -> String {
    let remedy =
        command == "write"
        ? "fix the file, or run again with --replace-corrupt, which copies it aside first"
        : "fix the file, or replace it with 'write … --replace-corrupt', which copies it aside first"
    return "not written: \(problem); \(remedy)"
}

/// What a command waiting for another process's lock of the file says after a second.
let lockWaitNotice = (after: Duration.seconds(1), call: { printError("waiting for another process to release the lock of \(path)…") })

/// Flushes (replacing a file that does not parse after copying it aside, with `--replace-corrupt`),
/// then prints the other problems found (a value of the wrong type, a key found twice). A failed
/// write exits 1.
@MainActor
func flushOrFail() {
    do {
        if replacesCorruptFile {
            if let copy = try store.replaceCorruptFile(timeout: timeout, notice: lockWaitNotice) {
                printError("\(path) did not parse: copied it to \(copy), then replaced it")
            }
        } else {
            try store.flush(timeout: timeout, notice: lockWaitNotice)
        }
    } catch {
        // Given up on purpose, or not written for a reason given: the change must not be written
        // at exit either.
        if error.errno == ETIMEDOUT {
            printError(error.description)
            _exit(1)
        }
        if error.kind == .corruptFile, error.path != nil {
            printError(notChanged(error))
            _exit(1)
        }
        fail(error.description)
    }
    // An etcd outage the flush got past (its lost replies settled) is no news either; a broken file
    // found meanwhile is over (the write parsed it), or was just said to be replaced.
    let found = problems.take().filter { !isValueProblem($0) && $0.kind != .unreachable && $0.kind != .corruptFile }
    for problem in found { printError(problem.description) }
}

// MARK: Commands

switch command {
case "read":
    // A layer's problem (a value that does not decode) is part of the answer, not a failure.
    let layerProblems = problems.withLock { found in
        defer { found.removeAll { $0.kind == .layerProblem } }
        return found.filter { $0.kind == .layerProblem }
    }
    for problem in layerProblems { printError(problem.description) }
    failOnProblems(warnAboutValues: positional.isEmpty)
    if layerOptions.explains {
        for line in explanation(of: positional[0], in: store, options: layerOptions) { printLine(line) }
        for problem in problems.take() where problem.kind == .layerProblem { printError(problem.description) }
        exit(0)
    }
    if !layerOptions.layers.isEmpty, let key = positional.first {
        let source = store._source(of: layeredKey(key), revealingSecrets: true)
        if source.answering.kind != .store {
            guard source.answering.kind != .defaultValue, source.answering.kind != .registered, let value = store[layeredKey(key)] else {
                fail("key '\(key)' not found in \(path) nor in its layers")
            }
            printLine(layerOptions.redacts(key, from: source.answering.kind) ? DefaultsKeyNames.redacted : value.json.prettyText)
            exit(0)
        }
    }
    // Like `defaults read` of a domain that does not exist: an error, not an empty object.
    if let file = store.fileURL?.path, access(file, F_OK) != 0, errno == ENOENT || errno == ENOTDIR { fail("no defaults at \(path)") }
    do {
        if let key = positional.first {
            guard let value = try store.jsonValue(forKey: key) else { fail("key '\(key)' not found in \(path)") }
            printLine(layerOptions.redacts(key) ? DefaultsKeyNames.redacted : value.prettyText)
        } else {
            let values = try store.jsonValues()
            var shown = values
            for key in values.keys where layerOptions.redacts(key) { shown[key] = .string(DefaultsKeyNames.redacted) }
            printLine(JSONValue.object(shown).prettyText)
        }
    } catch {
        fail("\(error)")
    }

case "write":
    failOnProblems()
    var pairs: [(key: String, value: JSONValue?)] = []
    for index in stride(from: 0, to: positional.count, by: 2) {
        let text = positional[index + 1]
        pairs.removeAll { $0.key == positional[index] }
        pairs.append((positional[index], (try? JSONValue.parse(text)) ?? .string(text)))
    }
    store.setJSONValues(pairs)
    flushOrFail()
    for (key, _) in pairs {
        if let notice = shadowingNotice(of: key, in: store, options: layerOptions) { printError(notice) }
    }

case "update":
    // Checked by the parse: an update has its addend.
    let addend = invocation.addend ?? "0"
    failOnProblems()
    let key = positional[0]
    do {
        let new = try store.updateJSONValue(forKey: key, timeout: timeout, notice: lockWaitNotice) { current throws(CommandError) in
            try adding(addend, to: current, key: key, secret: layerOptions.redacts(key))
        }
        printLine(layerOptions.redacts(key) ? DefaultsKeyNames.redacted : new?.compactText ?? "")
    } catch let error as CommandError {
        fail(error.message)
    } catch let error as DefaultsError where error.kind == .corruptFile && error.path != nil {
        fail(notChanged(error))
    } catch {
        fail("\(error)")
    }
    for problem in problems.take() { printError(problem.description) }

case "delete":
    failOnProblems()
    let key = positional[0]
    // A value that is not JSON is there to be deleted.
    guard (try? store.jsonValue(forKey: key)) ?? nil != nil || store.hasUnreadableValue(forKey: key) else {
        fail("key '\(key)' not found in \(path)")
    }
    store.removeValue(forKey: key)
    flushOrFail()

case "watch":
    // Printed already.
    if !problems.current.isEmpty { exit(1) }
    let withTimestamps = invocation.timestamps
    let token = store.observeJSON(key: positional.first) { key, old, new, _ in
        func shown(_ value: JSONValue?) -> String {
            guard let value else { return "(absent)" }
            return DefaultsKeyNames.isSecret(key) ? DefaultsKeyNames.redacted : value.compactText
        }
        var line = "\(key): \(shown(old)) -> \(shown(new))"
        if withTimestamps {
            var now = timespec()
            clock_gettime(CLOCK_MONOTONIC, &now)
            line = "\(Int(now.tv_sec) * 1_000_000_000 + Int(now.tv_nsec)) " + line
        }
        printLine(line)
    }
    // A plain handler, not a Dispatch signal source: on Linux a source needs the signal ignored,
    // and an ignored signal is discarded by the kernel before libdispatch sees it. Lines are
    // written unbuffered, so exiting at once loses nothing.
    // The shell's convention for a process ended by a signal: 128 + its number.
    signal(SIGINT) { _ in _exit(128 + SIGINT) }
    signal(SIGTERM) { _ in _exit(128 + SIGTERM) }
    // The end of an etcd outage, of a file that did not parse, of a directory layer's absence (their
    // start was printed by the handler).
    let statusToken = store.observeLayerStatuses(options: [.old, .new]) { store, change in
        guard let old = change.oldValue, let new = change.newValue else { return }
        for (before, after) in zip(old, new) where !before.isAvailable && after.isAvailable {
            if after.kind != .store {
                printError("\(after.kind) layer \(after.place): back")
            } else if case .connected(let revision?) = store.backendStatus {
                printError("\(path): reachable again; the watch resumed from revision \(revision + 1)")
            } else {
                printError("\(path): readable again")
            }
        }
    }
    // The main thread waits here, in this frame, for the signals whose handlers end the watch:
    // nothing uses the main queue. The signals are blocked in the threads (the process may start
    // with them blocked): `sigsuspend` takes them with none blocked while it waits, as
    // `dispatchMain()`'s signal thread does. Not `dispatchMain()` itself: on Linux it ends the main
    // thread's frames (pthread_exit) and waits in a thread-specific-data destructor, so a handler
    // then runs on stack the address sanitizer still holds as this top-level code's frame.
    var noSignalsBlocked = sigset_t()
    sigemptyset(&noSignalsBlocked)
    withExtendedLifetime((token, statusToken)) {
        while true { sigsuspend(&noSignalsBlocked) }
    }

default:
    usageError("unknown command '\(command)'")
}
exit(0)
