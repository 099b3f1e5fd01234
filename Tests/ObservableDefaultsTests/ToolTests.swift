import Foundation
@testable import ObservableDefaults
import Testing
import TestSupport

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

@Suite("kvo-defaults", .tags(.processes))
struct ToolTests {
    let directory = TemporaryDirectory()

    @Test func writeReadDeleteRoundTripWithShellExitCodes() throws {
        let path = directory.file("s.json").path
        #expect(try runTool(["write", "--file", path, "speed", "1.5"]).status == 0)
        #expect(try runTool(["write", "--file", path, "greeting", "hello world"]).status == 0)
        #expect(try runTool(["write", "--file", path, "list", "[1, true, null]"]).status == 0)
        #expect(try runTool(["read", "--file", path, "speed"]).output == "1.5\n")
        #expect(try runTool(["read", "--file", path, "greeting"]).output == "\"hello world\"\n")
        #expect(
            try runTool(["read", "--file", path]).output == """
                {
                  "greeting": "hello world",
                  "list": [
                    1,
                    true,
                    null
                  ],
                  "speed": 1.5
                }

                """)
        #expect(try runTool(["delete", "--file", path, "speed"]).status == 0)
        let missing = try runTool(["read", "--file", path, "speed"])
        #expect(missing.status == 1)
        #expect(missing.error.hasPrefix("kvo-defaults: key 'speed' not found"))
        #expect(try runTool(["delete", "--file", path, "speed"]).status == 1)
    }

    @Test func updateAddsAtomicallyAndPrintsTheResult() throws {
        let path = directory.file("s.json").path
        #expect(try runTool(["update", "--file", path, "hits", "--add", "5"]).output == "5\n")
        #expect(try runTool(["update", "--file", path, "hits", "--add=-2"]).output == "3\n")
        #expect(try runTool(["update", "--file", path, "ratio", "--add", "0.5"]).output == "0.5\n")
        // Eight processes at once: none loses another's increment.
        let runs = try (0..<8).map { _ in try startTool(["update", "--file", path, "hits", "--add", "1"]) }
        for run in runs {
            run.process.waitUntilExit()
            #expect(run.process.terminationStatus == 0)
        }
        #expect(try runTool(["read", "--file", path, "hits"]).output == "11\n")

        #expect(try runTool(["write", "--file", path, "name", "ada"]).status == 0)
        let notANumber = try runTool(["update", "--file", path, "name", "--add", "1"])
        #expect(notANumber.status == 1)
        #expect(notANumber.error.contains("the value of 'name' is \"ada\", not a number"))
        #expect(try runTool(["write", "--file", path, "big", "9223372036854775807"]).status == 0)
        let overflow = try runTool(["update", "--file", path, "big", "--add", "1"])
        #expect(overflow.status == 1 && overflow.error.contains("overflows"))
        #expect(try runTool(["update", "--file", path, "hits"]).status == 2)
        #expect(try runTool(["update", "--file", path, "hits", "--add", "x"]).status == 2)
        #expect(try runTool(["write", "--file", path, "hits", "--add", "1"]).status == 2)
    }

    @Test func writeOfSeveralPairsIsOneWrite() throws {
        let path = directory.file("s.json").path
        let result = try runTool(["write", "--file", path, "a", "1", "b", "x", "a", "2"])
        #expect(result.status == 0, "\(result.error)")
        #expect(jsonObject(at: directory.file("s.json")) == ["a": .number("2"), "b": .string("x")])
        #expect(try runTool(["write", "--file", path, "a", "1", "b"]).status == 2)
    }

    @Test func usageErrorsExitWithTwo() throws {
        for arguments in [
            [], ["frobnicate", "s"], ["read"], ["write", "--file", "/tmp/x.json", "k"], ["read", "a/b"], ["read", "s", "--bogus"],
        ] {
            let result = try runTool(arguments)
            #expect(result.status == 2, "\(arguments)")
            #expect(result.error.hasPrefix("kvo-defaults: "), "\(arguments)")
        }
        let help = try runTool(["--help"])
        #expect(help.status == 0)
        #expect(help.output.contains("USAGE: kvo-defaults read"))
    }

    @Test func aCorruptFileIsARuntimeError() throws {
        let url = directory.file("s.json")
        try "{oops".write(to: url, atomically: false, encoding: .utf8)
        let result = try runTool(["read", "--file", url.path])
        #expect(result.status == 1)
        #expect(result.error.contains("\(url.path):1:2"))
    }

    @Test func aSuiteLivesInXDGConfigHome() throws {
        var environment = ProcessInfo.processInfo.environment
        environment["XDG_CONFIG_HOME"] = directory.path + "/config"
        #expect(try runTool(["write", "com.example.tool", "k", "7"], environment: environment).status == 0)
        #expect(jsonObject(at: URL(fileURLWithPath: directory.path + "/config/com.example.tool.json")) == ["k": .number("7")])
        #expect(try runTool(["read", "com.example.tool", "k"], environment: environment).output == "7\n")
    }

    @Test func watchPrintsEachChangeWithOldAndNewValuesUntilInterrupted() throws {
        let url = directory.file("s.json")
        let outputURL = directory.file("watch.out")
        #expect(FileManager.default.createFile(atPath: outputURL.path, contents: nil))
        let output = try FileHandle(forWritingTo: outputURL)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: toolPath)
        process.arguments = ["watch", "--file", url.path]
        process.standardOutput = output
        try process.run()
        let store = DefaultsStore(fileURL: url)
        let ready = DefaultsKey("ready", default: 0)
        // The watcher is ready once it reports a change: write until it does.
        var attempt = 0
        #expect(
            waitUntil {
                attempt += 1
                store[ready] = attempt
                try? store.flush()
                return contents(of: outputURL)?.contains("ready: ") == true
            })
        let before = contents(of: outputURL) ?? ""
        store[DefaultsKey("speed", default: 0.0)] = 1.5
        try store.flush()
        #expect(waitUntil { contents(of: outputURL)?.contains("speed: (absent) -> 1.5\n") == true })
        store.removeValue(for: DefaultsKey("speed", default: 0.0))
        try store.flush()
        #expect(waitUntil { contents(of: outputURL)?.contains("speed: 1.5 -> (absent)\n") == true })
        #expect(before.hasSuffix("\n"))
        kill(process.processIdentifier, SIGINT)
        process.waitUntilExit()
        #expect(process.terminationStatus == 130)
        try output.close()
    }

    /// `help` is a command word only: as a KEY or VALUE it is data; `-h` after `--` is data too.
    @Test func helpIsACommandOnlyInTheCommandsPlace() throws {
        let path = directory.file("s.json").path
        let written = try runTool(["write", "--file", path, "k", "help"])
        #expect(written.status == 0, "\(written.error)")
        #expect(try runTool(["read", "--file", path, "k"]).output == "\"help\"\n")
        #expect(try runTool(["write", "--file", path, "help", "1"]).status == 0)
        #expect(try runTool(["write", "--file", path, "--", "dash", "-h"]).status == 0)
        #expect(jsonObject(at: URL(fileURLWithPath: path)) == ["k": .string("help"), "help": .number("1"), "dash": .string("-h")])
        let help = try runTool(["help"])
        #expect(help.status == 0)
        #expect(help.output.contains("USAGE: kvo-defaults read"))
    }

    /// `read` of a file in a directory that does not exist, and `watch` of it until another process
    /// writes it, create nothing: no directory, no lock file, no file (run from the temporary
    /// directory, with a relative path, as a user would).
    @Test func readAndWatchOfAFileInAMissingDirectoryCreateNothing() throws {
        let relative = "missing/dir/x.json"
        let absolute = directory.path + "/" + relative
        for arguments in [["read", "--file", relative], ["read", "--file", relative, "speed"]] {
            let result = try runTool(arguments, currentDirectory: directory.url)
            #expect(result.status == 1)
            #expect(result.error == "kvo-defaults: no defaults at \(absolute)\n")
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path) == [])
        let watcher = try startTool(["watch", "--file", relative], currentDirectory: directory.url)
        defer {
            kill(watcher.process.processIdentifier, SIGTERM)
            watcher.process.waitUntilExit()
        }
        #if os(Linux)
        // Ready once its store watches something (the directory's nearest existing ancestor).
        #expect(waitUntil { hasInotifyWatch(watcher.process.processIdentifier) })
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path) == [])
        #endif
        #expect(try runTool(["write", "--file", absolute, "speed", "1.5"]).status == 0)
        let output = waitForText("speed: (absent) -> 1.5\n", in: watcher.output)
        #expect(output == "speed: (absent) -> 1.5\n")
    }

    @Test func readingASuiteWithoutAFileIsAnError() throws {
        let path = directory.file("none.json").path
        let result = try runTool(["read", "--file", path])
        #expect(result.status == 1)
        #expect(result.error == "kvo-defaults: no defaults at \(path)\n")
        #expect(result.output.isEmpty)
    }

    /// The file turns out broken only when `write` flushes (it was fine when the tool read it): the
    /// tool writes nothing, says so, where, and what to do, keeps the broken file as it is, and
    /// exits 1. It read good values first: it says it keeps them. The test holds the lock file
    /// until the tool says it waits for it, then breaks the file.
    @Test func aCorruptionFoundByWritesFlushIsNotWrittenAndSaysSo() throws {
        let url = directory.file("s.json")
        try #"{"a": 1}"#.write(to: url, atomically: true, encoding: .utf8)
        let lock = try HeldLock(url.path)
        let tool = try startTool(["write", "--file", url.path, "b", "2"])
        let waiting = waitForText("waiting for another process", in: tool.error)
        #expect(waiting.contains("waiting for another process to release the lock of \(url.path)"))
        try #"{"a": 1,,"#.write(to: url, atomically: true, encoding: .utf8)
        lock.release()
        #expect(waitUntil { !tool.process.isRunning })
        tool.process.waitUntilExit()
        let error = String(decoding: (try? tool.error.fileHandleForReading.readToEnd()) ?? Data(), as: UTF8.self)
        #expect(tool.process.terminationStatus == 1)
        #expect(error.contains("not written: \(url.path):1:9"), "\(error)")
        #expect(error.contains("keeping the last good values"), "\(error)")
        #expect(error.contains("--replace-corrupt"), "\(error)")
        #expect(contents(of: url) == #"{"a": 1,,"#)
        let names = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        #expect(!names.contains { $0.contains(".corrupt-") }, "\(names)")
    }

    /// A hand-edited file with a typo: `write` says it wrote nothing, where the file is broken and
    /// what to do (no "last good values": it never read any); `--replace-corrupt` copies the file
    /// aside, prints the copy's path, and writes.
    @Test func writeOnAFileThatDoesNotParseSaysWhatHappenedAndWhatToDo() throws {
        let url = directory.file("f.json")
        let broken = #"{"a": 1,}"#
        try broken.write(to: url, atomically: false, encoding: .utf8)
        let refused = try runTool(["write", "--file", url.path, "port", "7000"])
        #expect(refused.status == 1)
        #expect(
            refused.error == """
                kvo-defaults: not written: \(url.path):1:9 (byte 8): corrupt defaults file: unexpected character in an object, \
                expected a key in double quotes; fix the file, or run again with --replace-corrupt, which copies it aside first

                """, "\(refused.error)")
        #expect(contents(of: url) == broken)
        let replaced = try runTool(["write", "--file", url.path, "--replace-corrupt", "port", "7000"])
        #expect(replaced.status == 0, "\(replaced.error)")
        let prefix = "kvo-defaults: \(url.path) did not parse: copied it to "
        #expect(replaced.error.hasPrefix(prefix), "\(replaced.error)")
        let copy = replaced.error.dropFirst(prefix.count).prefix { $0 != "," }
        #expect(copy.hasPrefix(url.path + ".corrupt-"))
        #expect(contents(of: URL(fileURLWithPath: String(copy))) == broken)
        #expect(jsonObject(at: url) == ["port": .number("7000")])
        #expect(try runTool(["read", "--file", url.path, "--replace-corrupt"]).status == 2)
    }

    /// `update` and `delete` on a hand-edited file with a typo say that nothing was written, where
    /// the file is broken and what to do; they have no `--replace-corrupt` of their own, so they
    /// name `write`'s.
    @Test func updateAndDeleteOnAFileThatDoesNotParseSayWhatHappenedAndWhatToDo() throws {
        let url = directory.file("f.json")
        let broken = #"{"a": 1,}"#
        try broken.write(to: url, atomically: false, encoding: .utf8)
        for arguments in [["update", "--file", url.path, "a", "--add", "1"], ["delete", "--file", url.path, "a"]] {
            let refused = try runTool(arguments)
            #expect(refused.status == 1)
            #expect(
                refused.error == """
                    kvo-defaults: not written: \(url.path):1:9 (byte 8): corrupt defaults file: unexpected character in an object, \
                    expected a key in double quotes; fix the file, or replace it with 'write … --replace-corrupt', which copies \
                    it aside first

                    """, "\(refused.error)")
            #expect(contents(of: url) == broken)
        }
    }

    /// `--timeout` gives up on a lock another process holds: exit 1, and the change is not written
    /// at exit either.
    @Test func aWriteGivesUpOnAHeldLockAfterItsTimeout() throws {
        let url = directory.file("s.json")
        try #"{"a": 1}"#.write(to: url, atomically: true, encoding: .utf8)
        let lock = try HeldLock(url.path)
        let result = try runTool(["write", "--file", url.path, "b", "2", "--timeout", "0.2"])
        lock.release()
        #expect(result.status == 1)
        #expect(result.error.contains("gave up after"), "\(result.error)")
        #expect(jsonObject(at: url) == ["a": .number("1")])
        #expect(try runTool(["write", "--file", url.path, "b", "2", "--timeout", "0.2"]).status == 0)
        #expect(jsonObject(at: url) == ["a": .number("1"), "b": .number("2")])
        #expect(try runTool(["write", "--file", url.path, "b", "2", "--timeout", "soon"]).status == 2)
    }

    /// Every argument is checked before the store is opened: a wrong number of KEYs with an etcd
    /// store is a usage error even when no member answers (port 1 refuses connections).
    @Test func theArgumentsAreCheckedBeforeTheStoreIsOpened() throws {
        let etcd = ["--etcd", "http://127.0.0.1:1", "--prefix", "app/", "--timeout", "0.5"]
        for (arguments, message) in [
            (["read"] + etcd + ["a", "b"], "unexpected argument 'b'"), (["update"] + etcd + ["a"], "'update' needs '--add N'"),
            (["read", "--explain"] + etcd, "'--explain' needs a KEY"),
        ] {
            let result = try runTool(arguments)
            #expect(result.status == 2, "\(arguments): \(result.error)")
            #expect(result.error.contains(message), "\(arguments): \(result.error)")
        }
    }

    /// A timeout too long for milliseconds in an Int64 is a usage error, not a trap (found while
    /// extracting the parse for the kvo-defaults-arguments fuzz target; its regression input is in
    /// Fuzz/regressions/kvo-defaults-arguments).
    @Test func aTimeoutTooLongIsAUsageError() throws {
        let url = directory.file("s.json")
        let result = try runTool(["write", "--file", url.path, "b", "2", "--timeout", "1e300"])
        #expect(result.status == 2)
        #expect(result.error.contains("'--timeout' 1e300 is too long: at most 9223372036854775 seconds"), "\(result.error)")
        #expect(!FileManager.default.fileExists(atPath: url.path))
    }

    /// `update` waits for a held lock as `write` does: it says so after a second, and `--timeout`
    /// (in its usage line) gives up, exit 1, the number left as it was.
    @Test func anUpdateAnnouncesItsWaitForAHeldLockAndGivesUpAfterItsTimeout() throws {
        let url = directory.file("s.json")
        try #"{"n": 1}"#.write(to: url, atomically: true, encoding: .utf8)
        #expect(try runTool(["--help"]).output.contains("kvo-defaults update STORE KEY --add N [--timeout SECONDS]"))
        let lock = try HeldLock(url.path)
        let gaveUp = try runTool(["update", "--file", url.path, "n", "--add", "1", "--timeout", "0.2"])
        #expect(gaveUp.status == 1 && gaveUp.error.contains("gave up after"), "\(gaveUp.error)")
        let waiting = try startTool(["update", "--file", url.path, "n", "--add", "1"])
        let said = waitForText("waiting for another process", in: waiting.error)
        #expect(said.contains("waiting for another process to release the lock of \(url.path)"), "\(said)")
        lock.release()
        #expect(waitUntil { !waiting.process.isRunning })
        waiting.process.waitUntilExit()
        #expect(waiting.process.terminationStatus == 0)
        #expect(jsonObject(at: url) == ["n": .number("2")])
    }

    /// A key that is not valid UTF-8 would become U+FFFD and overwrite another key.
    @Test func anArgumentThatIsNotValidUTF8IsAUsageError() throws {
        let url = directory.file("s.json")
        // printf makes the byte 0xFF, which no UTF-8 text holds.
        let script = "exec \(shellQuoted(toolPath)) write --file \(shellQuoted(url.path)) \"$(printf 'k\\377')\" 1"
        let result = try runTool(["-c", script], executable: "/bin/sh")
        #expect(result.status == 2)
        #expect(result.error.contains("argument 4 is not valid UTF-8"), "\(result.error)")
        #expect(!FileManager.default.fileExists(atPath: url.path))
    }
}

