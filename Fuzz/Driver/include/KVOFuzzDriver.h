#ifndef KVO_FUZZ_DRIVER_H
#define KVO_FUZZ_DRIVER_H

#include <stddef.h>
#include <stdint.h>

/// libFuzzer's entry point for a program with its own main (libclang_rt.fuzzer_no_main and
/// libclang_rt.fuzzer both define it). Declared here, with C's calling convention, because Swift
/// has no declaration of it; only kvo-fuzz built with -DKVO_FUZZ (Fuzz/run) calls it, so a normal
/// build never needs the fuzzer runtime.
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));

#endif
