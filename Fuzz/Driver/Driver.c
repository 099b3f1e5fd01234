// Intentionally empty: SwiftPM builds a C target from at least one source file. The target only
// declares libFuzzer's LLVMFuzzerRunDriver (include/KVOFuzzDriver.h).
