import KeyValueObserving
import Observation

// The objects of the observed-keys curve (10 and 100 keys). Declarations are five to a line.

/// A hundred observable properties (-1 at first: the scenarios set 0, 1, 2…).
final class WideForm: KeyValueObservable {
    @Observed var k0 = -1; @Observed var k1 = -1; @Observed var k2 = -1; @Observed var k3 = -1; @Observed var k4 = -1
    @Observed var k5 = -1; @Observed var k6 = -1; @Observed var k7 = -1; @Observed var k8 = -1; @Observed var k9 = -1
    @Observed var k10 = -1; @Observed var k11 = -1; @Observed var k12 = -1; @Observed var k13 = -1; @Observed var k14 = -1
    @Observed var k15 = -1; @Observed var k16 = -1; @Observed var k17 = -1; @Observed var k18 = -1; @Observed var k19 = -1
    @Observed var k20 = -1; @Observed var k21 = -1; @Observed var k22 = -1; @Observed var k23 = -1; @Observed var k24 = -1
    @Observed var k25 = -1; @Observed var k26 = -1; @Observed var k27 = -1; @Observed var k28 = -1; @Observed var k29 = -1
    @Observed var k30 = -1; @Observed var k31 = -1; @Observed var k32 = -1; @Observed var k33 = -1; @Observed var k34 = -1
    @Observed var k35 = -1; @Observed var k36 = -1; @Observed var k37 = -1; @Observed var k38 = -1; @Observed var k39 = -1
    @Observed var k40 = -1; @Observed var k41 = -1; @Observed var k42 = -1; @Observed var k43 = -1; @Observed var k44 = -1
    @Observed var k45 = -1; @Observed var k46 = -1; @Observed var k47 = -1; @Observed var k48 = -1; @Observed var k49 = -1
    @Observed var k50 = -1; @Observed var k51 = -1; @Observed var k52 = -1; @Observed var k53 = -1; @Observed var k54 = -1
    @Observed var k55 = -1; @Observed var k56 = -1; @Observed var k57 = -1; @Observed var k58 = -1; @Observed var k59 = -1
    @Observed var k60 = -1; @Observed var k61 = -1; @Observed var k62 = -1; @Observed var k63 = -1; @Observed var k64 = -1
    @Observed var k65 = -1; @Observed var k66 = -1; @Observed var k67 = -1; @Observed var k68 = -1; @Observed var k69 = -1
    @Observed var k70 = -1; @Observed var k71 = -1; @Observed var k72 = -1; @Observed var k73 = -1; @Observed var k74 = -1
    @Observed var k75 = -1; @Observed var k76 = -1; @Observed var k77 = -1; @Observed var k78 = -1; @Observed var k79 = -1
    @Observed var k80 = -1; @Observed var k81 = -1; @Observed var k82 = -1; @Observed var k83 = -1; @Observed var k84 = -1
    @Observed var k85 = -1; @Observed var k86 = -1; @Observed var k87 = -1; @Observed var k88 = -1; @Observed var k89 = -1
    @Observed var k90 = -1; @Observed var k91 = -1; @Observed var k92 = -1; @Observed var k93 = -1; @Observed var k94 = -1
    @Observed var k95 = -1; @Observed var k96 = -1; @Observed var k97 = -1; @Observed var k98 = -1; @Observed var k99 = -1

    /// Every key, `k0` first.
    static var keys: [ReferenceWritableKeyPath<WideForm, Int>] {
        [
            \.k0, \.k1, \.k2, \.k3, \.k4, \.k5, \.k6, \.k7, \.k8, \.k9,
            \.k10, \.k11, \.k12, \.k13, \.k14, \.k15, \.k16, \.k17, \.k18, \.k19,
            \.k20, \.k21, \.k22, \.k23, \.k24, \.k25, \.k26, \.k27, \.k28, \.k29,
            \.k30, \.k31, \.k32, \.k33, \.k34, \.k35, \.k36, \.k37, \.k38, \.k39,
            \.k40, \.k41, \.k42, \.k43, \.k44, \.k45, \.k46, \.k47, \.k48, \.k49,
            \.k50, \.k51, \.k52, \.k53, \.k54, \.k55, \.k56, \.k57, \.k58, \.k59,
            \.k60, \.k61, \.k62, \.k63, \.k64, \.k65, \.k66, \.k67, \.k68, \.k69,
            \.k70, \.k71, \.k72, \.k73, \.k74, \.k75, \.k76, \.k77, \.k78, \.k79,
            \.k80, \.k81, \.k82, \.k83, \.k84, \.k85, \.k86, \.k87, \.k88, \.k89,
            \.k90, \.k91, \.k92, \.k93, \.k94, \.k95, \.k96, \.k97, \.k98, \.k99,
        ]
    }
}