#if os(Linux)
/// Whether the process `pid` holds an inotify descriptor with at least one watch.
func hasInotifyWatch(_ pid: Int32) -> Bool {
    let descriptors = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")) ?? []
    return descriptors.contains { descriptor in
        guard (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\(descriptor)")) == "anon_inode:inotify" else {
            return false
        }
        return (try? String(contentsOfFile: "/proc/\(pid)/fdinfo/\(descriptor)", encoding: .utf8))?.contains("inotify wd:") == true
    }
}
#endif

@Suite("kvo-defaults with layers and secrets", .tags(.processes))
struct ToolLayerTests {
    let directory = TemporaryDirectory()

    @Test func explainNamesTheAnsweringLayerAndWhatEachHolds() throws {
        let file = directory.path + "/s.json"
        let config = directory.path + "/config"
        try FileManager.default.createDirectory(atPath: config, withIntermediateDirectories: true)
        try writeAtomically("2.5\n", to: config + "/playback-speed")
        #expect(try runTool(["write", "--file", file, "playbackSpeed", "1.0"]).status == 0)
        var environment = ProcessInfo.processInfo.environment
        environment["TOOLTEST_PLAYBACK_SPEED"] = "1.75"
        let result = try runTool(
            [
                "read", "--file", file, "playbackSpeed", "--explain", "--env-prefix", "TOOLTEST", "--directory", config, "--arg",
                "--verbose",
            ],
            environment: environment)
        #expect(result.status == 0, "\(result.error)")
        let lines = result.output.split(separator: "\n").map(String.init)
        #expect(lines.first == "playbackSpeed: 1.75 from the environment layer (TOOLTEST_PLAYBACK_SPEED)")
        #expect(lines.contains("     arguments (the arguments given): nothing"))
        #expect(lines.contains("  -> environment (prefix TOOLTEST): 1.75 as TOOLTEST_PLAYBACK_SPEED"))
        // A directory's values are printed redacted: that is where secrets are mounted.
        #expect(lines.contains("     directory (\(config)): <redacted> as \(config)/playback-speed (shadowed)"))
        #expect(lines.contains("     store (\(file)): 1.0 (shadowed)"))
        // The plain read of a layered key reads what the program would.
        let read = try runTool(["read", "--file", file, "playbackSpeed", "--arg", "--playback-speed=3"], environment: environment)
        #expect(read.output == "3\n")
    }

