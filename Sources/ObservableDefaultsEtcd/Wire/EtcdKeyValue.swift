/// One key of etcd with its value and revisions, as a range read or a watch event returns it.
///
/// Keys and values are bytes: etcd does not interpret them (the JSON gateway carries them as base64).
package struct EtcdKeyValue: Sendable, Hashable {
    /// The key.
    package var key: [UInt8]
    /// The value (empty for an empty value).
    package var value: [UInt8]
    /// The revision of the put that created the key (after its last deletion).
    package var createRevision: Int64
    /// The revision of the last put of the key.
    package var modRevision: Int64
    /// How many times the key was put since it was created (1 after the first put).
    package var version: Int64

    package init(key: [UInt8], value: [UInt8], createRevision: Int64, modRevision: Int64, version: Int64) {
        self.key = key
        self.value = value
        self.createRevision = createRevision
        self.modRevision = modRevision
        self.version = version
    }
}
