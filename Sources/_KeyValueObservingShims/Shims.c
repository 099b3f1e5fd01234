// Everything is in include/_KeyValueObservingShims.h (weak definitions, emitted where used); SwiftPM needs one source file per C target.