    @Test func writePrintsThatTheValueIsShadowedAndByWhichLayer() throws {
        let file = directory.path + "/s.json"
        let result = try runTool(["write", "--file", file, "playbackSpeed", "1.0", "--arg", "--playback-speed=2"])
        #expect(result.status == 0)
        #expect(
            result.error.contains(
                "playbackSpeed is written to \(file), but shadowed by the arguments layer (--playback-speed), which holds 2"))
        let unshadowed = try runTool(["write", "--file", file, "volume", "1.0", "--arg", "--playback-speed=2"])
        #expect(unshadowed.error.isEmpty)
        #expect(jsonObject(at: URL(fileURLWithPath: file))?["playbackSpeed"] == .number("1.0"))
    }

    @Test func secretsAreRedactedUnlessRevealed() throws {
        let file = directory.path + "/s.json"
        let secret = "tool-secret-\(UInt32.random(in: 0...UInt32.max))"
        #expect(try runTool(["write", "--file", file, "apiToken", secret, "--secret", "apiToken"]).status == 0)
        let all = try runTool(["read", "--file", file, "--secret", "apiToken"])
        #expect(all.output.contains("\"apiToken\": \"<redacted>\""))
        let one = try runTool(["read", "--file", file, "apiToken", "--secret", "apiToken"])
        #expect(one.output == "<redacted>\n")
        let explained = try runTool(["read", "--file", file, "apiToken", "--secret", "apiToken", "--explain"])
        #expect(explained.output.contains("apiToken: <redacted> from the store layer"))
        for output in [all.output + all.error, one.output + one.error, explained.output + explained.error] {
            #expect(!output.contains(secret))
        }
        // A file made by a command that declares a secret is not world-readable.
        var info = stat()
        #expect(stat(file, &info) == 0 && info.st_mode & 0o777 == 0o600)
        // update prints the new value: not a secret's.
        #expect(try runTool(["write", "--file", file, "pin", "41"]).status == 0)
        let updated = try runTool(["update", "--file", file, "pin", "--add", "1", "--secret", "pin"])
        #expect(updated.status == 0 && updated.output == "<redacted>\n", "\(updated)")
        #expect(try runTool(["update", "--file", file, "pin", "--add", "1"]).output == "43\n")
        // Nor do its errors quote it: a value that is not a number, or one that overflows.
        let notANumber = try runTool(["update", "--file", file, "apiToken", "--add", "1", "--secret", "apiToken"])
        #expect(notANumber.status == 1 && notANumber.error.contains("is not a number"), "\(notANumber.error)")
        #expect(try runTool(["write", "--file", file, "pin", "9223372036854775807"]).status == 0)
        let overflow = try runTool(["update", "--file", file, "pin", "--add", "1", "--secret", "pin"])
        #expect(overflow.status == 1 && overflow.error.contains("<redacted> + 1 overflows"), "\(overflow.error)")
        for output in [notANumber.error + notANumber.output, overflow.error + overflow.output] {
            #expect(!output.contains(secret) && !output.contains("922337203685"), "\(output)")
        }
        let revealed = try runTool(["read", "--file", file, "apiToken", "--secret", "apiToken", "--reveal"])
        #expect(revealed.output == "\"\(secret)\"\n")
        // A watch of a secret prints that it changed, not what it holds.
        let watch = try startTool(["watch", "--file", file, "apiToken", "--secret", "apiToken"])
        #if os(Linux)
        #expect(waitUntil(seconds: 10) { hasInotifyWatch(watch.process.processIdentifier) })
        #else
        usleep(500_000)
        #endif
        #expect(try runTool(["write", "--file", file, "apiToken", secret + "-2"]).status == 0)
        let printed = waitForText("apiToken: <redacted> -> <redacted>", in: watch.output)
        watch.process.terminate()
        watch.process.waitUntilExit()
        #expect(printed.contains("apiToken: <redacted> -> <redacted>"))
        #expect(!printed.contains(secret))
    }

    /// `--help` warns that `write`'s VALUE is visible to other users, and says `--secret` takes a
    /// key's name.
    @Test func helpWarnsThatAValueWrittenFromTheCommandLineIsVisibleToOtherUsers() throws {
        let help = try runTool(["--help"]).output.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.joined(
            separator: " ")
        #expect(
            help.contains("A VALUE given here is visible to every user of the machine while the command runs (ps, /proc/PID/cmdline)"),
            "\(help)")
        #expect(help.contains("never write a secret this way"), "\(help)")
        #expect(help.contains("KEY (a key's name, not a value) is secret"), "\(help)")
        #expect(help.contains("like a VALUE of write, visible to every user of the machine: never pass a secret's value"), "\(help)")
    }

    /// A directory layer is secret: `read KEY` of a key it answers for prints `<redacted>` (its
    /// value with `--reveal`), and `write`'s notice that it shadows the key written names the
    /// layer, not its value.
    @Test func aDirectoryLayersValueIsRedactedInReadAndInWritesShadowingNotice() throws {
        let file = directory.path + "/s.json"
        let config = directory.path + "/secrets"
        try FileManager.default.createDirectory(atPath: config, withIntermediateDirectories: true)
        let secret = randomSecret()
        try writeAtomically(secret + "\n", to: config + "/dbPassword")
        let read = try runTool(["read", "--file", file, "dbPassword", "--directory", config])
        #expect(read.status == 0 && read.output == "<redacted>\n", "\(read)")
        let revealed = try runTool(["read", "--file", file, "dbPassword", "--directory", config, "--reveal"])
        #expect(revealed.output == "\"\(secret)\"\n", "\(revealed)")
        let written = try runTool(["write", "--file", file, "dbPassword", "in-the-file", "--directory", config])
        #expect(written.status == 0, "\(written.error)")
        #expect(
            written.error.contains(
                "dbPassword is written to \(file), but shadowed by the directory layer (\(config)/dbPassword), which holds <redacted>"),
            "\(written.error)")
        #expect(jsonObject(at: URL(fileURLWithPath: file))?["dbPassword"] == .string("in-the-file"))
        for output in [read.output + read.error, written.output + written.error] {
            #expect(leak(of: secret, in: output) == nil, "\(output)")
        }
    }

    /// `read` and `watch` of a file that breaks inside or right after a secret's value: their
    /// errors say where and what was expected, and quote no character of it.
    @Test func readAndWatchOfAFileBrokenAtASecretQuoteNothingOfIt() throws {
        for (index, make) in SecretTests.brokenFiles.enumerated() {
            let secret = randomSecret()
            let file = directory.path + "/broken\(index).json"
            let text = make("apiToken", secret)
            try text.write(toFile: file, atomically: true, encoding: .utf8)
            let read = try runTool(["read", "--file", file, "apiToken", "--secret", "apiToken"])
            #expect(read.status == 1 && read.error.contains("\(file):1:") && read.error.contains("corrupt defaults file"), "\(read)")
            #expect(SecretTests.quotation(of: secret, in: read.output + read.error) == nil, "\(text): \(read.error)")
            let watch = try startTool(["watch", "--file", file, "--secret", "apiToken"])
            let printed = waitForText("corrupt defaults file", in: watch.error)
            watch.process.terminate()
            watch.process.waitUntilExit()
            #expect(printed.contains("\(file):1:") && printed.contains("corrupt defaults file"), "\(printed)")
            #expect(SecretTests.quotation(of: secret, in: printed) == nil, "\(text): \(printed)")
        }
    }
}
