/// One line of a watch's stream (`POST /v3/watch` through the JSON gateway), decoded.
package enum EtcdWatchReply: Equatable {
    /// etcd refused the watch: an HTTP status other than 200, or an error object; the message.
    case refused(String)
    /// etcd cancelled the watch because its start revision was compacted.
    case compacted(compactRevision: Int64)
    /// etcd cancelled the watch for another reason.
    case cancelled(reason: String)
    /// Events (none when the line only says the watch was created, or is a progress notice), with
    /// the reply's header revision.
    case events([EtcdWatchEvent], headerRevision: Int64, created: Bool)

    /// Decodes a line received with HTTP `status`.
    ///
    /// - Throws: `EtcdMalformedReply` naming what was wrong (not JSON, a field of the wrong type).
    package static func decode(_ line: [UInt8], status: Int) throws(EtcdMalformedReply) -> EtcdWatchReply {
        let reply = try EtcdJSON.decode(line)
        if status != 200 || reply["error"] != nil {
            return .refused("watch refused (HTTP \(status)): \(errorMessage(reply))")
        }
        let result = try EtcdJSON.object(reply, "result")
        let headerRevision = try EtcdJSON.int64(try EtcdJSON.object(result, "header"), "revision")
        if EtcdJSON.bool(result, "canceled") {
            let compactRevision = try EtcdJSON.int64(result, "compact_revision")
            if compactRevision > 0 { return .compacted(compactRevision: compactRevision) }
            return .cancelled(reason: (result["cancel_reason"] as? String) ?? "the watch was cancelled by etcd")
        }
        var events: [EtcdWatchEvent] = []
        for item in try EtcdJSON.array(result, "events") { events.append(try EtcdJSON.event(item)) }
        return .events(events, headerRevision: headerRevision, created: EtcdJSON.bool(result, "created"))
    }

    private static func errorMessage(_ reply: EtcdJSON.Object) -> String {
        if let error = reply["error"] as? EtcdJSON.Object, let message = error["message"] as? String { return message }
        // Not the reply itself: it may carry values (secrets') in base64.
        return EtcdJSON.message(of: reply)
    }
}
