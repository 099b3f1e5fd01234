@testable import ObservableDefaultsEtcd
import Testing

@Suite("etcd key ranges")
struct KeyArithmeticTests {
    @Test func prefixEndIncrementsTheLastByte() {
        #expect(EtcdKeys.rangeEnd(forPrefix: Array("app/".utf8)) == Array("app0".utf8))
    }

    @Test func prefixEndingInFFDropsItAndIncrementsTheByteBefore() {
        #expect(EtcdKeys.rangeEnd(forPrefix: [0x61, 0xFF, 0xFF]) == [0x62])
    }

    @Test func prefixOfOnlyFFSelectsEveryKeyFromIt() {
        #expect(EtcdKeys.rangeEnd(forPrefix: [0xFF, 0xFF]) == [0])
        #expect(EtcdKeys.rangeEnd(forPrefix: []) == [0])
    }
}