/// `@Observable` with the same hundred properties (-1 at first: Observation does not notify an
/// assignment of an equal value). `@unchecked Sendable`: used on the main thread only;
/// `withObservationTracking`'s `onChange` closure is `@Sendable`.
@Observable
final class ObservableWideForm: @unchecked Sendable {
    var k0 = -1; var k1 = -1; var k2 = -1; var k3 = -1; var k4 = -1; var k5 = -1; var k6 = -1; var k7 = -1; var k8 = -1; var k9 = -1
    var k10 = -1; var k11 = -1; var k12 = -1; var k13 = -1; var k14 = -1; var k15 = -1; var k16 = -1; var k17 = -1; var k18 = -1;
    var k19 = -1
    var k20 = -1; var k21 = -1; var k22 = -1; var k23 = -1; var k24 = -1; var k25 = -1; var k26 = -1; var k27 = -1; var k28 = -1;
    var k29 = -1
    var k30 = -1; var k31 = -1; var k32 = -1; var k33 = -1; var k34 = -1; var k35 = -1; var k36 = -1; var k37 = -1; var k38 = -1;
    var k39 = -1
    var k40 = -1; var k41 = -1; var k42 = -1; var k43 = -1; var k44 = -1; var k45 = -1; var k46 = -1; var k47 = -1; var k48 = -1;
    var k49 = -1
    var k50 = -1; var k51 = -1; var k52 = -1; var k53 = -1; var k54 = -1; var k55 = -1; var k56 = -1; var k57 = -1; var k58 = -1;
    var k59 = -1
    var k60 = -1; var k61 = -1; var k62 = -1; var k63 = -1; var k64 = -1; var k65 = -1; var k66 = -1; var k67 = -1; var k68 = -1;
    var k69 = -1
    var k70 = -1; var k71 = -1; var k72 = -1; var k73 = -1; var k74 = -1; var k75 = -1; var k76 = -1; var k77 = -1; var k78 = -1;
    var k79 = -1
    var k80 = -1; var k81 = -1; var k82 = -1; var k83 = -1; var k84 = -1; var k85 = -1; var k86 = -1; var k87 = -1; var k88 = -1;
    var k89 = -1
    var k90 = -1; var k91 = -1; var k92 = -1; var k93 = -1; var k94 = -1; var k95 = -1; var k96 = -1; var k97 = -1; var k98 = -1;
    var k99 = -1
}

/// A read of each property of `form`, `k0` first, for one tracking each.
func everyPropertyRead(of form: ObservableWideForm) -> [@Sendable () -> Void] {
    [
        { _ = form.k0 }, { _ = form.k1 }, { _ = form.k2 }, { _ = form.k3 }, { _ = form.k4 },
        { _ = form.k5 }, { _ = form.k6 }, { _ = form.k7 }, { _ = form.k8 }, { _ = form.k9 },
        { _ = form.k10 }, { _ = form.k11 }, { _ = form.k12 }, { _ = form.k13 }, { _ = form.k14 },
        { _ = form.k15 }, { _ = form.k16 }, { _ = form.k17 }, { _ = form.k18 }, { _ = form.k19 },
        { _ = form.k20 }, { _ = form.k21 }, { _ = form.k22 }, { _ = form.k23 }, { _ = form.k24 },
        { _ = form.k25 }, { _ = form.k26 }, { _ = form.k27 }, { _ = form.k28 }, { _ = form.k29 },
        { _ = form.k30 }, { _ = form.k31 }, { _ = form.k32 }, { _ = form.k33 }, { _ = form.k34 },
        { _ = form.k35 }, { _ = form.k36 }, { _ = form.k37 }, { _ = form.k38 }, { _ = form.k39 },
        { _ = form.k40 }, { _ = form.k41 }, { _ = form.k42 }, { _ = form.k43 }, { _ = form.k44 },
        { _ = form.k45 }, { _ = form.k46 }, { _ = form.k47 }, { _ = form.k48 }, { _ = form.k49 },
        { _ = form.k50 }, { _ = form.k51 }, { _ = form.k52 }, { _ = form.k53 }, { _ = form.k54 },
        { _ = form.k55 }, { _ = form.k56 }, { _ = form.k57 }, { _ = form.k58 }, { _ = form.k59 },
        { _ = form.k60 }, { _ = form.k61 }, { _ = form.k62 }, { _ = form.k63 }, { _ = form.k64 },
        { _ = form.k65 }, { _ = form.k66 }, { _ = form.k67 }, { _ = form.k68 }, { _ = form.k69 },
        { _ = form.k70 }, { _ = form.k71 }, { _ = form.k72 }, { _ = form.k73 }, { _ = form.k74 },
        { _ = form.k75 }, { _ = form.k76 }, { _ = form.k77 }, { _ = form.k78 }, { _ = form.k79 },
        { _ = form.k80 }, { _ = form.k81 }, { _ = form.k82 }, { _ = form.k83 }, { _ = form.k84 },
        { _ = form.k85 }, { _ = form.k86 }, { _ = form.k87 }, { _ = form.k88 }, { _ = form.k89 },
        { _ = form.k90 }, { _ = form.k91 }, { _ = form.k92 }, { _ = form.k93 }, { _ = form.k94 },
        { _ = form.k95 }, { _ = form.k96 }, { _ = form.k97 }, { _ = form.k98 }, { _ = form.k99 },
    ]
}

@inline(never) func setK0(_ form: WideForm, _ value: Int) { form.k0 = value }
@inline(never) func setK0(_ form: ObservableWideForm, _ value: Int) { form.k0 = value }
