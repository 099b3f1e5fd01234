/// What the secret tests of the defaults and etcd targets search printed text with.

/// A random secret of 24 letters and digits, unlike anything else a test prints.
package func randomSecret(prefix: String = "") -> String {
    let alphabet = Array("ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789")
    return prefix + String((0..<(24 - prefix.count)).map { _ in alphabet.randomElement()! })
}

/// Where `text` shows `secret`, or a piece of it of `length` characters: `nil` if nowhere.
package func leak(of secret: String, in text: String, length: Int = 8) -> String? {
    let characters = Array(secret)
    guard characters.count >= length else { return text.contains(secret) ? secret : nil }
    for start in 0...(characters.count - length) {
        let piece = String(characters[start..<(start + length)])
        if text.contains(piece) { return piece }
    }
    return nil
}

/// Everything `value` prints: its description, its debug description, `dump` and its mirror's
/// children (one level and, through `dump`, every level).
package func everythingPrinted(_ value: Any) -> String {
    var text = "\(value)\n\(String(reflecting: value))\n"
    dump(value, to: &text)
    for child in Mirror(reflecting: value).children { text += "\(child.label ?? "-"): \(child.value)\n" }
    return text
}
