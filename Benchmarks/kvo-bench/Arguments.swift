// The command line: usage, the commands, and parsing.

let usage = """
    USAGE: kvo-bench [--quick] [--filter SUBSTRING]... [--markdown FILE] [--json FILE] [--svg FILE] [--callgrind]
           kvo-bench run SCENARIO [--iterations N]
           kvo-bench compare OLD.json NEW.json [--threshold PERCENT]
           kvo-bench gate [--thresholds FILE] [--filter SUBSTRING]... [--json FILE] [--update] [--targets]
           kvo-bench contention [--quick] [--threads N] [--updates N] [--rounds N]
           kvo-bench stress [--quick] [--seconds N]
           kvo-bench --list | --help

    Measures KeyValueObserving, ObservableProgress and ObservableDefaults against the alternatives
    (NotificationCenter, Observation, AsyncStream, Foundation Progress, UserDefaults, a Dictionary)
    and plain Swift, all in this one run, and prints a summary (one line per alternative: how many
    times faster or slower), then the tables: ns/op (p50, p90, p99 over repeated samples), every row
    naming its implementation; the async hand-offs per value (the latency of a fresh delivery, and
    how often the first value delivered after a set was an earlier one); a memory table (bytes per
    object, observer and observed key, from the allocator's statistics); the defaults store's
    cross-process notification latency (this executable starts itself as the other process); and
    registration at scale, each implementation in a child process. Samples are taken in rounds (one
    batch of every scenario per round) so machine noise hits a scenario and its baseline alike; a
    ratio is the median of the rounds' paired ratios, with their range [lowest–highest], and one
    whose range spans 1× (the rounds disagree on which side is faster) is marked unstable.

    OPTIONS:
      --quick               smoke mode: few, short samples (the whole run takes under a minute),
                            \(SamplingPlan.quick.deliveries) hand-offs per implementation (a full run:
                            \(SamplingPlan.full.deliveries.formatted())), registration at scale on
                            a tenth of the objects
      --filter SUBSTRING    only scenarios whose name contains SUBSTRING (repeatable); the
                            baselines they are compared with run too
      --markdown FILE       also write the summary and the full tables as Markdown to FILE, with
                            the date, toolchain and machine (Benchmarks/README.md is written so)
      --json FILE           also write the results as JSON to FILE (toolchain, machine, date,
                            ns/op, ratios, bytes, and Ir/op with --callgrind)
      --svg FILE            also draw the scaling curves (one set vs observers, observed keys,
                            objects; any scenario family with a numeric parameter) of this package
                            and the alternatives to FILE: log-scale axes, one line per implementation
      --callgrind           also count instructions per operation of every selected scenario with
                            valgrind (an Ir/op column; slow: two valgrind runs per scenario, so
                            combine it with --filter)
      --list                list the scenarios and exit
      -h, --help            show this help

    run SCENARIO:
      Runs exactly that scenario's loop N times (default 1000000) after its setup, with no
      warm-up or sampling, then checks the result. For instruction counts:
        valgrind --tool=callgrind kvo-bench run SCENARIO --iterations 10000
        valgrind --tool=callgrind kvo-bench run SCENARIO --iterations 60000
      Ir/op = (Ir(60000) - Ir(10000)) / 50000.

    compare OLD.json NEW.json:
      Compares two '--json' (or 'gate --json') files scenario by scenario: p50 old → new, the
      change in percent, ratio changes, Ir/op and bytes where present. A scenario regresses when
      its Ir/op (where both files have it, since it does not drift with machine load), else its
      p50, grew by more than PERCENT (default 10); a memory figure when its bytes did.

    gate:
      The CI regression gate: counts Ir/op of the scenarios listed in the thresholds file
      (default Benchmarks/thresholds.json, one scenario per line) with valgrind, 10000 and 60000
      iterations, and fails when one exceeds its threshold by more than the file's tolerance.
      Skipped (exit 0, loudly) on another CPU architecture than the thresholds'; compared with a
      loud warning under another toolchain. valgrind comes from $VALGRIND or the PATH.
        --update            measure and rewrite the thresholds file (toolchain, machine, date)
        --json FILE         also write the measured Ir/op as JSON (readable by 'compare')
        --targets           also time the scenarios that carry one of this package's own targets
                            (e.g. an observed set ≤ 4× a didSet closure) and report met or missed;
                            informative, never fatal (timings drift with load)

    contention:
      Times N threads (default 8) at once, each making --updates updates (default 100000), in
      --rounds rounds (default 15): one progress node updated by every thread (unobserved and
      observed), the leaves of one tree (one per thread, the root observed, so every update takes
      the root's lock too), and a counter behind each lock alone: the package's lock,
      \(Contention.lockInThisBuild), which progress nodes use, and the spinning lock they used
      before, kept here as a comparison.
      Every row runs on every CPU the process may use, then (Linux only) with all its threads
      pinned to one CPU (sched_setaffinity). Prints the wall and CPU ns per update (CPU: all
      threads, so a waiter that spins counts and one that sleeps does not), median [min–max] over
      the rounds, and fails if an update was lost. Timings drift with load; --quick: 3 rounds of
      20000 updates.

    stress:
      A soak: for --seconds N (default 4; --quick: 1), threads register and remove observers
      while others set observed keys, run batches, set through key-path chains, change the inputs
      of a dependent key, a chain and a tracked observation (observeTracking), update progress
      trees and write a defaults store on a temporary file that two writer processes (this
      executable again) write too. The registry's lock-free read path and its reclamation under
      load, for valgrind's memcheck and the thread sanitizer:
        valgrind --tool=memcheck --leak-check=full kvo-bench stress --quick
      and memory over time (CI runs 'stress --seconds 20'; run 1200 for a 20-minute soak):
      prints malloc's bytes in use about 40 times a run (every N/40 s, 0.25 s to 10 s apart).
      Exits 1, naming what failed, if a check fails: an observer that missed a change or did not
      end on the final value, a progress tree that did not finish, a writer that failed, a store
      that did not converge to the writers' last values and sum of their updates; or, in a run
      of 10 s or more, if the least-squares slope of bytes in use over the second half of the run
      is above the larger of 1 KiB/s and 512 KiB over the half's seconds (51.2 KiB/s for 20 s,
      1 KiB/s from 1024 s): a short run's samples swing and still warm up by less than that; a
      leak per observer, set or defaults write is far above, a rarer one needs a long run.

    EXIT STATUS: 0 on success; 1 if a result check fails, a file cannot be read or written, or
    valgrind is missing or fails; 2 on bad arguments (every command); 3 when compare or gate
    finds a regression.
    """
