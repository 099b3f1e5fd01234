import Foundation
import ObservableDefaults

/// A reply that is not what the etcd v3 JSON gateway sends; `reason` names the field. It quotes
/// nothing of the reply that could be a value (a reply carries the values of keys, secrets
/// included, in base64).
package struct EtcdMalformedReply: Error, Equatable {
    package let reason: String
}

/// The JSON of the etcd v3 gateway: keys and values are base64 strings, 64-bit integers are JSON
/// strings (proto3's JSON mapping; numbers are accepted too), fields with their default value (0,
/// false, empty) are left out.
package enum EtcdJSON {
    package typealias Object = [String: Any]

    package static func encode(_ object: Object) -> [UInt8] {
        // Only strings, booleans, arrays and objects built by this file: serialization cannot fail.
        Array((try? JSONSerialization.data(withJSONObject: object)) ?? Data("{}".utf8))
    }

    package static func decode(_ bytes: [UInt8]) throws(EtcdMalformedReply) -> Object {
        guard let object = try? JSONSerialization.jsonObject(with: Data(bytes)), let object = object as? Object else {
            throw EtcdMalformedReply(reason: "not a JSON object: \(describe(bytes))")
        }
        return object
    }

    /// What is wrong with `bytes`, which are not a JSON object, without quoting them: their length,
    /// and where they stop parsing (the parser's reasons quote no character of the text).
    static func describe(_ bytes: [UInt8]) -> String {
        let length = "\(bytes.count) byte\(bytes.count == 1 ? "" : "s")"
        do throws(JSONParseError) {
            if case .object = try JSONValue.parse(bytes) { return "\(length) of a JSON object that JSONSerialization does not read" }
            return "\(length) of JSON whose top-level value is not an object"
        } catch {
            return "\(length) that stop parsing at line \(error.line), column \(error.column) (byte \(error.offset)): \(error.reason)"
        }
    }

    /// What a field's value is, without quoting it: it may be a value's base64.
    static func shape(of value: Any) -> String {
        if let text = value as? String { return "a string of \(text.utf8.count) bytes" }
        return "not a string"
    }

    package static func base64(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString()
    }

    /// A base64 field as bytes; absent means empty.
    static func bytes(_ object: Object, _ field: String) throws(EtcdMalformedReply) -> [UInt8] {
        guard let value = object[field] else { return [] }
        guard let text = value as? String, let data = Data(base64Encoded: text) else {
            throw EtcdMalformedReply(reason: "\(field) is not base64 (\(shape(of: value)))")
        }
        return Array(data)
    }

    /// A 64-bit integer field (a JSON string, or a number); absent means 0.
    static func int64(_ object: Object, _ field: String) throws(EtcdMalformedReply) -> Int64 {
        switch object[field] {
        case nil: return 0
        case let text as String:
            guard let value = Int64(text) else { throw EtcdMalformedReply(reason: "\(field) is not a 64-bit integer: \(text)") }
            return value
        case let number as NSNumber:
            // JSONSerialization reads integers exactly (as Int64) when they fit.
            let value = number.int64Value
            guard NSNumber(value: value) == number else { throw EtcdMalformedReply(reason: "\(field) is not an integer: \(number)") }
            return value
        case let other?:
            throw EtcdMalformedReply(reason: "\(field) is not an integer: \(other)")
        }
    }

    static func bool(_ object: Object, _ field: String) -> Bool {
        switch object[field] {
        case let value as Bool: value
        case let value as NSNumber: value.boolValue
        case let value as String: value == "true"
        default: false
        }
    }

    static func object(_ object: Object, _ field: String) throws(EtcdMalformedReply) -> Object {
        guard let value = object[field] else { return [:] }
        guard let nested = value as? Object else { throw EtcdMalformedReply(reason: "\(field) is not an object") }
        return nested
    }

    static func array(_ object: Object, _ field: String) throws(EtcdMalformedReply) -> [Object] {
        guard let value = object[field] else { return [] }
        guard let items = value as? [Any] else { throw EtcdMalformedReply(reason: "\(field) is not an array") }
        var objects: [Object] = []
        for item in items {
            guard let nested = item as? Object else { throw EtcdMalformedReply(reason: "an element of \(field) is not an object") }
            objects.append(nested)
        }
        return objects
    }

    /// `header.revision` of a reply.
    package static func revision(_ reply: Object) throws(EtcdMalformedReply) -> Int64 {
        try int64(try object(reply, "header"), "revision")
    }

    static func keyValue(_ object: Object) throws(EtcdMalformedReply) -> EtcdKeyValue {
        EtcdKeyValue(
            key: try bytes(object, "key"), value: try bytes(object, "value"), createRevision: try int64(object, "create_revision"),
            modRevision: try int64(object, "mod_revision"), version: try int64(object, "version"))
    }

    package static func keyValues(_ reply: Object) throws(EtcdMalformedReply) -> [EtcdKeyValue] {
        var result: [EtcdKeyValue] = []
        for item in try array(reply, "kvs") { result.append(try keyValue(item)) }
        return result
    }

    package static func event(_ object: Object) throws(EtcdMalformedReply) -> EtcdWatchEvent {
        let keyValue = try keyValue(try self.object(object, "kv"))
        switch object["type"] as? String {
        case nil, "PUT"?: return .put(keyValue)
        case "DELETE"?: return .delete(key: keyValue.key, modRevision: keyValue.modRevision)
        case let other?: throw EtcdMalformedReply(reason: "unknown event type \(other)")
        }
    }

    // MARK: Requests

    static func rangeRequest(key: [UInt8], rangeEnd: [UInt8]?) -> Object {
        var request: Object = ["key": base64(key)]
        if let rangeEnd { request["range_end"] = base64(rangeEnd) }
        return request
    }

    static func operation(_ operation: EtcdOperation) -> Object {
        switch operation {
        case .put(let key, let value): ["request_put": ["key": base64(key), "value": base64(value)]]
        case .delete(let key): ["request_delete_range": ["key": base64(key)]]
        case .range(let key): ["request_range": ["key": base64(key)]]
        }
    }

    static func compare(_ compare: EtcdCompare) -> Object {
        switch compare {
        case .modRevision(let key, let revision):
            ["key": base64(key), "target": "MOD", "result": "EQUAL", "mod_revision": String(revision)]
        }
    }

    static func transactionRequest(compare: [EtcdCompare], success: [EtcdOperation], failure: [EtcdOperation]) -> Object {
        ["compare": compare.map(self.compare), "success": success.map(operation), "failure": failure.map(operation)]
    }

    package static func transactionResult(_ reply: Object) throws(EtcdMalformedReply) -> EtcdTransactionResult {
        var ranges: [[EtcdKeyValue]] = []
        for response in try array(reply, "responses") where response["response_range"] != nil {
            ranges.append(try keyValues(try object(response, "response_range")))
        }
        return EtcdTransactionResult(succeeded: bool(reply, "succeeded"), revision: try revision(reply), ranges: ranges)
    }

    static func watchRequest(key: [UInt8], rangeEnd: [UInt8], startRevision: Int64) -> Object {
        var create: Object = ["key": base64(key), "range_end": base64(rangeEnd)]
        if startRevision > 0 { create["start_revision"] = String(startRevision) }
        return ["create_request": create]
    }

    /// The error of a failed reply: `{"error": …, "message": …, "code": N}`. A reply without one
    /// (a proxy's page, one that echoes the request) is described by its size and fields, never
    /// quoted: it could hold a value in base64.
    package static func serverError(_ body: [UInt8]) -> (message: String, code: Int?) {
        guard let reply = try? decode(body) else { return ("a reply of \(body.count) bytes that is not etcd's JSON", nil) }
        return (message(of: reply, size: body.count), (try? int64(reply, "code")).map { Int($0) })
    }

    /// The message of an error reply (its `message`, else its `error` as text), or, where it has
    /// none, the names of its fields and its `size` if given: never their values, which may be
    /// keys' values in base64.
    static func message(of reply: Object, size: Int? = nil) -> String {
        if let message = (reply["message"] as? String) ?? (reply["error"] as? String) { return message }
        let fields = reply.keys.sorted().joined(separator: ", ")
        return "no message (a reply \(size.map { "of \($0) bytes " } ?? "")with the fields \(fields.isEmpty ? "none" : fields))"
    }
}
